// The one exchange path (exchange.hpp).
#include "coll/exchange.hpp"

#include <algorithm>
#include <climits>
#include <utility>

#include "base/errors.hpp"
#include "coll/block_lists.hpp"
#include "coll/collective_op.hpp"
#include "coll/topology.hpp"
#include "zero_copy/zero_copy.hpp"

namespace tempi {
namespace coll {

namespace {

// Who an exchange's blocks go to (dests) and come from (sources), in the order of the
// application's arrays.
struct Peers {
  std::vector<int> dests, sources;  // comm ranks; MPI_PROC_NULL: a Cartesian border
  bool handshake = true;            // zero-copy may take part (not on an intercommunicator)
  bool cartesian = false;           // duplicate neighbours pair as the library decides
  bool in_place = false;            // MPI_IN_PLACE (all-to-all only): the receive buffer is the send side
  size_t room = 1;                  // the least length of a w-form's wire arrays
};

// Step 1. False for a communicator the library must judge (or without a topology, for a
// neighbourhood call): the library gets the call as it is.
bool peers_of(const Exchange &x, Peers &p) {
  if (x.neighbours()) {
    if (!neighbourhood(x.comm, p.sources, p.dests, &p.cartesian)) return false;
    // MPICH before 4.1 reads the count arrays of MPI_Neighbor_alltoallw with the other
    // direction's degree (pmodels/mpich#6233): TEMPI's arrays hold max(indegree, outdegree).
    p.room = std::max(p.sources.size(), p.dests.size());
    return true;
  }
  Group g;
  if (!group_of(x.comm, g)) return false;
  p.dests = p.sources = every_rank(g.peers());
  p.handshake = !g.inter;
  p.in_place = x.send.buf == MPI_IN_PLACE;
  return true;
}

// Step 2, one side: `a`'s blocks, to or from `peers`, in bytes.
int blocks_of(const Exchange &x, const ExchangeArgs &a, const std::vector<int> &peers, bool load, bool store,
              const CollectiveOp &op, std::vector<Block> &out) {
  const int n = int(peers.size());
  int err;
  if (x.kind == Exchange::Kind::Alltoallw)
    err = typed(n, a.counts, a.displs, a.types, load, store, op.comm, op.call, out);
  else if (x.kind == Exchange::Kind::NeighborAlltoallw)
    err = typed(n, a.counts, a.adispls, a.types, load, store, op.comm, op.call, out);
  else
    err = varying(n, a.counts, a.displs, a.type, load, store, op.comm, op.call, out);
  if (err != MPI_SUCCESS) return err;
  skip_null_peers(out, peers);
  return MPI_SUCCESS;
}

// Step 4. A blocking call moves its zero-copy pairs now; a persistent init decides them for
// every start (how.init keeps what the starts do); a nonblocking call takes no part (its
// pairs would have to be agreed before the call returns, which needs the peers). Zero-copy
// may not write a receive buffer that MPI_IN_PLACE makes the send side too.
int zero_copy_handshake(ZeroCopyCall &zc, const Issue &how, const CollectiveOp &op, const Peers &p, void *sbuf,
                        std::vector<Block> &sblocks, void *rbuf, std::vector<Block> &rblocks) {
  if (!p.handshake || (how.request && !how.persistent)) return MPI_SUCCESS;
  if (p.in_place) rbuf = nullptr;
  if (!how.request)
    return zc.start(op.comm, op.call, sbuf, sblocks, p.dests, rbuf, rblocks, p.sources, p.cartesian);
  return zc.start_persistent(op.comm, op.call, sbuf, sblocks, p.dests, rbuf, rblocks, p.sources, p.cartesian,
                             how.init->zero_copy);
}

// Step 6, one side: what the library gets in place of `a` (`a` itself where the side is
// not rewired).
int wire_side(const Exchange &x, const Side &side, Wire &w, const CollectiveOp &op, size_t room, ExchangeArgs &a) {
  a.buf = side.library_buffer(a.buf);
  if (x.kind == Exchange::Kind::Alltoallw) {
    WArgs<int> t;
    if (const int err = wire_typed(side, a.counts, a.displs, a.types, op.comm, op.call, w, w.displs, t)) return err;
    a.counts = t.counts, a.displs = t.displs, a.types = t.types;
  } else if (x.kind == Exchange::Kind::NeighborAlltoallw) {
    WArgs<MPI_Aint> t;
    if (const int err = wire_typed(side, a.counts, a.adispls, a.types, op.comm, op.call, w, w.adispls, t, room))
      return err;
    a.counts = t.counts, a.adispls = t.displs, a.types = t.types;
  } else {
    VArgs v;
    if (const int err = wire_varying(side, a.counts, a.displs, a.type, op.comm, op.call, w, v)) return err;
    a.counts = v.counts, a.displs = v.displs, a.type = v.type;
  }
  return MPI_SUCCESS;
}

// Whether any count to or from a peer is not 0 (a rank's arguments give the library data);
// a block to or from MPI_PROC_NULL carries nothing (so a non-periodic grid's border ranks
// may skip the library too).
bool any_count(const int *counts, const std::vector<int> &peers) {
  if (!counts) return false;
  for (size_t i = 0; i < peers.size(); ++i)
    if (peers[i] != MPI_PROC_NULL && counts[i] != 0) return true;
  return false;
}

// Step 7: the library's own form of the call, on `s` and `r`.
int library_call(const Exchange &x, const ExchangeArgs &s, const ExchangeArgs &r) {
  const Issue &how = x.how;
  const MPI_Comm comm = x.comm;
  switch (x.kind) {
    case Exchange::Kind::Alltoallv:
      return TEMPI_FORWARD(how, MPI_Ialltoallv, MPI_Alltoallv, s.buf, s.counts, s.displs, s.type, r.buf, r.counts,
                           r.displs, r.type, comm);
    case Exchange::Kind::Alltoallw:
      return TEMPI_FORWARD(how, MPI_Ialltoallw, MPI_Alltoallw, s.buf, s.counts, s.displs, s.types, r.buf, r.counts,
                           r.displs, r.types, comm);
    case Exchange::Kind::NeighborAlltoallv:
      return TEMPI_FORWARD(how, MPI_Ineighbor_alltoallv, MPI_Neighbor_alltoallv, s.buf, s.counts, s.displs, s.type,
                           r.buf, r.counts, r.displs, r.type, comm);
    case Exchange::Kind::NeighborAlltoallw:
      return TEMPI_FORWARD(how, MPI_Ineighbor_alltoallw, MPI_Neighbor_alltoallw, s.buf, s.counts, s.adispls,
                           s.types, r.buf, r.counts, r.adispls, r.types, comm);
  }
  return MPI_ERR_INTERN;
}

}  // namespace

int exchange(const Exchange &x) {
  Peers peers;  // 1. peers
  if (!peers_of(x, peers)) return library_call(x, x.send, x.recv);
  auto op = new_op(x.blocking, x.nonblocking, x.comm, x.how);
  void *const sbuf = !peers.in_place && gpu_data(x.send.buf) ? x.send.buf : nullptr;
  void *const rbuf = gpu_data(x.recv.buf) ? x.recv.buf : nullptr;
  std::vector<Block> sblocks, rblocks;  // 2. blocks
  if (sbuf)
    if (const int err = blocks_of(x, x.send, peers.dests, true, false, *op, sblocks)) return err;
  if (rbuf)
    if (const int err = blocks_of(x, x.recv, peers.sources, peers.in_place, true, *op, rblocks)) return err;
  if (const int err = check_types(sblocks, op->comm, op->call)) return err;  // 3. checks
  if (const int err = check_types(rblocks, op->comm, op->call)) return err;
  ZeroCopyCall zc;  // 4. zero-copy
  if (const int err = zero_copy_handshake(zc, x.how, *op, peers, sbuf, sblocks, rbuf, rblocks)) return err;
  if (sbuf)  // 5. plan
    if (const int err = op->send.plan(sbuf, std::move(sblocks), false, op->comm, op->call)) return err;
  if (rbuf)
    if (const int err = op->recv.plan(rbuf, std::move(rblocks), false, op->comm, op->call)) return err;
  ExchangeArgs s = x.send, r = x.recv;  // 6. load, and the wire
  const bool ours = needed(*op);
  if (ours) {
    if (const int err = load(*op, x.how)) return err;
    if (const int err = wire_side(x, op->send, op->swire, *op, peers.room, s)) return err;
    if (const int err = wire_side(x, op->recv, op->rwire, *op, peers.room, r)) return err;
  }
  // 7. library: unless the call is blocking or a persistent init and no rank of the
  // communicator gives the library any data (ZeroCopyCall::library_needed): then a persistent
  // init keeps no library call, and its starts make none (coll/persistent_coll.cpp).
  const bool carries = (!peers.in_place && any_count(s.counts, peers.dests)) || any_count(r.counts, peers.sources);
  const bool nonblocking = x.how.request && !x.how.persistent;
  int err = MPI_SUCCESS;
  if (nonblocking || zc.library_needed(carries)) err = library_call(x, s, r);
  err = ours ? conclude(op, err, x.how) : untouched(op, err, x.how);  // 8. conclude
  return zc.finish(err);  // 9. finish
}

bool as_varying(MPI_Comm comm, bool in_place, const Issue &how) {
  return (!how.request || how.persistent) && !in_place && zero_copy_participates(comm);
}

namespace {

// `n` equal blocks of `count` elements of `type` as per-peer arrays: block i at i * count
// extents, or every block at 0 (`at_zero`: one send block for every peer, as in the
// gathers to all). Where i * count overflows an int, the unit becomes a contiguous type of
// `count` elements (count 1, displacement i), which has the same type signature.
struct PerPeer {
  std::vector<int> counts, displs;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  OwnedType owned;
};
int per_peer(int n, int count, MPI_Datatype type, bool at_zero, MPI_Comm comm, const char *call, PerPeer &out) {
  out.type = type;
  int per_block = count;  // elements of out.type per block, and the displacement step
  if (!at_zero && n > 1 && int64_t(n - 1) * count > INT_MAX) {
    MPI_Datatype t = MPI_DATATYPE_NULL;
    int err = PMPI_Type_contiguous(count, type, &t);
    if (err == MPI_SUCCESS) err = PMPI_Type_commit(&t);
    if (err != MPI_SUCCESS)
      return raise_error(comm, MPI_ERR_INTERN, "%s: cannot describe blocks of %d elements to MPI", call, count);
    out.type = t;
    out.owned = OwnedType(t);
    per_block = 1;
  }
  out.counts.assign(size_t(std::max(n, 0)), per_block);
  out.displs.resize(size_t(std::max(n, 0)));
  for (int i = 0; i < n; ++i) out.displs[size_t(i)] = at_zero ? 0 : i * per_block;
  return MPI_SUCCESS;
}

// The per-peer arrays of a one-count call run as its v-variant: a persistent init keeps
// them with its request (its library call at every start reads them), a blocking call
// drops them on return.
struct Varying {
  PerPeer s, r;
};

// One side of a one-count call as per-peer arrays.
int per_peer_side(int n, int count, bool at_zero, const char *name, const Exchange &x, PerPeer &out,
                  ExchangeArgs &a) {
  if (const int err = per_peer(n, count, a.type, at_zero, x.comm, name, out)) return err;
  a.counts = out.counts.data();
  a.displs = out.displs.data();
  a.type = out.type;
  return MPI_SUCCESS;
}

}  // namespace

int as_v_form(Exchange x, int nsend, int scount, bool same_block, int nrecv, int rcount) {
  const char *name = call_name(x.blocking, x.nonblocking, x.how);
  auto v = std::make_shared<Varying>();
  if (const int err = per_peer_side(nsend, scount, same_block, name, x, v->s, x.send)) return err;
  if (!x.recv.counts)
    if (const int err = per_peer_side(nrecv, rcount, false, name, x, v->r, x.recv)) return err;
  if (x.how.persistent) x.how.init->arrays = std::move(v);  // a blocking call drops them on return
  return exchange(x);
}

}  // namespace coll
}  // namespace tempi
