// zero_copy_counts (zero_copy.hpp) and the counters it reads (zero_copy/counters.hpp).
#include "zero_copy/counters.hpp"

#include "node/peer_mapping.hpp"
#include "zero_copy/zero_copy.hpp"

namespace tempi {

ZeroCopyCounters &zero_copy_counters() {
  static ZeroCopyCounters *c = new ZeroCopyCounters;  // immortal: read at MPI_Finalize
  return *c;
}

ZeroCopyCounts zero_copy_counts() {
  ZeroCopyCounters &c = zero_copy_counters();
  return {c.peer_blocks.load(), c.self_blocks.load(), mappings_opened(), c.kept_pairs.load(),
          c.prepared_calls.load(), c.library_skipped.load()};
}

}  // namespace tempi
