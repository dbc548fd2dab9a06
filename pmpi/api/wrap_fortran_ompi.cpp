// Open MPI's Fortran bindings (4.1, libmpi_mpifh and libmpi_usempif08) call PMPI_X for
// every call, past TEMPI's C wrappers. So TEMPI defines the Fortran entry points that
// those bindings reach, converts the Fortran arguments, and enters its C wrappers
// (docs/using.md, "Fortran"). What reaches what (nm -D and objdump -d of Debian's 4.1.4,
// gfortran's naming):
//   `use mpi`, mpif.h   user code calls mpi_x_, a weak alias of ompi_x_f in libmpi_mpifh;
//   `use mpi_f08`       user code calls mpi_x_f08_ in libmpi_usempif08, which calls
//                       ompi_x_f, or pmpi_x_ for the calls with a LOGICAL or a
//                       topology argument (MPI_Test*, MPI_Request_get_status, MPI_Iprobe,
//                       MPI_Improbe, MPI_Cart_create, ...), both through the PLT.
// A definition in the program (or in TEMPI's preload library) comes first in symbol
// lookup, so defining mpi_x_ and ompi_x_f (or pmpi_x_) catches all three interfaces;
// TYPE(MPI_Status) of mpi_f08 is laid out as INTEGER status(MPI_STATUS_SIZE), and
// mpi_f08's MPI_STATUS_IGNORE, MPI_BOTTOM and MPI_IN_PLACE are the mpif.h sentinels.
//
// Calls with a buffer, a request, a status or a datatype go into TEMPI's C wrappers with
// the handles converted (f2c on the way in; c2f of every handle the call changed on the
// way out; 1-based indices; .TRUE. is 1, as gfortran has it). The calls TEMPI intercepts
// only to post its deferred sends first (probes, barrier, communicator, topology, window
// and file calls) post them and continue in Open MPI's own Fortran code, through the
// standard's names for it (PMPI_X_f, MPI-3.1 section 17.1.5), referenced weakly so that
// C programs need no libmpi_mpifh.
#include <dlfcn.h>
#include <mpi.h>

#include <algorithm>
#include <type_traits>
#include <utility>
#include <vector>

#include "p2p/engine.hpp"
#include "base/forward.hpp"
#include "log.hpp"
#include "base/runtime.hpp"

using F = MPI_Fint;
static_assert(std::is_same_v<MPI_Fint, int>, "Open MPI: INTEGER is int, so count and displacement arrays pass as they are");
// INTEGERs in a Fortran status (MPI_STATUS_SIZE): Open MPI's C status, word for word.
constexpr size_t status_size = sizeof(MPI_Status) / sizeof(MPI_Fint);
static_assert(status_size == 6, "Open MPI 4.1: MPI_STATUS_SIZE is 6");

// Open MPI's Fortran MPI_BOTTOM and MPI_IN_PLACE: common blocks that libmpi defines.
extern "C" F mpi_fortran_bottom_, mpi_fortran_in_place_;

namespace {

void *bottom(void *buf) { return buf == &mpi_fortran_bottom_ ? MPI_BOTTOM : buf; }
// Collectives' buffers: either may be MPI_IN_PLACE (the send buffer, or the receive
// buffer of a scatter's root).
void *coll(void *buf) { return buf == &mpi_fortran_in_place_ ? MPI_IN_PLACE : bottom(buf); }
MPI_Comm comm(const F *c) { return PMPI_Comm_f2c(*c); }
MPI_Datatype type(const F *t) { return PMPI_Type_f2c(*t); }
MPI_Op op(const F *o) { return PMPI_Op_f2c(*o); }

// The arguments that the C call writes: each gives the C argument (c()) and, once the
// call returned, writes back what Fortran must see (back(err)).

// A handle the call may change (MPI_Request, MPI_Datatype, MPI_Message): written back
// when the call changed it, or always after success where it is output only.
template <class C, C (*f2c)(F), F (*c2f)(C)>
class Handle {
 public:
  explicit Handle(F *f) : f_(f), c_(f2c(*f)), before_(c_) {}
  static Handle out(F *f, C null) { return Handle(f, null); }
  C *c() { return &c_; }
  void back(int err) {
    if (c_ != before_ || (output_only_ && err == MPI_SUCCESS)) *f_ = c2f(c_);
  }

