// Pack and unpack of small patterns repeated many times: structs of mixed members, arrays
// and subarrays of them, short indexed types with a count, and gathers of one small shape
// at a list of offsets (picked elements or structs, equal blocks; issue 11).
//
// The byte-balanced kernel (blocklist.cu) finds the block under every 16-byte window of
// the stream; when a pattern instance is a few short members, nearly every window spans
// two or three of them and goes byte by byte (a struct {int; double[3]; char; short[2]}
// moved at 5% of DRAM peak, 7x a memcpy of its bytes). Here one thread block takes a tile
// of whole instances and stages their typed spans (the bytes from an instance's first
// typed byte to its last) in shared memory, each at its own alignment mod 16:
//  - pack: a span whose aligned 16-byte chunks lie inside the typed buffer's allocation
//    (SmallPatternArgs::readable_lo/hi) is read as those whole chunks, the bytes between
//    members included (read and dropped, never written). Elsewhere (a span that crosses
//    the allocation's end, or no range known) the spans are read with the fewest aligned
//    accesses (1 to 16 bytes) that cover exactly their typed bytes, listed once per plan
//    for each of the 16 alignments a span may have, so that a thread's work is one access
//    of one instance whatever the members. A warp's lanes take the same access of
//    consecutive instances, so they diverge only where the instances' alignments differ.
//    Then the tile's packed bytes are gathered from shared memory through a per-byte map
//    and written as aligned 4-byte words, coalesced.
//  - unpack: the packed words are scattered into the staged spans through the same map,
//    and the spans written back with accesses that cover exactly their typed bytes, so
//    the gaps between members, which may belong to other data, are never written. The
//    lanes of a warp take the accesses of one instance. Where instances are scattered
//    (groups), those accesses are bytes: a warp's stores to an instance then go out as one
//    request per line, where accesses of mixed widths went out as one per width, and
//    scattered partial lines cost a request each (H100, 2026-11-23: 500,000 picked structs
//    unpacked in 91 us against 125, 64-byte blocks at random offsets in 67 against 83;
//    packing is fastest with the widest accesses: 54 us against 88 with bytes).
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
  int per;       // work items per instance: accesses, or (packing) the aligned chunks of a span if more
  uint64_t readable_lo, readable_hi;  // pack: spans whose chunks lie inside are read as whole chunks
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

// The typed offset of instance `inst`'s span: its group's offset, then the repetition's
// place over the dimensions.
template <bool Wide>
__device__ __forceinline__ int64_t span_offset(const SmallPatternArgs &a, int64_t inst) {
  int64_t base = a.start + a.table.span_lo;
  if (a.table.ngroups > 1) {
    const int64_t q = quot<Wide>(inst, a.table.ngroups);
    base += __ldg(a.table.groups + (inst - q * a.table.ngroups));
    inst = q;
  }
  for (int d = 0; d < a.ndims; ++d) {
    const int64_t q = quot<Wide>(inst, a.counts[d]);
    base += (inst - q * a.counts[d]) * a.strides[d];
    inst = q;
  }
  return base;
}

// Where each of the tile's n instances (from i0) has its span: chunk0[i] the address of
// its slot's byte 0 (bit 0 set where packing may read the span as whole aligned chunks,
// all inside the readable range), off[i] the shared offset of the span's first byte.
template <bool Wide, bool Pack>
__device__ __forceinline__ void place_spans(const SmallPatternArgs &a, const Tile &t, int64_t i0, int n,
                                            uint64_t *chunk0, int *off) {
  for (int i = threadIdx.x; i < n; i += kThreads) {
    const uint64_t at = t.typed + uint64_t(span_offset<Wide>(a, i0 + i)), first = at & ~uint64_t(kWindow - 1);
    const uint64_t end = (at + uint64_t(a.table.span) + kWindow - 1) & ~uint64_t(kWindow - 1);
    const bool whole = Pack && first >= t.readable_lo && end <= t.readable_hi;
    chunk0[i] = first | uint64_t(whole);
    off[i] = i * t.slot + int(at & (kWindow - 1));
  }
}

