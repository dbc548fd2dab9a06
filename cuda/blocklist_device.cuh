// Device pieces that both block-list kernels use (blocklist.cu, long_blocks.cu): division
// by run-time divisors, and 16-byte chunk accesses that never leave a block.
// Included by .cu files only; everything here has internal linkage.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace tempi {
namespace {

constexpr int kWindow = 16;  // bytes of a chunk: the widest access

// Division by run-time divisors: 32-bit where every position and count fits 31 bits
// (a fraction of the cost of 64-bit division), else 64-bit.
template <bool Wide>
__device__ __forceinline__ int64_t quot(int64_t n, int64_t d) {
  return Wide ? n / d : int64_t(uint32_t(n) / uint32_t(d));
}

// Bytes [lo, hi) of a 16-byte chunk, as offsets into it (clamped to [0, 16]).
__device__ __forceinline__ int clamp16(int64_t x) { return int(x < 0 ? 0 : (x > kWindow ? kWindow : x)); }

// The aligned 16-byte chunk at `at`, reading only its bytes [lo, hi) (the others are 0).
__device__ __forceinline__ uint4 load_chunk(uint64_t at, int lo, int hi) {
  if (lo == 0 && hi == kWindow) return *reinterpret_cast<const uint4 *>(at);
  uint32_t w[4] = {0, 0, 0, 0};
  if (lo < hi) {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      if (lo <= 4 * k && hi >= 4 * k + 4) {
        w[k] = *reinterpret_cast<const uint32_t *>(at + 4 * k);
        continue;
      }
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (4 * k + j >= lo && 4 * k + j < hi) w[k] |= uint32_t(*reinterpret_cast<const uint8_t *>(at + 4 * k + j)) << (8 * j);
    }
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// Writes bytes [lo, hi) of `v` to the aligned 16-byte chunk at `at`, with the widest
// stores that stay inside them.
__device__ __forceinline__ void store_chunk(uint64_t at, uint4 v, int lo, int hi) {
  if (lo >= hi) return;
  if (lo == 0 && hi == kWindow) {
    *reinterpret_cast<uint4 *>(at) = v;
    return;
  }
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (lo <= 8 * h && hi >= 8 * h + 8) {
      *reinterpret_cast<uint2 *>(at + 8 * h) = make_uint2(w[2 * h], w[2 * h + 1]);
      continue;
    }
#pragma unroll
    for (int k = 2 * h; k < 2 * h + 2; ++k) {
      if (lo <= 4 * k && hi >= 4 * k + 4) {
        *reinterpret_cast<uint32_t *>(at + 4 * k) = w[k];
        continue;
      }
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (4 * k + j >= lo && 4 * k + j < hi) *reinterpret_cast<uint8_t *>(at + 4 * k + j) = uint8_t(w[k] >> (8 * j));
    }
  }
}

// The 16 bytes that start at byte `s` (0-15) of the 32 bytes c0:c1.
__device__ __forceinline__ uint4 realign(uint4 c0, uint4 c1, unsigned s) {
  const uint32_t w[8] = {c0.x, c0.y, c0.z, c0.w, c1.x, c1.y, c1.z, c1.w};
  const unsigned q = s >> 2, r = 8 * (s & 3);
  uint32_t x[5];
#pragma unroll
  for (int k = 0; k < 5; ++k) x[k] = q == 0 ? w[k] : q == 1 ? w[k + 1] : q == 2 ? w[k + 2] : w[k + 3];
  return make_uint4(__funnelshift_r(x[0], x[1], r), __funnelshift_r(x[1], x[2], r), __funnelshift_r(x[2], x[3], r),
                    __funnelshift_r(x[3], x[4], r));
}

}  // namespace
}  // namespace tempi
