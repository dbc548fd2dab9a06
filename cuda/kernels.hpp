// Launchers of the pack/unpack kernels (kernels.cu). Both directions use the same
// kernels: `to_packed` true packs (typed -> packed), false unpacks.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend.hpp"

namespace tempi {

constexpr int kMaxKernelDims = 15;  // repetition dimensions above the contiguous block

// A strided plan for `count` elements, restricted to stream bytes [first, last).
struct StridedArgs {
  int64_t start = 0;       // typed offset of the first block
  int64_t block = 0;       // contiguous bytes per block (dimension 0)
  int ndims = 0;           // repetition dimensions, innermost first
  int64_t counts[kMaxKernelDims] = {};
  int64_t strides[kMaxKernelDims] = {};
  int64_t first = 0, last = 0;
};

// A piece of one pattern instance: `nblocks` blocks of `block` bytes, `stride`
// apart in the typed buffer, contiguous from `packed` in the packed stream.
struct WorkUnit {
  int64_t typed;
  int64_t packed;
  int64_t stride;
  uint32_t block;
  uint32_t nblocks;
};

// A block-list plan: units of one pattern instance (on the device), repeated over dims.
struct IrregularArgs {
  const WorkUnit *units = nullptr;
  int64_t nunits = 0;
  int64_t start = 0;
  int64_t pattern_size = 0;
  int ndims = 0;
  int64_t counts[kMaxKernelDims] = {};
  int64_t strides[kMaxKernelDims] = {};
  int64_t first = 0, last = 0;
};

// `word` is the access width in bytes (1, 2, 4, 8 or 16) dividing every offset,
// length and address involved.
Status launch_strided(const StridedArgs &a, int word, const void *typed, void *packed, bool to_packed,
                      cudaStream_t stream);
Status launch_irregular(const IrregularArgs &a, int word, const void *typed, void *packed, bool to_packed,
                        cudaStream_t stream);

}  // namespace tempi