 private:
  Handle(F *f, C null) : f_(f), c_(null), before_(null), output_only_(true) {}
  F *f_;
  C c_, before_;
  bool output_only_ = false;
};
using Request = Handle<MPI_Request, PMPI_Request_f2c, PMPI_Request_c2f>;
using Datatype = Handle<MPI_Datatype, PMPI_Type_f2c, PMPI_Type_c2f>;
using Message = Handle<MPI_Message, PMPI_Message_f2c, PMPI_Message_c2f>;
Request new_request(F *f) { return Request::out(f, MPI_REQUEST_NULL); }

class Requests {
 public:
  Requests(F n, F *f) : f_(f) {
    for (F i = 0; i < n; ++i) c_.push_back(PMPI_Request_f2c(f[i]));
    before_ = c_;
  }
  MPI_Request *c() { return c_.data(); }
  // Every request the call completed and freed, also when it failed (MPI_ERR_IN_STATUS).
  void back(int) {
    for (size_t i = 0; i < c_.size(); ++i)
      if (c_[i] != before_[i]) f_[i] = PMPI_Request_c2f(c_[i]);
  }

 private:
  F *f_;
  std::vector<MPI_Request> c_, before_;
};

class Status {
 public:
  explicit Status(F *f) : f_(f) {}
  MPI_Status *c() { return f_ == MPI_F_STATUS_IGNORE ? MPI_STATUS_IGNORE : &c_; }
  void back(int err) {
    if (err == MPI_SUCCESS && f_ != MPI_F_STATUS_IGNORE) PMPI_Status_c2f(&c_, f_);
  }

 private:
  F *f_;
  MPI_Status c_{};
};

class Statuses {
 public:
  Statuses(F n, F *f) : f_(f), c_(ignored() ? 0 : size_t(std::max(n, 0))) {}
  MPI_Status *c() { return ignored() ? MPI_STATUSES_IGNORE : c_.data(); }
  void back(int err) { back_first(int(c_.size()), err); }
  // MPI_Waitsome, MPI_Testsome: the first n hold the completed requests' statuses.
  void back_first(int n, int err) {
    if (ignored() || (err != MPI_SUCCESS && err != MPI_ERR_IN_STATUS)) return;
    for (int i = 0; i < n; ++i) PMPI_Status_c2f(&c_[size_t(i)], f_ + size_t(i) * status_size);
  }

 private:
  bool ignored() const { return f_ == MPI_F_STATUSES_IGNORE; }
  F *f_;
  std::vector<MPI_Status> c_;
};

class Flag {
 public:
  explicit Flag(F *f) : f_(f) {}
  int *c() { return &c_; }
  void back(int err) {
    if (err == MPI_SUCCESS) *f_ = c_ ? 1 : 0;
  }

 private:
  F *f_;
  int c_ = 0;
};

// MPI_Waitany, MPI_Testany: Fortran counts from 1.
class Index {
 public:
  explicit Index(F *f) : f_(f) {}
  int *c() { return &c_; }
  void back(int) { *f_ = c_ == MPI_UNDEFINED ? c_ : c_ + 1; }

 private:
  F *f_;
  int c_ = MPI_UNDEFINED;
};

// The datatypes of MPI_(I)alltoallw and MPI_(I)neighbor_alltoallw, one per peer. The
// library keeps what it needs of them by the time the call returns.
class Types {
 public:
  Types(int n, const F *f) {
    for (int i = 0; i < n; ++i) c_.push_back(PMPI_Type_f2c(f[i]));
  }
  const MPI_Datatype *c() { return c_.data(); }
  void back(int) {}

