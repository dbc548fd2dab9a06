#include <cuda_runtime.h>

#include <cstring>

#include "check.hpp"
#include "kernels.hpp"

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
struct FusedBatch {
  int n;
  FusedDev objects[kMaxFusedObjects];
};

template <int W>
__device__ __forceinline__ int64_t fused_offset(const FusedDev &o, uint32_t i) {
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
    const int64_t off = fused_offset<W>(o, i);
    if (ToPacked)
      reinterpret_cast<T *>(o.dst)[i] = *reinterpret_cast<const T *>(o.src + off);
    else
      *reinterpret_cast<T *>(o.dst + off) = reinterpret_cast<const T *>(o.src)[i];
  }
}

template <bool ToPacked>
__global__ void __launch_bounds__(kThreads) fused(const __grid_constant__ FusedBatch b) {
  int j = 0;
  while (j + 1 < b.n && blockIdx.x >= b.objects[j + 1].first_block) ++j;
  const FusedDev &o = b.objects[j];
  const uint32_t nblocks = (j + 1 < b.n ? b.objects[j + 1].first_block : gridDim.x) - o.first_block;
  const uint32_t i = (blockIdx.x - o.first_block) * blockDim.x + threadIdx.x, step = nblocks * blockDim.x;
  switch (o.word) {
    case 16: return fused_object<16, ToPacked>(o, i, step);
    case 8: return fused_object<8, ToPacked>(o, i, step);
    case 4: return fused_object<4, ToPacked>(o, i, step);
    case 2: return fused_object<2, ToPacked>(o, i, step);
    default: return fused_object<1, ToPacked>(o, i, step);
  }
}

// An open launch (kernels.hpp): the host describes objects one at a time in pinned memory
// while the kernel runs. Block 0 relays the descriptions into device memory (one warp
// polls the host, so the other blocks do not each cross PCIe). The other blocks share the
// objects' tiles (kOpenTileWords words each, numbered across objects in publication
// order): worker w takes tiles w, w + workers, ..., so the tiles of one object, and many
// small objects, are moved by many blocks at once. A worker reads the host itself when the
// relay is behind, so that neither progress nor the end depends on block 0 running.
constexpr uint32_t kOpenSlotWords = kOpenSlotBytes / 8;
constexpr uint32_t kOpenObjectWords = (sizeof(FusedDev) + 7) / 8;  // what is relayed and read of a slot
constexpr uint32_t kOpenUnroll = kOpenTileWords / kThreads;        // words per thread of a tile
static_assert(sizeof(FusedDev) <= kOpenSlotBytes, "an object's description fits its slot");
static_assert(alignof(FusedDev) <= 8, "a description is read as 8-byte words");
static_assert(kOpenObjectWords <= 32, "one warp reads a description");
static_assert(kOpenTileWords % kThreads == 0, "a tile is whole rounds of a block");
constexpr uint64_t kOpenEnded = uint64_t(1) << 31;  // in the device mirror: no more objects come

