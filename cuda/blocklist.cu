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

// Three blocks of 256 threads per multiprocessor: at most 85 registers a thread, which
// the general path of a group needs (at 64 it spills).
constexpr int kThreads = 256;
// Consecutive windows per lane and step: their loads are all issued before the first
// store, and a lane realigns across its own chunks (kGroup + 1 loads for kGroup windows).
constexpr int kGroup = 4;
constexpr int64_t kWarpStep = 32 * kGroup;  // windows a warp moves per step

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

// Pack. Each lane moves groups of kGroup consecutive windows. A group inside one block
// (the common case for blocks of 64 bytes and more) reads the kGroup + 1 aligned typed
// chunks under it, the inner ones without any check, and realigns each window from two
// of them; other groups go window by window.
template <bool Wide>
__global__ void __launch_bounds__(kThreads, 3) gather(const BlockListArgs a, const Launch l) {
  const int64_t warp = (int64_t(blockIdx.x) * kThreads + threadIdx.x) / 32;
  const int64_t end = min(l.nwin, (warp + 1) * l.per_warp);
  Cursor c;
  for (int64_t g = warp * l.per_warp + (threadIdx.x % 32) * kGroup; g < end; g += kWarpStep) {
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

// Unpack, the mirror image: a group inside one block writes the aligned typed chunks
// under it, the inner ones whole and the two at its ends in part.
template <bool Wide>
__global__ void __launch_bounds__(kThreads, 3) scatter(const BlockListArgs a, const Launch l) {
  const int64_t warp = (int64_t(blockIdx.x) * kThreads + threadIdx.x) / 32;
  const int64_t end = min(l.nwin, (warp + 1) * l.per_warp);
  Cursor c;
  for (int64_t g = warp * l.per_warp + (threadIdx.x % 32) * kGroup; g < end; g += kWarpStep) {
    const Group gr = group_at(a, l, g, end);
    const uint64_t in = l.window0 + g * kWindow;
    uint4 v[kGroup];
    int e0[kGroup], e1[kGroup];
#pragma unroll
    for (int k = 0; k < kGroup; ++k) {
      window_bytes(a, gr, k, e0[k], e1[k]);
      if (gr.whole)
        v[k] = *reinterpret_cast<const uint4 *>(in + k * kWindow);
      else if (e0[k] < e1[k])
        v[k] = load_chunk(in + k * kWindow, e0[k], e1[k]);
    }
    if (gr.whole) {
      const Piece p = locate<Wide>(a, c, gr.ws);
      if (p.hi - p.typed >= kGroup * kWindow) {
        const uint64_t t0 = l.typed + p.typed, at = t0 & ~uint64_t(kWindow - 1);
        const int s = int(t0 - at);
        if (s == 0) {
#pragma unroll
          for (int k = 0; k < kGroup; ++k) *reinterpret_cast<uint4 *>(at + k * kWindow) = v[k];
        } else {
          const uint4 zero = make_uint4(0, 0, 0, 0);
          const unsigned r = unsigned(kWindow - s);
          store_chunk(at, realign(zero, v[0], r), s, kWindow);
#pragma unroll
          for (int k = 1; k < kGroup; ++k) *reinterpret_cast<uint4 *>(at + k * kWindow) = realign(v[k - 1], v[k], r);
          store_chunk(at + kGroup * kWindow, realign(v[kGroup - 1], zero, r), 0, s);
        }
        continue;
      }
    }
#pragma unroll
    for (int k = 0; k < kGroup; ++k) {
      if (e0[k] >= e1[k]) continue;
      const int64_t ws = gr.ws + k * kWindow;
      const Piece p = locate<Wide>(a, c, ws + e0[k]);
      if (p.hi - p.typed >= e1[k] - e0[k])
        store_window(v[k], l.typed + p.typed - e0[k], e0[k], e1[k]);
      else
        disperse<Wide>(a, c, p, l.typed, ws, e0[k], e1[k], v[k]);
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
  static const int64_t gather_warps = resident_warps(gather<Wide>), scatter_warps = resident_warps(scatter<Wide>);
  const int64_t phase = int64_t(packed % kWindow);
  Launch l;
  l.typed = typed;
  l.window0 = packed - uint64_t(phase);
  l.stream0 = a.first - phase;
  l.nwin = (phase + a.last - a.first + kWindow - 1) / kWindow;
  // Equal shares of whole warp steps, as many as the GPU holds at once.
  const int64_t steps = (l.nwin + kWarpStep - 1) / kWarpStep;
  const int64_t warps = std::min(steps, to_packed ? gather_warps : scatter_warps);
  l.per_warp = (steps + warps - 1) / warps * kWarpStep;
  const int64_t blocks = ((l.nwin + l.per_warp - 1) / l.per_warp + kThreads / 32 - 1) / (kThreads / 32);
  if (to_packed)
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
}

Status launch_blocklist(const BlockListArgs &a, const void *typed, void *packed, bool to_packed,
                        cudaStream_t stream) {
  if (a.last <= a.first || a.table.nruns == 0) return Status::Ok;
  const uint64_t t = reinterpret_cast<uintptr_t>(typed), p = reinterpret_cast<uintptr_t>(packed);
  return fits_narrow(a) ? launch<false>(a, t, p, to_packed, stream) : launch<true>(a, t, p, to_packed, stream);
}

}  // namespace tempi
