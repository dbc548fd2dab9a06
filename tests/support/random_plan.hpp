// Small random plans of every shape a plan allows (negative and zero strides, several
// runs, repetition dimensions), for tests that check core functions against the bytes.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "plan.hpp"

namespace tempi::test {

inline Plan random_plan(std::mt19937_64 &rng) {
  auto pick = [&](int64_t lo, int64_t hi) { return lo + int64_t(rng() % uint64_t(hi - lo + 1)); };
  Plan p;
  p.start = pick(0, 40);
  std::vector<Run> runs;
  const int nruns = int(pick(1, 3));
  for (int r = 0; r < nruns; ++r) runs.push_back({pick(-20, 20), pick(1, 6), pick(-12, 12), pick(1, 3)});
  p.pattern = RunList(runs);
  for (const Run &r : runs) p.pattern_size += r.length * r.count;
  const int ndims = int(pick(0, 2));
  for (int d = 0; d < ndims; ++d) p.dims.push_back({pick(1, 4), pick(-40, 40)});
  return p;
}

}  // namespace tempi::test
