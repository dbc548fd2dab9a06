#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <type_traits>
#include <vector>

#include "blocklist_device.cuh"
#include "check.hpp"
#include "kernels.hpp"
#include "resources.hpp"

namespace tempi {

namespace {

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

// Kernel parameters for indices that fit 32 bits (the common case): fast division.
struct Strided32 {
  int64_t start;
  int ndims;
  uint32_t words_per_block;
  FastDiv per_block;
  FastDiv dims[kMaxKernelDims];
  int64_t strides[kMaxKernelDims];
  uint32_t first_word, nwords;
};

__device__ __forceinline__ int64_t typed_offset(const Strided32 &a, uint32_t q, int word) {
  uint32_t row = a.per_block.div(q);
  int64_t off = a.start + int64_t(q - row * a.words_per_block) * word;
#pragma unroll
  for (int d = 0; d < kMaxKernelDims; ++d) {
    if (d >= a.ndims) break;
    const uint32_t next = a.dims[d].div(row);
    off += int64_t(row - next * a.dims[d].d) * a.strides[d];
    row = next;
  }
  return off;
}

// Each thread moves kUnroll words per round, all loads issued before any store, so
// that scattered accesses (short blocks) keep enough requests in flight.
constexpr int kUnroll = 4;

template <int W, bool ToPacked>
__global__ void __launch_bounds__(kThreads) strided32(Strided32 a, const uint8_t *__restrict__ src,
                                                      uint8_t *__restrict__ dst) {
  using T = typename WordOf<W>::type;
  const uint32_t step = gridDim.x * blockDim.x;
  uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  for (; i + (kUnroll - 1) * step < a.nwords; i += kUnroll * step) {
    T v[kUnroll];
    int64_t off[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      off[u] = typed_offset(a, a.first_word + i + u * step, W);
      v[u] = ToPacked ? *reinterpret_cast<const T *>(src + off[u]) : reinterpret_cast<const T *>(src)[i + u * step];
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (ToPacked)
        reinterpret_cast<T *>(dst)[i + u * step] = v[u];
      else
        *reinterpret_cast<T *>(dst + off[u]) = v[u];
    }
  }
  for (; i < a.nwords; i += step) {
    const int64_t off = typed_offset(a, a.first_word + i, W);
    if (ToPacked)
      reinterpret_cast<T *>(dst)[i] = *reinterpret_cast<const T *>(src + off);
    else
      *reinterpret_cast<T *>(dst + off) = reinterpret_cast<const T *>(src)[i];
  }
}

// The general case: 64-bit indices and plain division (objects with > 2^32 words).
template <int W, bool ToPacked>
__global__ void __launch_bounds__(kThreads) strided64(StridedArgs a, const uint8_t *__restrict__ src,
                                                      uint8_t *__restrict__ dst) {
  using T = typename WordOf<W>::type;
  const int64_t wpb = a.block / W, first = a.first / W, n = (a.last - a.first) / W;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t q = first + i;
    int64_t row = q / wpb;
    int64_t off = a.start + (q - row * wpb) * W;
    for (int d = 0; d < a.ndims; ++d) {
      off += (row % a.counts[d]) * a.strides[d];
      row /= a.counts[d];
    }
    if (ToPacked)
      reinterpret_cast<T *>(dst)[i] = reinterpret_cast<const T *>(src + off)[0];
    else
      reinterpret_cast<T *>(dst + off)[0] = reinterpret_cast<const T *>(src)[i];
  }
}

// Fused launches (kernel fusion over a table of small objects): one launch instead of
// one per object, since a launch costs as much as moving tens of kilobytes.
struct FusedDev {
  const uint8_t *src;
  uint8_t *dst;
  int64_t start;
  uint32_t word, words_per_block, nwords, first_block;
  FastDiv per_block;
  int ndims;
  FastDiv dims[kMaxFusedDims];
  int64_t strides[kMaxFusedDims];
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

template <int W, bool ToPacked>
__device__ __forceinline__ void fused_object(const FusedDev &o, uint32_t i, uint32_t step) {
  using T = typename WordOf<W>::type;
  for (; i < o.nwords; i += step) {
    const int64_t off = word_offset<W>(o, i);
    if (ToPacked)
      reinterpret_cast<T *>(o.dst)[i] = *reinterpret_cast<const T *>(o.src + off);
    else
      *reinterpret_cast<T *>(o.dst + off) = reinterpret_cast<const T *>(o.src)[i];
  }
}

// This thread block's part of object `o`, whose blocks end before block `end`.
template <bool ToPacked>
__device__ __forceinline__ void fused_part(const FusedDev &o, uint32_t end) {
  const uint32_t nblocks = end - o.first_block;
  const uint32_t i = (blockIdx.x - o.first_block) * blockDim.x + threadIdx.x, step = nblocks * blockDim.x;
  switch (o.word) {
    case 16: return fused_object<16, ToPacked>(o, i, step);
    case 8: return fused_object<8, ToPacked>(o, i, step);
    case 4: return fused_object<4, ToPacked>(o, i, step);
    case 2: return fused_object<2, ToPacked>(o, i, step);
    default: return fused_object<1, ToPacked>(o, i, step);
  }
}

template <bool ToPacked, int N>
__global__ void __launch_bounds__(kThreads) fused(const __grid_constant__ Batch<FusedDev, N> b) {
  int j = 0;
  while (j + 1 < b.n && blockIdx.x >= b.items[j + 1].first_block) ++j;
  fused_part<ToPacked>(b.items[j], j + 1 < b.n ? b.items[j + 1].first_block : gridDim.x);
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

// The fused launch with its descriptions in device memory (place_table).
template <bool ToPacked>
__global__ void __launch_bounds__(kThreads) fused_at(const FusedDev *items, int n) {
  __shared__ FusedDev o;
  const uint32_t end = find_own(items, n, o);
  fused_part<ToPacked>(o, end);
}

// An open launch (kernels.hpp): the host describes objects one at a time in pinned memory
// while the kernel runs. One warp relays the descriptions into device memory, so that the
// other warps never read host memory: every block has one warp more than its workers, and
// the first block to start makes its extra warp the relay (the others' leave at once), so
// the relay runs whatever order the blocks are scheduled in. The worker warps of every
// block share the objects' tiles (kOpenTileWords words each, numbered across objects in
// publication order): block b takes tiles b, b + blocks, ..., so the tiles of one object,
// and many small objects, are moved by many blocks at once.
//
// Measured on an H100 (2026-11-24): reads of pinned host memory cost about 2 us a round
// trip, and when all 264 worker blocks polled the host as well, the relay's own reads
// slowed to about 1 ms in all; so only the relay reads it, with its loads batched.
constexpr uint32_t kOpenSlotWords = kOpenSlotBytes / 8;
constexpr uint32_t kOpenObjectWords = (sizeof(FusedDev) + 7) / 8;  // what is relayed and read of a slot
constexpr uint32_t kOpenUnroll = kOpenTileWords / kThreads;        // words per thread of a tile
constexpr uint32_t kOpenRelayBatch = 8;                            // host loads in flight per relay lane
static_assert(sizeof(FusedDev) <= kOpenSlotBytes, "an object's description fits its slot");
static_assert(alignof(FusedDev) <= 8, "a description is read as 8-byte words");
static_assert(kOpenObjectWords <= 32, "one warp reads a description");
static_assert(kOpenTileWords % kThreads == 0, "a tile is whole rounds of the worker warps");
constexpr uint64_t kOpenEnded = uint64_t(1) << 31;  // in the device mirror: no more objects come

__device__ __forceinline__ uint32_t load_acquire_sys(const uint32_t *p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
// Relaxed loads of host memory, free to be issued together (ordered after the acquire of
// the count by the warp's own program order and the acquire's semantics).
__device__ __forceinline__ uint64_t load_relaxed_sys(const uint64_t *p) {
  uint64_t v;
  asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p));
  return v;
}
__device__ __forceinline__ uint32_t load_relaxed_sys(const uint32_t *p) {
  uint32_t v;
  asm volatile("ld.relaxed.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
}
__device__ __forceinline__ uint64_t load_acquire_gpu(const uint64_t *p) {
  uint64_t v;
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void store_release_gpu(uint64_t *p, uint64_t v) {
  asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
// A barrier of a block's worker warps only (the relay warp never joins it).
__device__ __forceinline__ void workers_sync() { asm volatile("bar.sync 1, %0;" ::"r"(kThreads) : "memory"); }

// Host and device areas have one layout (kernels.hpp): header, slots, tile ends. The
// device header holds the mirror (epoch << 32 | kOpenEnded once the launch ended | objects
// relayed) and the election word (the epoch of the last launch whose relay was chosen).
struct OpenView {
  const OpenHost *host;
  const uint64_t *host_slots;
  const uint32_t *host_ends;
  uint64_t *mirror;
  unsigned long long *elected;
  uint64_t *slots;
  uint32_t *ends;
  uint64_t epoch;  // of this launch
  uint64_t tag;    // its low 32 bits, as the mirror holds them
};

__device__ __forceinline__ OpenView open_view(const OpenArgs &a) {
  const uint8_t *h = reinterpret_cast<const uint8_t *>(a.host);
  OpenView v;
  v.host = a.host;
  v.host_slots = reinterpret_cast<const uint64_t *>(h + kOpenHeaderBytes);
  v.host_ends = reinterpret_cast<const uint32_t *>(h + kOpenEndsOffset);
  v.mirror = reinterpret_cast<uint64_t *>(a.device);
  v.elected = reinterpret_cast<unsigned long long *>(a.device + 8);
  v.slots = reinterpret_cast<uint64_t *>(a.device + kOpenHeaderBytes);
  v.ends = reinterpret_cast<uint32_t *>(a.device + kOpenEndsOffset);
  v.epoch = a.epoch;
  v.tag = a.epoch & 0xffffffffu;
  return v;
}

// The host's count of objects, at most the capacity (a count past it would be a bug).
__device__ __forceinline__ uint32_t host_published(const OpenHost *h) {
  const uint32_t n = load_acquire_sys(&h->published);
  return n < kOpenCapacity ? n : kOpenCapacity;
}

// Copies descriptions [from, to) and their tile ends from the host into device memory.
__device__ void open_relay_copy(const OpenView &v, uint32_t from, uint32_t to, uint32_t lane) {
  const uint32_t words = (to - from) * kOpenObjectWords;
  for (uint32_t k0 = 0; k0 < words; k0 += 32 * kOpenRelayBatch) {
    uint64_t value[kOpenRelayBatch];
#pragma unroll
    for (uint32_t u = 0; u < kOpenRelayBatch; ++u) {
      const uint32_t k = k0 + lane + 32 * u;
      if (k < words) value[u] = load_relaxed_sys(v.host_slots + (from + k / kOpenObjectWords) * kOpenSlotWords + k % kOpenObjectWords);
    }
#pragma unroll
    for (uint32_t u = 0; u < kOpenRelayBatch; ++u) {
      const uint32_t k = k0 + lane + 32 * u;
      if (k < words) v.slots[(from + k / kOpenObjectWords) * kOpenSlotWords + k % kOpenObjectWords] = value[u];
    }
  }
  for (uint32_t k = from + lane; k < to; k += 32) v.ends[k] = load_relaxed_sys(v.host_ends + k);
}

__device__ void open_relay(const OpenView &v) {
  const uint32_t lane = threadIdx.x % 32;
  uint32_t relayed = 0;
  for (;;) {
    uint32_t n = 0, closed = 0;
    if (lane == 0) {
      n = host_published(v.host);
      // Closed is read after the count and the count again after it: the host publishes
      // every object before it closes, so a closed launch's second count is its last.
      if (n == relayed && (closed = load_acquire_sys(&v.host->closed)) != 0) n = host_published(v.host);
    }
    __syncwarp();
    n = __shfl_sync(0xffffffffu, n, 0);
    closed = __shfl_sync(0xffffffffu, closed, 0);
    if (n > relayed) {
      open_relay_copy(v, relayed, n, lane);
      __threadfence();
      __syncwarp();
      if (lane == 0) store_release_gpu(v.mirror, v.tag << 32 | n);
      relayed = n;
    } else if (closed) {
      if (lane == 0) store_release_gpu(v.mirror, v.tag << 32 | kOpenEnded | relayed);
      return;
    } else {
      __nanosleep(256);
    }
  }
}

// Lane 0 of a block's first worker warp: waits until object j has been relayed (true) or
// the launch has ended without it (false). `relayed` is what it knows of the count.
__device__ bool open_find(const OpenView &v, uint32_t j, uint32_t &relayed) {
  while (j >= relayed) {
    const uint64_t m = load_acquire_gpu(v.mirror);
    if ((m >> 32) == v.tag) {
      relayed = uint32_t(m) & uint32_t(kOpenEnded - 1);
      if (j < relayed) break;
      if (m & kOpenEnded) return false;
    }
    __nanosleep(128);
  }
  return true;
}

// The first worker warp: the object, from `j` on, whose tiles hold tile t (its end tile is
// past t); -1 when the launch ends first. 32 objects' ends are compared at a time.
__device__ int open_locate(const OpenView &v, uint32_t t, int j, uint32_t &relayed) {
  const uint32_t lane = threadIdx.x;
  for (;;) {
    int found = 0;
    if (lane == 0) found = open_find(v, uint32_t(j), relayed);
    if (!__shfl_sync(0xffffffffu, found, 0)) return -1;
    const uint32_t known = __shfl_sync(0xffffffffu, relayed, 0);
    const uint32_t k = uint32_t(j) + lane;
    const unsigned hit = __ballot_sync(0xffffffffu, k < known && __ldcg(v.ends + k) > t);
    if (hit) return j + __ffs(int(hit)) - 1;
    j = int(min(known, uint32_t(j) + 32));
  }
}

template <int W, bool ToPacked>
__device__ __forceinline__ void open_tile(const FusedDev &o, uint32_t lo, uint32_t hi) {
  using T = typename WordOf<W>::type;
  T value[kOpenUnroll];
  int64_t off[kOpenUnroll];
#pragma unroll
  for (uint32_t u = 0; u < kOpenUnroll; ++u) {  // every load before any store
    const uint32_t i = lo + threadIdx.x + u * kThreads;
    if (i < hi) {
      off[u] = word_offset<W>(o, i);
      value[u] = ToPacked ? *reinterpret_cast<const T *>(o.src + off[u]) : reinterpret_cast<const T *>(o.src)[i];
    }
  }
#pragma unroll
  for (uint32_t u = 0; u < kOpenUnroll; ++u) {
    const uint32_t i = lo + threadIdx.x + u * kThreads;
    if (i < hi) {
      if (ToPacked)
        reinterpret_cast<T *>(o.dst)[i] = value[u];
      else
        *reinterpret_cast<T *>(o.dst + off[u]) = value[u];
    }
  }
}

template <bool ToPacked>
__device__ void open_worker(const OpenView &v) {
  __shared__ uint64_t words[kOpenObjectWords];
  __shared__ int current;
  const FusedDev &o = *reinterpret_cast<const FusedDev *>(words);
  uint32_t relayed = 0;   // lane 0 of warp 0
  int j = 0, loaded = -1;  // warp 0
  for (uint32_t t = blockIdx.x;; t += gridDim.x) {
    if (threadIdx.x < 32) {
      j = open_locate(v, t, j, relayed);
      if (j >= 0 && j != loaded) {
        if (threadIdx.x < kOpenObjectWords) words[threadIdx.x] = __ldcg(v.slots + uint32_t(j) * kOpenSlotWords + threadIdx.x);
        loaded = j;
      }
      if (threadIdx.x == 0) current = j;
    }
    workers_sync();
    if (current < 0) return;
    const uint32_t lo = (t - o.first_block) * kOpenTileWords;
    const uint32_t hi = min(lo + kOpenTileWords, o.nwords);
    switch (o.word) {
      case 16: open_tile<16, ToPacked>(o, lo, hi); break;
      case 8: open_tile<8, ToPacked>(o, lo, hi); break;
      case 4: open_tile<4, ToPacked>(o, lo, hi); break;
      case 2: open_tile<2, ToPacked>(o, lo, hi); break;
      default: open_tile<1, ToPacked>(o, lo, hi); break;
    }
    workers_sync();  // before warp 0 moves on to the next tile's object
  }
}

// kThreads worker threads and one warp that may become the relay.
template <bool ToPacked>
__global__ void __launch_bounds__(kThreads + 32) open_moves(const OpenArgs a) {
  const OpenView v = open_view(a);
  if (threadIdx.x < kThreads) return open_worker<ToPacked>(v);
  unsigned long long previous = 0;
  if (threadIdx.x == kThreads) previous = atomicMax(v.elected, (unsigned long long)v.epoch);
  if (__shfl_sync(0xffffffffu, previous, 0) < v.epoch) open_relay(v);
}

// Typed-to-typed pairs: both sides walk the same word index through their own strides.
struct SideDev {
  uint8_t *base;
  int64_t start;
  uint32_t words_per_block;
  FastDiv per_block;
  int ndims;
  FastDiv dims[kMaxFusedDims];
  int64_t strides[kMaxFusedDims];
};
struct PairDev {
  SideDev from, to;
  uint32_t word, nwords, first_block;
};

template <int W>
__device__ __forceinline__ void pair_object(const PairDev &p, uint32_t i, uint32_t step) {
  using T = typename WordOf<W>::type;
  for (; i < p.nwords; i += step)
    *reinterpret_cast<T *>(p.to.base + word_offset<W>(p.to, i)) =
        *reinterpret_cast<const T *>(p.from.base + word_offset<W>(p.from, i));
}

// This thread block's part of pair p, whose thread blocks end before block `end`.
__device__ __forceinline__ void pair_part(const PairDev &p, uint32_t end) {
  const uint32_t nblocks = end - p.first_block;
  const uint32_t i = (blockIdx.x - p.first_block) * blockDim.x + threadIdx.x, step = nblocks * blockDim.x;
  switch (p.word) {
    case 16: return pair_object<16>(p, i, step);
    case 8: return pair_object<8>(p, i, step);
    case 4: return pair_object<4>(p, i, step);
    case 2: return pair_object<2>(p, i, step);
    default: return pair_object<1>(p, i, step);
  }
}

template <int N>
__global__ void __launch_bounds__(kThreads) fused_pairs(const __grid_constant__ Batch<PairDev, N> b) {
  int j = 0;
  while (j + 1 < b.n && blockIdx.x >= b.items[j + 1].first_block) ++j;
  pair_part(b.items[j], j + 1 < b.n ? b.items[j + 1].first_block : gridDim.x);
}

// The same moves, their descriptions kept in device memory (prepare_fused_pairs): each thread
// block finds its pair and copies its description into shared memory, where the stores of
// the move cannot alias it (read from global memory, it would be read again after each).
__global__ void __launch_bounds__(kThreads) fused_pairs_at(const PairDev *items, int n) {
  __shared__ PairDev p;
  const uint32_t end = find_own(items, n, p);
  pair_part(p, end);
}

// Descriptions of fused launches kept in device memory. A launch's parameter is copied at
// every launch: the 26 objects of a halo exchange (in the 48-object batch, 6 KB) took 13 us
// to launch on an H100 with two ranks under MPS (2026-11-25, an instrumented tempi_halo),
// a quarter of the exchange's own time. So a batch of more than kParameterItems goes to the
// kernel as a pointer to a table. Each thread keeps, for each stream it launches on (TEMPI's
// own: they live as long as the thread), the last kTablesPerStream tables it placed: a batch
// that repeats byte for byte (the same exchange again, with the same buffers and staging)
// launches from its table with no transfer; another is copied into the least recently used
// table, on that stream, so after every launch that read the table before. The copy goes from
// a pinned shadow of the table: from pageable memory the runtime may wait for the stream
// first. The tables go with their thread.
constexpr int kParameterItems = 4;
constexpr int kTablesPerStream = 8;
constexpr size_t kTableBytes = std::max(sizeof(FusedDev) * kMaxFusedObjects, sizeof(PairDev) * kMaxFusedPairs);

std::atomic<uint64_t> g_tables_placed{0}, g_tables_reused{0};

struct Table {
  cudaStream_t stream = nullptr;
  int device = -1;
  uint64_t last_use = 0;
  std::vector<unsigned char> bytes;  // what the device copy holds
  void *copy = nullptr;              // kTableBytes of device memory
  void *shadow = nullptr;            // kTableBytes of pinned host memory, the copy's source
  cudaEvent_t copied = nullptr;      // after the last copy from the shadow
};

// A thread's tables, freed when it ends (cudaFree waits for the launches that read them).
struct Tables {
  std::vector<Table> all;
  uint64_t clock = 0;
  Tables() = default;
  Tables(const Tables &) = delete;
  Tables &operator=(const Tables &) = delete;
  ~Tables() {
    for (Table &t : all) {
      const int previous = current_device();
      if (t.device != previous) cudaSetDevice(t.device);
      cudaFree(t.copy);
      cudaFreeHost(t.shadow);
      cudaEventDestroy(t.copied);
      if (t.device != previous) cudaSetDevice(previous);
    }
    cudaGetLastError();  // at process exit the runtime may be gone: nothing to report
  }
};

// A new table for `stream` on `device` (the current one), or Unsupported.
Status add_table(Tables &t, cudaStream_t stream, int device) {
  Table n{stream, device, 0, {}, nullptr, nullptr, nullptr};
  if (cudaMalloc(&n.copy, kTableBytes) == cudaSuccess && cudaMallocHost(&n.shadow, kTableBytes) == cudaSuccess &&
      cudaEventCreateWithFlags(&n.copied, cudaEventDisableTiming) == cudaSuccess) {
    t.all.push_back(std::move(n));
    return Status::Ok;
  }
  cudaGetLastError();
  if (n.copy) cudaFree(n.copy);
  if (n.shadow) cudaFreeHost(n.shadow);
  return Status::Unsupported;
}

// A device copy of the `bytes` bytes at `host` (at most kTableBytes), in place for work
// issued on `stream` after this call. Unsupported where no memory could be had.
Status place_table(const void *host, size_t bytes, cudaStream_t stream, const void *&out) {
  thread_local Tables t;
  std::vector<Table> &tables = t.all;
  uint64_t &clock = t.clock;
  const int device = current_device();
  Table *reuse = nullptr;
  int on_stream = 0;
  for (Table &t : tables) {
    if (t.stream != stream || t.device != device) continue;
    ++on_stream;
    if (t.bytes.size() == bytes && std::memcmp(t.bytes.data(), host, bytes) == 0) {
      t.last_use = ++clock;
      out = t.copy;
      g_tables_reused.fetch_add(1, std::memory_order_relaxed);
      return Status::Ok;
    }
    if (!reuse || t.last_use < reuse->last_use) reuse = &t;
  }
  if (on_stream < kTablesPerStream) {
    if (add_table(t, stream, device) == Status::Ok) reuse = &tables.back();
    else if (!reuse) return Status::Unsupported;
  }
  // The shadow is rewritten once its last copy is done: kTablesPerStream placements ago, so
  // almost always at once.
  TEMPI_CUDA(cudaEventSynchronize(reuse->copied));
  std::memcpy(reuse->shadow, host, bytes);
  TEMPI_CUDA(cudaMemcpyAsync(reuse->copy, reuse->shadow, bytes, cudaMemcpyHostToDevice, stream));
  TEMPI_CUDA(cudaEventRecord(reuse->copied, stream));
  const unsigned char *from = static_cast<const unsigned char *>(host);
  reuse->bytes.assign(from, from + bytes);
  reuse->last_use = ++clock;
  out = reuse->copy;
  g_tables_placed.fetch_add(1, std::memory_order_relaxed);
  return Status::Ok;
}

}  // namespace

FusedTableCounts fused_table_counts() {
  return {g_tables_placed.load(std::memory_order_relaxed), g_tables_reused.load(std::memory_order_relaxed)};
}

namespace {

// Thread blocks for one object of a fused launch: about two words per thread, capped
// so that one large object does not hold the others back.
uint32_t fused_blocks(uint32_t nwords) {
  constexpr uint32_t kWordsPerBlock = 2 * kThreads, kMaxBlocks = 1024;
  const uint32_t b = (nwords + kWordsPerBlock - 1) / kWordsPerBlock;
  return b < 1 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b);
}

int grid_for(int64_t threads_needed) {
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

bool fits_32(const StridedArgs &a, int word) {
  const uint64_t limit = uint64_t(1) << 31;
  if (uint64_t(a.last / word) >= limit || uint64_t(a.block / word) >= limit) return false;
  uint64_t rows = 1;
  for (int d = 0; d < a.ndims; ++d) {
    rows *= uint64_t(a.counts[d]);
    if (rows >= limit) return false;
  }
  return true;
}

template <int W, bool ToPacked>
void launch_strided_w(const StridedArgs &a, const uint8_t *src, uint8_t *dst, cudaStream_t stream) {
  const int64_t nwords = (a.last - a.first) / W;
  const int grid = grid_for(nwords);
  if (fits_32(a, W)) {
    Strided32 s;
    s.start = a.start;
    s.ndims = a.ndims;
    s.words_per_block = uint32_t(a.block / W);
    s.per_block = FastDiv(s.words_per_block);
    for (int d = 0; d < a.ndims; ++d) {
      s.dims[d] = FastDiv(uint32_t(a.counts[d]));
      s.strides[d] = a.strides[d];
    }
    s.first_word = uint32_t(a.first / W);
    s.nwords = uint32_t(nwords);
    strided32<W, ToPacked><<<grid, kThreads, 0, stream>>>(s, src, dst);
  } else {
    strided64<W, ToPacked><<<grid, kThreads, 0, stream>>>(a, src, dst);
  }
}

template <bool ToPacked>
void dispatch_strided(const StridedArgs &a, int word, const uint8_t *src, uint8_t *dst, cudaStream_t s) {
  switch (word) {
    case 16: return launch_strided_w<16, ToPacked>(a, src, dst, s);
    case 8: return launch_strided_w<8, ToPacked>(a, src, dst, s);
    case 4: return launch_strided_w<4, ToPacked>(a, src, dst, s);
    case 2: return launch_strided_w<2, ToPacked>(a, src, dst, s);
    default: return launch_strided_w<1, ToPacked>(a, src, dst, s);
  }
}

}  // namespace

Status launch_strided(const StridedArgs &a, int word, const void *typed, void *packed, bool to_packed,
                      cudaStream_t stream) {
  if (a.last <= a.first) return Status::Ok;
  if (to_packed)
    dispatch_strided<true>(a, word, static_cast<const uint8_t *>(typed), static_cast<uint8_t *>(packed), stream);
  else
    dispatch_strided<false>(a, word, static_cast<const uint8_t *>(packed), static_cast<uint8_t *>(const_cast<void *>(typed)),
                            stream);
  TEMPI_CUDA(cudaGetLastError());
  return Status::Ok;
}

namespace {
void describe(const FusedObject &o, bool to_packed, FusedDev &d) {
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

int open_workers() {
  static const int workers = [] {
    int dev = 0, sms = 1;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    return 2 * sms;  // each tile is a few dependent memory round trips: two blocks per SM hide them
  }();
  return workers;
}
}  // namespace

uint32_t describe_open(const FusedObject &o, bool to_packed, uint32_t first_tile, void *slot) {
  FusedDev d{};
  describe(o, to_packed, d);
  d.first_block = first_tile;  // an open launch's objects are found by their tiles
  std::memcpy(slot, &d, sizeof d);
  return first_tile + (d.nwords + kOpenTileWords - 1) / kOpenTileWords;
}

Status launch_open(const OpenArgs &a, bool to_packed, cudaStream_t stream) {
  const int grid = open_workers();
  if (to_packed)
    open_moves<true><<<grid, kThreads + 32, 0, stream>>>(a);
  else
    open_moves<false><<<grid, kThreads + 32, 0, stream>>>(a);
  TEMPI_CUDA(cudaGetLastError());
  return Status::Ok;
}

bool fusable(int ndims, int64_t bytes, int word) {
  return ndims <= kMaxFusedDims && bytes > 0 && bytes / word < (int64_t(1) << 31);
}

Status launch_fused(const FusedObject *objects, int n, bool to_packed, cudaStream_t stream) {
  if (n <= 0) return Status::Ok;
  FusedDev d[kMaxFusedObjects];
  std::memset(static_cast<void *>(d), 0, sizeof d);  // padding too: a table is recognized by its bytes
  uint32_t blocks = 0;
  for (int k = 0; k < n; ++k) {
    describe(objects[k], to_packed, d[k]);
    d[k].first_block = blocks;
    blocks += fused_blocks(d[k].nwords);
  }
  const void *table = nullptr;
  if (n > kParameterItems && place_table(d, sizeof(FusedDev) * size_t(n), stream, table) == Status::Ok) {
    const FusedDev *items = static_cast<const FusedDev *>(table);
    if (to_packed)
      fused_at<true><<<blocks, kThreads, 0, stream>>>(items, n);
    else
      fused_at<false><<<blocks, kThreads, 0, stream>>>(items, n);
    TEMPI_CUDA(cudaGetLastError());
    return Status::Ok;
  }
  launch_smallest<4, 16, kMaxFusedObjects>(d, n, [&](const auto &b) {
    constexpr int N = std::decay_t<decltype(b)>::capacity;
    if (to_packed)
      fused<true, N><<<blocks, kThreads, 0, stream>>>(b);
    else
      fused<false, N><<<blocks, kThreads, 0, stream>>>(b);
  });
  TEMPI_CUDA(cudaGetLastError());
  return Status::Ok;
}

namespace {
void describe_side(const FusedObject &o, const void *base, SideDev &s) {
  s.base = static_cast<uint8_t *>(const_cast<void *>(base));
  s.start = o.start;
  s.words_per_block = uint32_t(o.block / o.word);
  s.per_block = FastDiv(s.words_per_block);
  s.ndims = o.ndims;
  for (int i = 0; i < o.ndims; ++i) {
    s.dims[i] = FastDiv(uint32_t(o.counts[i] < (int64_t(1) << 31) ? o.counts[i] : (int64_t(1) << 31)));
    s.strides[i] = o.strides[i];
  }
}
}  // namespace

// One warp per run: runs are at most kPairedRunBytes, one round of move_piece
// (blocklist_device.cuh), so a lane issues all its loads before its first store and
// every access is 16 bytes wide, realigned in registers, whatever the alignment of the
// run's two addresses (a triangle's rows start 8 bytes apart mod 16). A loop of
// one-word copies waited a memory round trip per word, since a store may alias the
// next load: 0.55 of the peer copy rate on triangles (docs/benchmarks.md).
static_assert(kPairedRunBytes <= kPieceBytes, "a paired run is one piece of a warp");

__global__ void __launch_bounds__(kThreads)
    paired_runs_kernel(const PairedRun *runs, int64_t n, const uint8_t *from, uint8_t *to) {
  const int lane = int(threadIdx.x % 32);
  const int64_t warps = int64_t(gridDim.x) * blockDim.x / 32;
  for (int64_t w = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32; w < n; w += warps) {
    const PairedRun r = runs[w];
    move_piece(reinterpret_cast<uintptr_t>(to + r.to), reinterpret_cast<uintptr_t>(from + r.from), r.length, lane);
  }
}

Status launch_paired_runs(const PairedRun *runs, int64_t n, const void *from, void *to, cudaStream_t stream) {
  if (n <= 0) return Status::Ok;
  paired_runs_kernel<<<grid_for(n * 32), kThreads, 0, stream>>>(runs, n, static_cast<const uint8_t *>(from),
                                                                  static_cast<uint8_t *>(to));
  TEMPI_CUDA(cudaGetLastError());
  return Status::Ok;
}

namespace {
// The descriptions of n pairs for a fused launch; returns its thread blocks.
uint32_t describe_pairs(const FusedPair *pairs, int n, PairDev *d) {
  uint32_t blocks = 0;
  for (int k = 0; k < n; ++k) {
    describe_side(pairs[k].from, pairs[k].from.typed, d[k].from);
    describe_side(pairs[k].to, pairs[k].to.typed, d[k].to);
    d[k].word = uint32_t(pairs[k].from.word);
    d[k].nwords = uint32_t(pairs[k].from.bytes / pairs[k].from.word);
    d[k].first_block = blocks;
    blocks += fused_blocks(d[k].nwords);
  }
  return blocks;
}
}  // namespace

size_t fused_pairs_bytes(int n) { return sizeof(PairDev) * size_t(n < 0 ? 0 : n); }

Status prepare_fused_pairs(const FusedPair *pairs, int n, void *device_items, uint32_t &blocks, cudaStream_t stream) {
  std::vector<PairDev> d(size_t(n < 0 ? 0 : n));
  blocks = describe_pairs(pairs, n, d.data());
  // On TEMPI's stream, not the legacy default one (the application's work there is not this
  // copy's business; the zero-copy thread prepares too).
  TEMPI_CUDA(cudaMemcpyAsync(device_items, d.data(), fused_pairs_bytes(n), cudaMemcpyHostToDevice, stream));
  TEMPI_CUDA(cudaStreamSynchronize(stream));
  return Status::Ok;
}

Status launch_prepared_pairs(const void *device_items, int n, uint32_t blocks, cudaStream_t stream) {
  if (n <= 0) return Status::Ok;
  fused_pairs_at<<<blocks, kThreads, 0, stream>>>(static_cast<const PairDev *>(device_items), n);
  TEMPI_CUDA(cudaGetLastError());
  return Status::Ok;
}

Status launch_fused_pairs(const FusedPair *pairs, int n, cudaStream_t stream) {
  if (n <= 0) return Status::Ok;
  PairDev d[kMaxFusedPairs];
  std::memset(static_cast<void *>(d), 0, sizeof d);  // padding too: a table is recognized by its bytes
  const uint32_t blocks = describe_pairs(pairs, n, d);
  const void *table = nullptr;
  if (n > kParameterItems && place_table(d, sizeof(PairDev) * size_t(n), stream, table) == Status::Ok) {
    fused_pairs_at<<<blocks, kThreads, 0, stream>>>(static_cast<const PairDev *>(table), n);
    TEMPI_CUDA(cudaGetLastError());
    return Status::Ok;
  }
  launch_smallest<2, 8, kMaxFusedPairs>(d, n, [&](const auto &b) {
    fused_pairs<std::decay_t<decltype(b)>::capacity><<<blocks, kThreads, 0, stream>>>(b);
  });
  TEMPI_CUDA(cudaGetLastError());
  return Status::Ok;
}

}  // namespace tempi
