// Pack and unpack of small patterns repeated many times: structs of mixed members, arrays
// and subarrays of them, short indexed types with a count (issue 11).
//
// The byte-balanced kernel (blocklist.cu) finds the block under every 16-byte window of
// the stream; when a pattern instance is a few short members, nearly every window spans
// two or three of them and goes byte by byte (a struct {int; double[3]; char; short[2]}
// moved at 5% of DRAM peak, 7x a memcpy of its bytes). Here one thread block takes a tile
// of whole instances and stages their typed spans (the bytes from an instance's first
// typed byte to its last) in shared memory, each at its own alignment mod 16:
//  - pack: the spans are read with the fewest aligned accesses (1 to 16 bytes) that cover
//    exactly their typed bytes, listed once per plan for each of the 16 alignments a span
//    may have, so that a thread's work is one access of one instance whatever the
//    members, and nothing but the type's bytes is read; a warp's lanes take the same
//    access of consecutive instances, so they diverge only where the instances'
//    alignments differ. Then the tile's packed bytes are gathered from shared memory
//    through a per-byte map and written as aligned 4-byte words, coalesced.
//  - unpack: the packed words are scattered into the staged spans through the same map,
//    and the spans written back with the same accesses, so the gaps between members,
//    which may belong to other data, are never written.
// A first version, which read each aligned 16-byte chunk of a span under a per-byte mask
// and took four bytes at once where the map said they were contiguous, ran at 40% of the
// roofline on an H100 (2026-11-23): lanes took different branches for different chunks
// and bytes, 35 M warp instructions for 16.5 MB.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <numeric>

#include "blocklist.hpp"
#include "blocklist_device.cuh"
#include "check.hpp"