 private:
  std::vector<MPI_Datatype> c_;
};

int peers(MPI_Comm c) {
  int inter = 0, n = 0;
  if (c == MPI_COMM_NULL || PMPI_Comm_test_inter(c, &inter) != MPI_SUCCESS) return 0;
  (inter ? PMPI_Comm_remote_size : PMPI_Comm_size)(c, &n);
  return n;
}

// In- and out-degree of a communicator's topology, as MPI_Neighbor_* count them.
std::pair<int, int> neighbours(MPI_Comm c) {
  int topo = MPI_UNDEFINED, in = 0, out = 0, weighted = 0;
  if (c != MPI_COMM_NULL) PMPI_Topo_test(c, &topo);
  if (topo == MPI_CART) {
    PMPI_Cartdim_get(c, &in);
    return {2 * in, 2 * in};
  }
  if (topo == MPI_GRAPH) {
    int rank = 0;
    PMPI_Comm_rank(c, &rank);
    PMPI_Graph_neighbors_count(c, rank, &in);
    return {in, in};
  }
  if (topo == MPI_DIST_GRAPH) PMPI_Dist_graph_neighbors_count(c, &in, &out, &weighted);
  return {in, out};
}

template <class A, class = void>
struct written : std::false_type {};
template <class A>
struct written<A, std::void_t<decltype(std::declval<A &>().back(0))>> : std::true_type {};

template <class A>
decltype(auto) c_arg(A &a) {
  if constexpr (written<std::decay_t<A>>::value)
    return a.c();
  else
    return (a);
}

// One Fortran call: the C wrapper with the converted arguments, then the write-backs,
// then ierror (absent: null).
template <class Fn, class... A>
void call(F *ierr, Fn fn, A &&...a) {
  const int err = fn(c_arg(a)...);
  (
      [&] {
        if constexpr (written<std::decay_t<A>>::value) a.back(err);
      }(),
      ...);
  if (ierr) *ierr = err;
}

using SomeFn = int (*)(int, MPI_Request[], int *, int[], MPI_Status[]);
void some(SomeFn fn, F *incount, F *reqs, F *outcount, F *indices, F *sts, F *ierr) {
  Requests r(*incount, reqs);
  Statuses s(*incount, sts);
  int out = MPI_UNDEFINED;
  const int err = fn(*incount, r.c(), &out, indices, s.c());
  r.back(err);
  *outcount = out;
  if (out != MPI_UNDEFINED) {
    s.back_first(out, err);
    for (int k = 0; k < out; ++k) ++indices[k];
  }
  if (ierr) *ierr = err;
}

// Where Open MPI's own Fortran code is missing (a link that dropped libmpi_mpifh).
void missing(const char *name, F *ierr) {
  TEMPI_LOG(Error, "Open MPI's Fortran %s is not in this program (libmpi_mpifh not linked?): the call fails", name);
  if (ierr) *ierr = MPI_ERR_INTERN;
}

}  // namespace

// TEMPI_F(x, params): defines ompi_x_f, with mpi_x_ as its alias. TEMPI_F_PMPI(x, params):
// defines mpi_x_, with pmpi_x_ as its alias (the calls mpi_f08 reaches through pmpi_x_).
#define TEMPI_F(name, params)                                                          \
  extern "C" void ompi_##name##_f params;                                              \
  extern "C" void mpi_##name##_ params __attribute__((alias("ompi_" #name "_f")));     \
  extern "C" void ompi_##name##_f params
#define TEMPI_F_PMPI(name, params)                                                     \
  extern "C" void mpi_##name##_ params;                                                \
  extern "C" void pmpi_##name##_ params __attribute__((alias("mpi_" #name "_")));      \
  extern "C" void mpi_##name##_ params

// TEMPI's C wrapper of MPI_fn (forward.hpp: MPI_fn, or __wrap_MPI_fn in the --wrap archive).
#define W(fn) TEMPI_WRAPPER(MPI_##fn)

// ---- datatypes, pack ------------------------------------------------------------------

TEMPI_F(type_commit, (F *t, F *ierr)) { call(ierr, W(Type_commit), Datatype(t)); }
TEMPI_F(type_free, (F *t, F *ierr)) { call(ierr, W(Type_free), Datatype(t)); }
TEMPI_F(pack, (void *in, F *n, F *t, void *out, F *size, F *pos, F *c, F *ierr)) {
  call(ierr, W(Pack), bottom(in), *n, type(t), out, *size, pos, comm(c));
}
TEMPI_F(unpack, (void *in, F *size, F *pos, void *out, F *n, F *t, F *c, F *ierr)) {
  call(ierr, W(Unpack), in, *size, pos, bottom(out), *n, type(t), comm(c));
}

// ---- point to point --------------------------------------------------------------------

#define TEMPI_F_SEND(name, Name)                                                       \
  TEMPI_F(name, (void *b, F *n, F *t, F *peer, F *tag, F *c, F *ierr)) {               \
    call(ierr, W(Name), bottom(b), *n, type(t), *peer, *tag, comm(c));                 \
  }
#define TEMPI_F_ISEND(name, Name)                                                      \
  TEMPI_F(name, (void *b, F *n, F *t, F *peer, F *tag, F *c, F *req, F *ierr)) {       \
    call(ierr, W(Name), bottom(b), *n, type(t), *peer, *tag, comm(c), new_request(req)); \
  }
