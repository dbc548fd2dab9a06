// Typed-to-typed moves between GPU buffers (Backend::move_async), as zero-copy issues them for
// the blocks a rank reads from its node peers' buffers, collectives and point-to-point alike:
// device scratch lent to the whole batch at once, and where none can be had, each pair moved
// alone (docs/design.md, "Bad arguments, faults and sanitizers": a failed GPU allocation
// falls back rather than fails the call).
#pragma once

#include <vector>

#include "backend.hpp"

namespace tempi {

// Device scratch for the typed-to-typed moves `jobs`, one allocation for all (Backend::
// move_async moves the pairs that do not go in one pass through it). Where that much device
// memory cannot be had the jobs get none, and move_pairs moves the pairs that need it one at
// a time.
void lend_scratch(std::vector<PairJob> &jobs, Scratch &scratch);
// Backend::move_async of `jobs` (on the current GPU); where a pair needs scratch that it has
// not, every pair moves alone, each through scratch of its own size where it needs it, and
// is finished when this returns (`done` then empty).
Status move_pairs(const std::vector<PairJob> &jobs, Fence &done);

}  // namespace tempi
