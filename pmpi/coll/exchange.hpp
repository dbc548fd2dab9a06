// One exchange path (docs/design.md, "Collectives"): MPI_Alltoallv, MPI_Alltoallw,
// MPI_Neighbor_alltoallv and MPI_Neighbor_alltoallw, blocking, nonblocking (MPI_I...) and
// persistent (..._init), and the one-count calls that zero-copy runs as their v-form
// (as_v_form), each fill one Exchange and go through exchange(), as NCCL's API calls each
// fill one ncclInfo and go through one enqueue. exchange() reads top to bottom:
//   1. peers      who each block goes to and comes from (every rank, or the neighbourhood);
//   2. blocks     this rank's GPU sides as blocks in bytes, whatever the v/w form;
//   3. checks     both sides' types, before peers rely on this rank;
//   4. zero-copy  the handshake with node peers (ZeroCopyCall; blocking and persistent calls);
//   5. plan       each GPU side's mode and staging (Side::plan);
//   6. load       the send blocks packed, and the library's arguments made (the wire);
//   7. library    the library's own form of the call, unless no rank gives it data;
//   8. conclude   finished now, or tracked for the completion call (conclude);
//   9. finish     this rank's zero-copy reads done and its readers gone (ZeroCopyCall::finish).
#pragma once

#include <mpi.h>

#include <memory>
#include <vector>

#include "coll/issue.hpp"

namespace tempi {
namespace coll {

// One direction's arguments of an exchange, as the application passed them (or as
// as_v_form made them).
struct ExchangeArgs {
  void *buf = nullptr;                       // const for the send side: the library only reads it
  const int *counts = nullptr;               // per peer
  const int *displs = nullptr;               // v: in extents of `type`; Alltoallw: in bytes
  const MPI_Aint *adispls = nullptr;         // Neighbor_alltoallw: in bytes
  MPI_Datatype type = MPI_DATATYPE_NULL;     // v: every peer's type
  const MPI_Datatype *types = nullptr;       // w: per peer
};

// One exchange call: everything exchange() needs.
struct Exchange {
  enum class Kind { Alltoallv, Alltoallw, NeighborAlltoallv, NeighborAlltoallw };
  Kind kind = Kind::Alltoallv;
  const char *blocking = "";     // the application's call ("MPI_Alltoall" for an MPI_Alltoall run as a v-form)
  const char *nonblocking = "";  // its MPI_I... name
  MPI_Comm comm = MPI_COMM_NULL;
  ExchangeArgs send, recv;
  Issue how;

  bool neighbours() const { return kind == Kind::NeighborAlltoallv || kind == Kind::NeighborAlltoallw; }
};

// Runs the call `x` describes, exactly once at the library. Returns an MPI error code.
int exchange(const Exchange &x);

// Zero-copy needs per-peer counts (a zero-copy pair's count becomes 0 at both ends of the
// library's call), which the calls with one count for every peer cannot express. On a
// communicator where zero-copy takes part (zero_copy_participates: the same answer at
// every rank), their blocking and persistent, not-in-place forms run as the v-variant with
// equal counts at every rank alike (MPI_IN_PLACE, blocking and persistent are the same at
// every rank by the standard), so the library still sees one collective. Nonblocking
// forms cannot take part in zero-copy (docs/using.md) and stay as they are.
bool as_varying(MPI_Comm comm, bool in_place, const Issue &how);

// A one-count collective run as a v-form (`x.kind` Alltoallv or NeighborAlltoallv, where
// zero-copy serves it): every peer's count and displacement made once (`nsend` send
// blocks of `scount`, displacements all zero where `same_block`: every peer gets the same
// block; `nrecv` receive blocks of `rcount`, unless `x.recv` has its counts already), kept
// by a persistent request for its starts. `x.send.counts` and `x.send.displs` are made here.
int as_v_form(Exchange x, int nsend, int scount, bool same_block, int nrecv, int rcount);

}  // namespace coll
}  // namespace tempi
