// The reductions' handlers (collectives.hpp): MPI_Reduce, MPI_Allreduce,
// MPI_Reduce_scatter(_block), MPI_Scan, MPI_Exscan and MPI_Reduce_local. The library must
// compute on typed data, so a GPU buffer is staged through a host copy of its region
// (Side::Mode::Region) on every library, CUDA-aware or not.
#include "coll/collectives.hpp"

#include <climits>

#include "base/errors.hpp"
#include "base/next.hpp"
#include "coll/block_lists.hpp"
#include "coll/topology.hpp"

namespace tempi {
namespace coll {

namespace {

// A side that holds a reduction's typed data (Region on a library that is not CUDA-aware).
int plan_typed(Side &s, const void *buf, int count, MPI_Datatype type, bool store, const CollectiveOp &op) {
  if (!gpu_data(buf)) return MPI_SUCCESS;
  return s.plan(mutable_buf(buf), single(count, type, true, store), true, op.comm, op.call);
}

// The rest of a reduction once its sides are planned: the library's call on the
// application's buffers where neither is GPU data, else on the host copies.
template <class Next>
int issue_typed(std::shared_ptr<CollectiveOp> op, const Issue &how, const void *sbuf, void *rbuf, const Next &next) {
  if (!needed(*op)) return untouched(op, next(sbuf, rbuf), how);
  if (const int err = load(*op, how)) return err;
  return conclude(op, next(op->send.library_buffer(sbuf), op->recv.library_buffer(rbuf)), how);
}

// The reductions where every rank has a send and a receive buffer of `count` elements
// (MPI_Allreduce, MPI_Scan, MPI_Exscan).
template <class Next>
int every_rank_alike(const char *blocking, const char *nonblocking, const void *sbuf, void *rbuf, int count,
                     MPI_Datatype type, MPI_Comm comm, const Issue &how, const Next &next) {
  auto op = new_op(blocking, nonblocking, comm, how);
  if (const int err = plan_typed(op->send, sbuf, count, type, false, *op)) return err;
  if (const int err = plan_typed(op->recv, rbuf, count, type, true, *op)) return err;
  return issue_typed(std::move(op), how, sbuf, rbuf, next);
}

}  // namespace

int reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op mpi_op, int root, MPI_Comm comm,
           Issue how) {
  auto next = [&](const void *s, void *r) {
    return TEMPI_FORWARD(how, MPI_Ireduce, MPI_Reduce, s, r, count, type, mpi_op, root, comm);
  };
  Group g;
  Role role;
  if (!rooted(comm, root, g, role)) return next(sbuf, rbuf);
  auto op = new_op("MPI_Reduce", "MPI_Ireduce", comm, how);
  const bool sends = g.inter ? role == Role::Leaf : !(role == Role::Root && sbuf == MPI_IN_PLACE);
  if (sends)
    if (const int err = plan_typed(op->send, sbuf, count, type, false, *op)) return err;
  if (role == Role::Root)
    if (const int err = plan_typed(op->recv, rbuf, count, type, true, *op)) return err;
  return issue_typed(std::move(op), how, sbuf, rbuf, next);
}

int allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op mpi_op, MPI_Comm comm,
              Issue how) {
  auto next = [&](const void *s, void *r) {
    return TEMPI_FORWARD(how, MPI_Iallreduce, MPI_Allreduce, s, r, count, type, mpi_op, comm);
  };
  return every_rank_alike("MPI_Allreduce", "MPI_Iallreduce", sbuf, rbuf, count, type, comm, how, next);
}

