// Pack and unpack of small patterns repeated many times: structs of mixed members, arrays
// and subarrays of them, short indexed types with a count (issue 11).
//
// The byte-balanced kernel (blocklist.cu) finds the block under every 16-byte window of
// the stream; when a pattern instance is a few short members, nearly every window spans
// two or three of them and goes byte by byte (a struct {int; double[3]; char; short[2]}
// moved at 5% of DRAM peak, 7x a memcpy of its bytes). Here one thread block takes a tile
// of whole instances and stages them through shared memory:
//  - pack: the typed span of each instance (the bytes from its first to its last typed
//    byte) is read as the aligned 16-byte chunks that hold it, coalesced, each chunk read
//    only at the bytes the pattern touches (a mask per span byte, so nothing outside the
//    type's bytes is read); then the tile's packed bytes are assembled from shared memory
//    through a per-byte map and written as aligned 4-byte words, coalesced;
//  - unpack: the same in reverse, and the typed chunks are written only at the touched
//    bytes (whole 16-byte stores where a chunk is all typed bytes), so the gaps between
//    members, which may belong to other data, are never written.
// Shared-memory reads of the map go four bytes at a time where the next three pattern
// bytes follow in the span (a flag in the map), which is most bytes of most members.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>

#include "blocklist.hpp"
#include "blocklist_device.cuh"
#include "check.hpp"

