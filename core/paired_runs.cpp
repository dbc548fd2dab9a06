#include "paired_runs.hpp"

#include <algorithm>

#include "host_packer.hpp"

namespace tempi {

namespace {

struct Segment {
  int64_t typed, length;
};

// Segments of the stream's first `bytes` bytes, adjacent ones merged; false when there
// would be more than `limit` before merging (counted from the plan, without listing them).
bool segments(const Plan &plan, int64_t bytes, size_t limit, std::vector<Segment> &out) {
  int64_t per_instance = 0;
  for (const Run &r : plan.pattern) per_instance += r.count;
  const int64_t instances = std::min(plan.instances(), bytes / std::max<int64_t>(plan.pattern_size, 1) + 1);
  if (per_instance > 0 && instances > int64_t(limit) / per_instance) return false;
  for_each_segment(plan, 0, bytes, [&](int64_t typed, int64_t, int64_t length) {
    if (!out.empty() && out.back().typed + out.back().length == typed)
      out.back().length += length;
    else
      out.push_back({typed, length});
  });
  return true;
}

}  // namespace

std::vector<PairedRun> paired_runs(const Plan &from, const Plan &to, int64_t bytes, int64_t max_length,
                                   size_t max_runs) {
  std::vector<PairedRun> runs;
  bytes = std::min({bytes, from.packed_size(), to.packed_size()});
  if (bytes <= 0 || max_length <= 0) return runs;
  std::vector<Segment> a, b;
  if (!segments(from, bytes, max_runs, a) || !segments(to, bytes, max_runs, b)) return runs;
  size_t i = 0, j = 0;
  int64_t used_a = 0, used_b = 0;  // bytes of a[i] and b[j] already in runs
  while (i < a.size() && j < b.size()) {
    const int64_t length = std::min({a[i].length - used_a, b[j].length - used_b, max_length});
    runs.push_back({a[i].typed + used_a, b[j].typed + used_b, length});
    if (runs.size() > max_runs) return {};
    used_a += length;
    used_b += length;
    if (used_a == a[i].length) ++i, used_a = 0;
    if (used_b == b[j].length) ++j, used_b = 0;
  }
  return runs;
}

}  // namespace tempi
