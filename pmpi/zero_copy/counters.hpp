// The counters behind zero_copy_counts (zero_copy.hpp): blocks the zero-copy collectives of
// this process moved and what their calls reused. Relaxed atomics: counts, no ordering.
#pragma once

#include <atomic>
#include <cstdint>

namespace tempi {

struct ZeroCopyCounters {
  std::atomic<uint64_t> peer_blocks{0}, self_blocks{0}, kept_pairs{0}, prepared_calls{0}, library_skipped{0};
  // One block read, from a peer (`from` >= 0) or from this rank itself.
  void read_one(int from) { (from < 0 ? self_blocks : peer_blocks).fetch_add(1, std::memory_order_relaxed); }
};
ZeroCopyCounters &zero_copy_counters();

}  // namespace tempi
