// The all-to-all family's handlers (collectives.hpp): the gathers to all and the
// all-to-alls, plain and neighbourhood. The v and w forms fill an Exchange and go through
// the one exchange path (exchange.hpp); the one-count forms go there too as v-forms where
// zero-copy serves them (as_v_form), else pass one count of one type per side
// (issue_uniform).
#include "coll/collectives.hpp"

#include "coll/block_lists.hpp"
#include "coll/exchange.hpp"
#include "coll/topology.hpp"

namespace tempi {
namespace coll {

namespace {

// An Exchange of the v-form `kind` for a one-count call, its send and receive types set.
Exchange v_form(Exchange::Kind kind, const char *blocking, const char *nonblocking, MPI_Comm comm, const void *sbuf,
                MPI_Datatype stype, void *rbuf, MPI_Datatype rtype, const Issue &how) {
  return {kind, blocking, nonblocking, comm, {mutable_buf(sbuf), nullptr, nullptr, nullptr, stype, nullptr},
          {rbuf, nullptr, nullptr, nullptr, rtype, nullptr}, how};
}

// MPI_Allgather (`gathers`: one send block for every peer) and MPI_Alltoall (a send block
// per peer): one count of one type on each side, or the v-form where zero-copy serves it.
template <class Next>
int one_count_all(bool gathers, const char *blocking, const char *nonblocking, const void *sbuf, int scount,
                  MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype, MPI_Comm comm, const Issue &how,
                  const Next &next) {
  Group g;
  if (!group_of(comm, g)) return next(sbuf, scount, stype, rbuf, rcount, rtype);
  const bool in_place = sbuf == MPI_IN_PLACE;
  if (!g.inter && as_varying(comm, in_place, how))
    return as_v_form(v_form(Exchange::Kind::Alltoallv, blocking, nonblocking, comm, sbuf, stype, rbuf, rtype, how),
                     g.size, scount, gathers, g.size, rcount);
  auto op = new_op(blocking, nonblocking, comm, how);
  if (!in_place && gpu_data(sbuf)) {
    std::vector<Block> blocks =
        gathers ? single(scount, stype, true, false) : uniform(g.peers(), scount, stype, true, false);
    if (const int err = plan_side(op->send, sbuf, std::move(blocks), *op)) return err;
  }
  if (gpu_data(rbuf)) {
    // In place: an all-to-all's receive blocks are its send blocks too; an all-gather's own
    // block is this rank's contribution, read by the library where it lies.
    std::vector<Block> blocks = uniform(g.peers(), rcount, rtype, !gathers && in_place, true);
    if (gathers && in_place && !g.inter) {
      blocks[size_t(g.rank)].load = true;
      blocks[size_t(g.rank)].store = false;
    }
    if (const int err = plan_side(op->recv, rbuf, std::move(blocks), *op)) return err;
  }
  return issue_uniform(std::move(op), how, sbuf, scount, stype, rbuf, rcount, rtype, next);
}

}  // namespace

// ---- all to all --------------------------------------------------------------------------

int allgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
              MPI_Comm comm, Issue how) {
  auto next = [&](const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt) {
    return TEMPI_FORWARD(how, MPI_Iallgather, MPI_Allgather, s, sc, st, r, rc, rt, comm);
  };
  return one_count_all(true, "MPI_Allgather", "MPI_Iallgather", sbuf, scount, stype, rbuf, rcount, rtype, comm, how,
                       next);
}

int allgatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, const int rcounts[], const int displs[],
               MPI_Datatype rtype, MPI_Comm comm, Issue how) {
  auto next = [&](const void *s, int sc, MPI_Datatype st, void *r, const int *rc, const int *rd, MPI_Datatype rt) {
    return TEMPI_FORWARD(how, MPI_Iallgatherv, MPI_Allgatherv, s, sc, st, r, rc, rd, rt, comm);
  };
  Group g;
  if (!group_of(comm, g)) return next(sbuf, scount, stype, rbuf, rcounts, displs, rtype);
  const bool in_place = sbuf == MPI_IN_PLACE;
  if (!g.inter && as_varying(comm, in_place, how)) {
    Exchange x = v_form(Exchange::Kind::Alltoallv, "MPI_Allgatherv", "MPI_Iallgatherv", comm, sbuf, stype, rbuf,
                        rtype, how);
    if (g.size > 0 && (!rcounts || !displs))
      return null_array(comm, call_name(x.blocking, x.nonblocking, how),
                        !rcounts ? "the counts array" : "the displacements array");
    x.recv.counts = rcounts;
    x.recv.displs = displs;
    return as_v_form(x, g.size, scount, true, g.size, 0);
  }
  auto op = new_op("MPI_Allgatherv", "MPI_Iallgatherv", comm, how);
  if (!in_place && gpu_data(sbuf))
    if (const int err = plan_side(op->send, sbuf, single(scount, stype, true, false), *op)) return err;
  if (gpu_data(rbuf)) {
    std::vector<Block> blocks;
    if (const int err = varying(g.peers(), rcounts, displs, rtype, false, true, comm, op->call, blocks)) return err;
    if (in_place && !g.inter) {
      blocks[size_t(g.rank)].load = true;  // this rank's contribution, read by the library in place
      blocks[size_t(g.rank)].store = false;
    }
    if (const int err = plan_side(op->recv, rbuf, std::move(blocks), *op)) return err;
  }
  return issue_gathered(std::move(op), how, sbuf, scount, stype, rbuf, rcounts, displs, rtype, next);
}

