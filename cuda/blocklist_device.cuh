// Device pieces that the block-list kernels share (blocklist.cu, long_blocks.cu,
// small_pattern.cu, and zero-copy's paired runs in pairs_kernels.cu): division by run-time
// divisors, 16-byte chunk accesses that never leave a block, and a warp's move of one
// piece of any alignment.
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

// Bytes [lo, 16) or [0, hi) of an aligned 16-byte chunk with at most four aligned
// accesses (widths 1, 2, 4, 8 as the bound's bits say), where load_chunk's word-by-word
// walk takes up to 16: the chunks at a block's two ends, in kernels whose lanes each own
// one such end. The other bytes of the result are 0.
__device__ __forceinline__ void put_bytes(uint64_t &h0, uint64_t &h1, uint64_t v, int pos) {
  const uint64_t shifted = v << (8 * (pos & 7));
  if (pos < 8)
    h0 |= shifted;
  else
    h1 |= shifted;
}
__device__ __forceinline__ uint64_t get_bytes(uint64_t h0, uint64_t h1, int pos) { return (pos < 8 ? h0 : h1) >> (8 * (pos & 7)); }
__device__ __forceinline__ uint4 to_chunk(uint64_t h0, uint64_t h1) {
  return make_uint4(uint32_t(h0), uint32_t(h0 >> 32), uint32_t(h1), uint32_t(h1 >> 32));
}

__device__ __forceinline__ uint4 load_suffix(uint64_t at, int lo) {
  uint64_t h0 = 0, h1 = 0;
  int p = lo;
  if (p & 1) put_bytes(h0, h1, *reinterpret_cast<const uint8_t *>(at + p), p), p += 1;
  if (p & 2) put_bytes(h0, h1, *reinterpret_cast<const uint16_t *>(at + p), p), p += 2;
  if (p & 4) put_bytes(h0, h1, *reinterpret_cast<const uint32_t *>(at + p), p), p += 4;
  if (p & 8) put_bytes(h0, h1, *reinterpret_cast<const uint64_t *>(at + p), p);
  return to_chunk(h0, h1);
}

__device__ __forceinline__ uint4 load_prefix(uint64_t at, int hi) {
  uint64_t h0 = 0, h1 = 0;
  int p = 0;
  if (hi & 8) put_bytes(h0, h1, *reinterpret_cast<const uint64_t *>(at + p), p), p += 8;
  if (hi & 4) put_bytes(h0, h1, *reinterpret_cast<const uint32_t *>(at + p), p), p += 4;
  if (hi & 2) put_bytes(h0, h1, *reinterpret_cast<const uint16_t *>(at + p), p), p += 2;
  if (hi & 1) put_bytes(h0, h1, *reinterpret_cast<const uint8_t *>(at + p), p);
  return to_chunk(h0, h1);
}

__device__ __forceinline__ void store_suffix(uint64_t at, uint4 v, int lo) {
  const uint64_t h0 = uint64_t(v.x) | uint64_t(v.y) << 32, h1 = uint64_t(v.z) | uint64_t(v.w) << 32;
  int p = lo;
  if (p & 1) *reinterpret_cast<uint8_t *>(at + p) = uint8_t(get_bytes(h0, h1, p)), p += 1;
  if (p & 2) *reinterpret_cast<uint16_t *>(at + p) = uint16_t(get_bytes(h0, h1, p)), p += 2;
  if (p & 4) *reinterpret_cast<uint32_t *>(at + p) = uint32_t(get_bytes(h0, h1, p)), p += 4;
  if (p & 8) *reinterpret_cast<uint64_t *>(at + p) = get_bytes(h0, h1, p);
}

