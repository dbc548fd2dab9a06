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
// A reader that cannot map a sender's allocation (CUDA maps one once per process, and a
// CUDA-aware library may hold it) says so in the sender's slot before the sender gives the
// library its counts: that pair takes the pack path at both ends.
//
// Synchronization: a rank with GPU blocks waits for its node peers' slots of this call (so
// nobody reads a buffer before its owner entered the call) and a sender for its readers'
// answers; after its GPU finished reading
// a peer's blocks it tells that peer; a sender returns only when every reader of its send
// buffer has told it. A neighbourhood collective talks to its neighbours only. Ranks whose
// buffers are host memory write their slot and never wait.
//
// Where it is: the call's start, zero_copy/call.cpp; the handshake, zero_copy/negotiate.cpp
// (this rank's half, zero_copy/place_local.cpp; what is kept between calls,
// zero_copy/memo.hpp; the slots, zero_copy/slots.hpp); the library round and the end of the
// call, zero_copy/finish.cpp; persistent starts, zero_copy/persistent.cpp; their progress,
// zero_copy/progress.cpp. The node share itself (segment, plan arena, mappings) is pmpi/node/.
#pragma once

#include <mpi.h>

#include <atomic>
#include <memory>
#include <vector>

#include "backend.hpp"
#include "base/block.hpp"
#include "node/node_share.hpp"

namespace tempi {

struct NodeShare;
class ZeroCopyPersistent;
struct ZeroCopyMemo;
struct LocalHalf;
struct Negotiation;

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
  // The same handshake at a persistent collective's init (MPI_X_init may wait for the other
  // ranks: MPI 4.1, "persistent collective initialization procedures are nonlocal"): the
  // pairs are decided once for every start and nothing moves now. `kept` gets what each
  // start does (null: no zero-copy pair at this rank). finish() ends the handshake as for
  // a blocking call.
  int start_persistent(MPI_Comm comm, const char *call, void *sbuf, std::vector<Block> &sblocks,
                       const std::vector<int> &dests, void *rbuf, std::vector<Block> &rblocks,
                       const std::vector<int> &sources, bool cartesian, std::shared_ptr<ZeroCopyPersistent> &kept);
  // A blocking call, after start() and before the library's call: whether any rank of the
  // communicator gives the library data in it (`carries`: whether this rank does). Where the
  // communicator lies on this node every rank asks (collective), and where none does, none
  // calls the library: the call is then nothing but its zero-copy moves, and skipped at
  // every rank alike, the library's own state (its collective sequence) stays in step.
  // Elsewhere (ranks on other nodes, no zero-copy) true. A rank that fails before asking
  // says so in the round (finish), and the others then fail the call without the library.
  bool library_needed(bool carries);
  // After the library's call: waits for this rank's reads, tells their owners, and waits
  // until every reader of this rank's send buffer is done. Returns `err` or the first error.
  int finish(int err);

  int pairs() const { return int(active_.size()); }  // blocks this rank reads (tests, logs)

