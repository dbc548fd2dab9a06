// Block-list pack and unpack for lists of long blocks (triangular matrices, columns,
// blocks of kilobytes; issue 19).
//
// The stream bytes [first, last) are cut into shares of kShareBytes, aligned to the
// packed buffer's address, one share per warp. A warp walks its share block by block
// (the run index and a cursor, blocklist_device.cuh; every lane computes the same walk,
// so no shared memory or barrier is needed) and moves each piece of a block as the
// aligned 16-byte chunks of its destination: whole chunks inside the piece, partial ones
// at its two ends, so that nothing outside the block or the range is written. Lane l
// takes chunks l, l + 32, ..., so that a warp's accesses are coalesced, and builds its
// chunk from the two aligned source chunks under it, realigned in registers when the
// block's source and destination addresses differ mod 16: the access width follows each
// block, not the worst alignment of the plan. The second source chunk is the next lane's
// first (a shuffle), so every source chunk is read once. A share fits in one round of
// kSlices chunks per lane, all loaded before the first store.
//
// The byte-balanced kernel of blocklist.cu finds the block of every 16-byte window,
// which costs more than moving it once blocks are long; this one finds each block once
// per share, and the one-warp-per-piece kernel it replaces used one access width for
// the whole plan (8 bytes on a triangle of doubles, 1 byte where any block is odd).
#include <cuda_runtime.h>

#include <algorithm>

#include "blocklist.hpp"
#include "blocklist_device.cuh"
#include "check.hpp"

namespace tempi {

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
// Chunks a lane has in flight: a round moves 32 * kSlices chunks, and a share is short
// enough to fit one round whatever the alignment of either side: n bytes cover at most
// n / 16 + 1 chunks, and the source bytes under the last destination chunk never reach
// a chunk past the round.
constexpr int kSlices = 4;
constexpr int64_t kShareBytes = (32 * kSlices - 1) * kWindow;  // 2032

// Plans whose blocks average this many bytes or more take this kernel.
constexpr int64_t kLongBlockBytes = 256;

// What one launch moves: shares [0, nshares) of the stream, share 0 starting at stream
// position `stream0` (at most 15 bytes before `first`, where the packed address is
// 16-byte aligned).
struct Shares {
  uint64_t typed, packed;
  int64_t stream0, nshares;
};

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

// The warp moves `n` bytes (n > 0, at most kShareBytes) from `src` to `dst`, both of any
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
      // the last slice, bytes past the piece: shares are short enough for that)
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

// One share per warp; `ToPacked` packs (typed -> packed), else unpacks.
template <bool Wide, bool ToPacked>
__global__ void __launch_bounds__(kThreads, 4) long_blocks(const BlockListArgs a, const Shares s) {
  const int64_t share = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (share >= s.nshares) return;
  const int lane = threadIdx.x % 32;
  const int64_t lo = s.stream0 + share * kShareBytes;
  const int64_t hi = min(a.last, lo + kShareBytes);
  Cursor c;
  for (int64_t pos = max(lo, a.first); pos < hi;) {
    const Piece p = locate<Wide>(a, c, pos);
    const int64_t n = min(hi - pos, p.hi - p.typed);
    const uint64_t typed = s.typed + uint64_t(p.typed), packed = s.packed + uint64_t(pos - a.first);
    if (ToPacked)
      move_piece(packed, typed, n, lane);
    else
      move_piece(typed, packed, n, lane);
    pos += n;
  }
}

template <bool Wide>
Status launch(const BlockListArgs &a, uint64_t typed, uint64_t packed, bool to_packed, cudaStream_t stream) {
  const int64_t phase = int64_t(packed % kWindow);
  Shares s;
  s.typed = typed;
  s.packed = packed;
  s.stream0 = a.first - phase;
  s.nshares = (a.last - s.stream0 + kShareBytes - 1) / kShareBytes;
  const int64_t blocks = (s.nshares + kWarps - 1) / kWarps;
  if (blocks > int64_t(0x7fffffff)) return Status::Unsupported;
  if (to_packed)
    long_blocks<Wide, true><<<unsigned(blocks), kThreads, 0, stream>>>(a, s);
  else
    long_blocks<Wide, false><<<unsigned(blocks), kThreads, 0, stream>>>(a, s);
  TEMPI_CUDA(cudaGetLastError());
  return Status::Ok;
}

}  // namespace

bool long_block_plan(const Plan &plan) {
  int64_t blocks = 0;
  for (const Run &r : plan.pattern) blocks += r.count;
  return blocks > 0 && plan.pattern_size >= kLongBlockBytes * blocks;
}

Status launch_long_blocks(const BlockListArgs &a, const void *typed, void *packed, bool to_packed,
                          cudaStream_t stream) {
  if (a.last <= a.first || a.table.nruns == 0) return Status::Ok;
  const uint64_t t = reinterpret_cast<uintptr_t>(typed), p = reinterpret_cast<uintptr_t>(packed);
  return fits_narrow(a) ? launch<false>(a, t, p, to_packed, stream) : launch<true>(a, t, p, to_packed, stream);
}

}  // namespace tempi