// Packing's second half: the tile's packed bytes [0, bytes), gathered from the staged
// spans, written to `out` as aligned 4-byte words (the two at the ends in part).
__device__ __forceinline__ void write_packed(const char *shared, const uint16_t *map, const int *off,
                                             uint64_t inv_size, int size, int n, uint64_t out, int lead, int bytes,
                                             int words) {
  for (int k = threadIdx.x; k < words; k += kThreads) {
    const int j0 = 4 * k - lead;
    const Word w(j0, size, inv_size, n, off);
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
}

template <bool Wide, bool Pack>
__global__ void __launch_bounds__(kThreads) small_pattern(SmallPatternArgs a, Tile t) {
  extern __shared__ uint4 shared4[];
  char *shared = reinterpret_cast<char *>(shared4);
  uint16_t *map = reinterpret_cast<uint16_t *>(shared + t.map_at);
  uint64_t *chunk0 = reinterpret_cast<uint64_t *>(shared + t.chunk_at);  // address of a span's slot byte 0
  int *off = reinterpret_cast<int *>(shared + t.off_at);  // shared offset of a span's first byte
  const int size = a.table.size, accesses = t.accesses;
  const AccessTable &lists = Pack ? a.table.pack : a.table.unpack;
  for (int k = threadIdx.x; k < size; k += kThreads) map[k] = a.table.map[k];

  for (int64_t tile = blockIdx.x; tile < t.tiles; tile += gridDim.x) {
    const int64_t i0 = a.inst_first + tile * t.instances;
    const int n = int(min(int64_t(t.instances), a.inst_first + a.inst_count - i0));
    __syncthreads();  // the previous tile is done with shared memory (and the map is in)
    place_spans<Wide, Pack>(a, t, i0, n, chunk0, off);
    __syncthreads();

    // The tile's packed bytes [0, n * size) lie at `out`: aligned 4-byte words, the two at
    // the ends in part.
    const uint64_t out = t.packed + uint64_t((i0 - a.inst_first) * size);
    const int lead = int(out & 3), bytes = n * size;
    const int words = (lead + bytes + 3) / 4;
    const int items = n * (Pack ? t.per : accesses);

    // Access `k` of the tile, from the list of its span's alignment. Packing, access k / n
    // of instance k % n: the lanes of a warp take the same access of consecutive instances
    // (the same width where their spans' alignments agree, so they do not diverge), and
    // their loads meet in L1. Unpacking, access k % accesses of instance k / accesses: the
    // lanes' stores to the typed buffer go to consecutive bytes. On an H100 (2026-11-23) the
    // struct row packed in 37.6 us of kernel time the first way and 40.9 the second, and
    // unpacked in 42.5 the second way and 49.5 the first; scattered instances (groups)
    // unpacked the first way took longer still (picked structs 155.8 us a call against
    // 126.7, 64-byte blocks 106.9 against 83.6).
    // A span read as whole chunks takes chunk `which` (16 bytes, to the same place of its
    // slot) for its items, while its list's accesses are not used.
    const uint64_t inv = inverse(Pack ? n : accesses);
    auto access = [&](int k, uint32_t &code, int &staged, uint64_t &typed) {
      const int q = div_by(k, inv), r = Pack ? k - q * n : k - q * accesses;
      const int i = Pack ? r : q, which = Pack ? q : r, phase = off[i] - i * t.slot;
      const uint64_t c0 = chunk0[i];
      if (Pack && (c0 & 1)) {
        code = kWindow * which < phase + a.table.span ? 4u : kNoAccess;
        staged = i * t.slot + kWindow * which;
        typed = c0 - 1 + uint64_t(kWindow) * which;
        return;
      }
      const uint32_t e = which < accesses ? __ldg(lists.list + phase * lists.stride + which) : kNoAccess;
      code = e & 7u;
      staged = i * t.slot + int(e >> 3);
      typed = c0 + (e >> 3);
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
      write_packed(shared, map, off, t.inv_size, size, n, out, lead, bytes, words);
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

// Instances that are one block of a multiple of 16 bytes (gathered blocks of 16, 32, 64
// ... bytes, structs without gaps), packed side 16-byte aligned: nothing to stage. On an
// H100 (2026-11-24, Nsight Compute, bench_pack's 64-byte blocks at random offsets) the
// tiled kernel packed them in 41.5 us of kernel time and unpacked them in 54.9, these
// kernels in 20-23 (below) and 41.7. Unpacking is bounded by the blocks' ends: partial
// 32-byte sectors make the L2 read them first (a scatter of the same blocks moved onto
// sector boundaries takes 27.5 us; tools/gpu/gather_bounds.cu).
struct Words {
  uint64_t typed, packed;  // typed address of typed offset 0; packed address of instance inst_first
  uint64_t readable_lo, readable_hi;  // pack: chunks inside are read whole (SmallPatternArgs)
  int64_t lanes;           // inst_count * per_inst
  int words;               // 16-byte words of an instance
  int per_inst;            // lanes of an instance: one per packed word (pack), one per typed chunk (unpack)
};

// Pack: one lane per packed word, from the two aligned typed chunks under it, realigned;
// the stores are whole words, coalesced. The chunks at a block's two ends hold bytes that
// are not the block's: read whole where they lie inside the typed buffer's allocation
// (e.readable_lo/hi; such bytes are only read, and dropped), else only the block's bytes
// with at most four narrower loads. On an H100 (2026-11-24, Nsight Compute, 64-byte blocks
// at random offsets) whole end chunks inside the allocation took 20.1-23.2 us of kernel
// time, narrow loads everywhere 25.6, and the end chunks read byte by byte (load_chunk) 30.2.
template <bool Wide>
__global__ void __launch_bounds__(kThreads) gather_words(SmallPatternArgs a, Words e) {
  uint4 *out = reinterpret_cast<uint4 *>(e.packed);
  const int64_t step = int64_t(gridDim.x) * kThreads;
  for (int64_t w = int64_t(blockIdx.x) * kThreads + threadIdx.x; w < e.lanes; w += step) {
    const int64_t j = quot<Wide>(w, e.per_inst);
    const int k = int(w - j * e.per_inst);
    const uint64_t block = e.typed + uint64_t(span_offset<Wide>(a, a.inst_first + j));
    const uint64_t at = (block & ~uint64_t(kWindow - 1)) + uint64_t(kWindow) * k;
    const unsigned shift = unsigned(block & (kWindow - 1));
    // Word k is bytes [shift, shift + 16) of chunks at, at + 16: the first of a block's
    // chunks starts before it, its last (k = words - 1, at + 16) ends after it.
    const bool narrow0 = k == 0 && shift && (at < e.readable_lo || at + kWindow > e.readable_hi);
    const uint4 c0 = narrow0 ? load_suffix(at, int(shift)) : *reinterpret_cast<const uint4 *>(at);
    if (shift == 0) {
      out[w] = c0;
      continue;
    }
    const bool narrow1 = k == e.words - 1 && (at + kWindow < e.readable_lo || at + 2 * kWindow > e.readable_hi);
    const uint4 c1 = narrow1 ? load_prefix(at + kWindow, int(shift)) : *reinterpret_cast<const uint4 *>(at + kWindow);
    out[w] = realign(c0, c1, shift);
  }
}

// Unpack: one lane per aligned typed chunk that the block touches (words + 1 of them; the
// last is empty where the block is aligned), built from the two packed words under it.
// A chunk the block fills in part is prefetched into L2 first, so that its partial stores
// merge there instead of each going to DRAM.
template <bool Wide>
__global__ void __launch_bounds__(kThreads) scatter_words(SmallPatternArgs a, Words e) {
  const uint4 *in = reinterpret_cast<const uint4 *>(e.packed);
  const int64_t step = int64_t(gridDim.x) * kThreads;
  for (int64_t w = int64_t(blockIdx.x) * kThreads + threadIdx.x; w < e.lanes; w += step) {
    const int64_t j = quot<Wide>(w, e.per_inst);
    const int c = int(w - j * e.per_inst);
    const uint64_t block = e.typed + uint64_t(span_offset<Wide>(a, a.inst_first + j));
    const unsigned shift = unsigned(block & (kWindow - 1));
    const uint64_t at = (block & ~uint64_t(kWindow - 1)) + uint64_t(kWindow) * c;
    const int lo = c == 0 ? int(shift) : 0, hi = clamp16(int64_t(block + kWindow * e.words - at));
    if (lo >= hi) continue;
    if (lo > 0 || hi < kWindow) asm volatile("prefetch.global.L2 [%0];" ::"l"(at + lo));
    const uint4 *words = in + j * e.words, zero = make_uint4(0, 0, 0, 0);
    uint4 v;
    if (shift == 0) {
      v = words[c];
    } else {  // chunk byte x is instance byte 16 c - shift + x
      const uint4 before = c > 0 ? words[c - 1] : zero, after = c < e.words ? words[c] : zero;
      v = realign(before, after, kWindow - shift);
    }
    if (lo > 0)
      store_suffix(at, v, lo);
    else if (hi < kWindow)
      store_prefix(at, v, hi);
    else
      *reinterpret_cast<uint4 *>(at) = v;
  }
}

template <bool Wide>
void launch_words(const SmallPatternArgs &a, const Words &e, bool pack, cudaStream_t stream) {
  const unsigned grid = unsigned(std::min<int64_t>((e.lanes + kThreads - 1) / kThreads, int64_t(1) << 20));
  if (pack)
    gather_words<Wide><<<grid, kThreads, 0, stream>>>(a, e);
  else
    scatter_words<Wide><<<grid, kThreads, 0, stream>>>(a, e);
}

int round16(int64_t x) { return int((x + kWindow - 1) / kWindow * kWindow); }

// The typed bytes of runs [0, n) of a pattern, as offsets in their span [lo, hi).
struct SpanBytes {
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  SpanBytes(const Run *runs, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      const Run &r = runs[i];
      if (r.length <= 0 || r.count <= 0) continue;
      const int64_t last = r.offset + (r.count - 1) * r.stride;
      lo = std::min({lo, r.offset, last});
      hi = std::max({hi, r.offset + r.length, last + r.length});
    }
  }
};

int64_t packed_bytes(const Run *runs, size_t n) {
  int64_t bytes = 0;
  for (size_t i = 0; i < n; ++i) bytes += runs[i].length * runs[i].count;
  return bytes;
}

// Whether an instance of `size` packed bytes and span `s` fits a tile: 4 bytes at least
// (see Word), and not so sparse that the staged spans would be mostly gaps (those go to
// the byte-balanced kernel).
bool fits_tile(int64_t size, const SpanBytes &s) {
  return size >= 4 && size <= policy::kMaxSmallPattern && s.hi > s.lo && s.hi - s.lo <= policy::kMaxSmallSpan &&
         s.hi - s.lo <= 8 * size;
}

// The blocks of a pattern in packed order, its runs expanded. Groups are looked for among
// blocks, not runs: the plan may have folded any few blocks into one strided run.
class Blocks {
 public:
  explicit Blocks(const RunList &runs) : runs_(runs) {}
  bool next(int64_t &offset, int64_t &length) {
    while (r_ < runs_.size() && k_ >= runs_[r_].count) ++r_, k_ = 0;
    if (r_ == runs_.size()) return false;
    const Run &run = runs_[r_];
    offset = run.offset + k_++ * run.stride;
    length = run.length;
    return true;
  }

 private:
  const RunList &runs_;
  size_t r_ = 0;
  int64_t k_ = 0;
};

int64_t block_count(const RunList &runs) {
  int64_t n = 0;
  for (const Run &r : runs) n += r.count;
  return n;
}

// The widest access, log2 of its bytes (16).
constexpr int kWidestAccess = 4;

// Groups of one block: the length of the pieces that cut every block of the pattern, the
// gcd of their lengths, where that makes at most twice as many pieces as blocks (gathered
// elements, some adjacent ones merged into one block by the plan), else 0.
int64_t piece_length(const RunList &runs, int64_t blocks, int64_t packed) {
  int64_t g = 0;
  for (const Run &r : runs) g = std::gcd(g, r.length);
  return g > 0 && packed / g <= std::min(2 * blocks, policy::kMaxGroups) ? g : 0;
}

// Whether the pattern's blocks are groups of `k` (2 or more) that repeat the shape of the
// first group at other offsets; `first` gets the first group's blocks.
bool groups_of(const RunList &runs, int64_t k, std::vector<Run> &first) {
  first.clear();
  Blocks blocks(runs);
  int64_t offset, length, i = 0, shift = 0;
  for (; blocks.next(offset, length); ++i) {
    const int64_t j = i % k;
    if (i < k) {
      first.push_back({offset, length, 0, 1});
      continue;
    }
    if (j == 0) shift = offset - first[0].offset;
    if (length != first[size_t(j)].length || offset - shift != first[size_t(j)].offset) return false;
  }
  return true;
}

// For each alignment p of a span whose typed bytes are `typed`, the fewest aligned accesses
// of at most 2^widest bytes that cover them exactly (slot byte p + x holds span byte x).
AccessLists access_lists(const std::vector<bool> &typed, int widest) {
  const int span = int(typed.size());
  std::vector<std::vector<uint32_t>> lists(kWindow);
  for (int p = 0; p < kWindow; ++p)
    for (int x = 0; x < span;) {
      if (!typed[size_t(x)]) {
        ++x;
        continue;
      }
      int code = widest;
      for (; code > 0; --code) {
        const int w = 1 << code;
        if ((p + x) % w != 0 || x + w > span) continue;
        bool all = true;
        for (int b = 0; b < w && all; ++b) all = typed[size_t(x + b)];
        if (all) break;
      }
      lists[size_t(p)].push_back(uint32_t(p + x) << 3 | uint32_t(code));
      x += 1 << code;
    }
  AccessLists a;
  for (int p = 0; p < kWindow; ++p) {
    a.accesses[p] = int(lists[size_t(p)].size());
    a.stride = std::max(a.stride, a.accesses[p]);
  }
  for (const auto &l : lists) {
    a.list.insert(a.list.end(), l.begin(), l.end());
    a.list.insert(a.list.end(), size_t(a.stride) - l.size(), kNoAccess);
  }
  return a;
}

}  // namespace

int64_t small_pattern_blocks(const Plan &plan) {
  const RunList &runs = plan.pattern;
  const int64_t total = block_count(runs);
  if (total == 0) return 0;
  if (fits_tile(plan.pattern_size, SpanBytes(runs.data(), runs.size()))) return total;
  // Runs of many blocks each (an indexed type of vectors) are regular already: the
  // byte-balanced kernel moved them faster than groups of one block (H100, 2026-11-23:
  // 34 / 39 us against 47 / 47 us for 16 MiB in 16-byte blocks).
  if (total > policy::kMaxGroups || total > policy::kMaxBlocksPerRun * int64_t(runs.size())) return 0;
  if (const int64_t piece = piece_length(runs, total, plan.pattern_size))
    return piece >= 4 && piece <= policy::kMaxSmallPattern ? 1 : 0;  // see fits_tile
  std::vector<Run> first;
  for (int64_t k = 2; k <= std::min(total / 2, policy::kMaxGroupBlocks); ++k) {
    if (total % k != 0) continue;
    if (!groups_of(runs, k, first)) continue;
    // The fewest blocks that repeat: the most instances, the smallest tables.
    return fits_tile(packed_bytes(first.data(), first.size()), SpanBytes(first.data(), first.size())) ? k : 0;
  }
  return 0;
}

SmallPatternImage small_pattern_image(const Plan &plan) {
  SmallPatternImage im;
  const int64_t k = small_pattern_blocks(plan), total = block_count(plan.pattern);
  std::vector<Run> shape;  // an instance's blocks
  std::vector<int64_t> at;  // where each instance's first block lies
  if (k == total) {
    shape = plan.pattern.runs();
  } else if (k == 1) {
    const int64_t piece = piece_length(plan.pattern, total, plan.pattern_size);
    Blocks blocks(plan.pattern);
    for (int64_t offset, length; blocks.next(offset, length);)
      for (int64_t x = 0; x < length; x += piece) at.push_back(offset + x);
    shape = {{at[0], piece, 0, 1}};
  } else {
    groups_of(plan.pattern, k, shape);
    Blocks blocks(plan.pattern);
    int64_t offset, length;
    for (int64_t i = 0; blocks.next(offset, length); ++i)
      if (i % k == 0) at.push_back(offset);
  }
  const SpanBytes s(shape.data(), shape.size());
  im.span_lo = s.lo;
  im.span = int(s.hi - s.lo);
  int64_t low = 0;  // the low four bits of the groups' offsets, or'ed
  for (int64_t a : at) {
    im.groups.push_back(a - at[0]);
    low |= im.groups.back() & (kWindow - 1);
  }
  im.group_step = int(std::gcd(int64_t(kWindow), low));
  std::vector<bool> typed(size_t(im.span), false);
  for (const Run &r : shape)
    for (int64_t c = 0; c < r.count; ++c)
      for (int64_t b = 0; b < r.length; ++b) {
        const int64_t at = r.offset + c * r.stride + b - s.lo;
        im.map.push_back(uint16_t(at));
        typed[size_t(at)] = true;
      }
  im.one_block = int64_t(im.map.size()) == im.span;
  for (size_t b = 0; b < im.map.size() && im.one_block; ++b) im.one_block = im.map[b] == b;
  im.pack = access_lists(typed, kWidestAccess);
  im.unpack = access_lists(typed, im.groups.empty() ? kWidestAccess : 0);
  return im;
}

// The map, then the access lists, then the groups' offsets, each 16-byte aligned.
namespace {
size_t round_up16(size_t x) { return (x + 15) / 16 * 16; }
}  // namespace

size_t SmallPatternImage::bytes() const {
  return round_up16(map.size() * sizeof(uint16_t)) + round_up16(pack.list.size() * sizeof(uint32_t)) +
         round_up16(unpack.list.size() * sizeof(uint32_t)) + groups.size() * sizeof(int64_t);
}

void SmallPatternImage::lay_out(void *host, void *device, SmallPatternTable &t) const {
  char *h = static_cast<char *>(host), *d = static_cast<char *>(device);
  size_t at = 0;
  // Copies `bytes` from `from` to the next 16-byte aligned place; returns its device address.
  auto put = [&](const void *from, size_t bytes) {
    if (bytes) std::memcpy(h + at, from, bytes);
    char *placed = d + at;
    at += round_up16(bytes);
    return placed;
  };
  t.map = reinterpret_cast<const uint16_t *>(put(map.data(), map.size() * sizeof(uint16_t)));
  for (auto [from, to] : {std::pair<const AccessLists *, AccessTable *>{&pack, &t.pack}, {&unpack, &t.unpack}}) {
    to->list = reinterpret_cast<const uint32_t *>(put(from->list.data(), from->list.size() * sizeof(uint32_t)));
    to->stride = from->stride;
    std::copy(from->accesses, from->accesses + kWindow, to->accesses);
  }
  const char *g = put(groups.data(), groups.size() * sizeof(int64_t));
  t.groups = groups.empty() ? nullptr : reinterpret_cast<const int64_t *>(g);
  t.ngroups = groups.empty() ? 1 : int64_t(groups.size());
  t.group_step = group_step;
  t.span_lo = span_lo;
  t.span = span;
  t.size = int(map.size());
  t.one_block = one_block;
}

Status launch_small_pattern(const SmallPatternArgs &a, const void *typed, void *packed, bool to_packed,
                            cudaStream_t stream) {
  if (a.inst_count <= 0) return Status::Ok;
  const int size = a.table.size;
  const int64_t limit = int64_t(1) << 31;
  bool wide = a.inst_first + a.inst_count >= limit;
  for (int d = 0; d < a.ndims; ++d) wide = wide || a.counts[d] >= limit;
  if (a.table.one_block && size % kWindow == 0 && (reinterpret_cast<uintptr_t>(packed) & (kWindow - 1)) == 0) {
    Words e;
    e.typed = reinterpret_cast<uintptr_t>(typed);
    e.packed = reinterpret_cast<uintptr_t>(packed);
    e.readable_lo = a.readable_lo;  // empty (0, 0): every end chunk is read narrow
    e.readable_hi = a.readable_hi;
    e.words = size / kWindow;
    e.per_inst = to_packed ? e.words : e.words + 1;
    e.lanes = a.inst_count * e.per_inst;
    if (wide || e.lanes >= limit)
      launch_words<true>(a, e, to_packed, stream);
    else
      launch_words<false>(a, e, to_packed, stream);
    TEMPI_CUDA(cudaGetLastError());
    return Status::Ok;
  }
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
  // The alignments spans take: the first one's, plus multiples of what the strides and the
  // groups' offsets keep of 16.
  int64_t step = a.table.group_step;
  for (int d = 0; d < a.ndims; ++d) step = std::gcd(step, a.strides[d] & (kWindow - 1));
  const int first = int((t.typed + uint64_t(a.start + a.table.span_lo)) & (kWindow - 1));
  t.accesses = 0;
  const AccessTable &lists = to_packed ? a.table.pack : a.table.unpack;
  for (int p = first % int(step); p < kWindow; p += int(step)) t.accesses = std::max(t.accesses, lists.accesses[p]);
  t.per = t.accesses;
  t.readable_lo = t.readable_hi = 0;  // empty: every span through its access list
  if (to_packed && a.readable_hi > a.readable_lo) {
    t.per = std::max(t.accesses, (kWindow - 1 + a.table.span + kWindow - 1) / kWindow);
    t.readable_lo = a.readable_lo;
    t.readable_hi = a.readable_hi;
  }
  // Exact for the quotients a tile takes: bytes < 2^21 over size <= 2^11; and access
  // numbers k < n * accesses <= n * size < 2^14 over n <= 2^10 or accesses <= 2^11.
  t.inv_size = inverse(size);
  t.tiles = (a.inst_count + t.instances - 1) / t.instances;
  const unsigned grid = unsigned(std::min<int64_t>(t.tiles, int64_t(1) << 20));
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
