// Zero-copy between GPUs of one node in blocking exchange collectives (all-to-all and
// all-gather, plain, v, w and neighbourhood forms; docs/design.md,
// "Zero-copy collectives"). For a pair of ranks on one node whose blocks are both GPU
// memory, and whose GPUs have peer access, the receiving rank's GPU reads the sender's
// typed block through CUDA IPC and writes its own typed block; the MPI library moves
// nothing for that pair (its counts become 0 at both ends), the rest of the call is the
// usual pack path. A rank's blocks to itself are a local GPU move.
//
// The protocol runs in shared memory of the node (an MPI-3 shared window per communicator,
// made once at the communicator's first such call): each rank writes, per call, a slot
// with its pairs on the node (the k-th block to or from a peer, its bytes, a reference to
// its plan in the rank's plan arena) and the IPC handle of its send buffer, then reads the
// slots of its node peers for the same call. Every rank computes each pair's decision from
// the same two entries, so both ends agree without another message. Plans are published
// once per (plan, count) and named by their arena offset afterwards; peers map each
// allocation once (keyed by the owner's process and the allocation's id, never by address).
//
// Synchronization: a rank with GPU blocks waits for its node peers' slots of this call (so
// nobody reads a buffer before its owner entered the call); after its GPU finished reading
// a peer's blocks it tells that peer; a sender returns only when every reader of its send
// buffer has told it. A neighbourhood collective talks to its neighbours only. Ranks whose
// buffers are host memory write their slot and never wait.
#pragma once

#include <mpi.h>

#include <memory>
#include <vector>

#include "backend.hpp"
#include "collectives.hpp"

namespace tempi {

struct NodeShare;

class ZeroCopyCall {
 public:
  ZeroCopyCall() = default;
  ZeroCopyCall(const ZeroCopyCall &) = delete;
  ZeroCopyCall &operator=(const ZeroCopyCall &) = delete;
  ~ZeroCopyCall();

  // Before the library's call, at every rank of a blocking exchange collective on `comm`:
  // position i of `sblocks` goes to comm rank dests[i], position j of `rblocks` comes from
  // sources[j] (MPI_PROC_NULL: nothing). `sbuf`/`rbuf` null: that side is not GPU data (its
  // blocks are ignored). Blocks moved by zero-copy get count 0; their moves are issued on
  // the GPU. `cartesian`: duplicate neighbours pair as the library decides, so they are left
  // to it. Returns an MPI error code.
  int start(MPI_Comm comm, const char *call, void *sbuf, std::vector<Block> &sblocks, const std::vector<int> &dests,
            void *rbuf, std::vector<Block> &rblocks, const std::vector<int> &sources, bool cartesian);
  // After the library's call: waits for this rank's reads, tells their owners, and waits
  // until every reader of this rank's send buffer is done. Returns `err` or the first error.
  int finish(int err);

  int pairs() const { return int(reads_.size()); }  // blocks this rank reads (tests, logs)

 private:
  // One block this rank reads: from a peer's mapped send buffer (or its own), into its own.
  struct Read {
    int from = -1;               // node rank; -1: this rank's own send block
    const Plan *plan = nullptr;  // the peer's plan (from its arena)
    Plan own_plan;               // a block to itself: the send block's plan
    char *typed = nullptr;       // where the sending plan starts
    PlacedBlock into;
  };
  const char *call_ = "";
  MPI_Comm comm_ = MPI_COMM_NULL;
  std::shared_ptr<NodeShare> node_;
  uint64_t seq_ = 0;
  int readers_ = 0;                // pairs whose receiver reads this rank's send buffer
  std::vector<int> peers_;         // node ranks of the call's pattern (they read this rank's slot)
  std::vector<int> told_;          // per node rank: pairs read from it, to report
  std::vector<Read> reads_;
  std::vector<MoveJob> packs_, unpacks_;
  Scratch scratch_;
  Fence fence_;
  int device_ = -1;
  bool started_ = false;
  int error_ = MPI_SUCCESS;
};

// Whether ranks of `comm` may move blocks by zero-copy, so that every blocking exchange
// collective on it must take part in the protocol, host buffers or not. Collective on the
// communicator's first such call (every rank of it makes the same call).
bool zero_copy_participates(MPI_Comm comm);

// Blocks this process has moved by zero-copy, from peers and from itself (tests, the
// log at MPI_Finalize), and peer allocations it has mapped.
struct ZeroCopyCounts {
  uint64_t peer_blocks = 0, self_blocks = 0, mappings = 0;
};
ZeroCopyCounts zero_copy_counts();

// Closes every mapped peer allocation (at MPI_Finalize).
void zero_copy_shutdown();

}  // namespace tempi