TEMPI_F_SEND(send, Send)
TEMPI_F_SEND(ssend, Ssend)
TEMPI_F_SEND(bsend, Bsend)
TEMPI_F_SEND(rsend, Rsend)
TEMPI_F_ISEND(isend, Isend)
TEMPI_F_ISEND(issend, Issend)
TEMPI_F_ISEND(ibsend, Ibsend)
TEMPI_F_ISEND(irsend, Irsend)
TEMPI_F_ISEND(irecv, Irecv)
// Persistent requests: made like the nonblocking calls.
TEMPI_F_ISEND(send_init, Send_init)
TEMPI_F_ISEND(ssend_init, Ssend_init)
TEMPI_F_ISEND(bsend_init, Bsend_init)
TEMPI_F_ISEND(rsend_init, Rsend_init)
TEMPI_F_ISEND(recv_init, Recv_init)
#undef TEMPI_F_SEND
#undef TEMPI_F_ISEND

TEMPI_F(recv, (void *b, F *n, F *t, F *src, F *tag, F *c, F *st, F *ierr)) {
  call(ierr, W(Recv), bottom(b), *n, type(t), *src, *tag, comm(c), Status(st));
}
TEMPI_F(sendrecv, (void *sb, F *sn, F *st, F *dest, F *stag, void *rb, F *rn, F *rt, F *src, F *rtag, F *c,
                   F *status, F *ierr)) {
  call(ierr, W(Sendrecv), bottom(sb), *sn, type(st), *dest, *stag, bottom(rb), *rn, type(rt), *src, *rtag, comm(c),
       Status(status));
}
TEMPI_F(sendrecv_replace, (void *b, F *n, F *t, F *dest, F *stag, F *src, F *rtag, F *c, F *st, F *ierr)) {
  call(ierr, W(Sendrecv_replace), bottom(b), *n, type(t), *dest, *stag, *src, *rtag, comm(c), Status(st));
}
TEMPI_F(mrecv, (void *b, F *n, F *t, F *msg, F *st, F *ierr)) {
  call(ierr, W(Mrecv), bottom(b), *n, type(t), Message(msg), Status(st));
}
TEMPI_F(imrecv, (void *b, F *n, F *t, F *msg, F *req, F *ierr)) {
  call(ierr, W(Imrecv), bottom(b), *n, type(t), Message(msg), new_request(req));
}

// ---- completion, start -----------------------------------------------------------------

TEMPI_F(wait, (F *req, F *st, F *ierr)) { call(ierr, W(Wait), Request(req), Status(st)); }
TEMPI_F(waitall, (F *n, F *reqs, F *sts, F *ierr)) {
  call(ierr, W(Waitall), *n, Requests(*n, reqs), Statuses(*n, sts));
}
TEMPI_F(waitany, (F *n, F *reqs, F *index, F *st, F *ierr)) {
  call(ierr, W(Waitany), *n, Requests(*n, reqs), Index(index), Status(st));
}
TEMPI_F(waitsome, (F *n, F *reqs, F *outcount, F *indices, F *sts, F *ierr)) {
  some(W(Waitsome), n, reqs, outcount, indices, sts, ierr);
}
TEMPI_F_PMPI(test, (F *req, F *flag, F *st, F *ierr)) { call(ierr, W(Test), Request(req), Flag(flag), Status(st)); }
TEMPI_F_PMPI(testall, (F *n, F *reqs, F *flag, F *sts, F *ierr)) {
  call(ierr, W(Testall), *n, Requests(*n, reqs), Flag(flag), Statuses(*n, sts));
}
TEMPI_F_PMPI(testany, (F *n, F *reqs, F *index, F *flag, F *st, F *ierr)) {
  call(ierr, W(Testany), *n, Requests(*n, reqs), Index(index), Flag(flag), Status(st));
}
TEMPI_F_PMPI(testsome, (F *n, F *reqs, F *outcount, F *indices, F *sts, F *ierr)) {
  some(W(Testsome), n, reqs, outcount, indices, sts, ierr);
}
TEMPI_F_PMPI(request_get_status, (F *req, F *flag, F *st, F *ierr)) {
  call(ierr, W(Request_get_status), PMPI_Request_f2c(*req), Flag(flag), Status(st));
}
TEMPI_F(request_free, (F *req, F *ierr)) { call(ierr, W(Request_free), Request(req)); }
TEMPI_F(start, (F *req, F *ierr)) { call(ierr, W(Start), Request(req)); }
TEMPI_F(startall, (F *n, F *reqs, F *ierr)) { call(ierr, W(Startall), *n, Requests(*n, reqs)); }