namespace tempi {

namespace {

constexpr int kThreads = 256;
// Packed bytes per tile (about), and the shared memory its staged spans may take: a tile
// of 8 KiB keeps 256 threads busy with 8 words each and 8 tiles resident per SM.
constexpr int kTileBytes = 8192;
constexpr int kTileData = 24 * 1024;
constexpr int kMaxTile = 1024;
constexpr uint16_t kRun4 = 0x8000;
constexpr int kBatch = 4;  // global loads a thread has in flight  // map flag: this byte and the next 3 are contiguous in the span

// What the kernel needs besides the table: the shape of a tile in shared memory.
struct Tile {
  uint64_t typed, packed;     // typed address of typed offset 0; packed address of instance inst_first
  int instances, slot;        // instances per tile; shared bytes per instance (a multiple of 16)
  int map_at, mask_at, chunk_at, off_at;  // offsets in shared memory of the map, mask, per-instance data
  int64_t tiles;
};

// Bits j of the result: whether span byte b0 + j (b0 >= -15) is a typed byte.
__device__ __forceinline__ unsigned span_bits(const uint32_t *mask, int span, int b0) {
  const int lead = b0 < 0 ? -b0 : 0, b = b0 + lead;
  if (b >= span) return 0;
  const int w = b >> 5;
  const uint64_t x = uint64_t(mask[w]) | (uint64_t(mask[w + 1]) << 32);
  return (unsigned(x >> (b & 31)) << lead) & 0xffffu;
}

// The aligned 16-byte chunk at `at`, reading only the bytes set in `m` (the others are 0).
__device__ __forceinline__ uint4 load_masked(uint64_t at, unsigned m) {
  if (m == 0xffffu) return __ldg(reinterpret_cast<const uint4 *>(at));
  uint32_t w[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const unsigned q = (m >> (4 * k)) & 0xfu;
    w[k] = 0;
    if (q == 0xfu) {
      w[k] = __ldg(reinterpret_cast<const uint32_t *>(at + 4 * k));
      continue;
    }
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (q >> j & 1u) w[k] |= uint32_t(__ldg(reinterpret_cast<const uint8_t *>(at + 4 * k + j))) << (8 * j);
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// Writes the bytes of `v` set in `m` to the aligned 16-byte chunk at `at`.
__device__ __forceinline__ void store_masked(uint64_t at, uint4 v, unsigned m) {
  if (m == 0xffffu) {
    *reinterpret_cast<uint4 *>(at) = v;
    return;
  }
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (((m >> (8 * h)) & 0xffu) == 0xffu) {
      *reinterpret_cast<uint2 *>(at + 8 * h) = make_uint2(w[2 * h], w[2 * h + 1]);
      continue;
    }
#pragma unroll
    for (int k = 2 * h; k < 2 * h + 2; ++k) {
      const unsigned q = (m >> (4 * k)) & 0xfu;
      if (q == 0xfu) {
        *reinterpret_cast<uint32_t *>(at + 4 * k) = w[k];
        continue;
      }
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (q >> j & 1u) *reinterpret_cast<uint8_t *>(at + 4 * k + j) = uint8_t(w[k] >> (8 * j));
    }
  }
}

// Four bytes of shared memory from any byte address: two aligned words, funnel-shifted.
__device__ __forceinline__ uint32_t shared_word(const char *data, int s) {
  const uint32_t *w = reinterpret_cast<const uint32_t *>(data + (s & ~3));
  return (s & 3) ? __funnelshift_r(w[0], w[1], 8 * (s & 3)) : w[0];
}

// Tile byte j (j = i * size + o) of the packed stream as instance i's staged span byte.
struct TileCursor {
  int i, o;
};

template <bool Wide, bool Pack>
__global__ void __launch_bounds__(kThreads) small_pattern(SmallPatternArgs a, Tile t) {
  extern __shared__ uint4 shared4[];
  char *shared = reinterpret_cast<char *>(shared4);
  uint16_t *map = reinterpret_cast<uint16_t *>(shared + t.map_at);
  uint32_t *mask = reinterpret_cast<uint32_t *>(shared + t.mask_at);
  uint64_t *chunk0 = reinterpret_cast<uint64_t *>(shared + t.chunk_at);  // aligned chunk under a span's start
  int *off = reinterpret_cast<int *>(shared + t.off_at);  // shared offset of a span's first byte
  const int size = a.table.size, span = a.table.span, chunks = t.slot / kWindow;
  for (int k = threadIdx.x; k < size; k += kThreads) map[k] = a.table.map[k];
  for (int k = threadIdx.x; k < a.table.mask_words; k += kThreads) mask[k] = a.table.mask[k];

  for (int64_t tile = blockIdx.x; tile < t.tiles; tile += gridDim.x) {
    const int64_t i0 = a.inst_first + tile * t.instances;
    const int n = int(min(int64_t(t.instances), a.inst_first + a.inst_count - i0));
    __syncthreads();  // the previous tile is done with shared memory (and the map is in)
    for (int i = threadIdx.x; i < n; i += kThreads) {
      int64_t inst = i0 + i, base = a.start;
      for (int d = 0; d < a.ndims; ++d) {
        const int64_t q = quot<Wide>(inst, a.counts[d]);
        base += (inst - q * a.counts[d]) * a.strides[d];
        inst = q;
      }
      const uint64_t at = t.typed + uint64_t(base + a.table.span_lo);
      chunk0[i] = at & ~uint64_t(kWindow - 1);
      off[i] = i * t.slot + int(at & (kWindow - 1));
    }
    __syncthreads();

    // The tile's packed bytes [0, n * size) lie at `out`: aligned 4-byte words, the two at
    // the ends in part.
    const uint64_t out = t.packed + uint64_t((i0 - a.inst_first) * size);
    const int lead = int(out & 3), bytes = n * size;
    const int words = (lead + bytes + 3) / 4;

    if (Pack) {
      // kBatch chunks a thread, all loads issued before the first store to shared memory
      for (int k0 = threadIdx.x; k0 < n * chunks; k0 += kBatch * kThreads) {
        unsigned m[kBatch];
        int to[kBatch];
        uint64_t from[kBatch];
        uint4 v[kBatch];
#pragma unroll
        for (int u = 0; u < kBatch; ++u) {
          const int k = k0 + u * kThreads, i = k / chunks, c = k - i * chunks;
          m[u] = k < n * chunks ? span_bits(mask, span, kWindow * c - (off[i] - i * t.slot)) : 0u;
          to[u] = i * t.slot + kWindow * c;
          from[u] = m[u] ? chunk0[i] + kWindow * c : 0;
        }
#pragma unroll
        for (int u = 0; u < kBatch; ++u)
          if (m[u]) v[u] = load_masked(from[u], m[u]);
#pragma unroll
        for (int u = 0; u < kBatch; ++u)
          if (m[u]) *reinterpret_cast<uint4 *>(shared + to[u]) = v[u];
      }
      __syncthreads();
      for (int k = threadIdx.x; k < words; k += kThreads) {
        const int j0 = 4 * k - lead;
        const int i = max(j0, 0) / size;
        int o = max(j0, 0) - i * size;
        uint32_t word;
        if (j0 >= 0 && j0 + 4 <= bytes && (map[o] & kRun4)) {
          word = shared_word(shared, off[i] + (map[o] & ~kRun4));
        } else {
          word = 0;
          int ii = i;
          for (int b = max(-j0, 0); b < 4 && j0 + b < bytes; ++b) {
            word |= uint32_t(uint8_t(shared[off[ii] + (map[o] & ~kRun4)])) << (8 * b);
            if (++o == size) o = 0, ++ii;
          }
        }
        const uint64_t at = out - lead + 4 * uint64_t(k);
        if (j0 >= 0 && j0 + 4 <= bytes) {
          *reinterpret_cast<uint32_t *>(at) = word;
        } else {
          for (int b = max(-j0, 0); b < 4 && j0 + b < bytes; ++b) *reinterpret_cast<uint8_t *>(at + b) = uint8_t(word >> (8 * b));
        }
      }
    } else {
      // kBatch words a thread, all loaded before the first store to shared memory
      for (int k0 = threadIdx.x; k0 < words; k0 += kBatch * kThreads) {
        uint32_t word[kBatch];
#pragma unroll
        for (int u = 0; u < kBatch; ++u) {
          const int k = k0 + u * kThreads, j0 = 4 * k - lead;
          const uint64_t at = out - lead + 4 * uint64_t(k);
          word[u] = 0;
          if (k >= words) continue;
          if (j0 >= 0 && j0 + 4 <= bytes) {
            word[u] = __ldg(reinterpret_cast<const uint32_t *>(at));
          } else {
            for (int b = max(-j0, 0); b < 4 && j0 + b < bytes; ++b)
              word[u] |= uint32_t(__ldg(reinterpret_cast<const uint8_t *>(at + b))) << (8 * b);
          }
        }
#pragma unroll
        for (int u = 0; u < kBatch; ++u) {
          const int k = k0 + u * kThreads, j0 = 4 * k - lead;
          if (k >= words) continue;
          const int i = max(j0, 0) / size;
          int o = max(j0, 0) - i * size;
          const int s = off[i] + (map[o] & ~kRun4);
          if (j0 >= 0 && j0 + 4 <= bytes && (map[o] & kRun4) && (s & 3) == 0) {
            *reinterpret_cast<uint32_t *>(shared + s) = word[u];
            continue;
          }
          int ii = i;
          for (int b = max(-j0, 0); b < 4 && j0 + b < bytes; ++b) {
            shared[off[ii] + (map[o] & ~kRun4)] = char(word[u] >> (8 * b));
            if (++o == size) o = 0, ++ii;
          }
        }
      }
      __syncthreads();
      for (int k = threadIdx.x; k < n * chunks; k += kThreads) {
        const int i = k / chunks, c = k - i * chunks;
        const unsigned m = span_bits(mask, span, kWindow * c - (off[i] - i * t.slot));
        if (m) store_masked(chunk0[i] + kWindow * c, *reinterpret_cast<const uint4 *>(shared + i * t.slot + kWindow * c), m);
      }
    }
  }
}

template <bool Wide, bool Pack>
void launch(const SmallPatternArgs &a, const Tile &t, size_t shared_bytes, unsigned grid, cudaStream_t stream) {
  small_pattern<Wide, Pack><<<grid, kThreads, shared_bytes, stream>>>(a, t);
}

int round16(int64_t x) { return int((x + kWindow - 1) / kWindow * kWindow); }

}  // namespace

bool small_pattern_plan(const Plan &plan) {
  if (plan.pattern_size <= 0 || plan.pattern_size > kMaxSmallPattern) return false;
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (const Run &r : plan.pattern) {
    if (r.length <= 0 || r.count <= 0) continue;
    const int64_t last = r.offset + (r.count - 1) * r.stride;
    lo = std::min({lo, r.offset, last});
    hi = std::max({hi, r.offset + r.length, last + r.length});
  }
  // Sparse patterns would stage mostly gaps: leave them to the byte-balanced kernel.
  return hi > lo && hi - lo <= kMaxSmallSpan && hi - lo <= 8 * plan.pattern_size;
}

SmallPatternImage small_pattern_image(const Plan &plan) {
  SmallPatternImage im;
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (const Run &r : plan.pattern) {
    if (r.length <= 0 || r.count <= 0) continue;
    const int64_t last = r.offset + (r.count - 1) * r.stride;
    lo = std::min({lo, r.offset, last});
    hi = std::max({hi, r.offset + r.length, last + r.length});
  }
  im.span_lo = lo;
  im.span = int(hi - lo);
  im.mask.assign(size_t((im.span + 31) / 32 + 1), 0u);  // one spare word: span_bits reads two
  for (const Run &r : plan.pattern)
    for (int64_t k = 0; k < r.count; ++k)
      for (int64_t b = 0; b < r.length; ++b) {
        const int64_t s = r.offset + k * r.stride + b - lo;
        im.map.push_back(uint16_t(s));
        im.mask[size_t(s / 32)] |= 1u << (s % 32);
      }
  for (size_t o = 0; o + 3 < im.map.size(); ++o)
    if (im.map[o + 1] == im.map[o] + 1 && im.map[o + 2] == im.map[o] + 2 && im.map[o + 3] == im.map[o] + 3)
      im.map[o] |= kRun4;
  return im;
}

size_t SmallPatternImage::bytes() const { return map.size() * sizeof(uint16_t) + mask.size() * sizeof(uint32_t) + 16; }

void SmallPatternImage::lay_out(void *host, void *device, SmallPatternTable &t) const {
  char *h = static_cast<char *>(host), *d = static_cast<char *>(device);
  const size_t m = (map.size() * sizeof(uint16_t) + 15) / 16 * 16;
  std::memcpy(h, map.data(), map.size() * sizeof(uint16_t));
  std::memcpy(h + m, mask.data(), mask.size() * sizeof(uint32_t));
  t.map = reinterpret_cast<const uint16_t *>(d);
  t.mask = reinterpret_cast<const uint32_t *>(d + m);
  t.span_lo = span_lo;
  t.span = span;
  t.size = int(map.size());
  t.mask_words = int(mask.size());
}

Status launch_small_pattern(const SmallPatternArgs &a, const void *typed, void *packed, bool to_packed,
                            cudaStream_t stream) {
  if (a.inst_count <= 0) return Status::Ok;
  const int size = a.table.size;
  Tile t;
  t.typed = reinterpret_cast<uintptr_t>(typed);
  t.packed = reinterpret_cast<uintptr_t>(packed);
  // Room for a span at any alignment: up to 15 bytes before its first byte.
  t.slot = round16(a.table.span + kWindow - 1);
  t.instances = int(std::max<int64_t>(1, std::min<int64_t>({(kTileBytes + size - 1) / size, kTileData / t.slot, kMaxTile,
                                                            a.inst_count})));
  t.map_at = t.instances * t.slot;
  t.mask_at = t.map_at + round16(int64_t(size) * 2);
  t.chunk_at = t.mask_at + round16(int64_t(a.table.mask_words) * 4);
  t.off_at = t.chunk_at + t.instances * 8;
  // shared_word reads up to 7 bytes past a span's last byte: the map lies there, or this pad
  const size_t shared_bytes = size_t(t.off_at + round16(int64_t(t.instances) * 4) + kWindow);
  t.tiles = (a.inst_count + t.instances - 1) / t.instances;
  const unsigned grid = unsigned(std::min<int64_t>(t.tiles, int64_t(1) << 20));
  const int64_t limit = int64_t(1) << 31;
  bool wide = a.inst_first + a.inst_count >= limit;
  for (int d = 0; d < a.ndims; ++d) wide = wide || a.counts[d] >= limit;
  if (to_packed) {
    if (wide)
      launch<true, true>(a, t, shared_bytes, grid, stream);
    else
      launch<false, true>(a, t, shared_bytes, grid, stream);
  } else {
    if (wide)
      launch<true, false>(a, t, shared_bytes, grid, stream);
    else
      launch<false, false>(a, t, shared_bytes, grid, stream);
  }
  TEMPI_CUDA(cudaGetLastError());
  return Status::Ok;
}

}  // namespace tempi
