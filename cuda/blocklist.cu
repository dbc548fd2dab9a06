// Block-list pack and unpack, balanced by bytes of the packed stream.
//
// The stream bytes [first, last) are cut into 16-byte windows aligned to the packed
// buffer's address. Each warp takes an equal contiguous share of the windows and its
// lanes interleave (lane l takes every 32nd window), so the packed side moves as whole
// aligned 16-byte words, coalesced, whatever the blocks' lengths. A lane finds the
// block under its window from a cache of the run and pattern instance it used last,
// else from the host-built index into the run list and a short binary search. A window
// inside one block moves through the two aligned 16-byte words of the typed side that
// hold it, realigned in registers (funnel shifts): the access width follows each
// block's alignment, not the worst alignment of the plan, and narrower accesses happen
// only at the edges of blocks, where they keep every access inside the block. A window
// that spans several blocks is assembled (or dispersed) piece by piece.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>

#include "blocklist.hpp"
#include "blocklist_device.cuh"
#include "check.hpp"

namespace tempi {

namespace {

constexpr int kThreads = 256;
// Windows per lane and step of a warp (32 consecutive windows each): their loads are
// all issued before the first use.
constexpr int kSteps = 2;
constexpr int64_t kWarpStep = 32 * kSteps;  // windows a warp moves per step
// Packing blocks of 32 bytes or more on average, a lane takes kGroup consecutive windows
// instead, realigned across its own chunks (kGroup + 1 loads for kGroup windows): on an
// H100 (2026-11-23) that packed 64-byte blocks at random offsets in 50 us where the
// interleaved lanes took 76, and 16-byte blocks in 44 where the interleaved lanes took 34
// (bench_pack, irregular-64B-random and indexed-of-vectors).
constexpr int kGroup = 4;
constexpr int64_t kGroupStep = 32 * kGroup;
constexpr int64_t kGroupedPackBlock = 32;

// Index entries per pattern at most: the index stays a small fraction of the runs.
constexpr int64_t kMaxIndexEntries = int64_t(1) << 20;

// Where one lane's walk stands: the pattern instance and the run it used last.
struct Cursor {
  int64_t inst_lo = 1, inst_hi = 0;  // stream bytes of the cached instance (none at first)
  int64_t base = 0;                  // the instance's typed offset
  int64_t run = -1;
  int64_t run_lo = 1, run_hi = 0;    // pattern bytes of the cached run
  BlockRun desc = {};
};

// A piece of the stream in the typed buffer: the offset of its first byte and the
// bounds of the block that holds it (the bytes a kernel may touch around it).
struct Piece {
  int64_t typed, lo, hi;
};

// Moves the cursor to the run that holds pattern byte `o`. The loads for the two ways
// of finding it (the run after the cached one, which short runs meet in order, and the
// index) are independent, so that their latencies overlap.
__device__ void find_run(const BlockListTable &t, Cursor &c, int64_t o) {
  const int64_t next = c.run + 1, e = o >> t.shift;
  const int64_t next_end = t.starts[min(next + 1, t.nruns)];
  int64_t lo = t.run_at[e], hi = t.run_at[e + 1];
  if (next < t.nruns && o >= c.run_hi && o < next_end) {  // the next run starts where the cached one ends
    c.run = next;
    c.run_lo = c.run_hi;
    c.run_hi = next_end;
    c.desc = t.runs[next];
    return;
  }
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (t.starts[mid] <= o)
      lo = mid;
    else
      hi = mid - 1;
  }
  c.run = lo;
  c.run_lo = t.starts[lo];
  c.run_hi = t.starts[lo + 1];
  c.desc = t.runs[lo];
}

// The piece that starts at stream byte `pos`.
template <bool Wide>
__device__ Piece locate(const BlockListArgs &a, Cursor &c, int64_t pos) {
  if (pos < c.inst_lo || pos >= c.inst_hi) {
    int64_t inst = quot<Wide>(pos, a.pattern_size);
    c.inst_lo = inst * a.pattern_size;
    c.inst_hi = c.inst_lo + a.pattern_size;
    int64_t base = a.start;
    for (int d = 0; d < a.ndims; ++d) {
      const int64_t q = quot<Wide>(inst, a.counts[d]);
      base += (inst - q * a.counts[d]) * a.strides[d];
      inst = q;
    }
    c.base = base;
  }
  const int64_t o = pos - c.inst_lo;
  if (o < c.run_lo || o >= c.run_hi) find_run(a.table, c, o);
  const int64_t into = o - c.run_lo;
  const int64_t k = c.run_hi - c.run_lo == c.desc.length ? 0 : quot<Wide>(into, c.desc.length);
  const int64_t lo = c.base + c.desc.typed + k * c.desc.stride;
  return {lo + into - k * c.desc.length, lo, lo + c.desc.length};
}

// Writes bytes [x0, x1) of the window `v` to typed address t0 + x0: the window lies
// across two aligned typed chunks at byte `s` of the first.
__device__ __forceinline__ void store_window(uint4 v, uint64_t t0, int x0, int x1) {
  const uint64_t at = t0 & ~uint64_t(kWindow - 1);
  const int s = int(t0 - at);
  if (s == 0) return store_chunk(at, v, x0, x1);
  const uint4 zero = make_uint4(0, 0, 0, 0);
  store_chunk(at, realign(zero, v, unsigned(kWindow - s)), s + x0, min(s + x1, kWindow));
  store_chunk(at + kWindow, realign(v, zero, unsigned(kWindow - s)), max(s + x0 - kWindow, 0), s + x1 - kWindow);
}

// Bytes [x0, x1) of `from` replace those of `into`.
__device__ __forceinline__ uint32_t merge_word(uint32_t into, uint32_t from, int k, int x0, int x1) {
  const int lo = max(min(x0 - 4 * k, 4), 0), hi = max(min(x1 - 4 * k, 4), 0);
  const uint32_t mask = uint32_t((uint64_t(1) << (8 * hi)) - (uint64_t(1) << (8 * lo)));
  return (into & ~mask) | (from & mask);
}

__device__ __forceinline__ uint4 merge(uint4 into, uint4 from, int x0, int x1) {
  return make_uint4(merge_word(into.x, from.x, 0, x0, x1), merge_word(into.y, from.y, 1, x0, x1),
                    merge_word(into.z, from.z, 2, x0, x1), merge_word(into.w, from.w, 3, x0, x1));
}

// What one launch moves: windows [0, nwin) of 16 bytes, window 0 at packed address
// `window0` and stream position `stream0`; each warp takes `per_warp` of them.
struct Launch {
  uint64_t typed, window0;
  int64_t stream0, nwin, per_warp;
};

// Window `w` of a launch as one lane sees it: its stream position, the bytes of it in
// [first, last) and in the warp's share (as offsets into it), and the block under it.
struct Slot {
  int64_t ws;
  int e0, e1;
  bool one;         // the window's bytes lie in one block
  Piece p;          // the piece at ws + e0
  uint64_t t0, at;  // typed address of window byte 0, and the aligned chunk that holds it
  unsigned shift;   // t0 - at
};

template <bool Wide>
__device__ __forceinline__ Slot slot_at(const BlockListArgs &a, const Launch &l, Cursor &c, int64_t w, int64_t end) {
  Slot s;
  s.ws = l.stream0 + w * kWindow;
  s.e0 = clamp16(a.first - s.ws);
  s.e1 = w < end ? clamp16(a.last - s.ws) : 0;
  s.one = false;
  if (s.e0 < s.e1) {
    s.p = locate<Wide>(a, c, s.ws + s.e0);
    s.one = s.p.hi - s.p.typed >= s.e1 - s.e0;
    s.t0 = l.typed + s.p.typed - s.e0;
    s.at = s.t0 & ~uint64_t(kWindow - 1);
    s.shift = unsigned(s.t0 - s.at);
  }
  return s;
}

// The typed chunk at s.at + 16 * k, reading only bytes of the slot's block.
__device__ __forceinline__ uint4 block_chunk(const Slot &s, const Launch &l, int k) {
  const uint64_t at = s.at + k * kWindow;
  return load_chunk(at, clamp16(int64_t(l.typed + s.p.lo - at)), clamp16(int64_t(l.typed + s.p.hi - at)));
}

// What a lane tells its neighbours about its window `w` when the window is whole and in
// one block: the block (its typed address) and where window 0 would lie if the block
// went on (t0 - 16 w). Neighbours with equal tags hold typed-contiguous windows of one
// block, so a chunk between them is theirs alone; equal blocks alone would not say it,
// since a type may repeat a block.
struct Tag {
  unsigned long long block, origin;
};

__device__ __forceinline__ Tag tag_of(const Slot &s, const Launch &l, int64_t w) {
  if (!s.one || s.e0 != 0 || s.e1 != kWindow) return {0, 0};
  return {(unsigned long long)(l.typed + s.p.lo), (unsigned long long)(s.t0 - uint64_t(w) * kWindow)};
}

__device__ __forceinline__ bool same(const Tag &a, const Tag &b) {
  return a.block && a.block == b.block && a.origin == b.origin;
}

// Shuffles, by every lane of the warp (never inside a branch that lanes take apart).
__device__ __forceinline__ Tag shfl_down(const Tag &t) {
  return {__shfl_down_sync(~0u, t.block, 1), __shfl_down_sync(~0u, t.origin, 1)};
}

__device__ __forceinline__ Tag shfl_up(const Tag &t) {
  return {__shfl_up_sync(~0u, t.block, 1), __shfl_up_sync(~0u, t.origin, 1)};
}

__device__ __forceinline__ uint4 shfl_down(uint4 v) {
  return make_uint4(__shfl_down_sync(~0u, v.x, 1), __shfl_down_sync(~0u, v.y, 1), __shfl_down_sync(~0u, v.z, 1),
                    __shfl_down_sync(~0u, v.w, 1));
}

// A lane's group of kGroup consecutive windows, from window `g` of the launch.
struct Group {
  int64_t ws;   // stream position of its first byte (window g's start)
  int64_t n;    // windows of the group in the warp's share
  bool whole;   // all kGroup windows in the share and in [first, last)
};

__device__ __forceinline__ Group group_at(const BlockListArgs &a, const Launch &l, int64_t g, int64_t end) {
  Group gr;
  gr.ws = l.stream0 + g * kWindow;
  gr.n = min(int64_t(kGroup), end - g);
  gr.whole = gr.n == kGroup && gr.ws >= a.first && gr.ws + kGroup * kWindow <= a.last;
  return gr;
}

// Stream bytes [e0, e1) of window k of a group, as offsets into the window.
__device__ __forceinline__ void window_bytes(const BlockListArgs &a, const Group &gr, int k, int &e0, int &e1) {
  const int64_t ws = gr.ws + k * kWindow;
  e0 = clamp16(a.first - ws);
  e1 = k < gr.n ? clamp16(a.last - ws) : 0;
}

// Bytes [e0, e1) of the window at stream position `ws`, gathered block by block; `p`
// is the piece at ws + e0.
template <bool Wide>
__device__ uint4 assemble(const BlockListArgs &a, Cursor &c, Piece p, uint64_t typed, int64_t ws, int e0, int e1) {
  uint4 v = make_uint4(0, 0, 0, 0);
  for (int x = e0;;) {
    const int m = int(min(int64_t(e1 - x), p.hi - p.typed));
    v = merge(v, aligned(load_window(typed + p.typed - x, typed + p.lo, typed + p.hi)), x, x + m);
    x += m;
    if (x >= e1) return v;
    p = locate<Wide>(a, c, ws + x);
  }
}

// Bytes [e0, e1) of the window `v` at stream position `ws`, dispersed block by block.
template <bool Wide>
__device__ void disperse(const BlockListArgs &a, Cursor &c, Piece p, uint64_t typed, int64_t ws, int e0, int e1,
                         uint4 v) {
  for (int x = e0;;) {
    const int m = int(min(int64_t(e1 - x), p.hi - p.typed));
    store_window(v, typed + p.typed - x, x, x + m);
    x += m;
    if (x >= e1) return;
    p = locate<Wide>(a, c, ws + x);
  }
}

// Pack. Lane l of a warp takes windows base + 32u + l (u < kSteps): each step of the
// warp is 512 contiguous packed bytes, stored as whole aligned words. A lane loads the
// aligned typed chunk under the start of its window; the chunk under its end is the next
// lane's, taken with a shuffle where that lane's window continues the same block, so
// that a long block costs one coalesced 16-byte load and one store per window. Lanes
// at the ends of blocks load the rest themselves, only from bytes of their block.
template <bool Wide>
__global__ void __launch_bounds__(kThreads, 3) gather(const BlockListArgs a, const Launch l) {
  const int lane = int(threadIdx.x % 32);
  const int64_t warp = (int64_t(blockIdx.x) * kThreads + threadIdx.x) / 32;
  const int64_t end = min(l.nwin, (warp + 1) * l.per_warp);
  Cursor c;
  for (int64_t base = warp * l.per_warp; base < end; base += kWarpStep) {
    Slot s[kSteps];
    uint4 c0[kSteps];
#pragma unroll
    for (int u = 0; u < kSteps; ++u) {  // every load of the step issued before any use
      s[u] = slot_at<Wide>(a, l, c, base + 32 * u + lane, end);
      c0[u] = make_uint4(0, 0, 0, 0);
      if (s[u].one)
        c0[u] = block_chunk(s[u], l, 0);
      else if (s[u].e0 < s[u].e1)
        c0[u] = assemble<Wide>(a, c, s[u].p, l.typed, s[u].ws, s[u].e0, s[u].e1);
    }
#pragma unroll
    for (int u = 0; u < kSteps; ++u) {
      const Tag tag = tag_of(s[u], l, base + 32 * u + lane);
      const Tag next_tag = shfl_down(tag);
      const uint4 next = shfl_down(c0[u]);
      const bool next_same = lane < 31 && same(tag, next_tag);
      if (s[u].e0 >= s[u].e1) continue;
      uint4 v = c0[u];
      if (s[u].one && s[u].shift) v = realign(c0[u], next_same ? next : block_chunk(s[u], l, 1), s[u].shift);
      store_chunk(l.window0 + (base + 32 * u + lane) * kWindow, v, s[u].e0, s[u].e1);
    }
  }
}

// Pack of blocks of kGroupedPackBlock bytes or more on average. Each lane moves groups of
// kGroup consecutive windows. A group inside one block
// (the common case for blocks of 64 bytes and more) reads the kGroup + 1 aligned typed
// chunks under it, the inner ones without any check, and realigns each window from two
// of them; other groups go window by window.
template <bool Wide>
__global__ void __launch_bounds__(kThreads, 3) gather_grouped(const BlockListArgs a, const Launch l) {
  const int64_t warp = (int64_t(blockIdx.x) * kThreads + threadIdx.x) / 32;
  const int64_t end = min(l.nwin, (warp + 1) * l.per_warp);
  Cursor c;
  for (int64_t g = warp * l.per_warp + (threadIdx.x % 32) * kGroup; g < end; g += kGroupStep) {
    const Group gr = group_at(a, l, g, end);
    const uint64_t out = l.window0 + g * kWindow;
    if (gr.whole) {
      const Piece p = locate<Wide>(a, c, gr.ws);
      if (p.hi - p.typed >= kGroup * kWindow) {
        const uint64_t t0 = l.typed + p.typed, at = t0 & ~uint64_t(kWindow - 1);
        const unsigned s = unsigned(t0 - at);
        const int64_t lo = int64_t(l.typed + p.lo - at), hi = int64_t(l.typed + p.hi - at);
        uint4 ch[kGroup + 1];
        ch[0] = load_chunk(at, clamp16(lo), clamp16(hi));
#pragma unroll
        for (int k = 1; k < kGroup; ++k) ch[k] = *reinterpret_cast<const uint4 *>(at + k * kWindow);
        ch[kGroup] = s ? load_chunk(at + kGroup * kWindow, clamp16(lo - kGroup * kWindow), clamp16(hi - kGroup * kWindow))
                       : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int k = 0; k < kGroup; ++k)
          *reinterpret_cast<uint4 *>(out + k * kWindow) = s ? realign(ch[k], ch[k + 1], s) : ch[k];
        continue;
      }
    }
    // Window by window; windows inside one block are realigned after every load is issued.
    Raw raw[kGroup];
    int e0[kGroup], e1[kGroup];
#pragma unroll
    for (int k = 0; k < kGroup; ++k) {
      window_bytes(a, gr, k, e0[k], e1[k]);
      if (e0[k] >= e1[k]) continue;
      const int64_t ws = gr.ws + k * kWindow;
      const Piece p = locate<Wide>(a, c, ws + e0[k]);
      if (p.hi - p.typed >= e1[k] - e0[k]) {
        raw[k] = load_window(l.typed + p.typed - e0[k], l.typed + p.lo, l.typed + p.hi);
      } else {
        raw[k].c0 = assemble<Wide>(a, c, p, l.typed, ws, e0[k], e1[k]);
        raw[k].shift = 0;
      }
    }
#pragma unroll
    for (int k = 0; k < kGroup; ++k)
      if (e0[k] < e1[k]) store_chunk(out + k * kWindow, aligned(raw[k]), e0[k], e1[k]);
  }
}

