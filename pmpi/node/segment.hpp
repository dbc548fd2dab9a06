// The layout of one rank's shared segment, the part of a communicator's node share that
// each rank of the node writes and its node peers read (node/share.hpp makes one per rank
// in an MPI-3 shared window; docs/design.md, "Zero-copy between GPUs of one node"). Plain
// data and lock-free atomics only: other processes read it through their own mapping.
// Who writes what: the slots and persistent flags, the zero-copy collectives
// (zero_copy/negotiate.cpp, zero_copy/persistent.cpp); the board and push word,
// zero-copy point-to-point (zero_copy/p2p_*.cpp); the arena, node/plan_arena.cpp.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>

#include "backend.hpp"
#include "node/node_share.hpp"

namespace tempi {

// One pair as one end sees it: the k-th block (`occurrence`) between this rank and comm rank
// `peer` in one direction.
struct Entry {
  int32_t peer = 0, occurrence = 0;
  int64_t bytes = 0;
  int64_t plan_at = -1;  // a send: the plan's place in this rank's arena
  int64_t offset = 0;    // a send: where the plan starts, from the first byte of the send allocation
};

constexpr int kMaxEntries = 1024;  // pairs on the node per direction and call; more: the pack path
constexpr int kMaxReadable = 16;
constexpr size_t kArenaBytes = size_t(256) << 10;
constexpr size_t kIdBytes = 32;
constexpr int kMaxPersistent = 64;  // persistent zero-copy collectives alive per rank and communicator
constexpr int kMaxNodeRanks = 64;   // node ranks of a communicator that persistent zero-copy serves

// What a rank says about one call. `seq` is written last (and zeroed first): a reader that
// finds the call's number before and after copying has a consistent copy.
struct Slot {
  std::atomic<uint64_t> seq{0};
  std::atomic<uint64_t> done{0};  // pairs whose readers finished reading this rank's send blocks
  std::atomic<uint64_t> seen{0};  // peers that copied this slot (it is not rewritten before all did)
  std::atomic<uint64_t> answered{0};  // readers that said which of this rank's send blocks they can map
  // A blocking call on a communicator that lies on this node: 0 until this rank knows whether
  // it gives the library any data in it, then kLibraryNoData, kLibraryData or kLibraryFailed
  // (it failed before asking; zero_copy/slots.hpp); and how many ranks read that.
  std::atomic<uint32_t> library{0};
  std::atomic<uint64_t> library_seen{0};
  IpcHandle handle;               // of the send buffer's allocation (size 0: not exported)
  char send_device[kIdBytes] = {};
  int32_t flags_at = -1;          // a persistent init: this rank's flags (Segment::flags)
  int32_t nsend = 0, nrecv = 0;
  Entry entries[kMaxEntries * 2];  // sends, then receives
  // Per send entry, set by its reader before it answers: the reader cannot map the send
  // buffer (CUDA IPC refused it), so the pair takes the pack path at both ends.
  std::atomic<uint8_t> refused[kMaxEntries];
  // Per node rank of the call's pattern: the call in which this rank and that one last
  // decided their pairs, where this rank still keeps what they decided and its own
  // arguments are the same as then (ZeroCopyMemo); 0: none.
  uint64_t pair_tag[kMaxNodeRanks];
};

// One persistent collective's flags at one rank: the starts it made, the allocation that
// holds its send buffer at the latest start (written before `started`: the application may
// free the buffer and allocate it again at the same address between starts), and per node
// rank that reads its send buffer, the last start whose reads finished.
struct PersistentFlags {
  std::atomic<uint64_t> started{0};
  IpcHandle handle;  // size 0: the send blocks are not readable in one exported allocation
  std::atomic<uint64_t> read_done[kMaxNodeRanks];
};

struct Segment {
  int32_t pid = 0;
  int32_t nreadable = 0;
  uint64_t nonce = 0;  // random: a control message of zero-copy point-to-point carries it
  std::atomic<uint32_t> push_word{0};  // zero-copy point-to-point: its pusher sleeps on it (futex)
  char readable[kMaxReadable][kIdBytes] = {};  // GPUs whose memory this rank's GPU reads
  Slot slots[2];                               // calls alternate: a rank is at most one call ahead of a peer that waits for it
  std::atomic<uint64_t> arena_used{0};
  PersistentFlags flags[kMaxPersistent];
  P2pEntry board[kP2pEntries];  // this rank's zero-copy point-to-point sends (zero_copy/p2p_send.cpp)
  char arena[kArenaBytes];
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared-memory counters must be lock-free");

// A GPU identity as a segment holds it: at most kIdBytes - 1 bytes, zero-padded.
inline void copy_id(char (&dst)[kIdBytes], const std::string &id) {
  std::memset(dst, 0, kIdBytes);
  std::memcpy(dst, id.data(), std::min(id.size(), kIdBytes - 1));
}

// Whether the GPU of the rank that owns `receiver` reads memory of GPU `device`.
inline bool readable_by(const Segment &receiver, const char *device) {
  if (!device[0]) return false;
  for (int i = 0; i < receiver.nreadable && i < kMaxReadable; ++i)
    if (!std::strncmp(receiver.readable[i], device, kIdBytes)) return true;
  return false;
}

}  // namespace tempi
