// Block-list plans on the GPU (blocklist.cu): the pattern's runs and an index into
// them, built once per plan and uploaded once per device; kernels that balance the
// work by bytes of the packed stream, not by blocks.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "backend.hpp"
#include "kernels.hpp"
#include "plan.hpp"

namespace tempi {

// One run of a pattern as the kernels read it: blocks of `length` bytes, block k at
// typed offset `typed + k * stride` (relative to the pattern instance). Its packed
// bytes are [starts[i], starts[i + 1]) of the instance.
struct BlockRun {
  int64_t typed, stride, length;
};

// A pattern on the device. `run_at[e]` is the run holding pattern byte e << shift, so
// that a kernel finds the run under any byte with one load and a short search.
struct BlockListTable {
  const int64_t *starts = nullptr;  // nruns + 1 entries, the last the pattern's size
  const BlockRun *runs = nullptr;
  const uint32_t *run_at = nullptr;  // ((pattern_size - 1) >> shift) + 2 entries
  int64_t nruns = 0;
  int shift = 0;
  int64_t mean_block = 0;  // bytes per block, on average (picks the pack kernel)
};

// The host image of a table, laid out as one allocation: starts, runs, run_at.
struct BlockListImage {
  std::vector<int64_t> starts;
  std::vector<BlockRun> runs;
  std::vector<uint32_t> run_at;
  int shift = 0;
  int64_t mean_block = 0;
  size_t bytes() const;
  // Copies the three arrays into `host` (bytes() long) and points `t` at them as
  // they will lie at `device` once `host` is copied there.
  void lay_out(void *host, void *device, BlockListTable &t) const;
};
BlockListImage blocklist_image(const Plan &plan);

// A block-list plan for `count` elements, restricted to stream bytes [first, last).
struct BlockListArgs {
  BlockListTable table;
  int64_t start = 0, pattern_size = 0;
  int ndims = 0;
  int64_t counts[kMaxKernelDims] = {};
  int64_t strides[kMaxKernelDims] = {};
  int64_t first = 0, last = 0;
};

// Plans of long blocks (policy::kLongBlockBytes on average or more, long_blocks.cu): one pattern
// instance cut into pieces of at most about 2 KiB, each inside one block, in stream
// order; one warp moves one piece.
struct LongPiece {
  int64_t typed;   // typed offset of the piece's first byte in the instance
  int64_t packed;  // stream offset of that byte in the instance
  int64_t length;
};
bool long_block_plan(const Plan &plan);
std::vector<LongPiece> long_pieces(const Plan &plan);

// A long-block plan for `count` elements, restricted to stream bytes [first, last):
// `npieces` pieces (on the device) repeated over the dimensions.
struct LongBlockArgs {
  const LongPiece *pieces = nullptr;
  int64_t npieces = 0;
  int64_t start = 0, pattern_size = 0;
  int ndims = 0;
  int64_t counts[kMaxKernelDims] = {};
  int64_t strides[kMaxKernelDims] = {};
  int64_t first = 0, last = 0;
};

// Plans of a small pattern repeated many times (small_pattern.cu): structs of mixed
// members, arrays and subarrays of them, and gathers of one small shape at a list of
// offsets (indexed types of equal blocks, of structs, of vectors). A thread block stages
// a tile of whole instances through shared memory. An instance is the whole pattern,
// or, where the pattern is `ngroups` groups of runs of one shape, one group: group g
// of repetition i lies `groups[g]` bytes after group 0 of repetition i. `map` gives, for
// each byte of an instance's packed bytes, its offset in the instance's typed span (the
// bytes from its first typed byte to its last); `access` lists, for each of the 16
// alignments a span may have, the aligned accesses that cover its typed bytes exactly
// (`accesses[p]` of them at entry `p * stride`, each (slot byte << 3) | log2(width),
// slot byte p + x holding span byte x). Packing reads with accesses of up to 16 bytes;
// unpacking scattered instances (groups) writes bytes, so that a warp's stores to one
// instance are one request, as a whole pattern's 16-byte stores are with their neighbours'.
// Instances that are one block of a multiple of 16 bytes (`one_block`), with the packed
// side aligned, skip the staging: one lane per 16-byte word (small_pattern.cu, Words).
constexpr uint32_t kNoAccess = 7;           // an access entry's code that pads a list
struct AccessTable {
  const uint32_t *list = nullptr;
  int stride = 0;
  int accesses[16] = {};
};
struct SmallPatternTable {
  const uint16_t *map = nullptr;
  AccessTable pack, unpack;
  const int64_t *groups = nullptr;  // ngroups offsets; null for one group
  int64_t ngroups = 1;
  int64_t span_lo = 0;  // typed offset of the span's first byte in an instance
  int span = 0, size = 0;
  int group_step = 16;  // the groups' offsets are multiples of this, mod 16
  bool one_block = false;  // an instance is one block: its packed bytes are its span
};
struct AccessLists {
  std::vector<uint32_t> list;  // 16 * stride entries
  int stride = 0;
  int accesses[16] = {};
};
struct SmallPatternImage {
  std::vector<uint16_t> map;
  AccessLists pack, unpack;
  std::vector<int64_t> groups;  // empty for one group
  int64_t span_lo = 0;
  int span = 0, group_step = 16;
  bool one_block = false;
  size_t bytes() const;
  void lay_out(void *host, void *device, SmallPatternTable &t) const;
};
// The blocks of an instance (the pattern's runs expanded): all of the pattern's where the
// whole pattern is small, else the fewest that make groups of one small shape, 1 where
// that shape is one block or an equal piece of every block (gathered elements, adjacent
// ones merged); 0 where none of these (the byte-balanced kernel).
int64_t small_pattern_blocks(const Plan &plan);  // requires !plan.strided()
inline bool small_pattern_plan(const Plan &plan) { return small_pattern_blocks(plan) > 0; }
SmallPatternImage small_pattern_image(const Plan &plan);  // requires small_pattern_plan(plan)

// Whole instances [inst_first, inst_first + inst_count) of a small-pattern plan, in
// packed order: instance j is group j % ngroups of repetition j / ngroups.
struct SmallPatternArgs {
  SmallPatternTable table;
  int64_t start = 0;
  int ndims = 0;
  int64_t counts[kMaxKernelDims] = {};
  int64_t strides[kMaxKernelDims] = {};
  int64_t inst_first = 0, inst_count = 0;
  // Packing: typed addresses inside which an aligned 16-byte chunk may be read whole, past
  // the type's bytes (the typed buffer's allocation); an empty range reads only the type's
  // bytes.
  uint64_t readable_lo = 0, readable_hi = 0;
};

// `typed` and `packed` may have any alignment; `packed` holds stream byte `first`
// (launch_small_pattern: the first byte of instance inst_first).
// launch_blocklist balances by bytes and finds the block of every 16-byte window (short
// blocks); launch_long_blocks takes `starts`, the pieces' stream offsets on the host, to
// launch only the pieces in [first, last).
Status launch_long_blocks(const LongBlockArgs &a, const std::vector<int64_t> &starts, const void *typed,
                          void *packed, bool to_packed, cudaStream_t stream);
Status launch_blocklist(const BlockListArgs &a, const void *typed, void *packed, bool to_packed,
                        cudaStream_t stream);
Status launch_small_pattern(const SmallPatternArgs &a, const void *typed, void *packed, bool to_packed,
                            cudaStream_t stream);

}  // namespace tempi