// Unpack, the mirror image: the typed chunk between two lanes' windows of one block is
// written whole by the first of them (its window's end, the next lane's start, taken
// with a shuffle), so that every typed chunk inside a block is written once, whole; a
// chunk at a block's end is written in part, by the lane whose window reaches it.
template <bool Wide>
__global__ void __launch_bounds__(kThreads, 3) scatter(const BlockListArgs a, const Launch l) {
  const int lane = int(threadIdx.x % 32);
  const int64_t warp = (int64_t(blockIdx.x) * kThreads + threadIdx.x) / 32;
  const int64_t end = min(l.nwin, (warp + 1) * l.per_warp);
  Cursor c;
  for (int64_t base = warp * l.per_warp; base < end; base += kWarpStep) {
    uint4 v[kSteps];
    int e0[kSteps], e1[kSteps];
#pragma unroll
    for (int u = 0; u < kSteps; ++u) {  // the packed loads first
      const int64_t w = base + 32 * u + lane, ws = l.stream0 + w * kWindow;
      e0[u] = clamp16(a.first - ws);
      e1[u] = w < end ? clamp16(a.last - ws) : 0;
      v[u] = e0[u] < e1[u] ? load_chunk(l.window0 + w * kWindow, e0[u], e1[u]) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kSteps; ++u) {
      const Slot s = slot_at<Wide>(a, l, c, base + 32 * u + lane, end);
      const Tag tag = tag_of(s, l, base + 32 * u + lane);
      const Tag next_tag = shfl_down(tag), prev_tag = shfl_up(tag);
      const uint4 next = shfl_down(v[u]);
      const bool next_same = lane < 31 && same(tag, next_tag);
      const bool prev_same = lane > 0 && same(tag, prev_tag);
      if (s.e0 >= s.e1) continue;
      if (!s.one) {
        disperse<Wide>(a, c, s.p, l.typed, s.ws, s.e0, s.e1, v[u]);
        continue;
      }
      if (s.shift == 0) {
        store_chunk(s.at, v[u], s.e0, s.e1);
        continue;
      }
      const unsigned r = unsigned(kWindow) - s.shift;
      const uint4 zero = make_uint4(0, 0, 0, 0);
      if (!prev_same)  // else the previous lane writes this chunk whole
        store_chunk(s.at, realign(zero, v[u], r), int(s.shift) + s.e0, min(int(s.shift) + s.e1, kWindow));
      if (next_same)
        *reinterpret_cast<uint4 *>(s.at + kWindow) = realign(v[u], next, r);
      else
        store_chunk(s.at + kWindow, realign(v[u], zero, r), max(int(s.shift) + s.e0 - kWindow, 0),
                    int(s.shift) + s.e1 - kWindow);
    }
  }
}

