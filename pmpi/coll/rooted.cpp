// The rooted collectives' handlers (collectives.hpp): MPI_Bcast, MPI_Gather(v) and
// MPI_Scatter(v) in their three forms. The root's buffer has one block per peer, a leaf's
// one block; an intercommunicator's root only sends or only receives.
#include "coll/collectives.hpp"

#include "coll/block_lists.hpp"
#include "coll/topology.hpp"

namespace tempi {
namespace coll {

int bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm, Issue how) {
  auto next = [&](void *b, int c, MPI_Datatype t) {
    return TEMPI_FORWARD(how, MPI_Ibcast, MPI_Bcast, b, c, t, root, comm);
  };
  Group g;
  Role role;
  if (!gpu_data(buf) || !rooted(comm, root, g, role))
    return next(buf, count, type);
  auto op = new_op("MPI_Bcast", "MPI_Ibcast", comm, how);
  const bool sends = role == Role::Root;
  Side &s = sends ? op->send : op->recv;
  if (const int err = plan_side(s, buf, single(count, type, sends, !sends), *op)) return err;
  if (!needed(*op)) return untouched(op, next(buf, count, type), how);
  if (const int err = load(*op, how)) return err;
  Wire &w = sends ? op->swire : op->rwire;
  if (const int err = wire_uniform(s, count, type, op->comm, op->call, w)) return err;
  return conclude(op, next(s.library_buffer(buf), w.count, w.unit), how);
}

int gather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype, int root,
           MPI_Comm comm, Issue how) {
  auto next = [&](const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt) {
    return TEMPI_FORWARD(how, MPI_Igather, MPI_Gather, s, sc, st, r, rc, rt, root, comm);
  };
  Group g;
  Role role;
  if (!rooted(comm, root, g, role))
    return next(sbuf, scount, stype, rbuf, rcount, rtype);
  auto op = new_op("MPI_Gather", "MPI_Igather", comm, how);
  const bool in_place = sbuf == MPI_IN_PLACE;
  const bool sends = !g.inter || role == Role::Leaf;
  if (sends && gpu_data(sbuf))
    if (const int err = plan_side(op->send, sbuf, single(scount, stype, true, false), *op)) return err;
  if (role == Role::Root && gpu_data(rbuf)) {
    std::vector<Block> blocks = uniform(g.peers(), rcount, rtype, false, true);
    if (in_place && !g.inter) blocks[size_t(g.rank)].store = false;  // the root's own block stays where it is
    if (const int err = plan_side(op->recv, rbuf, std::move(blocks), *op)) return err;
  }
  return issue_uniform(std::move(op), how, sbuf, scount, stype, rbuf, rcount, rtype, next);
}

int gatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, const int rcounts[], const int displs[],
            MPI_Datatype rtype, int root, MPI_Comm comm, Issue how) {
  auto next = [&](const void *s, int sc, MPI_Datatype st, void *r, const int *rc, const int *rd, MPI_Datatype rt) {
    return TEMPI_FORWARD(how, MPI_Igatherv, MPI_Gatherv, s, sc, st, r, rc, rd, rt, root, comm);
  };
  Group g;
  Role role;
  if (!rooted(comm, root, g, role))
    return next(sbuf, scount, stype, rbuf, rcounts, displs, rtype);
  auto op = new_op("MPI_Gatherv", "MPI_Igatherv", comm, how);
  const bool in_place = sbuf == MPI_IN_PLACE;
  const bool sends = !g.inter || role == Role::Leaf;
  if (sends && gpu_data(sbuf))
    if (const int err = plan_side(op->send, sbuf, single(scount, stype, true, false), *op)) return err;
  if (role == Role::Root && gpu_data(rbuf)) {
    std::vector<Block> blocks;
    if (const int err = varying(g.peers(), rcounts, displs, rtype, false, true, comm, op->call, blocks)) return err;
    if (in_place && !g.inter) blocks[size_t(g.rank)].store = false;
    if (const int err = plan_side(op->recv, rbuf, std::move(blocks), *op)) return err;
  }
  return issue_gathered(std::move(op), how, sbuf, scount, stype, rbuf, rcounts, displs, rtype, next);
}

int scatter(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype, int root,
            MPI_Comm comm, Issue how) {
  auto next = [&](const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt) {
    return TEMPI_FORWARD(how, MPI_Iscatter, MPI_Scatter, s, sc, st, r, rc, rt, root, comm);
  };
  Group g;
  Role role;
  if (!rooted(comm, root, g, role))
    return next(sbuf, scount, stype, rbuf, rcount, rtype);
  auto op = new_op("MPI_Scatter", "MPI_Iscatter", comm, how);
  const bool in_place = rbuf == MPI_IN_PLACE;
  const bool receives = !g.inter || role == Role::Leaf;
  if (role == Role::Root && gpu_data(sbuf)) {
    std::vector<Block> blocks = uniform(g.peers(), scount, stype, true, false);
    if (in_place && !g.inter) blocks[size_t(g.rank)].load = false;  // the root's own block is not sent
    if (const int err = plan_side(op->send, sbuf, std::move(blocks), *op)) return err;
  }
  if (receives && gpu_data(rbuf))
    if (const int err = plan_side(op->recv, rbuf, single(rcount, rtype, false, true), *op)) return err;
  return issue_uniform(std::move(op), how, sbuf, scount, stype, rbuf, rcount, rtype, next);
}

int scatterv(const void *sbuf, const int scounts[], const int displs[], MPI_Datatype stype, void *rbuf, int rcount,
             MPI_Datatype rtype, int root, MPI_Comm comm, Issue how) {
  auto next = [&](const void *s, const int *sc, const int *sd, MPI_Datatype st, void *r, int rc, MPI_Datatype rt) {
    return TEMPI_FORWARD(how, MPI_Iscatterv, MPI_Scatterv, s, sc, sd, st, r, rc, rt, root, comm);
  };
  Group g;
  Role role;
  if (!rooted(comm, root, g, role))
    return next(sbuf, scounts, displs, stype, rbuf, rcount, rtype);
  auto op = new_op("MPI_Scatterv", "MPI_Iscatterv", comm, how);
  const bool in_place = rbuf == MPI_IN_PLACE;
  const bool receives = !g.inter || role == Role::Leaf;
  if (role == Role::Root && gpu_data(sbuf)) {
    std::vector<Block> blocks;
    if (const int err = varying(g.peers(), scounts, displs, stype, true, false, comm, op->call, blocks)) return err;
    if (in_place && !g.inter) blocks[size_t(g.rank)].load = false;
    if (const int err = plan_side(op->send, sbuf, std::move(blocks), *op)) return err;
  }
  if (receives && gpu_data(rbuf))
    if (const int err = plan_side(op->recv, rbuf, single(rcount, rtype, false, true), *op)) return err;
  if (!needed(*op)) return untouched(op, next(sbuf, scounts, displs, stype, rbuf, rcount, rtype), how);
  if (const int err = load(*op, how)) return err;
  VArgs s;
  Wire &rw = op->rwire;
  if (const int err = wire_varying(op->send, scounts, displs, stype, op->comm, op->call, op->swire, s)) return err;
  if (const int err = wire_uniform(op->recv, rcount, rtype, op->comm, op->call, rw)) return err;
  return conclude(op, next(op->send.library_buffer(sbuf), s.counts, s.displs, s.type, op->recv.library_buffer(rbuf),
                           rw.count, rw.unit),
                  how);
}

}  // namespace coll
}  // namespace tempi
