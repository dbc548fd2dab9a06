// Calls that TEMPI intercepts only so that its engine posts every deferred send before
// they run (engine.hpp): each may wait for another process, which may be waiting for
// one of those sends (MPI's progress rule: a started send must be able to complete).
// Then they forward the user's arguments unchanged; probes then look whether they found a
// zero-copy control message (zero_copy_p2p.hpp). (The collectives that take buffers are
// wrap_coll.cpp's.)
#include "p2p/engine.hpp"
#include "base/forward.hpp"
#include "base/peers.hpp"
#include "stream/streams.hpp"
#include "zero_copy/zero_copy_p2p.hpp"

using namespace tempi;

extern "C" {

namespace {

// The status a probe fills, even where the application ignores it.
struct ProbeStatus {
  explicit ProbeStatus(MPI_Status *user) : ptr(user == MPI_STATUS_IGNORE ? &local : user) {}
  MPI_Status local;
  MPI_Status *ptr;
};

}  // namespace

int TEMPI_WRAPPER(MPI_Probe)(int source, int tag, MPI_Comm comm, MPI_Status *status) {
  flush_sends();
  ProbeStatus st(status);
  const int err = TEMPI_NEXT(MPI_Probe)(source, tag, comm, st.ptr);
  if (err == MPI_SUCCESS && source != MPI_PROC_NULL) p2p_after_probe(comm, *st.ptr);
  return err;
}

int TEMPI_WRAPPER(MPI_Iprobe)(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status) {
  flush_sends();
  ProbeStatus st(status);
  const int err = TEMPI_NEXT(MPI_Iprobe)(source, tag, comm, flag, st.ptr);
  if (err == MPI_SUCCESS && flag && *flag && source != MPI_PROC_NULL) p2p_after_probe(comm, *st.ptr);
  return err;
}

int TEMPI_WRAPPER(MPI_Mprobe)(int source, int tag, MPI_Comm comm, MPI_Message *message, MPI_Status *status) {
  flush_sends();
  ProbeStatus st(status);
  const int err = TEMPI_NEXT(MPI_Mprobe)(source, tag, comm, message, st.ptr);
  if (err == MPI_SUCCESS && source != MPI_PROC_NULL) p2p_after_probe(comm, *st.ptr);
  return err;
}

int TEMPI_WRAPPER(MPI_Improbe)(int source, int tag, MPI_Comm comm, int *flag, MPI_Message *message,
                               MPI_Status *status) {
  flush_sends();
  ProbeStatus st(status);
  const int err = TEMPI_NEXT(MPI_Improbe)(source, tag, comm, flag, message, st.ptr);
  if (err == MPI_SUCCESS && flag && *flag && source != MPI_PROC_NULL) p2p_after_probe(comm, *st.ptr);
  return err;
}

int TEMPI_WRAPPER(MPI_Barrier)(MPI_Comm comm) {
  flush_sends();
  return TEMPI_NEXT(MPI_Barrier)(comm);
}

int TEMPI_WRAPPER(MPI_Comm_dup)(MPI_Comm comm, MPI_Comm *newcomm) {
  flush_sends();
  return TEMPI_NEXT(MPI_Comm_dup)(comm, newcomm);
}

int TEMPI_WRAPPER(MPI_Comm_split)(MPI_Comm comm, int color, int key, MPI_Comm *newcomm) {
  flush_sends();
  return TEMPI_NEXT(MPI_Comm_split)(comm, color, key, newcomm);
}

int TEMPI_WRAPPER(MPI_Comm_create)(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm) {
  flush_sends();
  return TEMPI_NEXT(MPI_Comm_create)(comm, group, newcomm);
}

// A send posted later must not name a freed communicator, and what was kept about its
// handle is forgotten (the library may give it to the next communicator it makes).
int TEMPI_WRAPPER(MPI_Comm_free)(MPI_Comm *comm) {
  flush_sends();
  if (comm) streams::comm_freeing(*comm);  // a stream's operations on it go to the library first
  comm_freed();  // before, and after: the handle may come back as soon as the library let it go
  const int err = TEMPI_NEXT(MPI_Comm_free)(comm);
  comm_freed();
  return err;
}

// Detaching waits for buffered sends, which must be posted first.
int TEMPI_WRAPPER(MPI_Buffer_detach)(void *buffer, int *size) {
  flush_sends();
  return TEMPI_NEXT(MPI_Buffer_detach)(buffer, size);
}

}  // extern "C"