// ---- collectives -----------------------------------------------------------------------

TEMPI_F(bcast, (void *b, F *n, F *t, F *root, F *c, F *ierr)) {
  call(ierr, W(Bcast), bottom(b), *n, type(t), *root, comm(c));
}
TEMPI_F(ibcast, (void *b, F *n, F *t, F *root, F *c, F *req, F *ierr)) {
  call(ierr, W(Ibcast), bottom(b), *n, type(t), *root, comm(c), new_request(req));
}

// (sbuf, scount, stype, rbuf, rcount, rtype, [root,] comm): gather, scatter, allgather,
// alltoall, neighbour allgather and alltoall.
#define TEMPI_F_EXCHANGE(name, Name, IName)                                                   \
  TEMPI_F(name, (void *sb, F *sn, F *st, void *rb, F *rn, F *rt, F *c, F *ierr)) {     \
    call(ierr, W(Name), coll(sb), *sn, type(st), coll(rb), *rn, type(rt), comm(c));    \
  }                                                                                    \
  TEMPI_F(i##name, (void *sb, F *sn, F *st, void *rb, F *rn, F *rt, F *c, F *req, F *ierr)) { \
    call(ierr, W(IName), coll(sb), *sn, type(st), coll(rb), *rn, type(rt), comm(c), new_request(req)); \
  }
#define TEMPI_F_ROOTED(name, Name, IName)                                                     \
  TEMPI_F(name, (void *sb, F *sn, F *st, void *rb, F *rn, F *rt, F *root, F *c, F *ierr)) { \
    call(ierr, W(Name), coll(sb), *sn, type(st), coll(rb), *rn, type(rt), *root, comm(c)); \
  }                                                                                    \
  TEMPI_F(i##name, (void *sb, F *sn, F *st, void *rb, F *rn, F *rt, F *root, F *c, F *req, F *ierr)) { \
    call(ierr, W(IName), coll(sb), *sn, type(st), coll(rb), *rn, type(rt), *root, comm(c), new_request(req)); \
  }
TEMPI_F_ROOTED(gather, Gather, Igather)
TEMPI_F_ROOTED(scatter, Scatter, Iscatter)
TEMPI_F_EXCHANGE(allgather, Allgather, Iallgather)
TEMPI_F_EXCHANGE(alltoall, Alltoall, Ialltoall)
TEMPI_F_EXCHANGE(neighbor_allgather, Neighbor_allgather, Ineighbor_allgather)
TEMPI_F_EXCHANGE(neighbor_alltoall, Neighbor_alltoall, Ineighbor_alltoall)
#undef TEMPI_F_EXCHANGE
#undef TEMPI_F_ROOTED

// One count for the send side, counts and displacements for the receive side.
TEMPI_F(gatherv, (void *sb, F *sn, F *st, void *rb, F *rns, F *rds, F *rt, F *root, F *c, F *ierr)) {
  call(ierr, W(Gatherv), coll(sb), *sn, type(st), coll(rb), rns, rds, type(rt), *root, comm(c));
}
TEMPI_F(igatherv, (void *sb, F *sn, F *st, void *rb, F *rns, F *rds, F *rt, F *root, F *c, F *req, F *ierr)) {
  call(ierr, W(Igatherv), coll(sb), *sn, type(st), coll(rb), rns, rds, type(rt), *root, comm(c), new_request(req));
}
TEMPI_F(scatterv, (void *sb, F *sns, F *sds, F *st, void *rb, F *rn, F *rt, F *root, F *c, F *ierr)) {
  call(ierr, W(Scatterv), coll(sb), sns, sds, type(st), coll(rb), *rn, type(rt), *root, comm(c));
}
TEMPI_F(iscatterv, (void *sb, F *sns, F *sds, F *st, void *rb, F *rn, F *rt, F *root, F *c, F *req, F *ierr)) {
  call(ierr, W(Iscatterv), coll(sb), sns, sds, type(st), coll(rb), *rn, type(rt), *root, comm(c), new_request(req));
}
#define TEMPI_F_GATHERV(name, Name, IName)                                                    \
  TEMPI_F(name, (void *sb, F *sn, F *st, void *rb, F *rns, F *rds, F *rt, F *c, F *ierr)) { \
    call(ierr, W(Name), coll(sb), *sn, type(st), coll(rb), rns, rds, type(rt), comm(c)); \
  }                                                                                    \
  TEMPI_F(i##name, (void *sb, F *sn, F *st, void *rb, F *rns, F *rds, F *rt, F *c, F *req, F *ierr)) { \
    call(ierr, W(IName), coll(sb), *sn, type(st), coll(rb), rns, rds, type(rt), comm(c), new_request(req)); \
  }
