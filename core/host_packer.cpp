#include "host_packer.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

namespace tempi {

void for_each_segment(const Plan &plan, int64_t first, int64_t last,
                      const std::function<void(int64_t, int64_t, int64_t)> &fn) {
  const int64_t P = plan.pattern_size;
  last = std::min(last, plan.packed_size());
  if (P == 0 || first >= last) return;

  // Multi-index of the pattern instance that holds byte `first`.
  int64_t instance = first / P;
  std::vector<int64_t> index(plan.dims.size());
  int64_t base = plan.start;
  for (size_t d = 0; d < plan.dims.size(); ++d) {
    index[d] = instance % plan.dims[d].count;
    instance /= plan.dims[d].count;
    base += index[d] * plan.dims[d].stride;
  }

  int64_t pos = first / P * P;  // stream position of the current instance's first byte
  while (pos < last) {
    for (const Run &r : plan.pattern) {
      const int64_t run_bytes = r.length * r.count;
      if (pos + run_bytes <= first) {  // wholly before the range
        pos += run_bytes;
        continue;
      }
      int64_t k = pos < first ? (first - pos) / r.length : 0;
      for (int64_t at = pos + k * r.length; k < r.count && at < last; ++k, at += r.length) {
        const int64_t lo = std::max(at, first), hi = std::min(at + r.length, last);
        fn(base + r.offset + k * r.stride + (lo - at), lo - first, hi - lo);
      }
      pos += run_bytes;
      if (pos >= last) return;
    }
    for (size_t d = 0; d < plan.dims.size(); ++d) {  // next instance, odometer-style
      base += plan.dims[d].stride;
      if (++index[d] < plan.dims[d].count) break;
      base -= index[d] * plan.dims[d].stride;
      index[d] = 0;
    }
  }
}

void host_pack(const Plan &plan, const void *typed, void *packed, int64_t first, int64_t last) {
  const auto *src = static_cast<const unsigned char *>(typed);
  auto *dst = static_cast<unsigned char *>(packed);
  for_each_segment(plan, first, last, [&](int64_t t, int64_t p, int64_t n) { std::memcpy(dst + p, src + t, n); });
}

void host_unpack(const Plan &plan, const void *packed, void *typed, int64_t first, int64_t last) {
  const auto *src = static_cast<const unsigned char *>(packed);
  auto *dst = static_cast<unsigned char *>(typed);
  for_each_segment(plan, first, last, [&](int64_t t, int64_t p, int64_t n) { std::memcpy(dst + t, src + p, n); });
}

}  // namespace tempi