namespace tempi {

namespace {

constexpr int kThreads = 256;
// Packed bytes per tile (about), and the shared memory its staged spans may take: a tile
// of 8 KiB keeps 256 threads busy with 8 words each and several tiles resident per SM.
constexpr int kTileBytes = 8192;
constexpr int kTileData = 24 * 1024;
constexpr int kMaxTile = 1024;
constexpr int kBatch = 4;  // global loads a thread has in flight

// What the kernel needs besides the table: the shape of a tile in shared memory.
struct Tile {
  uint64_t typed, packed;  // typed address of typed offset 0; packed address of instance inst_first
  int instances, slot;     // instances per tile; shared bytes per instance (a multiple of 16)
  int map_at, chunk_at, off_at;  // offsets in shared memory of the map and the per-instance data
  int accesses;  // accesses per instance: the most that a span's alignment in this launch needs
  uint64_t inv_size;  // inverse(size)
  int64_t tiles;
};

// ceil(2^32 / d): x / d is (x * inverse(d)) >> 32 wherever x * d < 2^32 (exact: the error
// x * (inverse(d) - 2^32 / d) / 2^32 stays under 1 / d), which holds for the x of a tile.
__host__ __device__ __forceinline__ uint64_t inverse(int64_t d) { return ((uint64_t(1) << 32) + uint64_t(d) - 1) / uint64_t(d); }
__device__ __forceinline__ int div_by(int x, uint64_t inv) { return int((uint64_t(x) * inv) >> 32); }

// One access of `1 << code` bytes (code 0-4), into or out of the low bytes of a uint4.
template <typename T>
__device__ __forceinline__ uint4 load_access(const T *at, uint32_t code) {
  switch (code) {
    case 0:
      return make_uint4(reinterpret_cast<const uint8_t *>(at)[0], 0, 0, 0);
    case 1:
      return make_uint4(reinterpret_cast<const uint16_t *>(at)[0], 0, 0, 0);
    case 2:
      return make_uint4(reinterpret_cast<const uint32_t *>(at)[0], 0, 0, 0);
    case 3: {
      const uint2 v = reinterpret_cast<const uint2 *>(at)[0];
      return make_uint4(v.x, v.y, 0, 0);
    }
    default:
      return reinterpret_cast<const uint4 *>(at)[0];
  }
}

template <typename T>
__device__ __forceinline__ void store_access(T *at, uint4 v, uint32_t code) {
  switch (code) {
    case 0:
      reinterpret_cast<uint8_t *>(at)[0] = uint8_t(v.x);
      return;
    case 1:
      reinterpret_cast<uint16_t *>(at)[0] = uint16_t(v.x);
      return;
    case 2:
      reinterpret_cast<uint32_t *>(at)[0] = v.x;
      return;
    case 3:
      reinterpret_cast<uint2 *>(at)[0] = make_uint2(v.x, v.y);
      return;
    default:
      reinterpret_cast<uint4 *>(at)[0] = v;
  }
}

// The four tile bytes j0 .. j0 + 3 of the packed stream (j0 >= -3) as bytes of the staged
// spans: byte j is instance j / size's pattern byte j % size. An instance has 4 bytes or
// more, so the four cross at most one instance boundary; selects, not branches, so
// that the lanes of a warp do not diverge where their words cross one.
struct Word {
  int o, at, next;  // pattern byte of j0 (negative before the tile), its instance's span, the next one's
  __device__ __forceinline__ Word(int j0, int size, uint64_t inv_size, int n, const int *off) {
    const int i = div_by(max(j0, 0), inv_size);
    o = j0 - i * size;
    at = off[i];
    next = off[min(i + 1, n - 1)];
  }
  __device__ __forceinline__ int staged(int b, const uint16_t *map, int size) const {
    const int ob = o + b;
    return ob >= size ? next + map[ob - size] : at + map[ob];
  }
};

template <bool Wide, bool Pack>
__global__ void __launch_bounds__(kThreads) small_pattern(SmallPatternArgs a, Tile t) {
  extern __shared__ uint4 shared4[];
  char *shared = reinterpret_cast<char *>(shared4);
  uint16_t *map = reinterpret_cast<uint16_t *>(shared + t.map_at);
  uint64_t *chunk0 = reinterpret_cast<uint64_t *>(shared + t.chunk_at);  // address of a span's slot byte 0
  int *off = reinterpret_cast<int *>(shared + t.off_at);  // shared offset of a span's first byte
  const int size = a.table.size, accesses = t.accesses;
  for (int k = threadIdx.x; k < size; k += kThreads) map[k] = a.table.map[k];

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
    const int items = n * accesses;

    // Access `k` of the tile, from the list of its span's alignment. Packing, access k / n of instance k % n: the lanes of a warp
    // take the same access of consecutive instances (the same width where their spans'
    // alignments agree, so they do not diverge), and their loads meet in L1. Unpacking,
    // access k % accesses of instance k / accesses: the lanes' stores to the typed buffer
    // go to consecutive bytes (on an H100, 2026-11-23, the struct row packed in 37.6 us of
    // kernel time the first way and 40.9 the second, and unpacked in 42.5 the second way
    // and 49.5 the first).
    const uint64_t inv = inverse(Pack ? n : accesses);
    auto access = [&](int k, uint32_t &code, int &staged, uint64_t &typed) {
      const int q = div_by(k, inv), r = Pack ? k - q * n : k - q * accesses;
      const int i = Pack ? r : q, which = Pack ? q : r, phase = off[i] - i * t.slot;
      const uint32_t e = __ldg(a.table.access + phase * a.table.stride + which);
      code = e & 7u;
      staged = i * t.slot + int(e >> 3);
      typed = chunk0[i] + (e >> 3);
    };

    if (Pack) {
      for (int k0 = threadIdx.x; k0 < items; k0 += kBatch * kThreads) {
        uint32_t code[kBatch];
        int to[kBatch];
        uint64_t from[kBatch];
        uint4 v[kBatch];
#pragma unroll
        for (int u = 0; u < kBatch; ++u) {
          code[u] = kNoAccess;
          if (k0 + u * kThreads < items) access(k0 + u * kThreads, code[u], to[u], from[u]);
        }
#pragma unroll
        for (int u = 0; u < kBatch; ++u)
          if (code[u] != kNoAccess) v[u] = load_access(reinterpret_cast<const char *>(from[u]), code[u]);
#pragma unroll
        for (int u = 0; u < kBatch; ++u)
          if (code[u] != kNoAccess) store_access(shared + to[u], v[u], code[u]);
      }
      __syncthreads();
      for (int k = threadIdx.x; k < words; k += kThreads) {
        const int j0 = 4 * k - lead;
        const Word w(j0, size, t.inv_size, n, off);
        uint32_t word = 0;
#pragma unroll
        for (int b = 0; b < 4; ++b)
          if (j0 + b >= 0 && j0 + b < bytes) word |= uint32_t(uint8_t(shared[w.staged(b, map, size)])) << (8 * b);
        char *to = reinterpret_cast<char *>(out - lead) + 4 * k;
        if (j0 >= 0 && j0 + 4 <= bytes) {
          *reinterpret_cast<uint32_t *>(to) = word;
        } else {
          for (int b = max(-j0, 0); b < 4 && j0 + b < bytes; ++b) to[b] = char(word >> (8 * b));
        }
      }
    } else {
      for (int k0 = threadIdx.x; k0 < words; k0 += kBatch * kThreads) {
        uint32_t word[kBatch];
#pragma unroll
        for (int u = 0; u < kBatch; ++u) {
          const int k = k0 + u * kThreads, j0 = 4 * k - lead;
          const char *from = reinterpret_cast<const char *>(out - lead) + 4 * k;
          word[u] = 0;
          if (k >= words) continue;
          if (j0 >= 0 && j0 + 4 <= bytes) {
            word[u] = __ldg(reinterpret_cast<const uint32_t *>(from));
          } else {
            for (int b = max(-j0, 0); b < 4 && j0 + b < bytes; ++b)
              word[u] |= uint32_t(uint8_t(__ldg(from + b))) << (8 * b);
          }
        }
#pragma unroll
        for (int u = 0; u < kBatch; ++u) {
          const int k = k0 + u * kThreads, j0 = 4 * k - lead;
          if (k >= words) continue;
          const Word w(j0, size, t.inv_size, n, off);
#pragma unroll
          for (int b = 0; b < 4; ++b)
            if (j0 + b >= 0 && j0 + b < bytes) shared[w.staged(b, map, size)] = char(word[u] >> (8 * b));
        }
      }
      __syncthreads();
      for (int k = threadIdx.x; k < items; k += kThreads) {
        uint32_t code;
        int staged;
        uint64_t typed;
        access(k, code, staged, typed);
        if (code != kNoAccess) store_access(reinterpret_cast<char *>(typed), load_access(shared + staged, code), code);
      }
    }
  }
}

template <bool Wide, bool Pack>
void launch(const SmallPatternArgs &a, const Tile &t, size_t shared_bytes, unsigned grid, cudaStream_t stream) {
  small_pattern<Wide, Pack><<<grid, kThreads, shared_bytes, stream>>>(a, t);
}

int round16(int64_t x) { return int((x + kWindow - 1) / kWindow * kWindow); }

// The typed bytes of one pattern instance, as offsets in its span [lo, hi).
struct SpanBytes {
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  explicit SpanBytes(const Plan &plan) {
    for (const Run &r : plan.pattern) {
      if (r.length <= 0 || r.count <= 0) continue;
      const int64_t last = r.offset + (r.count - 1) * r.stride;
      lo = std::min({lo, r.offset, last});
      hi = std::max({hi, r.offset + r.length, last + r.length});
    }
  }
};

}  // namespace

