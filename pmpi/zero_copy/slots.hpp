// The zero-copy collectives' side of the node segment's slots (node/segment.hpp): what the
// protocol's words mean, waiting for a peer's slot, a consistent copy of what a peer's slot
// says to this rank, and how positions of a call's peer lists pair up (docs/design.md,
// "Zero-copy between GPUs of one node").
#pragma once

#include <mpi.h>
#include <sched.h>

#include <chrono>
#include <cstdint>
#include <vector>

#include "log.hpp"
#include "node/segment.hpp"

namespace tempi {

constexpr int kBlockingCall = -2;  // ZeroCopyCall::negotiate's flags_at for a blocking call
constexpr int kNoFlags = -1;       // ... for a persistent init that has no flags
// What a rank says in Slot::library (0: not yet).
constexpr uint32_t kLibraryNoData = 1, kLibraryData = 2, kLibraryFailed = 3;

// Spins until `ready()`, letting the MPI library progress now and then, and saying once
// every half minute what it is waiting for.
template <class Ready>
void spin_until(Ready ready, MPI_Comm node, const char *call, const char *what, int peer) {
  auto began = std::chrono::steady_clock::now();
  for (uint64_t n = 1; !ready(); ++n) {
    if (n % 256 == 0) {
      int flag = 0;
      PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, node, &flag, MPI_STATUS_IGNORE);
      sched_yield();
    }
    if (n % 65536 == 0 && std::chrono::steady_clock::now() - began > std::chrono::seconds(30)) {
      TEMPI_LOG(Warn, "%s: still waiting for comm rank %d %s (zero-copy)", call, peer, what);
      began = std::chrono::steady_clock::now();
    }
  }
}

// What a peer's slot says to this rank (comm rank `me`) about one call.
struct PeerView {
  uint64_t tag = 0;  // its pair tag for this rank
  IpcHandle handle;
  char send_device[kIdBytes] = {};
  int flags_at = -1;
  std::vector<Entry> sends, recvs;  // its pairs with this rank
  std::vector<int> send_at;         // per entry of `sends`: its place in the peer's slot
};

// A consistent copy of a peer's slot for call `seq` (false would mean the peer went past
// the call without this rank's copy, which the `seen` count rules out). `tag_at`: this rank's
// node rank, whose pair tag goes to view.tag (-1: none); where it equals `kept` (not 0) the
// pairs are those decided then and the entries are not copied.
bool snapshot(Slot &s, uint64_t seq, int me, int tag_at, uint64_t kept, PeerView &view, MPI_Comm node,
              const char *call, int peer);

// The place in `entries` of the pair with this occurrence, or -1.
int find_entry(const std::vector<Entry> &entries, int occurrence);

// Per position of a peer list: which occurrence of its peer it is, or -1 where the position
// takes no part (MPI_PROC_NULL, another node, a duplicate Cartesian neighbour).
std::vector<int> occurrences(const std::vector<int> &peers, size_t n, bool cartesian, int me,
                             const std::vector<int> *node_of);

}  // namespace tempi
