// Whether two typed objects share a byte: the test that lets consecutive MPI_Unpack calls
// run side by side in one launch (TEMPI_DEFER_PACK=2, docs/using.md) only where no byte
// is written by one and read or written by another, so that running them in any order
// gives what running them in call order gives.
#pragma once

#include <cstdint>

#include "plan.hpp"

namespace tempi {

// Whether plan `a` at address `a_at` and plan `b` at address `b_at` (the typed buffers'
// addresses, as integers) may touch a common byte. Exact for plans of regular runs (an
// object of strided dimensions: halo faces, subarrays, vectors), where the answer is
// found in a few steps however many blocks the objects have; after `budget` steps (plans
// of many irregular runs) it answers true, which only costs a separate launch.
bool may_share_bytes(const Plan &a, int64_t a_at, const Plan &b, int64_t b_at, int64_t budget = 4096);

// The same for plan `a` and the contiguous bytes [lo, hi).
bool may_share_bytes(const Plan &a, int64_t a_at, int64_t lo, int64_t hi, int64_t budget = 4096);

}  // namespace tempi