int reduce_scatter(const void *sbuf, void *rbuf, const int rcounts[], MPI_Datatype type, MPI_Op mpi_op,
                   MPI_Comm comm, Issue how) {
  auto next = [&](const void *s, void *r) {
    return TEMPI_FORWARD(how, MPI_Ireduce_scatter, MPI_Reduce_scatter, s, r, rcounts, type, mpi_op, comm);
  };
  Group g;
  if (!group_of(comm, g) || (!gpu_data(sbuf) && !gpu_data(rbuf))) return next(sbuf, rbuf);
  auto op = new_op("MPI_Reduce_scatter", "MPI_Ireduce_scatter", comm, how);
  if (!rcounts) return null_array(comm, op->call, "recvcounts");
  int64_t total = 0;  // the input vector: every process's share (of the local group)
  for (int i = 0; i < g.size; ++i) {
    if (rcounts[i] < 0) return raise_error(comm, MPI_ERR_COUNT, "%s: negative count %d", op->call, rcounts[i]);
    total += rcounts[i];
  }
  if (total > INT_MAX)
    return raise_error(comm, MPI_ERR_COUNT, "%s: %lld elements in all cannot be staged", op->call, (long long)total);
  const bool in_place = sbuf == MPI_IN_PLACE;
  if (const int err = plan_typed(op->send, sbuf, int(total), type, false, *op)) return err;
  if (const int err = plan_typed(op->recv, rbuf, in_place ? int(total) : rcounts[g.rank], type, true, *op)) return err;
  return issue_typed(std::move(op), how, sbuf, rbuf, next);
}

int reduce_scatter_block(const void *sbuf, void *rbuf, int rcount, MPI_Datatype type, MPI_Op mpi_op, MPI_Comm comm,
                         Issue how) {
  auto next = [&](const void *s, void *r) {
    return TEMPI_FORWARD(how, MPI_Ireduce_scatter_block, MPI_Reduce_scatter_block, s, r, rcount, type, mpi_op, comm);
  };
  Group g;
  if (!group_of(comm, g) || (!gpu_data(sbuf) && !gpu_data(rbuf))) return next(sbuf, rbuf);
  auto op = new_op("MPI_Reduce_scatter_block", "MPI_Ireduce_scatter_block", comm, how);
  if (rcount < 0) return raise_error(comm, MPI_ERR_COUNT, "%s: negative count %d", op->call, rcount);
  const int64_t total = int64_t(rcount) * g.size;
  if (total > INT_MAX)
    return raise_error(comm, MPI_ERR_COUNT, "%s: %lld elements in all cannot be staged", op->call, (long long)total);
  const bool in_place = sbuf == MPI_IN_PLACE;
  if (const int err = plan_typed(op->send, sbuf, int(total), type, false, *op)) return err;
  if (const int err = plan_typed(op->recv, rbuf, in_place ? int(total) : rcount, type, true, *op)) return err;
  return issue_typed(std::move(op), how, sbuf, rbuf, next);
}

int scan(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op mpi_op, MPI_Comm comm,
         Issue how) {
  auto next = [&](const void *s, void *r) {
    return TEMPI_FORWARD(how, MPI_Iscan, MPI_Scan, s, r, count, type, mpi_op, comm);
  };
  return every_rank_alike("MPI_Scan", "MPI_Iscan", sbuf, rbuf, count, type, comm, how, next);
}

int exscan(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op mpi_op, MPI_Comm comm,
           Issue how) {
  auto next = [&](const void *s, void *r) {
    return TEMPI_FORWARD(how, MPI_Iexscan, MPI_Exscan, s, r, count, type, mpi_op, comm);
  };
  return every_rank_alike("MPI_Exscan", "MPI_Iexscan", sbuf, rbuf, count, type, comm, how, next);
}

int reduce_local(const void *inbuf, void *inoutbuf, int count, MPI_Datatype type, MPI_Op mpi_op) {
  auto op = new_op("MPI_Reduce_local", "MPI_Reduce_local", MPI_COMM_SELF, nullptr);
  if (const int err = plan_typed(op->send, inbuf, count, type, false, *op)) return err;
  if (const int err = plan_typed(op->recv, inoutbuf, count, type, true, *op)) return err;
  if (!needed(*op)) return next::MPI_Reduce_local(inbuf, inoutbuf, count, type, mpi_op);
  if (const int err = load(*op)) return err;
  const int err = next::MPI_Reduce_local(op->send.library_buffer(inbuf), op->recv.library_buffer(inoutbuf),
                                               count, type, mpi_op);
  return conclude(op, err, nullptr);
}

}  // namespace coll
}  // namespace tempi