 private:
  friend class ZeroCopyPersistent;
  friend struct ZeroCopyMemo;
  friend struct LocalHalf;
  friend struct Negotiation;
  // The handshake and the pair decisions; `flags_at`: this rank's persistent flags
  // (kBlockingCall: a blocking call). Fills active_ (and reads_ where no memo keeps them).
  int negotiate(MPI_Comm comm, const char *call, void *sbuf, std::vector<Block> &sblocks,
                const std::vector<int> &dests, void *rbuf, std::vector<Block> &rblocks,
                const std::vector<int> &sources, bool cartesian, int flags_at);
  // This rank's half of a call, from its own arguments alone: its blocks placed, its pairs
  // with itself, and its slot's entries (plans published).
  void place_local(MPI_Comm comm, void *sbuf, const std::vector<Block> &sblocks, const std::vector<int> &dests,
                   void *rbuf, const std::vector<Block> &rblocks, const std::vector<int> &sources, bool cartesian,
                   bool listing, LocalHalf &local);
  // A call that keeps every pair of the last one: its moves as prepared for the device then
  // (prepared now at the first such call). False where the backend cannot prepare them.
  bool move_as_before();
  // Whether this call takes part in the round of library_needed, and this rank's part of it
  // (what it says: zero_copy/slots.hpp's kLibrary*); false where no rank calls the library.
  bool library_round() const;
  bool tell_library(uint32_t mine_says);
  // The moves of active_ (Backend::move_async), with device scratch for the pairs that do
  // not move in one pass (block lists: packed into it, then unpacked; lend_scratch) where
  // `lend`.
  void prepare_moves(bool lend = true);
  // One block this rank reads: from a peer's mapped send buffer (or its own), into its own.
  struct Read {
    int from = -1;               // node rank; -1: this rank's own send block
    const Plan *plan = nullptr;  // the peer's plan (from its arena)
    Plan own_plan;               // a block to itself: the send block's plan
    char *typed = nullptr;       // where the sending plan starts
    int64_t from_sbuf = 0;       // a peer's block: where its plan starts, from the peer's send buffer
    int mapping = -1;            // a peer's block: its mapping in mapped_
    PlacedBlock into;
  };
  const char *call_ = "";
  MPI_Comm comm_ = MPI_COMM_NULL;
  std::shared_ptr<NodeShare> node_;
  uint64_t seq_ = 0;
  int readers_ = 0;                // pairs whose receiver reads this rank's send buffer
  int64_t send_lo_ = 0, send_hi_ = 0;  // the bytes peers read, from the send buffer's first
  std::vector<int> peers_;         // node ranks of the call's pattern (they read this rank's slot)
  std::vector<int> told_;          // per node rank: pairs read from it, to report
  std::vector<Read> reads_;         // the reads of a call whose communicator keeps no memo of them
  std::vector<const Read *> active_;  // this call's reads (in reads_ or in the memo)
  std::vector<int> reader_ranks_;  // node ranks that read this rank's send buffer
  std::vector<int> owner_flags_;   // per node rank: where its persistent flags are (-1: none)
  std::vector<PeerMapping> mapped_;  // the peers' send buffers that reads_ read through
  std::vector<PairJob> moves_;  // the reads: each peer block straight into its receive block
  Scratch scratch_;
  Fence fence_;
  int device_ = -1;
  bool started_ = false;
  bool as_before_ = false;  // every pair as decided at an earlier call (the memo's)
  bool blocking_ = false;
  bool library_round_ = false;  // library_needed read every rank's answer (finish waits for theirs)
  int error_ = MPI_SUCCESS;
};

// What every start of a persistent collective does for its zero-copy pairs (decided at
// init, docs/design.md "Persistent zero-copy"): the start publishes its number in this
// rank's flags (after the application's work on the legacy default stream, so that peers
// read the buffer's current contents), and TEMPI's zero-copy thread issues this rank's reads
// once each peer it reads from has started the same instance, then tells those peers. The
// start is complete when the library's part is, this rank's reads are, and every peer that
// reads this rank's send buffer has told it so. Completion calls see it through a
// generalized request (`gate`) that zero_copy_progress completes; nothing here waits for
// another process, so a start stays nonblocking and MPI_Test stays local.
class ZeroCopyPersistent : public std::enable_shared_from_this<ZeroCopyPersistent> {
 public:
  ~ZeroCopyPersistent();
  // MPI_Start: publishes start number n + 1 and hands the reads to the zero-copy thread.
  // Returns an MPI error code.
  int begin();
  // After the library's call of this start returned `library`: the request the
  // application's completion calls wait for in its place. Returns an MPI error code.
  int gate(MPI_Request library, MPI_Request *gated);
  // Whether this start finished (tests the library's request; never waits).
  bool finished_now();
  // One step of this start's reads, by whichever thread gets to it first: the application's
  // MPI_Start (peers that started before it), its completion calls (a waiting thread moves
  // its own reads rather than wait for another to be scheduled) or the zero-copy thread.
  // Issues or checks the reads; true when they are done. False too while another thread is
  // at it (it will finish them).
  bool try_advance();