int alltoall(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
             MPI_Comm comm, Issue how) {
  auto next = [&](const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt) {
    return TEMPI_FORWARD(how, MPI_Ialltoall, MPI_Alltoall, s, sc, st, r, rc, rt, comm);
  };
  return one_count_all(false, "MPI_Alltoall", "MPI_Ialltoall", sbuf, scount, stype, rbuf, rcount, rtype, comm, how,
                       next);
}

int alltoallv(const void *sbuf, const int scounts[], const int sdispls[], MPI_Datatype stype, void *rbuf,
              const int rcounts[], const int rdispls[], MPI_Datatype rtype, MPI_Comm comm, Issue how) {
  return exchange({Exchange::Kind::Alltoallv, "MPI_Alltoallv", "MPI_Ialltoallv", comm,
                   {mutable_buf(sbuf), scounts, sdispls, nullptr, stype, nullptr},
                   {rbuf, rcounts, rdispls, nullptr, rtype, nullptr}, how});
}

int alltoallw(const void *sbuf, const int scounts[], const int sdispls[], const MPI_Datatype stypes[], void *rbuf,
              const int rcounts[], const int rdispls[], const MPI_Datatype rtypes[], MPI_Comm comm,
              Issue how) {
  return exchange({Exchange::Kind::Alltoallw, "MPI_Alltoallw", "MPI_Ialltoallw", comm,
                   {mutable_buf(sbuf), scounts, sdispls, nullptr, MPI_DATATYPE_NULL, stypes},
                   {rbuf, rcounts, rdispls, nullptr, MPI_DATATYPE_NULL, rtypes}, how});
}

// ---- neighbourhoods ----------------------------------------------------------------------

int neighbor_allgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
                       MPI_Comm comm, Issue how) {
  auto next = [&](const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt) {
    return TEMPI_FORWARD(how, MPI_Ineighbor_allgather, MPI_Neighbor_allgather, s, sc, st, r, rc, rt, comm);
  };
  std::vector<int> sources, dests;
  if (!neighbourhood(comm, sources, dests)) return next(sbuf, scount, stype, rbuf, rcount, rtype);
  if (as_varying(comm, false, how))
    return as_v_form(v_form(Exchange::Kind::NeighborAlltoallv, "MPI_Neighbor_allgather", "MPI_Ineighbor_allgather",
                            comm, sbuf, stype, rbuf, rtype, how),
                     int(dests.size()), scount, true, int(sources.size()), rcount);
  auto op = new_op("MPI_Neighbor_allgather", "MPI_Ineighbor_allgather", comm, how);
  if (gpu_data(sbuf))
    if (const int err = plan_side(op->send, sbuf, single(scount, stype, true, false), *op)) return err;
  if (gpu_data(rbuf)) {
    std::vector<Block> blocks = uniform(int(sources.size()), rcount, rtype, false, true);
    skip_null_peers(blocks, sources);
    if (const int err = plan_side(op->recv, rbuf, std::move(blocks), *op)) return err;
  }
  return issue_uniform(std::move(op), how, sbuf, scount, stype, rbuf, rcount, rtype, next);
}