#define TEMPI_F_ALLTOALLV(name, Name, IName)                                                  \
  TEMPI_F(name, (void *sb, F *sns, F *sds, F *st, void *rb, F *rns, F *rds, F *rt, F *c, F *ierr)) { \
    call(ierr, W(Name), coll(sb), sns, sds, type(st), coll(rb), rns, rds, type(rt), comm(c)); \
  }                                                                                    \
  TEMPI_F(i##name, (void *sb, F *sns, F *sds, F *st, void *rb, F *rns, F *rds, F *rt, F *c, F *req, F *ierr)) { \
    call(ierr, W(IName), coll(sb), sns, sds, type(st), coll(rb), rns, rds, type(rt), comm(c), new_request(req)); \
  }
TEMPI_F_GATHERV(allgatherv, Allgatherv, Iallgatherv)
TEMPI_F_GATHERV(neighbor_allgatherv, Neighbor_allgatherv, Ineighbor_allgatherv)
TEMPI_F_ALLTOALLV(alltoallv, Alltoallv, Ialltoallv)
TEMPI_F_ALLTOALLV(neighbor_alltoallv, Neighbor_alltoallv, Ineighbor_alltoallv)
#undef TEMPI_F_GATHERV
#undef TEMPI_F_ALLTOALLV

// A datatype per peer: int displacements for MPI_Alltoallw, MPI_Aint for the neighbour form.
TEMPI_F(alltoallw, (void *sb, F *sns, F *sds, F *sts, void *rb, F *rns, F *rds, F *rts, F *c, F *ierr)) {
  const int n = peers(comm(c));
  call(ierr, W(Alltoallw), coll(sb), sns, sds, Types(n, sts), coll(rb), rns, rds, Types(n, rts), comm(c));
}
TEMPI_F(ialltoallw, (void *sb, F *sns, F *sds, F *sts, void *rb, F *rns, F *rds, F *rts, F *c, F *req, F *ierr)) {
  const int n = peers(comm(c));
  call(ierr, W(Ialltoallw), coll(sb), sns, sds, Types(n, sts), coll(rb), rns, rds, Types(n, rts), comm(c),
       new_request(req));
}
TEMPI_F(neighbor_alltoallw, (void *sb, F *sns, MPI_Aint *sds, F *sts, void *rb, F *rns, MPI_Aint *rds, F *rts, F *c,
                             F *ierr)) {
  const auto [in, out] = neighbours(comm(c));
  call(ierr, W(Neighbor_alltoallw), coll(sb), sns, sds, Types(out, sts), coll(rb), rns, rds, Types(in, rts),
       comm(c));
}
TEMPI_F(ineighbor_alltoallw, (void *sb, F *sns, MPI_Aint *sds, F *sts, void *rb, F *rns, MPI_Aint *rds, F *rts,
                              F *c, F *req, F *ierr)) {
  const auto [in, out] = neighbours(comm(c));
  call(ierr, W(Ineighbor_alltoallw), coll(sb), sns, sds, Types(out, sts), coll(rb), rns, rds, Types(in, rts), comm(c),
       new_request(req));
}

// Reductions: (sbuf, rbuf, count, type, op, [root,] comm).
#define TEMPI_F_REDUCE(name, Name, IName)                                                     \
  TEMPI_F(name, (void *sb, void *rb, F *n, F *t, F *o, F *c, F *ierr)) {               \
    call(ierr, W(Name), coll(sb), coll(rb), *n, type(t), op(o), comm(c));              \
  }                                                                                    \
  TEMPI_F(i##name, (void *sb, void *rb, F *n, F *t, F *o, F *c, F *req, F *ierr)) {    \
    call(ierr, W(IName), coll(sb), coll(rb), *n, type(t), op(o), comm(c), new_request(req)); \
  }
