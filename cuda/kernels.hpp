// Launchers of the pack/unpack kernels (strided.cu, fused.cu, open_kernel.cu,
// pairs_kernels.cu; dispatch.cu chooses among them). Both directions use the same
// kernels: `to_packed` true packs (typed -> packed), false unpacks.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend.hpp"
#include "paired_runs.hpp"
#include "policy.hpp"

namespace tempi {

constexpr int kMaxKernelDims = 15;  // repetition dimensions above the contiguous block

// A strided plan for `count` elements, restricted to stream bytes [first, last).
struct StridedArgs {
  int64_t start = 0;       // typed offset of the first block
  int64_t block = 0;       // contiguous bytes per block (dimension 0)
  int ndims = 0;           // repetition dimensions, innermost first
  int64_t counts[kMaxKernelDims] = {};
  int64_t strides[kMaxKernelDims] = {};
  int64_t first = 0, last = 0;
};

// One strided object of a fused launch: bytes [0, bytes) of its packed stream, between
// `typed` and `packed` (both GPU-accessible: device, managed or mapped pinned memory).
struct FusedObject {
  const void *typed = nullptr;
  void *packed = nullptr;
  int64_t start = 0, block = 0;
  int ndims = 0;
  int64_t counts[policy::kMaxFusedDims] = {};
  int64_t strides[policy::kMaxFusedDims] = {};
  int64_t bytes = 0;
  int word = 1;  // access width dividing block, strides, start, bytes and both addresses
};
// Whether an object of this shape can be one of a fused launch (32-bit word indices).
bool fusable(int ndims, int64_t bytes, int word);
// Moves every object (at most policy::kMaxFusedObjects) with one kernel launch: thread blocks
// are dealt to the objects by size, each object with its own access width.
Status launch_fused(const FusedObject *objects, int n, bool to_packed, cudaStream_t stream);
// A fused launch of more than a few objects or pairs finds their descriptions in device
// memory (fused_tables.cu, place_table): how many tables this process copied there, and how many
// launches found theirs there already (a batch repeated byte for byte) (tests).
struct FusedTableCounts {
  uint64_t placed = 0, reused = 0;
};
FusedTableCounts fused_table_counts();
// For the life of a scope, the calling thread's fused launches carry their descriptions in
// the launch's parameter, never in a kept table: the launches on an application's stream
// (the enqueue calls), which may be destroyed while a table keyed by it lives on, or be
// captured into a graph, whose replays would copy whatever a table's shadow holds then.
class ParameterOnly {
 public:
  ParameterOnly();
  ~ParameterOnly();
  ParameterOnly(const ParameterOnly &) = delete;
  ParameterOnly &operator=(const ParameterOnly &) = delete;

 private:
  bool before_;
};

// An open launch (docs/design.md, "Open launches"): one kernel, launched once, that moves
// the objects the host describes to it while it runs, so that a run of MPI_Pack or
// MPI_Unpack calls costs one launch. The host writes each object's description into its
// slot in pinned host memory, then `published`; setting `closed` (after the last
// publication) ends the kernel once it has moved every published object. The objects of
// one open launch run in no order among themselves.
constexpr uint32_t kOpenCapacity = 256;   // objects per open launch
constexpr size_t kOpenSlotBytes = 160;    // one object's description
constexpr size_t kOpenHeaderBytes = 64;   // before the slots, in host and in device memory
constexpr uint32_t kOpenTileWords = 1024;  // an object is moved in tiles of this many words
struct OpenHost {
  uint32_t published;  // slots [0, published) hold objects
  uint32_t closed;     // no object will be added
};
// Host memory, mapped for the GPU: kOpenHeaderBytes (an OpenHost), kOpenCapacity slots,
// then kOpenCapacity tile ends (uint32_t: object k's tiles end where object k + 1's begin).
// Device memory: the same layout; the kernel's own copy. Zero it once when it is
// allocated: a launch recognizes its own writes there by `epoch` (never 0, never reused).
constexpr size_t kOpenEndsOffset = kOpenHeaderBytes + kOpenCapacity * kOpenSlotBytes;
constexpr size_t kOpenAreaBytes = kOpenEndsOffset + kOpenCapacity * sizeof(uint32_t);
struct OpenArgs {
  const OpenHost *host;
  uint8_t *device;
  uint64_t epoch;  // larger than every earlier launch's on this area; its low 32 bits never 0
};
// Writes the description of `o` (a fusable object) into a slot, its tiles numbered from
// `first_tile`; returns the end of its tiles.
uint32_t describe_open(const FusedObject &o, bool to_packed, uint32_t first_tile, void *slot);
Status launch_open(const OpenArgs &a, bool to_packed, cudaStream_t stream);

// A typed-to-typed move of a fused launch: `from` read at from.typed, `to` written at
// to.typed (their `packed` unused), one access width and one byte count for both.
struct FusedPair {
  FusedObject from, to;
};
// Moves every pair (at most policy::kMaxFusedPairs) with one kernel launch: each word is read
// from its place in the source object and written to its place in the destination, so
// the bytes cross memory once (zero-copy's reads of peers' blocks).
Status launch_fused_pairs(const FusedPair *pairs, int n, cudaStream_t stream);
// The same launch for pairs that repeat, any number of them: described once into
// `device_items` (device memory of fused_pairs_bytes(n), written before this returns), and
// launched from there with `blocks` thread blocks, a parameter of a few bytes.
size_t fused_pairs_bytes(int n);
Status prepare_fused_pairs(const FusedPair *pairs, int n, void *device_items, uint32_t &blocks, cudaStream_t stream);
Status launch_prepared_pairs(const void *device_items, int n, uint32_t blocks, cudaStream_t stream);

// The longest paired run launch_paired_runs takes: what one warp moves in one round.
constexpr int64_t kPairedRunBytes = 2016;
// Moves `n` paired runs (device memory, core/paired_runs.hpp; none longer than
// kPairedRunBytes) from the object at `from` to the object at `to`: one warp per run, in
// 16-byte accesses whatever the alignment (zero-copy's reads of block-list objects, in
// one pass).
Status launch_paired_runs(const PairedRun *runs, int64_t n, const void *from, void *to, cudaStream_t stream);

// `word` is the access width in bytes (1, 2, 4, 8 or 16) dividing every offset,
// length and address involved.
Status launch_strided(const StridedArgs &a, int word, const void *typed, void *packed, bool to_packed,
                      cudaStream_t stream);

}  // namespace tempi
