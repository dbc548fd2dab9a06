// The open launch's kernel (kernels.hpp, launch_open; open_launch.cpp drives it): one
// launch that moves the objects the host publishes while it runs.
#include "kernel_common.cuh"

namespace tempi {

namespace {

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

}  // namespace tempi