TEMPI_F_REDUCE(allreduce, Allreduce, Iallreduce)
TEMPI_F_REDUCE(reduce_scatter_block, Reduce_scatter_block, Ireduce_scatter_block)
TEMPI_F_REDUCE(scan, Scan, Iscan)
TEMPI_F_REDUCE(exscan, Exscan, Iexscan)
#undef TEMPI_F_REDUCE
TEMPI_F(reduce, (void *sb, void *rb, F *n, F *t, F *o, F *root, F *c, F *ierr)) {
  call(ierr, W(Reduce), coll(sb), coll(rb), *n, type(t), op(o), *root, comm(c));
}
TEMPI_F(ireduce, (void *sb, void *rb, F *n, F *t, F *o, F *root, F *c, F *req, F *ierr)) {
  call(ierr, W(Ireduce), coll(sb), coll(rb), *n, type(t), op(o), *root, comm(c), new_request(req));
}
TEMPI_F(reduce_scatter, (void *sb, void *rb, F *rns, F *t, F *o, F *c, F *ierr)) {
  call(ierr, W(Reduce_scatter), coll(sb), coll(rb), rns, type(t), op(o), comm(c));
}
TEMPI_F(ireduce_scatter, (void *sb, void *rb, F *rns, F *t, F *o, F *c, F *req, F *ierr)) {
  call(ierr, W(Ireduce_scatter), coll(sb), coll(rb), rns, type(t), op(o), comm(c), new_request(req));
}
TEMPI_F(reduce_local, (void *in, void *inout, F *n, F *t, F *o, F *ierr)) {
  call(ierr, W(Reduce_local), bottom(in), bottom(inout), *n, type(t), op(o));
}

// ---- calls that only post TEMPI's deferred sends first ---------------------------------

// MPI_Buffer_detach: `use mpi` and mpif.h ignore the address (MPI-3.1 section 3.6);
// mpi_f08 returns it as TYPE(C_PTR) through ompi_buffer_detach_f08.
TEMPI_F(buffer_detach, (void *, F *size, F *ierr)) {
  void *addr = nullptr;
  call(ierr, W(Buffer_detach), &addr, size);
}
extern "C" void ompi_buffer_detach_f08(void **addr, F *size, F *ierr) {
  void *a = nullptr;
  const int err = W(Buffer_detach)(&a, size);
  if (err == MPI_SUCCESS) *addr = a;
  if (ierr) *ierr = err;
}

