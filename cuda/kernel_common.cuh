// What the fused, open-launch and paired kernels share (fused.cu, open_kernel.cu,
// pairs_kernels.cu, fused_tables.cu): word types, fast division, the descriptions of a
// strided object (FusedDev) and of a typed-to-typed pair (PairDev), batches passed as a
// launch's parameter, and the device tables that hold larger batches. Device code:
// included by .cu files only.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>

#include "check.hpp"
#include "kernels.hpp"

namespace tempi {

constexpr int kThreads = 256;

// Division by a run-time invariant 32-bit divisor with a multiply and a shift
// (Granlund & Montgomery): index arithmetic must not cost more than the memory traffic.
struct FastDiv {
  uint32_t d = 1, m = 1, l = 0;
  FastDiv() = default;
  __host__ explicit FastDiv(uint32_t divisor) : d(divisor) {
    while ((uint64_t(1) << l) < d) ++l;
    m = uint32_t(((uint64_t(1) << 32) * ((uint64_t(1) << l) - d)) / d + 1);
  }
  __device__ uint32_t div(uint32_t n) const { return uint32_t((uint64_t(__umulhi(m, n)) + n) >> l); }
};

template <int W>
struct WordOf;
template <> struct WordOf<1> { using type = uint8_t; };
template <> struct WordOf<2> { using type = uint16_t; };
template <> struct WordOf<4> { using type = uint32_t; };
template <> struct WordOf<8> { using type = uint64_t; };
template <> struct WordOf<16> { using type = uint4; };

// Fused launches (kernel fusion over a table of small objects): one launch instead of
// one per object, since a launch costs as much as moving tens of kilobytes.
struct FusedDev {
  const uint8_t *src;
  uint8_t *dst;
  int64_t start;
  uint32_t word, words_per_block, nwords, first_block;
  FastDiv per_block;
  int ndims;
  FastDiv dims[policy::kMaxFusedDims];
  int64_t strides[policy::kMaxFusedDims];
};
// A launch's descriptions, passed as its parameter. The parameter is copied whole at every
// launch, so a batch goes in the smallest of three capacities that holds it
// (launch_smallest): a zero-copy call's two pairs in the largest (8 KB) took 7 us to launch
// where the same kernel with the 0.5 KB batch took 4 (one H200, two ranks under MPS,
// 2026-11-24).
template <class Dev, int N>
struct Batch {
  static constexpr int capacity = N;
  int n;
  Dev items[N];
};

// Calls launch(batch) on the n descriptions `d` copied into the smallest batch of
// capacity Small, Mid or Max (>= n) that holds them.
template <int Small, int Mid, int Max, class Dev, class Launch>
void launch_smallest(const Dev *d, int n, Launch launch) {
  const auto with = [&](auto &batch) {
    batch.n = n;
    for (int k = 0; k < n; ++k) batch.items[k] = d[k];
    launch(batch);
  };
  if (n <= Small) {
    Batch<Dev, Small> b;
    with(b);
  } else if (n <= Mid) {
    Batch<Dev, Mid> b;
    with(b);
  } else {
    Batch<Dev, Max> b;
    with(b);
  }
}

// The typed offset of word i of a strided shape (FusedDev, SideDev: the same fields).
template <int W, class Shape>
__device__ __forceinline__ int64_t word_offset(const Shape &o, uint32_t i) {
  uint32_t row = o.per_block.div(i);
  int64_t off = o.start + int64_t(i - row * o.words_per_block) * W;
  for (int d = 0; d < o.ndims; ++d) {
    const uint32_t next = o.dims[d].div(row);
    off += int64_t(row - next * o.dims[d].d) * o.strides[d];
    row = next;
  }
  return off;
}

// The last of `n` descriptions (sorted by first block) whose first block is at or below this
// thread block, copied into shared memory `out`, where the stores of the move cannot alias it
// (read from global memory, it would be read again after each); returns where its blocks end.
template <class Dev>
__device__ __forceinline__ uint32_t find_own(const Dev *items, int n, Dev &out) {
  int lo = 0, hi = n - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (items[mid].first_block <= blockIdx.x) lo = mid;
    else hi = mid - 1;
  }
  static_assert(sizeof(Dev) % 4 == 0, "copied in 4-byte words");
  const uint32_t *src = reinterpret_cast<const uint32_t *>(items + lo);
  uint32_t *dst = reinterpret_cast<uint32_t *>(&out);
  for (uint32_t k = threadIdx.x; k < sizeof(Dev) / 4; k += blockDim.x) dst[k] = src[k];
  const uint32_t end = lo + 1 < n ? items[lo + 1].first_block : gridDim.x;
  __syncthreads();
  return end;
}

// Typed-to-typed pairs: both sides walk the same word index through their own strides.
struct SideDev {
  uint8_t *base;
  int64_t start;
  uint32_t words_per_block;
  FastDiv per_block;
  int ndims;
  FastDiv dims[policy::kMaxFusedDims];
  int64_t strides[policy::kMaxFusedDims];
};
struct PairDev {
  SideDev from, to;
  uint32_t word, nwords, first_block;
};

// A device copy of the `bytes` bytes at `host` (at most one table: kMaxFusedObjects
// FusedDev or kMaxFusedPairs PairDev), in place for work issued on `stream` after this call
// (fused_tables.cu). Unsupported where no memory could be had.
Status place_table(const void *host, size_t bytes, cudaStream_t stream, const void *&out);

// Thread blocks for one object of a fused launch: about two words per thread, capped
// so that one large object does not hold the others back.
inline uint32_t fused_blocks(uint32_t nwords) {
  constexpr uint32_t kWordsPerBlock = 2 * kThreads, kMaxBlocks = 1024;
  const uint32_t b = (nwords + kWordsPerBlock - 1) / kWordsPerBlock;
  return b < 1 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b);
}

inline int grid_for(int64_t threads_needed) {
  static int max_blocks = [] {
    int dev = 0, sms = 1, per_sm = 2048;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, dev);
    return sms * (per_sm / kThreads);
  }();
  const int64_t blocks = (threads_needed + kThreads - 1) / kThreads;
  return int(blocks < 1 ? 1 : (blocks > max_blocks ? max_blocks : blocks));
}

// The kernel's description of a fused or open launch's object (its first block left 0).
inline void describe(const FusedObject &o, bool to_packed, FusedDev &d) {
  const uint8_t *typed = static_cast<const uint8_t *>(o.typed);
  uint8_t *packed = static_cast<uint8_t *>(o.packed);
  d.src = to_packed ? typed : packed;
  d.dst = to_packed ? packed : const_cast<uint8_t *>(typed);
  d.start = o.start;
  d.word = uint32_t(o.word);
  d.words_per_block = uint32_t(o.block / o.word);
  d.per_block = FastDiv(d.words_per_block);
  d.nwords = uint32_t(o.bytes / o.word);
  d.first_block = 0;
  d.ndims = o.ndims;
  for (int i = 0; i < o.ndims; ++i) {
    // A dimension's count only divides row indices below nwords, which fit 32 bits.
    d.dims[i] = FastDiv(uint32_t(o.counts[i] < (int64_t(1) << 31) ? o.counts[i] : (int64_t(1) << 31)));
    d.strides[i] = o.strides[i];
  }
}

}  // namespace tempi
