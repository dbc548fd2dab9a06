// One collective call around the library's call (CollectiveOp): its two Sides and what the
// library gets for them, and the steps every handler of coll/ runs in this order:
//   new_op     the op, named after the application's call and form;
//   (plan)     the handler plans its GPU sides (Side::plan);
//   load       the send blocks packed (or regions copied in) before the library's call;
//   (call)     the library's call, on the application's arguments (untouched) or on the wire;
//   conclude   a blocking call finishes now; a nonblocking or persistent one is tracked in
//              the request table, and the completion call that completes it finishes it.
#pragma once

#include <mpi.h>

#include <memory>
#include <vector>

#include "coll/issue.hpp"
#include "coll/side.hpp"
#include "coll/wire.hpp"
#include "p2p/requests.hpp"

namespace tempi {

// Everything one collective call needs around the library call.
// A nonblocking or persistent one is the request table's TrackedOp (p2p/requests.hpp):
// completion finishes every op of a call through finish_collectives.
struct CollectiveOp final : TrackedOp {
  const char *call = "";
  MPI_Comm comm = MPI_COMM_NULL;
  Side send, recv;
  Wire swire, rwire;
  bool finished = false;  // the receive side is in place (finish ran)

  MPI_Comm error_comm() const override { return comm; }
  Finisher finisher() const override;
};

// After the library completed `op` with error `err`: the receive side's data into the
// application's buffer (nothing when err is an error). Runs once.
int finish_collective(CollectiveOp &op, int err);

// finish_collective for ops that completed together (each a CollectiveOp): unpacks issued
// together, one wait per GPU.
int finish_collectives(std::vector<OpFinishing> &batch);

// Before the library's MPI_Start of a persistent collective: the send blocks' current
// data packed (or regions copied in), and the receive side marked unfinished.
int start_collective(CollectiveOp &op);

namespace coll {

// The name of the application's call in its form (`blocking`, its "MPI_I..." name, or
// "MPI_X_init" for a persistent init; the name outlives the op: errors, logs).
const char *call_name(const char *blocking, const char *nonblocking, const Issue &how);
// A new op for the application's call, its Sides told whether the library may read GPU memory.
std::shared_ptr<CollectiveOp> new_op(const char *blocking, const char *nonblocking, MPI_Comm comm, const Issue &how);
// Whether TEMPI rewires either side (else the library gets the application's arguments).
inline bool needed(const CollectiveOp &op) { return op.send.used() || op.recv.used(); }
// Before the library's call: the send blocks packed (or regions copied in). A persistent
// init packs nothing: each start does (start_collective).
int load(CollectiveOp &op, const Issue &how = Issue{});
// After the library's call returned `err`: a blocking call finishes now; a nonblocking
// one is tracked so that the completion call that completes it finishes it; a persistent
// one is tracked, inactive, until MPI_Request_free (coll/persistent_coll.hpp).
int conclude(std::shared_ptr<CollectiveOp> op, int err, const Issue &how);
// A call that TEMPI leaves to the library as it is (no GPU side used): its persistent
// form is still TEMPI's (each start issues the library's nonblocking call), since the
// library's own persistent collectives are not to be trusted (docs/using.md).
inline int untouched(std::shared_ptr<CollectiveOp> op, int err, const Issue &how) {
  return how.persistent ? conclude(std::move(op), err, how) : err;
}

inline void *mutable_buf(const void *p) { return const_cast<void *>(p); }

// Side::plan for a GPU buffer of an op that moves bytes (not a reduction's typed data).
inline int plan_side(Side &s, const void *buf, std::vector<Block> blocks, const CollectiveOp &op) {
  return s.plan(mutable_buf(buf), std::move(blocks), false, op.comm, op.call);
}

// The rest of a collective that passes one count of one type on each side, once its sides
// are planned: the library's call on the application's arguments where neither side needs
// TEMPI, else on the staging, after the send side is loaded. `next` issues the library's call.
template <class Next>
int issue_uniform(std::shared_ptr<CollectiveOp> op, const Issue &how, const void *sbuf, int scount,
                  MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype, const Next &next) {
  if (!needed(*op)) return untouched(op, next(sbuf, scount, stype, rbuf, rcount, rtype), how);
  if (const int err = load(*op, how)) return err;
  Wire &sw = op->swire, &rw = op->rwire;
  if (const int err = wire_uniform(op->send, scount, stype, op->comm, op->call, sw)) return err;
  if (const int err = wire_uniform(op->recv, rcount, rtype, op->comm, op->call, rw)) return err;
  return conclude(op, next(op->send.library_buffer(sbuf), sw.count, sw.unit, op->recv.library_buffer(rbuf), rw.count,
                           rw.unit),
                  how);
}

// The same for a collective that sends one count of one type and receives per-peer counts
// at per-peer displacements (the gathers: MPI_Gatherv, MPI_Allgatherv and its neighbourhood form).
template <class Next>
int issue_gathered(std::shared_ptr<CollectiveOp> op, const Issue &how, const void *sbuf, int scount,
                   MPI_Datatype stype, void *rbuf, const int *rcounts, const int *displs, MPI_Datatype rtype,
                   const Next &next) {
  if (!needed(*op)) return untouched(op, next(sbuf, scount, stype, rbuf, rcounts, displs, rtype), how);
  if (const int err = load(*op, how)) return err;
  Wire &sw = op->swire;
  VArgs r;
  if (const int err = wire_uniform(op->send, scount, stype, op->comm, op->call, sw)) return err;
  if (const int err = wire_varying(op->recv, rcounts, displs, rtype, op->comm, op->call, op->rwire, r)) return err;
  return conclude(op, next(op->send.library_buffer(sbuf), sw.count, sw.unit, op->recv.library_buffer(rbuf), r.counts,
                           r.displs, r.type),
                  how);
}

}  // namespace coll

}  // namespace tempi
