// MPICH's Fortran mpi_f08 bindings (4.0.x, libmpichfort) reach the MPI calls that take
// a buffer through MPI_X, so TEMPI's wrappers see them, but every call without a buffer
// through PMPI_X, past TEMPI: completion, MPI_Start, MPI_Type_commit/free, probes,
// barrier, communicator, window and file calls (found with nm and objdump on
// libmpichfort.so 4.0.2; docs/using.md, "Fortran"). A receive completed there would never
// be unpacked, and a deferred send never posted. So TEMPI defines those f08 entry points
// itself (mpi_wait_f08_, ...; the names gfortran gives MPI_Wait_f08): completion, start
// and type calls go into TEMPI's C wrappers, the others post TEMPI's deferred sends and
// continue in MPICH's own f08 code (pmpir_X_f08_, its profiling names, referenced weakly
// so that C programs need no libmpichfort). The mpif.h and `use mpi` bindings call MPI_X
// for everything and need nothing here.
//
// In MPICH a Fortran handle is the C handle, and TYPE(MPI_Status) is MPI_Status
// (MPI_F08_status in mpi.h); the static_asserts below hold the code to that. Optional
// `ierror` arguments arrive as null pointers when absent; LOGICALs are gfortran's (1 is
// .TRUE.); indices are 1-based.
#include <cstddef>

#include "p2p/engine.hpp"
#include "log.hpp"
#include "base/forward.hpp"

static_assert(sizeof(MPI_Fint) == sizeof(MPI_Request) && sizeof(MPI_Fint) == sizeof(MPI_Datatype),
              "MPICH: a Fortran handle is the C handle");
static_assert(sizeof(MPI_F08_status) == sizeof(MPI_Status) &&
                  offsetof(MPI_F08_status, MPI_SOURCE) == offsetof(MPI_Status, MPI_SOURCE) &&
                  offsetof(MPI_F08_status, MPI_TAG) == offsetof(MPI_Status, MPI_TAG) &&
                  offsetof(MPI_F08_status, MPI_ERROR) == offsetof(MPI_Status, MPI_ERROR),
              "MPICH: TYPE(MPI_Status) is MPI_Status");

namespace {

MPI_Request *requests(MPI_Fint *f) { return reinterpret_cast<MPI_Request *>(f); }
MPI_Datatype *datatype(MPI_Fint *f) { return reinterpret_cast<MPI_Datatype *>(f); }

MPI_Status *status(MPI_F08_status *s) {
  return s == MPI_F08_STATUS_IGNORE ? MPI_STATUS_IGNORE : reinterpret_cast<MPI_Status *>(s);
}
MPI_Status *statuses(MPI_F08_status *s) {
  return s == MPI_F08_STATUSES_IGNORE ? MPI_STATUSES_IGNORE : reinterpret_cast<MPI_Status *>(s);
}

void set_error(MPI_Fint *ierror, int err) {
  if (ierror) *ierror = err;
}
MPI_Fint logical(int flag) { return flag ? 1 : 0; }
MPI_Fint fortran_index(int index) { return index == MPI_UNDEFINED ? index : index + 1; }
// MPI_Waitsome/MPI_Testsome's outputs, 1-based, where the call wrote them (it succeeded or
// reported errors per request): an error of the call itself leaves the caller's arrays alone.
void some_back(int err, int out, MPI_Fint *outcount, MPI_Fint *indices) {
  if (err != MPI_SUCCESS && err != MPI_ERR_IN_STATUS) return;
  *outcount = out;
  for (int k = 0; out != MPI_UNDEFINED && k < out; ++k) indices[k] = fortran_index(indices[k]);
}

}  // namespace