// Resident warps of a kernel on the current device: the most warps worth launching.
template <typename Kernel>
int64_t resident_warps(Kernel kernel) {
  int dev = 0, sms = 1, per_sm = 1;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, 0);
  return int64_t(sms) * std::max(per_sm, 1) * (kThreads / 32);
}

template <bool Wide>
Status launch(const BlockListArgs &a, uint64_t typed, uint64_t packed, bool to_packed, cudaStream_t stream) {
  static const int64_t gather_warps = resident_warps(gather<Wide>), scatter_warps = resident_warps(scatter<Wide>),
                       grouped_warps = resident_warps(gather_grouped<Wide>);
  const bool grouped = to_packed && a.table.mean_block >= kGroupedPackBlock;
  const int64_t warp_step = grouped ? kGroupStep : kWarpStep;
  const int64_t phase = int64_t(packed % kWindow);
  Launch l;
  l.typed = typed;
  l.window0 = packed - uint64_t(phase);
  l.stream0 = a.first - phase;
  l.nwin = (phase + a.last - a.first + kWindow - 1) / kWindow;
  // Equal shares of whole warp steps, as many as the GPU holds at once.
  const int64_t steps = (l.nwin + warp_step - 1) / warp_step;
  const int64_t warps = std::min(steps, grouped ? grouped_warps : to_packed ? gather_warps : scatter_warps);
  l.per_warp = (steps + warps - 1) / warps * warp_step;
  const int64_t blocks = ((l.nwin + l.per_warp - 1) / l.per_warp + kThreads / 32 - 1) / (kThreads / 32);
  if (grouped)
    gather_grouped<Wide><<<unsigned(blocks), kThreads, 0, stream>>>(a, l);
  else if (to_packed)
    gather<Wide><<<unsigned(blocks), kThreads, 0, stream>>>(a, l);
  else
    scatter<Wide><<<unsigned(blocks), kThreads, 0, stream>>>(a, l);
  TEMPI_CUDA(cudaGetLastError());
  return Status::Ok;
}

