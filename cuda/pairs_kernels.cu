// Typed-to-typed kernels (kernels.hpp): fused pairs of strided objects, each word read
// from its place in the source and written to its place in the destination, and paired
// runs of block lists, one warp per run.
#include <type_traits>
#include <vector>

#include "blocklist_device.cuh"
#include "kernel_common.cuh"

namespace tempi {

namespace {

template <int W>
__device__ __forceinline__ void pair_object(const PairDev &p, uint32_t i, uint32_t step) {
  using T = typename WordOf<W>::type;
  for (; i < p.nwords; i += step)
    *reinterpret_cast<T *>(p.to.base + word_offset<W>(p.to, i)) =
        *reinterpret_cast<const T *>(p.from.base + word_offset<W>(p.from, i));
}

// This thread block's part of pair p, whose thread blocks end before block `end`.
__device__ __forceinline__ void pair_part(const PairDev &p, uint32_t end) {
  const uint32_t nblocks = end - p.first_block;
  const uint32_t i = (blockIdx.x - p.first_block) * blockDim.x + threadIdx.x, step = nblocks * blockDim.x;
  switch (p.word) {
    case 16: return pair_object<16>(p, i, step);
    case 8: return pair_object<8>(p, i, step);
    case 4: return pair_object<4>(p, i, step);
    case 2: return pair_object<2>(p, i, step);
    default: return pair_object<1>(p, i, step);
  }
}

template <int N>
__global__ void __launch_bounds__(kThreads) fused_pairs(const __grid_constant__ Batch<PairDev, N> b) {
  int j = 0;
  while (j + 1 < b.n && blockIdx.x >= b.items[j + 1].first_block) ++j;
  pair_part(b.items[j], j + 1 < b.n ? b.items[j + 1].first_block : gridDim.x);
}

// The same moves, their descriptions kept in device memory (prepare_fused_pairs): each thread
// block finds its pair and copies its description into shared memory, where the stores of
// the move cannot alias it (read from global memory, it would be read again after each).
__global__ void __launch_bounds__(kThreads) fused_pairs_at(const PairDev *items, int n) {
  __shared__ PairDev p;
  const uint32_t end = find_own(items, n, p);
  pair_part(p, end);
}

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

// One warp per run: runs are at most kPairedRunBytes, one round of move_piece
// (blocklist_device.cuh), so a lane issues all its loads before its first store and
// every access is 16 bytes wide, realigned in registers, whatever the alignment of the
// run's two addresses (a triangle's rows start 8 bytes apart mod 16). A loop of
// one-word copies waited a memory round trip per word, since a store may alias the
// next load: 0.55 of the peer copy rate on triangles (docs/benchmarks.md).
static_assert(kPairedRunBytes <= kPieceBytes, "a paired run is one piece of a warp");

__global__ void __launch_bounds__(kThreads)
    paired_runs_kernel(const PairedRun *runs, int64_t n, const uint8_t *from, uint8_t *to) {
  const int lane = int(threadIdx.x % 32);
  const int64_t warps = int64_t(gridDim.x) * blockDim.x / 32;
  for (int64_t w = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32; w < n; w += warps) {
    const PairedRun r = runs[w];
    move_piece(reinterpret_cast<uintptr_t>(to + r.to), reinterpret_cast<uintptr_t>(from + r.from), r.length, lane);
  }
}

Status launch_paired_runs(const PairedRun *runs, int64_t n, const void *from, void *to, cudaStream_t stream) {
  if (n <= 0) return Status::Ok;
  paired_runs_kernel<<<grid_for(n * 32), kThreads, 0, stream>>>(runs, n, static_cast<const uint8_t *>(from),
                                                                  static_cast<uint8_t *>(to));
  TEMPI_CUDA(cudaGetLastError());
  return Status::Ok;
}

namespace {
// The descriptions of n pairs for a fused launch; returns its thread blocks.
uint32_t describe_pairs(const FusedPair *pairs, int n, PairDev *d) {
  uint32_t blocks = 0;
  for (int k = 0; k < n; ++k) {
    describe_side(pairs[k].from, pairs[k].from.typed, d[k].from);
    describe_side(pairs[k].to, pairs[k].to.typed, d[k].to);
    d[k].word = uint32_t(pairs[k].from.word);
    d[k].nwords = uint32_t(pairs[k].from.bytes / pairs[k].from.word);
    d[k].first_block = blocks;
    blocks += fused_blocks(d[k].nwords);
  }
  return blocks;
}
}  // namespace

size_t fused_pairs_bytes(int n) { return sizeof(PairDev) * size_t(n < 0 ? 0 : n); }

Status prepare_fused_pairs(const FusedPair *pairs, int n, void *device_items, uint32_t &blocks, cudaStream_t stream) {
  std::vector<PairDev> d(size_t(n < 0 ? 0 : n));
  blocks = describe_pairs(pairs, n, d.data());
  // On TEMPI's stream, not the legacy default one (the application's work there is not this
  // copy's business; the zero-copy thread prepares too).
  TEMPI_CUDA(cudaMemcpyAsync(device_items, d.data(), fused_pairs_bytes(n), cudaMemcpyHostToDevice, stream));
  TEMPI_CUDA(cudaStreamSynchronize(stream));
  return Status::Ok;
}

Status launch_prepared_pairs(const void *device_items, int n, uint32_t blocks, cudaStream_t stream) {
  if (n <= 0) return Status::Ok;
  fused_pairs_at<<<blocks, kThreads, 0, stream>>>(static_cast<const PairDev *>(device_items), n);
  TEMPI_CUDA(cudaGetLastError());
  return Status::Ok;
}

Status launch_fused_pairs(const FusedPair *pairs, int n, cudaStream_t stream) {
  if (n <= 0) return Status::Ok;
  PairDev d[policy::kMaxFusedPairs];
  std::memset(static_cast<void *>(d), 0, sizeof d);  // padding too: a table is recognized by its bytes
  const uint32_t blocks = describe_pairs(pairs, n, d);
  const void *table = nullptr;
  if (n > policy::kParameterItems && place_table(d, sizeof(PairDev) * size_t(n), stream, table) == Status::Ok) {
    fused_pairs_at<<<blocks, kThreads, 0, stream>>>(static_cast<const PairDev *>(table), n);
    TEMPI_CUDA(cudaGetLastError());
    return Status::Ok;
  }
  launch_smallest<2, 8, policy::kMaxFusedPairs>(d, n, [&](const auto &b) {
    fused_pairs<std::decay_t<decltype(b)>::capacity><<<blocks, kThreads, 0, stream>>>(b);
  });
  TEMPI_CUDA(cudaGetLastError());
  return Status::Ok;
}

}  // namespace tempi