 private:
  friend class ZeroCopyCall;
  // begin(): this start's allocation of the send buffer, in this rank's flags for its
  // readers; false where it does not hold every block they read (it is not readable then).
  bool publish_send_buffer();
  // advance(): where an owner's send buffer is in another allocation than at the last start,
  // maps that one and moves the reads from it there. Returns an MPI error code.
  int follow_owners();
  // advance(): issues this start's moves, as prepared at an earlier start where it can.
  Status move();
  // try_advance's step, by one thread at a time.
  bool advance();
  const char *call_ = "";
  MPI_Comm comm_ = MPI_COMM_NULL;
  std::shared_ptr<NodeShare> node_;
  int flags_at_ = -1;                          // this rank's flags in its segment
  std::vector<std::pair<int, int>> owners_;    // (node rank, its flags) this rank reads from
  std::vector<int> readers_;                   // node ranks that read this rank's send buffer
  std::vector<ZeroCopyCall::Read> reads_;
  std::vector<PairJob> moves_;  // the reads: each peer block straight into its receive block
  Prepared prepared_;           // moves_ described for the device (Backend::prepare_moves)
  bool unpreparable_ = false;   // the backend cannot prepare moves_
  Scratch scratch_;
  std::vector<PeerMapping> mapped_;  // held from init to the request's end
  int device_ = -1;       // the receive buffer's GPU (the reads run there)
  void *sbuf_ = nullptr;  // the send buffer (GPU memory that peers read), as bound at init
  int64_t send_lo_ = 0, send_hi_ = 0;  // the bytes peers read, from sbuf_
  int send_device_ = -1;  // the send buffer's GPU
  uint64_t started_ = 0;                       // this rank's starts so far
  // The current start, between begin() and its completion.
  MPI_Request library_ = MPI_REQUEST_NULL;
  bool library_done_ = false;
  int library_error_ = MPI_SUCCESS;
  std::atomic<int> phase_{0};                  // 0 idle, 1 reads wait for owners, 2 reads issued, 3 reads done
  std::atomic<bool> advancing_{false};         // a thread is inside advance()
  Fence fence_;
  std::atomic<int> error_{MPI_SUCCESS};        // of the reads (set by the zero-copy thread)
  friend int gated_query(void *, MPI_Status *);
};

// Completes every started persistent zero-copy collective that finished (its generalized
// request): completion calls run it first, and loop on it (with the library's test
// calls) where a blocking completion call would otherwise wait for such a request.
void zero_copy_progress();
// Whether any persistent zero-copy start is in flight (completion calls then loop).
bool zero_copy_in_flight();

// Whether ranks of `comm` may move blocks by zero-copy, so that every blocking exchange
// collective on it must take part in the protocol, host buffers or not. Collective on the
// communicator's first such call (every rank of it makes the same call).
bool zero_copy_participates(MPI_Comm comm);

// Blocks this process has moved by zero-copy, from peers and from itself (tests, the
// log at MPI_Finalize), and peer allocations it has mapped.
struct ZeroCopyCounts {
  uint64_t peer_blocks = 0, self_blocks = 0, mappings = 0;
  uint64_t kept_pairs = 0;  // peers of blocking calls whose pairs were kept from an earlier call
  uint64_t prepared_calls = 0;  // blocking calls and persistent starts whose moves were issued as prepared
  uint64_t library_skipped = 0;  // blocking calls in which no rank called the MPI library (all zero-copy)
};
ZeroCopyCounts zero_copy_counts();

// Closes every mapped peer allocation (at MPI_Finalize).
void zero_copy_shutdown();

}  // namespace tempi
