// A move between two typed objects whose packed streams are the same bytes (zero-copy's
// reads: a peer's send object straight into this rank's receive object), as runs that
// are contiguous on both sides, in stream order: the two plans' segments cut wherever
// either one's ends. One pass over the bytes, where packing into scratch and unpacking
// from it makes two.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "plan.hpp"

namespace tempi {

struct PairedRun {
  int64_t from, to;  // typed offsets, each relative to its object's base address
  int64_t length;
};

// The runs of the first `bytes` stream bytes, none longer than `max_length` (so that the
// work splits evenly). Empty when `bytes` <= 0 or when the plans' segments would be more
// than `max_runs` (the caller then moves the bytes another way).
std::vector<PairedRun> paired_runs(const Plan &from, const Plan &to, int64_t bytes, int64_t max_length,
                                   size_t max_runs);

}  // namespace tempi