bool small_pattern_plan(const Plan &plan) {
  if (plan.pattern_size < 4 || plan.pattern_size > kMaxSmallPattern) return false;  // 4: see Word
  const SpanBytes s(plan);
  // Sparse patterns would stage mostly gaps: leave them to the byte-balanced kernel.
  return s.hi > s.lo && s.hi - s.lo <= kMaxSmallSpan && s.hi - s.lo <= 8 * plan.pattern_size;
}

SmallPatternImage small_pattern_image(const Plan &plan) {
  SmallPatternImage im;
  const SpanBytes s(plan);
  im.span_lo = s.lo;
  im.span = int(s.hi - s.lo);
  std::vector<bool> typed(size_t(im.span), false);
  for (const Run &r : plan.pattern)
    for (int64_t k = 0; k < r.count; ++k)
      for (int64_t b = 0; b < r.length; ++b) {
        const int64_t at = r.offset + k * r.stride + b - s.lo;
        im.map.push_back(uint16_t(at));
        typed[size_t(at)] = true;
      }
  // For each alignment p of a span, the widest aligned accesses that cover its typed bytes
  // exactly (slot byte p + x holds span byte x).
  std::vector<std::vector<uint32_t>> lists(kWindow);
  for (int p = 0; p < kWindow; ++p)
    for (int x = 0; x < im.span;) {
      if (!typed[size_t(x)]) {
        ++x;
        continue;
      }
      int code = 4;
      for (; code > 0; --code) {
        const int w = 1 << code;
        if ((p + x) % w != 0 || x + w > im.span) continue;
        bool all = true;
        for (int b = 0; b < w && all; ++b) all = typed[size_t(x + b)];
        if (all) break;
      }
      lists[size_t(p)].push_back(uint32_t(p + x) << 3 | uint32_t(code));
      x += 1 << code;
    }
  for (int p = 0; p < kWindow; ++p) {
    im.accesses[p] = int(lists[size_t(p)].size());
    im.stride = std::max(im.stride, im.accesses[p]);
  }
  for (const auto &l : lists) {
    im.access.insert(im.access.end(), l.begin(), l.end());
    im.access.insert(im.access.end(), size_t(im.stride) - l.size(), kNoAccess);
  }
  return im;
}

