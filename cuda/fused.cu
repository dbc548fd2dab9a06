// Fused launches (kernels.hpp, launch_fused): many small strided objects moved by one
// kernel, thread blocks dealt to the objects by size, the descriptions passed as the
// launch's parameter or, for larger batches, read from a device table.
#include <type_traits>

#include "kernel_common.cuh"

namespace tempi {

namespace {

template <int W, bool ToPacked>
__device__ __forceinline__ void fused_object(const FusedDev &o, uint32_t i, uint32_t step) {
  using T = typename WordOf<W>::type;
  for (; i < o.nwords; i += step) {
    const int64_t off = word_offset<W>(o, i);
    if (ToPacked)
      reinterpret_cast<T *>(o.dst)[i] = *reinterpret_cast<const T *>(o.src + off);
    else
      *reinterpret_cast<T *>(o.dst + off) = reinterpret_cast<const T *>(o.src)[i];
  }
}

// This thread block's part of object `o`, whose blocks end before block `end`.
template <bool ToPacked>
__device__ __forceinline__ void fused_part(const FusedDev &o, uint32_t end) {
  const uint32_t nblocks = end - o.first_block;
  const uint32_t i = (blockIdx.x - o.first_block) * blockDim.x + threadIdx.x, step = nblocks * blockDim.x;
  switch (o.word) {
    case 16: return fused_object<16, ToPacked>(o, i, step);
    case 8: return fused_object<8, ToPacked>(o, i, step);
    case 4: return fused_object<4, ToPacked>(o, i, step);
    case 2: return fused_object<2, ToPacked>(o, i, step);
    default: return fused_object<1, ToPacked>(o, i, step);
  }
}

template <bool ToPacked, int N>
__global__ void __launch_bounds__(kThreads) fused(const __grid_constant__ Batch<FusedDev, N> b) {
  int j = 0;
  while (j + 1 < b.n && blockIdx.x >= b.items[j + 1].first_block) ++j;
  fused_part<ToPacked>(b.items[j], j + 1 < b.n ? b.items[j + 1].first_block : gridDim.x);
}

// The fused launch with its descriptions in device memory (place_table).
template <bool ToPacked>
__global__ void __launch_bounds__(kThreads) fused_at(const FusedDev *items, int n) {
  __shared__ FusedDev o;
  const uint32_t end = find_own(items, n, o);
  fused_part<ToPacked>(o, end);
}

}  // namespace

bool fusable(int ndims, int64_t bytes, int word) {
  return ndims <= policy::kMaxFusedDims && bytes > 0 && bytes / word < (int64_t(1) << 31);
}

Status launch_fused(const FusedObject *objects, int n, bool to_packed, cudaStream_t stream) {
  if (n <= 0) return Status::Ok;
  FusedDev d[policy::kMaxFusedObjects];
  std::memset(static_cast<void *>(d), 0, sizeof d);  // padding too: a table is recognized by its bytes
  uint32_t blocks = 0;
  for (int k = 0; k < n; ++k) {
    describe(objects[k], to_packed, d[k]);
    d[k].first_block = blocks;
    blocks += fused_blocks(d[k].nwords);
  }
  const void *table = nullptr;
  if (n > policy::kParameterItems && place_table(d, sizeof(FusedDev) * size_t(n), stream, table) == Status::Ok) {
    const FusedDev *items = static_cast<const FusedDev *>(table);
    if (to_packed)
      fused_at<true><<<blocks, kThreads, 0, stream>>>(items, n);
    else
      fused_at<false><<<blocks, kThreads, 0, stream>>>(items, n);
    TEMPI_CUDA(cudaGetLastError());
    return Status::Ok;
  }
  launch_smallest<4, 16, policy::kMaxFusedObjects>(d, n, [&](const auto &b) {
    constexpr int N = std::decay_t<decltype(b)>::capacity;
    if (to_packed)
      fused<true, N><<<blocks, kThreads, 0, stream>>>(b);
    else
      fused<false, N><<<blocks, kThreads, 0, stream>>>(b);
  });
  TEMPI_CUDA(cudaGetLastError());
  return Status::Ok;
}

}  // namespace tempi