int neighbor_allgatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, const int rcounts[],
                        const int displs[], MPI_Datatype rtype, MPI_Comm comm, Issue how) {
  auto next = [&](const void *s, int sc, MPI_Datatype st, void *r, const int *rc, const int *rd, MPI_Datatype rt) {
    return TEMPI_FORWARD(how, MPI_Ineighbor_allgatherv, MPI_Neighbor_allgatherv, s, sc, st, r, rc, rd, rt, comm);
  };
  std::vector<int> sources, dests;
  if (!neighbourhood(comm, sources, dests)) return next(sbuf, scount, stype, rbuf, rcounts, displs, rtype);
  if (as_varying(comm, false, how)) {
    Exchange x = v_form(Exchange::Kind::NeighborAlltoallv, "MPI_Neighbor_allgatherv", "MPI_Ineighbor_allgatherv",
                        comm, sbuf, stype, rbuf, rtype, how);
    if (!sources.empty() && (!rcounts || !displs))
      return null_array(comm, call_name(x.blocking, x.nonblocking, how),
                        !rcounts ? "the counts array" : "the displacements array");
    x.recv.counts = rcounts;
    x.recv.displs = displs;
    return as_v_form(x, int(dests.size()), scount, true, int(sources.size()), 0);
  }
  auto op = new_op("MPI_Neighbor_allgatherv", "MPI_Ineighbor_allgatherv", comm, how);
  if (gpu_data(sbuf))
    if (const int err = plan_side(op->send, sbuf, single(scount, stype, true, false), *op)) return err;
  if (gpu_data(rbuf)) {
    std::vector<Block> blocks;
    if (const int err = varying(int(sources.size()), rcounts, displs, rtype, false, true, comm, op->call, blocks))
      return err;
    skip_null_peers(blocks, sources);
    if (const int err = plan_side(op->recv, rbuf, std::move(blocks), *op)) return err;
  }
  return issue_gathered(std::move(op), how, sbuf, scount, stype, rbuf, rcounts, displs, rtype, next);
}

int neighbor_alltoall(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
                      MPI_Comm comm, Issue how) {
  auto next = [&](const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt) {
    return TEMPI_FORWARD(how, MPI_Ineighbor_alltoall, MPI_Neighbor_alltoall, s, sc, st, r, rc, rt, comm);
  };
  std::vector<int> sources, dests;
  if (!neighbourhood(comm, sources, dests)) return next(sbuf, scount, stype, rbuf, rcount, rtype);
  if (as_varying(comm, false, how) && distinct_neighbours(comm, sources, dests))
    return as_v_form(v_form(Exchange::Kind::NeighborAlltoallv, "MPI_Neighbor_alltoall", "MPI_Ineighbor_alltoall",
                            comm, sbuf, stype, rbuf, rtype, how),
                     int(dests.size()), scount, false, int(sources.size()), rcount);
  auto op = new_op("MPI_Neighbor_alltoall", "MPI_Ineighbor_alltoall", comm, how);
  if (gpu_data(sbuf)) {
    std::vector<Block> blocks = uniform(int(dests.size()), scount, stype, true, false);
    skip_null_peers(blocks, dests);
    if (const int err = plan_side(op->send, sbuf, std::move(blocks), *op)) return err;
  }
  if (gpu_data(rbuf)) {
    std::vector<Block> blocks = uniform(int(sources.size()), rcount, rtype, false, true);
    skip_null_peers(blocks, sources);
    if (const int err = plan_side(op->recv, rbuf, std::move(blocks), *op)) return err;
  }
  return issue_uniform(std::move(op), how, sbuf, scount, stype, rbuf, rcount, rtype, next);
}

int neighbor_alltoallv(const void *sbuf, const int scounts[], const int sdispls[], MPI_Datatype stype, void *rbuf,
                       const int rcounts[], const int rdispls[], MPI_Datatype rtype, MPI_Comm comm,
                       Issue how) {
  return exchange({Exchange::Kind::NeighborAlltoallv, "MPI_Neighbor_alltoallv", "MPI_Ineighbor_alltoallv", comm,
                   {mutable_buf(sbuf), scounts, sdispls, nullptr, stype, nullptr},
                   {rbuf, rcounts, rdispls, nullptr, rtype, nullptr}, how});
}

int neighbor_alltoallw(const void *sbuf, const int scounts[], const MPI_Aint sdispls[], const MPI_Datatype stypes[],
                       void *rbuf, const int rcounts[], const MPI_Aint rdispls[], const MPI_Datatype rtypes[],
                       MPI_Comm comm, Issue how) {
  return exchange({Exchange::Kind::NeighborAlltoallw, "MPI_Neighbor_alltoallw", "MPI_Ineighbor_alltoallw", comm,
                   {mutable_buf(sbuf), scounts, nullptr, sdispls, MPI_DATATYPE_NULL, stypes},
                   {rbuf, rcounts, nullptr, rdispls, MPI_DATATYPE_NULL, rtypes}, how});
}

}  // namespace coll
}  // namespace tempi
