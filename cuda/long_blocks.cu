// Block-list pack and unpack for lists of long blocks (triangular matrices, columns,
// blocks of kilobytes; issue 19).
//
// Each pattern instance is cut, once per plan on the host, into pieces of at most
// kPieceBytes inside one block (cut where the instance's stream offset is a multiple of
// kPieceBytes, so that pieces start 16-byte aligned on the packed side where the packed
// buffer is), and one warp moves one piece: one load of its description, then the data.
// A warp moves its piece as the aligned 16-byte chunks of its destination (whole inside
// the piece, partial at its two ends, so that nothing outside the block or the range is
// written); lane l takes chunks l, l + 32, ..., so that the warp's accesses are
// coalesced, and builds its chunk from the two aligned source chunks under it,
// realigned in registers where the block's source and destination addresses differ mod
// 16: the access width follows each block, not the worst alignment of the plan. The
// second source chunk is the next lane's first (a shuffle), so each source chunk is read
// once, and a piece fits one round of kSlices chunks per lane, all loaded before the
// first store.
//
// Measured against the alternatives (one H100, 2026-11-23, docs/benchmarks.md): a warp
// per 2 KiB share of the stream that finds its blocks through the run index walked the
// blocks of a share one after another, each a round trip to memory, and the shares of
// many short columns at a triangle's end set the kernel's time (lower triangle N = 4000:
// 70 us against the hand-written kernel's 45 us); the byte-balanced kernel of
// blocklist.cu finds the block of every 16-byte window, which costs more than moving it
// once blocks are long; the one-warp-per-piece kernel before these used one access
// width for the whole plan (8 bytes on a triangle of doubles, 1 where any block is odd).
#include <cuda_runtime.h>

#include <algorithm>

#include "blocklist.hpp"
#include "blocklist_device.cuh"
#include "check.hpp"

namespace tempi {

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

// The pieces of one launch: `work` pieces from piece `first_piece` of the stream (piece
// g is piece g % npieces of instance g / npieces).
struct Work {
  uint64_t typed, packed;
  int64_t first_piece, work;
};

// One piece per warp; `ToPacked` packs (typed -> packed), else unpacks. `Wide`: 64-bit
// divisions (piece indices or counts past 2^31).
template <bool Wide, bool ToPacked>
__global__ void __launch_bounds__(kThreads) long_blocks(const LongBlockArgs a, const Work w) {
  const int64_t i = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (i >= w.work) return;
  const int lane = threadIdx.x % 32;
  const int64_t g = w.first_piece + i;
  int64_t inst = quot<Wide>(g, a.npieces);
  const LongPiece p = a.pieces[g - inst * a.npieces];
  const int64_t lo = inst * a.pattern_size + p.packed;
  const int64_t from = max(lo, a.first), to = min(lo + p.length, a.last);
  if (from >= to) return;
  int64_t base = a.start;
  for (int d = 0; d < a.ndims; ++d) {
    const int64_t q = quot<Wide>(inst, a.counts[d]);
    base += (inst - q * a.counts[d]) * a.strides[d];
    inst = q;
  }
  const uint64_t typed = w.typed + uint64_t(base + p.typed + (from - lo)), packed = w.packed + uint64_t(from - a.first);
  if (ToPacked)
    move_piece(packed, typed, to - from, lane);
  else
    move_piece(typed, packed, to - from, lane);
}

// The piece that holds stream byte `pos`, as an index into the stream's pieces.
int64_t piece_of(const LongBlockArgs &a, const std::vector<int64_t> &starts, int64_t pos) {
  const int64_t inst = pos / a.pattern_size, o = pos - inst * a.pattern_size;
  const int64_t k = int64_t(std::upper_bound(starts.begin(), starts.end(), o) - starts.begin()) - 1;
  return inst * a.npieces + k;
}

}  // namespace

bool long_block_plan(const Plan &plan) {
  int64_t blocks = 0;
  for (const Run &r : plan.pattern) blocks += r.count;
  return blocks > 0 && plan.pattern_size >= policy::kLongBlockBytes * blocks;
}

std::vector<LongPiece> long_pieces(const Plan &plan) {
  std::vector<LongPiece> pieces;
  int64_t packed = 0;
  for (const Run &r : plan.pattern)
    for (int64_t b = 0; b < r.count && r.length > 0; ++b)
      for (int64_t at = 0; at < r.length;) {
        const int64_t n = std::min(r.length - at, kPieceBytes - packed % kPieceBytes);
        pieces.push_back({r.offset + b * r.stride + at, packed, n});
        at += n;
        packed += n;
      }
  return pieces;
}

Status launch_long_blocks(const LongBlockArgs &a, const std::vector<int64_t> &starts, const void *typed,
                          void *packed, bool to_packed, cudaStream_t stream) {
  if (a.last <= a.first || a.npieces == 0) return Status::Ok;
  Work w;
  w.typed = reinterpret_cast<uintptr_t>(typed);
  w.packed = reinterpret_cast<uintptr_t>(packed);
  w.first_piece = piece_of(a, starts, a.first);
  w.work = piece_of(a, starts, a.last - 1) - w.first_piece + 1;
  const int64_t blocks = (w.work + kWarps - 1) / kWarps;
  if (blocks > int64_t(0x7fffffff)) return Status::Unsupported;
  const int64_t limit = int64_t(1) << 31;
  bool wide = w.first_piece + w.work >= limit || a.npieces >= limit;
  for (int d = 0; d < a.ndims; ++d) wide = wide || a.counts[d] >= limit;
  const unsigned grid = unsigned(blocks);
  if (to_packed) {
    if (wide)
      long_blocks<true, true><<<grid, kThreads, 0, stream>>>(a, w);
    else
      long_blocks<false, true><<<grid, kThreads, 0, stream>>>(a, w);
  } else {
    if (wide)
      long_blocks<true, false><<<grid, kThreads, 0, stream>>>(a, w);
    else
      long_blocks<false, false><<<grid, kThreads, 0, stream>>>(a, w);
  }
  TEMPI_CUDA(cudaGetLastError());
  return Status::Ok;
}

}  // namespace tempi