__device__ __forceinline__ uint32_t load_acquire_sys(const uint32_t *p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ uint64_t load_relaxed_sys(const uint64_t *p) {
  uint64_t v;
  asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ uint32_t load_relaxed_sys(const uint32_t *p) {
  uint32_t v;
  asm volatile("ld.relaxed.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
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

// Host and device areas have one layout (kernels.hpp): header, slots, tile ends.
struct OpenView {
  const OpenHost *host;
  const uint64_t *host_slots;
  const uint32_t *host_ends;
  uint64_t *mirror;  // epoch << 32 | kOpenEnded if so | objects relayed
  uint64_t *slots;
  uint32_t *ends;
  uint64_t epoch;
};

__device__ __forceinline__ OpenView open_view(const OpenArgs &a) {
  const uint8_t *h = reinterpret_cast<const uint8_t *>(a.host);
  OpenView v;
  v.host = a.host;
  v.host_slots = reinterpret_cast<const uint64_t *>(h + kOpenHeaderBytes);
  v.host_ends = reinterpret_cast<const uint32_t *>(h + kOpenEndsOffset);
  v.mirror = reinterpret_cast<uint64_t *>(a.device);
  v.slots = reinterpret_cast<uint64_t *>(a.device + kOpenHeaderBytes);
  v.ends = reinterpret_cast<uint32_t *>(a.device + kOpenEndsOffset);
  v.epoch = a.epoch;
  return v;
}

// The host's count of objects, at most the capacity (a count past it would be a bug).
__device__ __forceinline__ uint32_t host_published(const OpenHost *h) {
  const uint32_t n = load_acquire_sys(&h->published);
  return n < kOpenCapacity ? n : kOpenCapacity;
}

__device__ void open_relay(const OpenView &v) {
  if (threadIdx.x >= 32) return;
  const uint32_t lane = threadIdx.x;
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
      for (uint32_t k = lane; k < (n - relayed) * kOpenObjectWords; k += 32) {
        const uint32_t slot = relayed + k / kOpenObjectWords, word = k % kOpenObjectWords;
        v.slots[slot * kOpenSlotWords + word] = load_relaxed_sys(v.host_slots + slot * kOpenSlotWords + word);
      }
      for (uint32_t k = relayed + lane; k < n; k += 32) v.ends[k] = load_relaxed_sys(v.host_ends + k);
      __threadfence();
      __syncwarp();
      if (lane == 0) store_release_gpu(v.mirror, v.epoch << 32 | n);
      relayed = n;
    } else if (closed) {
      if (lane == 0) store_release_gpu(v.mirror, v.epoch << 32 | kOpenEnded | relayed);
      return;
    } else {
      __nanosleep(256);
    }
  }
}

// Lane 0 of a worker: waits until object j exists. 0: relayed to device memory, 1: only on
// the host yet, 2: the launch ended without it. `relayed` and `published` are what lane 0
// knows of the two counts.
__device__ int open_find(const OpenView &v, uint32_t j, uint32_t &relayed, uint32_t &published) {
  for (uint32_t spin = 1;; ++spin) {
    if (j < relayed) return 0;
    if (j < published) return 1;
    const uint64_t m = load_acquire_gpu(v.mirror);
    if ((m >> 32) == v.epoch) {
      relayed = uint32_t(m) & uint32_t(kOpenEnded - 1);
      if (j < relayed) return 0;
      if (m & kOpenEnded) return 2;
    }
    if ((spin & 63) == 0) {  // block 0 may not run yet: ask the host itself
      published = host_published(v.host);
      if (j < published) return 1;
      if (load_acquire_sys(&v.host->closed)) {
        published = host_published(v.host);
        return j < published ? 1 : 2;
      }
    }
    __nanosleep(128);
  }
}

// Warp 0 of a worker: the object, from `j` on, whose tiles hold tile t (its end tile is
// past t); -1 when the launch ends first. 32 objects' ends are compared at a time.
__device__ int open_locate(const OpenView &v, uint32_t t, int j, uint32_t &relayed, uint32_t &published) {
  const uint32_t lane = threadIdx.x;
  for (;;) {
    int where = 0;
    if (lane == 0) where = open_find(v, uint32_t(j), relayed, published);
    where = __shfl_sync(0xffffffffu, where, 0);
    if (where == 2) return -1;
    const uint32_t on_device = __shfl_sync(0xffffffffu, relayed, 0);
    const uint32_t known = max(on_device, __shfl_sync(0xffffffffu, published, 0));
    const uint32_t k = uint32_t(j) + lane;
    bool past = false;
    if (k < known) past = (k < on_device ? __ldcg(v.ends + k) : load_relaxed_sys(v.host_ends + k)) > t;
    const unsigned hit = __ballot_sync(0xffffffffu, past);
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
      off[u] = fused_offset<W>(o, i);
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
  const uint32_t workers = gridDim.x - 1;
  uint32_t relayed = 0, published = 0;  // lane 0 of warp 0
  int j = 0, loaded = -1;               // warp 0
  for (uint32_t t = blockIdx.x - 1;; t += workers) {
    if (threadIdx.x < 32) {
      j = open_locate(v, t, j, relayed, published);
      if (j >= 0 && j != loaded) {
        const bool on_device = uint32_t(j) < __shfl_sync(0xffffffffu, relayed, 0);
        if (threadIdx.x < kOpenObjectWords) {
          const uint32_t w = uint32_t(j) * kOpenSlotWords + threadIdx.x;
          words[threadIdx.x] = on_device ? __ldcg(v.slots + w) : load_relaxed_sys(v.host_slots + w);
        }
        loaded = j;
      }
      if (threadIdx.x == 0) current = j;
    }
    __syncthreads();
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
    __syncthreads();  // before warp 0 moves on to the next tile's object
  }
}

template <bool ToPacked>
__global__ void __launch_bounds__(kThreads) open_moves(const OpenArgs a) {
  const OpenView v = open_view(a);
  if (blockIdx.x == 0)
    open_relay(v);
  else
    open_worker<ToPacked>(v);
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
struct PairBatch {
  int n;
  PairDev pairs[kMaxFusedPairs];
};

template <int W>
__device__ __forceinline__ int64_t offset_of(const SideDev &s, uint32_t i) {
  uint32_t row = s.per_block.div(i);
  int64_t off = s.start + int64_t(i - row * s.words_per_block) * W;
  for (int d = 0; d < s.ndims; ++d) {
    const uint32_t next = s.dims[d].div(row);
    off += int64_t(row - next * s.dims[d].d) * s.strides[d];
    row = next;
  }
  return off;
}

template <int W>
__device__ __forceinline__ void pair_object(const PairDev &p, uint32_t i, uint32_t step) {
  using T = typename WordOf<W>::type;
  for (; i < p.nwords; i += step)
    *reinterpret_cast<T *>(p.to.base + offset_of<W>(p.to, i)) =
        *reinterpret_cast<const T *>(p.from.base + offset_of<W>(p.from, i));
}

__global__ void __launch_bounds__(kThreads) fused_pairs(const __grid_constant__ PairBatch b) {
  int j = 0;
  while (j + 1 < b.n && blockIdx.x >= b.pairs[j + 1].first_block) ++j;
  const PairDev &p = b.pairs[j];
  const uint32_t nblocks = (j + 1 < b.n ? b.pairs[j + 1].first_block : gridDim.x) - p.first_block;
  const uint32_t i = (blockIdx.x - p.first_block) * blockDim.x + threadIdx.x, step = nblocks * blockDim.x;
  switch (p.word) {
    case 16: return pair_object<16>(p, i, step);
    case 8: return pair_object<8>(p, i, step);
    case 4: return pair_object<4>(p, i, step);
    case 2: return pair_object<2>(p, i, step);
    default: return pair_object<1>(p, i, step);
  }
}

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
  const int grid = 1 + open_workers();
  if (to_packed)
    open_moves<true><<<grid, kThreads, 0, stream>>>(a);
  else
    open_moves<false><<<grid, kThreads, 0, stream>>>(a);
  TEMPI_CUDA(cudaGetLastError());
  return Status::Ok;
}

bool fusable(int ndims, int64_t bytes, int word) {
  return ndims <= kMaxFusedDims && bytes > 0 && bytes / word < (int64_t(1) << 31);
}

Status launch_fused(const FusedObject *objects, int n, bool to_packed, cudaStream_t stream) {
  FusedBatch b;
  b.n = 0;
  uint32_t blocks = 0;
  for (int k = 0; k < n; ++k) {
    FusedDev &d = b.objects[b.n];
    describe(objects[k], to_packed, d);
    d.first_block = blocks;
    blocks += fused_blocks(d.nwords);
    ++b.n;
  }
  if (b.n == 0) return Status::Ok;
  if (to_packed)
    fused<true><<<blocks, kThreads, 0, stream>>>(b);
  else
    fused<false><<<blocks, kThreads, 0, stream>>>(b);
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

Status launch_fused_pairs(const FusedPair *pairs, int n, cudaStream_t stream) {
  PairBatch b;
  b.n = 0;
  uint32_t blocks = 0;
  for (int k = 0; k < n; ++k) {
    const FusedPair &p = pairs[k];
    PairDev &d = b.pairs[b.n];
    describe_side(p.from, p.from.typed, d.from);
    describe_side(p.to, p.to.typed, d.to);
    d.word = uint32_t(p.from.word);
    d.nwords = uint32_t(p.from.bytes / p.from.word);
    d.first_block = blocks;
    blocks += fused_blocks(d.nwords);
    ++b.n;
  }
  if (b.n == 0) return Status::Ok;
  fused_pairs<<<blocks, kThreads, 0, stream>>>(b);
  TEMPI_CUDA(cudaGetLastError());
  return Status::Ok;
}

}  // namespace tempi