// Whether every position, count and division of the launch fits 31 bits.
bool fits_narrow(const BlockListArgs &a) {
  const int64_t limit = int64_t(1) << 31;
  if (a.last + kWindow >= limit || a.pattern_size >= limit) return false;
  for (int d = 0; d < a.ndims; ++d)
    if (a.counts[d] >= limit) return false;
  return true;
}

int floor_log2(uint64_t x) {
  int n = 0;
  while (x >>= 1) ++n;
  return n;
}

}  // namespace

BlockListImage blocklist_image(const Plan &plan) {
  BlockListImage im;
  int64_t packed = 0;
  for (const Run &r : plan.pattern) {
    if (r.length <= 0 || r.count <= 0) continue;
    im.starts.push_back(packed);
    im.runs.push_back({r.offset, r.stride, r.length});
    packed += r.length * r.count;
  }
  im.starts.push_back(packed);
  const int64_t nruns = int64_t(im.runs.size());
  if (nruns == 0) return im;
  int64_t blocks = 0;
  for (const Run &r : plan.pattern)
    if (r.length > 0 && r.count > 0) blocks += r.count;
  im.mean_block = packed / blocks;
  // About one run per index entry (a search of a step or two), at least 16 bytes each.
  im.shift = std::max(4, floor_log2(uint64_t(packed / nruns)));
  while (((packed - 1) >> im.shift) + 1 > kMaxIndexEntries) ++im.shift;
  const int64_t entries = ((packed - 1) >> im.shift) + 1;
  im.run_at.resize(size_t(entries + 1));
  int64_t r = 0;
  for (int64_t e = 0; e < entries; ++e) {
    while (im.starts[size_t(r + 1)] <= (e << im.shift)) ++r;
    im.run_at[size_t(e)] = uint32_t(r);
  }
  im.run_at[size_t(entries)] = uint32_t(nruns - 1);
  return im;
}