__device__ __forceinline__ void store_prefix(uint64_t at, uint4 v, int hi) {
  const uint64_t h0 = uint64_t(v.x) | uint64_t(v.y) << 32, h1 = uint64_t(v.z) | uint64_t(v.w) << 32;
  int p = 0;
  if (hi & 8) *reinterpret_cast<uint64_t *>(at + p) = get_bytes(h0, h1, p), p += 8;
  if (hi & 4) *reinterpret_cast<uint32_t *>(at + p) = uint32_t(get_bytes(h0, h1, p)), p += 4;
  if (hi & 2) *reinterpret_cast<uint16_t *>(at + p) = uint16_t(get_bytes(h0, h1, p)), p += 2;
  if (hi & 1) *reinterpret_cast<uint8_t *>(at + p) = uint8_t(get_bytes(h0, h1, p));
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

// The aligned typed chunks under a window, before realignment: the window's byte 0 is
// byte `shift` of c0:c1.
struct Raw {
  uint4 c0, c1;
  unsigned shift;
};

// Loads the chunks under the 16 bytes from typed address `t0`, reading only bytes in
// [lo, hi) (a block, so that no access leaves it).
__device__ __forceinline__ Raw load_window(uint64_t t0, uint64_t lo, uint64_t hi) {
  const uint64_t at = t0 & ~uint64_t(kWindow - 1);
  const int64_t l = int64_t(lo - at), h = int64_t(hi - at);
  Raw r;
  r.shift = unsigned(t0 - at);
  r.c0 = load_chunk(at, clamp16(l), clamp16(h));
  r.c1 = r.shift ? load_chunk(at + kWindow, clamp16(l - kWindow), clamp16(h - kWindow)) : make_uint4(0, 0, 0, 0);
  return r;
}

__device__ __forceinline__ uint4 aligned(const Raw &r) { return r.shift ? realign(r.c0, r.c1, r.shift) : r.c0; }

// One warp moves one piece: the block-list kernels' long blocks (long_blocks.cu) and
// zero-copy's paired runs (pairs_kernels.cu).
// Chunks a lane has in flight: a round moves 32 * kSlices chunks, and a piece is short
// enough to fit one round whatever the alignment of either side: its n bytes cover at
// most n / 16 + 1 destination chunks, and the source chunks under them start up to 30
// bytes before the piece's source, so n / 16 + 2 source chunks.
constexpr int kSlices = 4;
constexpr int64_t kPieceBytes = (32 * kSlices - 2) * kWindow;  // 2016

// Lane `from`'s v (every lane of the warp takes part).
__device__ __forceinline__ uint4 from_lane(uint4 v, int from) {
  return make_uint4(__shfl_sync(~0u, v.x, from), __shfl_sync(~0u, v.y, from), __shfl_sync(~0u, v.z, from),
                    __shfl_sync(~0u, v.w, from));
}

// Chunks of the source and the destination: whole ones as global-space 16-byte accesses
// (the source through the read-only path; plain pointers would compile to generic
// ones), the partial ones at a piece's two ends byte-exact.
__device__ __forceinline__ uint4 source_chunk(uint64_t at, int lo, int hi) {
  if (lo == 0 && hi == kWindow) return __ldg(reinterpret_cast<const uint4 *>(at));
  return load_chunk(at, lo, hi);
}

__device__ __forceinline__ void destination_chunk(uint64_t at, uint4 v, int lo, int hi) {
  if (lo == 0 && hi == kWindow) return __stwb(reinterpret_cast<uint4 *>(at), v);
  store_chunk(at, v, lo, hi);
}

// The warp moves `n` bytes (n > 0, at most kPieceBytes) from `src` to `dst`, both of any
// alignment and inside one block: destination chunk i (from the aligned chunk under
// dst) is bytes `shift` onwards of source chunks i and i + 1. Chunks are read and
// written only in their bytes inside [src, src + n) and [dst, dst + n).
__device__ __forceinline__ void move_piece(uint64_t dst, uint64_t src, int64_t n, int lane) {
  const uint64_t d0 = dst & ~uint64_t(kWindow - 1);
  const uint64_t under = src - (dst - d0);  // the source byte under d0 (may precede src)
  const uint64_t s0 = under & ~uint64_t(kWindow - 1);
  const unsigned shift = unsigned(under - s0);
  const int64_t nchunks = (int64_t(dst - d0) + n + kWindow - 1) / kWindow;  // destination chunks
  const int64_t nsource = (int64_t(src - s0) + n + kWindow - 1) / kWindow;  // source chunks
  uint4 c[kSlices];
#pragma unroll
  for (int u = 0; u < kSlices; ++u) {
    c[u] = make_uint4(0, 0, 0, 0);
    if (u * 32 < nsource) {  // the same for every lane of the warp
      const uint64_t at = s0 + uint64_t(u * 32 + lane) * kWindow;
      c[u] = source_chunk(at, clamp16(int64_t(src - at)), clamp16(int64_t(src + n - at)));
    }
  }
#pragma unroll
  for (int u = 0; u < kSlices; ++u) {
    if (u * 32 >= nchunks) break;
    uint4 v = c[u];
    if (shift) {
      // the next chunk: the next lane's, or for lane 31 the next slice's first (after
      // the last slice, bytes past the piece: pieces are short enough for that)
      uint4 next = from_lane(c[u], (lane + 1) % 32);
      if (u + 1 < kSlices) {
        const uint4 after = from_lane(c[u + 1 < kSlices ? u + 1 : u], 0);
        if (lane == 31) next = after;
      }
      v = realign(c[u], next, shift);
    }
    const uint64_t at = d0 + uint64_t(u * 32 + lane) * kWindow;
    destination_chunk(at, v, clamp16(int64_t(dst - at)), clamp16(int64_t(dst + n - at)));
  }
}

}  // namespace
}  // namespace tempi