// The others continue in Open MPI's Fortran code with the caller's arguments as they are
// (every one a pointer, but the hidden length of a CHARACTER argument).
using Arg = void *;
#define TEMPI_F_FLUSHING(route, name, Name, params, args)                              \
  extern "C" void PMPI_##Name##_f params __attribute__((weak));                        \
  route(name, params) {                                                                \
    tempi::flush_sends();                                                              \
    if (PMPI_##Name##_f)                                                               \
      PMPI_##Name##_f args;                                                            \
    else                                                                               \
      missing("MPI_" #Name, ierr);                                                     \
  }

TEMPI_F_FLUSHING(TEMPI_F, probe, Probe, (Arg a, Arg b, Arg c, Arg d, F *ierr), (a, b, c, d, ierr))
TEMPI_F_FLUSHING(TEMPI_F_PMPI, iprobe, Iprobe, (Arg a, Arg b, Arg c, Arg d, Arg e, F *ierr), (a, b, c, d, e, ierr))
TEMPI_F_FLUSHING(TEMPI_F, mprobe, Mprobe, (Arg a, Arg b, Arg c, Arg d, Arg e, F *ierr), (a, b, c, d, e, ierr))
TEMPI_F_FLUSHING(TEMPI_F_PMPI, improbe, Improbe, (Arg a, Arg b, Arg c, Arg d, Arg e, Arg f, F *ierr),
                 (a, b, c, d, e, f, ierr))
TEMPI_F_FLUSHING(TEMPI_F, barrier, Barrier, (Arg a, F *ierr), (a, ierr))
TEMPI_F_FLUSHING(TEMPI_F, comm_dup, Comm_dup, (Arg a, Arg b, F *ierr), (a, b, ierr))
TEMPI_F_FLUSHING(TEMPI_F, comm_split, Comm_split, (Arg a, Arg b, Arg c, Arg d, F *ierr), (a, b, c, d, ierr))
TEMPI_F_FLUSHING(TEMPI_F, comm_create, Comm_create, (Arg a, Arg b, Arg c, F *ierr), (a, b, c, ierr))
TEMPI_F_FLUSHING(TEMPI_F, comm_free, Comm_free, (Arg a, F *ierr), (a, ierr))
TEMPI_F_FLUSHING(TEMPI_F, comm_split_type, Comm_split_type, (Arg a, Arg b, Arg c, Arg d, Arg e, F *ierr),
                 (a, b, c, d, e, ierr))
TEMPI_F_FLUSHING(TEMPI_F, comm_create_group, Comm_create_group, (Arg a, Arg b, Arg c, Arg d, F *ierr),
                 (a, b, c, d, ierr))
TEMPI_F_FLUSHING(TEMPI_F, comm_disconnect, Comm_disconnect, (Arg a, F *ierr), (a, ierr))
TEMPI_F_FLUSHING(TEMPI_F, intercomm_create, Intercomm_create, (Arg a, Arg b, Arg c, Arg d, Arg e, Arg f, F *ierr),
                 (a, b, c, d, e, f, ierr))
TEMPI_F_FLUSHING(TEMPI_F_PMPI, intercomm_merge, Intercomm_merge, (Arg a, Arg b, Arg c, F *ierr), (a, b, c, ierr))
TEMPI_F_FLUSHING(TEMPI_F_PMPI, cart_create, Cart_create, (Arg a, Arg b, Arg c, Arg d, Arg e, Arg f, F *ierr),
                 (a, b, c, d, e, f, ierr))
TEMPI_F_FLUSHING(TEMPI_F_PMPI, cart_sub, Cart_sub, (Arg a, Arg b, Arg c, F *ierr), (a, b, c, ierr))
TEMPI_F_FLUSHING(TEMPI_F_PMPI, graph_create, Graph_create, (Arg a, Arg b, Arg c, Arg d, Arg e, Arg f, F *ierr),
                 (a, b, c, d, e, f, ierr))
TEMPI_F_FLUSHING(TEMPI_F_PMPI, dist_graph_create, Dist_graph_create,
                 (Arg a, Arg b, Arg c, Arg d, Arg e, Arg f, Arg g, Arg h, Arg i, F *ierr),
                 (a, b, c, d, e, f, g, h, i, ierr))
TEMPI_F_FLUSHING(TEMPI_F_PMPI, dist_graph_create_adjacent, Dist_graph_create_adjacent,
                 (Arg a, Arg b, Arg c, Arg d, Arg e, Arg f, Arg g, Arg h, Arg i, Arg j, F *ierr),
                 (a, b, c, d, e, f, g, h, i, j, ierr))
TEMPI_F_FLUSHING(TEMPI_F, win_create, Win_create, (Arg a, Arg b, Arg c, Arg d, Arg e, Arg f, F *ierr),
                 (a, b, c, d, e, f, ierr))
TEMPI_F_FLUSHING(TEMPI_F, win_allocate, Win_allocate, (Arg a, Arg b, Arg c, Arg d, Arg e, Arg f, F *ierr),
                 (a, b, c, d, e, f, ierr))
// use mpi with a TYPE(C_PTR) base address reaches MPI_Win_allocate through its own entry point.
TEMPI_F_FLUSHING(TEMPI_F, win_allocate_cptr, Win_allocate_cptr, (Arg a, Arg b, Arg c, Arg d, Arg e, Arg f, F *ierr),
                 (a, b, c, d, e, f, ierr))
TEMPI_F_FLUSHING(TEMPI_F, win_free, Win_free, (Arg a, F *ierr), (a, ierr))
TEMPI_F_FLUSHING(TEMPI_F, win_fence, Win_fence, (Arg a, Arg b, F *ierr), (a, b, ierr))
TEMPI_F_FLUSHING(TEMPI_F, file_open, File_open, (Arg a, Arg b, Arg c, Arg d, Arg e, F *ierr, size_t name_length),
                 (a, b, c, d, e, ierr, name_length))
TEMPI_F_FLUSHING(TEMPI_F, file_close, File_close, (Arg a, F *ierr), (a, ierr))
#undef TEMPI_F_FLUSHING

// One entry point of each route (use mpi and mpif.h; mpi_f08 through ompi_x_f and pmpi_x_).
const char *tempi::ompi_fortran_entry_point_missed() {
  const std::pair<const char *, void *> routes[] = {{"mpi_wait_", reinterpret_cast<void *>(mpi_wait_)},
                                                      {"ompi_wait_f", reinterpret_cast<void *>(ompi_wait_f)},
                                                      {"pmpi_test_", reinterpret_cast<void *>(pmpi_test_)}};
  for (const auto &[name, ours] : routes)
    if (dlsym(RTLD_DEFAULT, name) != ours) return name;
  return nullptr;
}

// What linked.cpp refers to, so that the link recipes' --require-defined pulls this file
// in with the C wrappers (mpifort links the archive before libmpi_mpifh).
extern "C" const char tempi_fortran_ompi_linked[] = "TEMPI Fortran entry points for Open MPI";
