// The reference packer: executes any plan on host memory, serially and simply. It
// is the oracle every GPU path is compared with, and what the tests compare with
// MPI_Pack. `packed` holds stream byte `first` at packed[0].
#pragma once

#include <cstdint>
#include <functional>

#include "plan.hpp"

namespace tempi {

// Calls fn(typed_offset, packed_offset, length) for each contiguous piece of the
// packed stream within [first, last), in stream order; packed_offset counts from `first`.
void for_each_segment(const Plan &plan, int64_t first, int64_t last,
                      const std::function<void(int64_t, int64_t, int64_t)> &fn);

void host_pack(const Plan &plan, const void *typed, void *packed, int64_t first, int64_t last);
void host_unpack(const Plan &plan, const void *packed, void *typed, int64_t first, int64_t last);

}  // namespace tempi
