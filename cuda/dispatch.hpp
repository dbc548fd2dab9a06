// Kernel choice for cuda/ (dispatch.cpp), in one room: every decision of which kernel,
// copy or launch moves an object, by the thresholds of policy.hpp.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend.hpp"
#include "kernels.hpp"

namespace tempi {

// Queues the move of stream bytes [first, last) of `plan` between a GPU-accessible typed
// buffer and a GPU-accessible packed one on `stream`, by the kernel (or copy) that suits
// the plan; a block list's tables go to the current device at the plan's first use.
Status run_kernel(const Plan &plan, void *typed, void *packed, int64_t first, int64_t last, bool to_packed,
                  cudaStream_t stream);
// The first byte of a contiguous plan's one run, and stream bytes [first, last) of it
// moved by one copy of the copy engines.
char *run_of(const Plan &plan, void *typed);
Status copy_run(const Plan &plan, void *typed, void *packed, int64_t first, int64_t last, bool to_packed,
                cudaStream_t stream);
// One pitched copy between a whole 2-D or 3-D strided object and its packed bytes in
// host memory, where the layout allows one and it pays; `copied` says whether it did.
Status pitched_copy(const Plan &plan, void *typed, void *host, int64_t bytes, bool to_host, cudaStream_t stream,
                    bool &copied);
// A job that can join a fused or open launch (a strided plan of few dimensions, 32-bit
// indices), described with `packed` as its packed side.
bool describe_fused(const MoveJob &j, void *packed, FusedObject &o);
// A large transpose or permutation that leaves the fused launch for the tiled kernels.
bool runs_alone(const FusedObject &o);
// How a typed-to-typed move of `bytes` bytes goes: both plans strided and fusable, one
// fused launch of pairs (`p` describes it, one access width for both sides); a large
// transpose or permutation whose other side is one contiguous run, a pack into that run or
// an unpack from it by the tiled kernels; Other: paired runs or the pair's scratch (pairs.cpp).
enum class PairRoute { Fused, PackIntoRun, UnpackFromRun, Other };
PairRoute choose_pair(const PairJob &j, int64_t bytes, FusedPair &p);
// Whether an object of a batch or of an open launch shares its launch: up to
// kOpenMaxBytes; a contiguous run above it goes to the copy engines alone.
inline bool shares_launch(int64_t bytes) { return bytes <= policy::kOpenMaxBytes; }
// The device tables of plan `id` may go (Backend::release_plan).
void release_plan_units(uint64_t id);

}  // namespace tempi