size_t BlockListImage::bytes() const {
  return starts.size() * sizeof(int64_t) + runs.size() * sizeof(BlockRun) + run_at.size() * sizeof(uint32_t);
}

void BlockListImage::lay_out(void *host, void *device, BlockListTable &t) const {
  char *h = static_cast<char *>(host), *d = static_cast<char *>(device);
  const size_t s = starts.size() * sizeof(int64_t), r = runs.size() * sizeof(BlockRun);
  std::memcpy(h, starts.data(), s);
  std::memcpy(h + s, runs.data(), r);
  std::memcpy(h + s + r, run_at.data(), run_at.size() * sizeof(uint32_t));
  t.starts = reinterpret_cast<const int64_t *>(d);
  t.runs = reinterpret_cast<const BlockRun *>(d + s);
  t.run_at = reinterpret_cast<const uint32_t *>(d + s + r);
  t.nruns = int64_t(runs.size());
  t.shift = shift;
  t.mean_block = mean_block;
}

Status launch_blocklist(const BlockListArgs &a, const void *typed, void *packed, bool to_packed,
                        cudaStream_t stream) {
  if (a.last <= a.first || a.table.nruns == 0) return Status::Ok;
  const uint64_t t = reinterpret_cast<uintptr_t>(typed), p = reinterpret_cast<uintptr_t>(packed);
  return fits_narrow(a) ? launch<false>(a, t, p, to_packed, stream) : launch<true>(a, t, p, to_packed, stream);
}

}  // namespace tempi
