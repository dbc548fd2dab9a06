// A communicator's node share as zero-copy point-to-point (zero_copy/p2p_*.cpp) uses it:
// the shared-memory segment per node rank that the zero-copy collectives set up
// (node/share.cpp, node/segment.hpp; docs/design.md "Zero-copy between GPUs of one node"):
// the ranks of the node, the GPUs each rank's GPU can read, the plan arena
// (node/plan_arena.cpp), the cache of mapped peer allocations (node/peer_mapping.hpp), and
// the board of point-to-point entries that each rank's segment holds.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend.hpp"
#include "node/peer_mapping.hpp"
#include "plan.hpp"

namespace tempi {

struct NodeShare;

// One message a rank sends by zero-copy, as its receiver reads it (docs/design.md,
// "Zero-copy point-to-point"). It lives in the sender's segment; the control message that
// the MPI library carries names it by index and serial.
struct P2pEntry {
  // 0 free; 1 posted (the receiver may read the buffer); 2 read (the receiver's GPU finished,
  // or it refused the data: a truncated receive). Written last by whoever hands it on.
  // zero_copy/p2p_flight.hpp adds the states of an entry being filled and of a push (its receiver
  // cannot map the send buffer, so the sender packs the message into `landing`).
  std::atomic<uint32_t> state{0};
  int32_t dest = -1;     // the receiver's node rank
  int32_t tag = 0;       // the application's tag
  uint64_t serial = 0;   // the sender's count of zero-copy sends, never 0
  int64_t bytes = 0;     // packed size of the message
  int64_t plan_at = -1;  // the send plan's place in the sender's arena
  int64_t offset = 0;    // where the plan starts, from the first byte of the allocation
  IpcHandle handle;      // of the send buffer's allocation
  IpcHandle landing;     // a push: the receiver's buffer to pack into (its offset: where)
};
constexpr int kP2pEntries = 256;  // zero-copy sends in flight per rank and communicator; more: the pack path

// The communicator's node share, made if it has none (collective on `comm` then: every rank
// must call). Null where zero-copy cannot run on it (TEMPI_IPC=off, a rank without a GPU,
// no shared memory).
std::shared_ptr<NodeShare> node_share(MPI_Comm comm);
// The share of a communicator on which zero-copy point-to-point was enabled, else null
// (never collective).
std::shared_ptr<NodeShare> p2p_share(MPI_Comm comm);
void set_p2p(NodeShare &s, bool on);
// Moves on whenever zero-copy point-to-point is switched on or off on any communicator, or a
// communicator where it was on is freed.
uint64_t p2p_generation();

int my_node_rank(const NodeShare &s);
int node_rank_of(const NodeShare &s, int comm_rank);  // -1: on another node
MPI_Comm node_comm(const NodeShare &s);
int home_device(const NodeShare &s);
int32_t pid_of(const NodeShare &s, int node_rank);
uint64_t nonce_of(const NodeShare &s, int node_rank);  // a random number each segment publishes
// Whether node rank `reader`'s GPU can read memory of the GPU with identity `device`.
bool reads_gpu(const NodeShare &s, int reader, const std::string &device);
P2pEntry *board_of(NodeShare &s, int node_rank);  // kP2pEntries entries
// Whether the last message of at least TEMPI_P2P_ZERO_COPY_MIN bytes that this rank received
// from node rank `node_rank` (-1: from any rank) was a control message; true until one came.
// saw_message records one, from node rank `node_rank` or (-1) from a rank on another node
// (thread-safe; a race only blurs a guess).
bool expects_control(const NodeShare &s, int node_rank);
void saw_message(NodeShare &s, int node_rank, bool control);
// The word node rank `node_rank`'s pusher thread sleeps on (a futex in shared memory):
// receivers add 1 and wake it when they ask it to push.
std::atomic<uint32_t> &push_word(NodeShare &s, int node_rank);

// This rank's `plan` (for `count` elements of plan id `id`) in its arena, published the first
// time: its offset, or -1 where it cannot be (the arena is full; a large plan's
// shared-memory block found no room). Thread-safe.
int64_t publish_plan(NodeShare &s, const Plan &plan, uint64_t id, int64_t count);
// Node rank `peer`'s plan at arena offset `at`, read once; null where a large plan's
// shared-memory block cannot be read (its messages then take the pack path or are pushed).
// This rank's own plans are always found. Thread-safe.
const Plan *peer_plan(NodeShare &s, int peer, int64_t at);

// The identity (PCI bus id) of GPU `device`.
std::string gpu_identity(int device);

// At MPI_Finalize, in this order: node_finalizing() before any share may go (from then on
// a share frees nothing collectively: the library frees its own objects), node_close()
// once no GPU work reads a peer's memory: unmaps every peer allocation and removes this
// process's plan blocks.
void node_finalizing();
void node_close();

}  // namespace tempi