extern "C" {

void mpi_wait_f08_(MPI_Fint *request, MPI_F08_status *st, MPI_Fint *ierror) {
  set_error(ierror, TEMPI_WRAPPER(MPI_Wait)(requests(request), status(st)));
}

void mpi_waitall_f08_(MPI_Fint *count, MPI_Fint *reqs, MPI_F08_status *sts, MPI_Fint *ierror) {
  set_error(ierror, TEMPI_WRAPPER(MPI_Waitall)(*count, requests(reqs), statuses(sts)));
}

void mpi_waitany_f08_(MPI_Fint *count, MPI_Fint *reqs, MPI_Fint *index, MPI_F08_status *st, MPI_Fint *ierror) {
  int i = MPI_UNDEFINED;
  const int err = TEMPI_WRAPPER(MPI_Waitany)(*count, requests(reqs), &i, status(st));
  *index = fortran_index(i);
  set_error(ierror, err);
}

void mpi_waitsome_f08_(MPI_Fint *incount, MPI_Fint *reqs, MPI_Fint *outcount, MPI_Fint *indices,
                       MPI_F08_status *sts, MPI_Fint *ierror) {
  int out = MPI_UNDEFINED;
  const int err = TEMPI_WRAPPER(MPI_Waitsome)(*incount, requests(reqs), &out, indices, statuses(sts));
  some_back(err, out, outcount, indices);
  set_error(ierror, err);
}

void mpi_test_f08_(MPI_Fint *request, MPI_Fint *flag, MPI_F08_status *st, MPI_Fint *ierror) {
  int f = 0;
  const int err = TEMPI_WRAPPER(MPI_Test)(requests(request), &f, status(st));
  *flag = logical(f);
  set_error(ierror, err);
}

void mpi_testall_f08_(MPI_Fint *count, MPI_Fint *reqs, MPI_Fint *flag, MPI_F08_status *sts, MPI_Fint *ierror) {
  int f = 0;
  const int err = TEMPI_WRAPPER(MPI_Testall)(*count, requests(reqs), &f, statuses(sts));
  *flag = logical(f);
  set_error(ierror, err);
}

void mpi_testany_f08_(MPI_Fint *count, MPI_Fint *reqs, MPI_Fint *index, MPI_Fint *flag, MPI_F08_status *st,
                      MPI_Fint *ierror) {
  int i = MPI_UNDEFINED, f = 0;
  const int err = TEMPI_WRAPPER(MPI_Testany)(*count, requests(reqs), &i, &f, status(st));
  *index = fortran_index(i);
  *flag = logical(f);
  set_error(ierror, err);
}

void mpi_testsome_f08_(MPI_Fint *incount, MPI_Fint *reqs, MPI_Fint *outcount, MPI_Fint *indices,
                       MPI_F08_status *sts, MPI_Fint *ierror) {
  int out = MPI_UNDEFINED;
  const int err = TEMPI_WRAPPER(MPI_Testsome)(*incount, requests(reqs), &out, indices, statuses(sts));
  some_back(err, out, outcount, indices);
  set_error(ierror, err);
}

void mpi_request_get_status_f08_(MPI_Fint *request, MPI_Fint *flag, MPI_F08_status *st, MPI_Fint *ierror) {
  int f = 0;
  const int err = TEMPI_WRAPPER(MPI_Request_get_status)(MPI_Request_f2c(*request), &f, status(st));
  *flag = logical(f);
  set_error(ierror, err);
}

void mpi_request_free_f08_(MPI_Fint *request, MPI_Fint *ierror) {
  set_error(ierror, TEMPI_WRAPPER(MPI_Request_free)(requests(request)));
}

void mpi_start_f08_(MPI_Fint *request, MPI_Fint *ierror) {
  set_error(ierror, TEMPI_WRAPPER(MPI_Start)(requests(request)));
}

void mpi_startall_f08_(MPI_Fint *count, MPI_Fint *reqs, MPI_Fint *ierror) {
  set_error(ierror, TEMPI_WRAPPER(MPI_Startall)(*count, requests(reqs)));
}

void mpi_type_commit_f08_(MPI_Fint *type, MPI_Fint *ierror) {
  set_error(ierror, TEMPI_WRAPPER(MPI_Type_commit)(datatype(type)));
}

void mpi_type_free_f08_(MPI_Fint *type, MPI_Fint *ierror) {
  set_error(ierror, TEMPI_WRAPPER(MPI_Type_free)(datatype(type)));
}

}  // extern "C"