size_t SmallPatternImage::bytes() const { return map.size() * sizeof(uint16_t) + access.size() * sizeof(uint32_t) + 16; }

void SmallPatternImage::lay_out(void *host, void *device, SmallPatternTable &t) const {
  char *h = static_cast<char *>(host), *d = static_cast<char *>(device);
  const size_t m = (map.size() * sizeof(uint16_t) + 15) / 16 * 16;
  std::memcpy(h, map.data(), map.size() * sizeof(uint16_t));
  std::memcpy(h + m, access.data(), access.size() * sizeof(uint32_t));
  t.map = reinterpret_cast<const uint16_t *>(d);
  t.access = reinterpret_cast<const uint32_t *>(d + m);
  t.span_lo = span_lo;
  t.span = span;
  t.size = int(map.size());
  t.stride = stride;
  std::copy(accesses, accesses + kWindow, t.accesses);
}

Status launch_small_pattern(const SmallPatternArgs &a, const void *typed, void *packed, bool to_packed,
                            cudaStream_t stream) {
  if (a.inst_count <= 0) return Status::Ok;
  const int size = a.table.size;
  Tile t;
  t.typed = reinterpret_cast<uintptr_t>(typed);
  t.packed = reinterpret_cast<uintptr_t>(packed);
  // Room for a span at any alignment: up to 15 bytes before its first byte.
  // An odd number of 16-byte units, so that the lanes' accesses at one offset of
  // consecutive spans fall in different banks of shared memory.
  t.slot = round16(a.table.span + kWindow - 1);
  if (t.slot / kWindow % 2 == 0) t.slot += kWindow;
  t.instances = int(std::max<int64_t>(1, std::min<int64_t>({(kTileBytes + size - 1) / size, kTileData / t.slot, kMaxTile,
                                                            a.inst_count})));
  t.map_at = t.instances * t.slot;
  t.chunk_at = t.map_at + round16(int64_t(size) * 2);
  t.off_at = t.chunk_at + t.instances * 8;
  const size_t shared_bytes = size_t(t.off_at + round16(int64_t(t.instances) * 4));
  // The alignments spans take: the first one's, plus multiples of what the strides keep of 16.
  int64_t step = kWindow;
  for (int d = 0; d < a.ndims; ++d) step = std::gcd(step, a.strides[d] & (kWindow - 1));
  const int first = int((t.typed + uint64_t(a.start + a.table.span_lo)) & (kWindow - 1));
  t.accesses = 0;
  for (int p = first % int(step); p < kWindow; p += int(step)) t.accesses = std::max(t.accesses, a.table.accesses[p]);
  // Exact for the quotients a tile takes: bytes < 2^21 over size <= 2^11; and access
  // numbers k < n * accesses <= n * size < 2^14 over n <= 2^10 or accesses <= 2^11.
  t.inv_size = inverse(size);
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
