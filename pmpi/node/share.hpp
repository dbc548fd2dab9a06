// One communicator's node share, whole: what the zero-copy collectives read and write of it
// directly (node_share.hpp is the narrower view of point-to-point). Made collectively at the
// communicator's first blocking exchange collective (node/share.cpp) and kept as an
// attribute of the communicator; its plans are published and read through its arena
// (node/plan_arena.cpp). A communicator's collectives are ordered, so the members that only
// they use (seq, memo) need no lock; the others say what guards them.
#pragma once

#include <mpi.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "node/node_share.hpp"
#include "node/segment.hpp"
#include "plan.hpp"

namespace tempi {

struct ZeroCopyMemo;  // zero_copy/memo.hpp: what the zero-copy collectives keep per communicator

struct NodeShare {
  MPI_Comm node = MPI_COMM_NULL;  // this node's ranks of the communicator
  MPI_Win win = MPI_WIN_NULL;
  int node_rank = 0;
  std::vector<Segment *> segments;  // by node rank
  std::vector<int> node_of;         // comm rank -> node rank, or -1
  std::vector<int> comm_of;         // node rank -> comm rank
  int home_device = -1;             // this rank's GPU (receive buffers elsewhere are not read by zero-copy)
  uint64_t seq = 0;                 // blocking exchange collectives on the communicator so far
  // This rank's published plans, by (plan id, count), and the peers' plans read so far.
  std::map<std::pair<uint64_t, int64_t>, int64_t> published;
  std::map<std::pair<int, int64_t>, Plan> peer_plans;  // this rank's own too
  std::vector<std::string> blobs;  // this rank's plans in shared-memory blocks, by serial - 1
  bool arena_full_logged = false;
  std::mutex plans_mutex;  // published and peer_plans: point-to-point calls run on any thread
  bool p2p = false;        // zero-copy point-to-point was enabled on the communicator (collectively)
  // Whether the last large message from each node rank (the last slot: from any rank) was a
  // control message (expects_control).
  std::unique_ptr<std::atomic<bool>[]> last_was_control;
  // A persistent collective was made on the communicator (every rank of it knows alike: the
  // init is collective). Its requests may outlive the communicator's handle (MPI allows
  // freeing a communicator that persistent requests still use) and are freed by each rank
  // on its own, so the window cannot be freed collectively any more: it stays until
  // MPI_Finalize.
  bool had_persistent = false;
  std::mutex flags_mutex;  // flags_used: given back by whichever thread drops a persistent collective last
  std::vector<bool> flags_used = std::vector<bool>(kMaxPersistent, false);  // this rank's PersistentFlags
  // The last blocking call's decisions (a communicator's calls are ordered); made by the
  // zero-copy collectives at their first blocking call on the communicator.
  std::shared_ptr<ZeroCopyMemo> memo;

  Segment &mine() { return *segments[size_t(node_rank)]; }

  // This rank's free persistent flags, cleared (-1: none, or a node too large to serve).
  int take_flags();
  void give_flags(int i);

  ~NodeShare();

  // The arena offset of `plan` (placed for `count` elements of plan id `id`), publishing it
  // the first time; -1 when it cannot be published (the arena full, no room in /dev/shm).
  int64_t publish(const Plan &plan, uint64_t id, int64_t count);
  // Node rank `peer`'s plan at arena offset `at` (published before the slot that names it),
  // or null where its shared-memory block cannot be read.
  const Plan *peer_plan(int peer, int64_t at);
  // Removes this share's plan blocks and lets the backend drop the peers' plans (its end).
  void release_plans();
};

// This process's plan blocks that no share removed (node/plan_arena.cpp): removed at
// MPI_Finalize (MPI never deletes the attributes of a communicator left alive).
void remove_all_plan_blobs();

}  // namespace tempi