// The calls TEMPI intercepts only to post its deferred sends first (wrap_progress.cpp,
// wrap_sync.cpp): the same, then MPICH's f08 code with the caller's arguments as they
// are. Every argument is a pointer, but the hidden length of a CHARACTER argument.
using Arg = void *;
namespace {
void continuation_missing(const char *name, MPI_Fint *ierr) {
  TEMPI_LOG(Error, "MPICH's mpi_f08 code for %s is not in this program (a static libmpichfort? link the shared "
            "one): the call fails", name);
  if (ierr) *ierr = MPI_ERR_INTERN;
}
}  // namespace
// A static libmpichfort keeps the pmpir_ continuations in an object nothing pulls in (the
// references are weak): the call then fails with one error line instead of crashing. Its
// error argument is the last pointer (`ierr`).
#define TEMPI_F08_FLUSHING(name, params, args, ierr)                                                    \
  extern "C" void pmpir_##name##_f08_ params __attribute__((weak));                                     \
  extern "C" void mpi_##name##_f08_ params {                                                            \
    tempi::flush_sends();                                                                               \
    if (pmpir_##name##_f08_)                                                                            \
      pmpir_##name##_f08_ args;                                                                         \
    else                                                                                                \
      continuation_missing("MPI_" #name, static_cast<MPI_Fint *>(ierr));                               \
  }

TEMPI_F08_FLUSHING(probe, (Arg a, Arg b, Arg c, Arg d, Arg e), (a, b, c, d, e), e)
TEMPI_F08_FLUSHING(iprobe, (Arg a, Arg b, Arg c, Arg d, Arg e, Arg f), (a, b, c, d, e, f), f)
TEMPI_F08_FLUSHING(mprobe, (Arg a, Arg b, Arg c, Arg d, Arg e, Arg f), (a, b, c, d, e, f), f)
TEMPI_F08_FLUSHING(improbe, (Arg a, Arg b, Arg c, Arg d, Arg e, Arg f, Arg g), (a, b, c, d, e, f, g), g)
TEMPI_F08_FLUSHING(barrier, (Arg a, Arg b), (a, b), b)
TEMPI_F08_FLUSHING(buffer_detach, (Arg a, Arg b, Arg c), (a, b, c), c)
TEMPI_F08_FLUSHING(comm_dup, (Arg a, Arg b, Arg c), (a, b, c), c)
TEMPI_F08_FLUSHING(comm_split, (Arg a, Arg b, Arg c, Arg d, Arg e), (a, b, c, d, e), e)
TEMPI_F08_FLUSHING(comm_create, (Arg a, Arg b, Arg c, Arg d), (a, b, c, d), d)
TEMPI_F08_FLUSHING(comm_free, (Arg a, Arg b), (a, b), b)
TEMPI_F08_FLUSHING(comm_split_type, (Arg a, Arg b, Arg c, Arg d, Arg e, Arg f), (a, b, c, d, e, f), f)
TEMPI_F08_FLUSHING(comm_create_group, (Arg a, Arg b, Arg c, Arg d, Arg e), (a, b, c, d, e), e)
TEMPI_F08_FLUSHING(comm_disconnect, (Arg a, Arg b), (a, b), b)
TEMPI_F08_FLUSHING(intercomm_create, (Arg a, Arg b, Arg c, Arg d, Arg e, Arg f, Arg g), (a, b, c, d, e, f, g), g)
TEMPI_F08_FLUSHING(intercomm_merge, (Arg a, Arg b, Arg c, Arg d), (a, b, c, d), d)
TEMPI_F08_FLUSHING(cart_create, (Arg a, Arg b, Arg c, Arg d, Arg e, Arg f, Arg g), (a, b, c, d, e, f, g), g)
TEMPI_F08_FLUSHING(cart_sub, (Arg a, Arg b, Arg c, Arg d), (a, b, c, d), d)
TEMPI_F08_FLUSHING(graph_create, (Arg a, Arg b, Arg c, Arg d, Arg e, Arg f, Arg g), (a, b, c, d, e, f, g), g)
TEMPI_F08_FLUSHING(dist_graph_create, (Arg a, Arg b, Arg c, Arg d, Arg e, Arg f, Arg g, Arg h, Arg i, Arg j),
                   (a, b, c, d, e, f, g, h, i, j), j)
TEMPI_F08_FLUSHING(dist_graph_create_adjacent,
                   (Arg a, Arg b, Arg c, Arg d, Arg e, Arg f, Arg g, Arg h, Arg i, Arg j, Arg k),
                   (a, b, c, d, e, f, g, h, i, j, k), k)
TEMPI_F08_FLUSHING(win_allocate, (Arg a, Arg b, Arg c, Arg d, Arg e, Arg f, Arg g), (a, b, c, d, e, f, g), g)
TEMPI_F08_FLUSHING(win_fence, (Arg a, Arg b, Arg c), (a, b, c), c)
TEMPI_F08_FLUSHING(win_free, (Arg a, Arg b), (a, b), b)
TEMPI_F08_FLUSHING(file_open, (Arg a, Arg b, Arg c, Arg d, Arg e, Arg f, size_t filename_length),
                   (a, b, c, d, e, f, filename_length), f)
TEMPI_F08_FLUSHING(file_close, (Arg a, Arg b), (a, b), b)
#undef TEMPI_F08_FLUSHING

// What linked.cpp refers to, so that the link recipes' --require-defined pulls this file
// in with the C wrappers (a Fortran driver links the archive before libmpichfort).
extern "C" const char tempi_fortran_mpich_linked[] = "TEMPI mpi_f08 entry points for MPICH";
