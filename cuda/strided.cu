// The strided kernels (kernels.hpp, launch_strided): one thread per word of the packed
// stream, each finding its typed offset through the plan's dimensions; 32-bit indices
// with fast division where the object allows, 64-bit ones otherwise.
#include "kernel_common.cuh"

namespace tempi {

namespace {

// Kernel parameters for indices that fit 32 bits (the common case): fast division.
struct Strided32 {
  int64_t start;
  int ndims;
  uint32_t words_per_block;
  FastDiv per_block;
  FastDiv dims[kMaxKernelDims];
  int64_t strides[kMaxKernelDims];
  uint32_t first_word, nwords;
};

__device__ __forceinline__ int64_t typed_offset(const Strided32 &a, uint32_t q, int word) {
  uint32_t row = a.per_block.div(q);
  int64_t off = a.start + int64_t(q - row * a.words_per_block) * word;
#pragma unroll
  for (int d = 0; d < kMaxKernelDims; ++d) {
    if (d >= a.ndims) break;
    const uint32_t next = a.dims[d].div(row);
    off += int64_t(row - next * a.dims[d].d) * a.strides[d];
    row = next;
  }
  return off;
}

// Each thread moves kUnroll words per round, all loads issued before any store, so
// that scattered accesses (short blocks) keep enough requests in flight.
constexpr int kUnroll = 4;

template <int W, bool ToPacked>
__global__ void __launch_bounds__(kThreads) strided32(Strided32 a, const uint8_t *__restrict__ src,
                                                      uint8_t *__restrict__ dst) {
  using T = typename WordOf<W>::type;
  const uint32_t step = gridDim.x * blockDim.x;
  uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  for (; i + (kUnroll - 1) * step < a.nwords; i += kUnroll * step) {
    T v[kUnroll];
    int64_t off[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      off[u] = typed_offset(a, a.first_word + i + u * step, W);
      v[u] = ToPacked ? *reinterpret_cast<const T *>(src + off[u]) : reinterpret_cast<const T *>(src)[i + u * step];
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (ToPacked)
        reinterpret_cast<T *>(dst)[i + u * step] = v[u];
      else
        *reinterpret_cast<T *>(dst + off[u]) = v[u];
    }
  }
  for (; i < a.nwords; i += step) {
    const int64_t off = typed_offset(a, a.first_word + i, W);
    if (ToPacked)
      reinterpret_cast<T *>(dst)[i] = *reinterpret_cast<const T *>(src + off);
    else
      *reinterpret_cast<T *>(dst + off) = reinterpret_cast<const T *>(src)[i];
  }
}

// The general case: 64-bit indices and plain division (objects with > 2^32 words).
template <int W, bool ToPacked>
__global__ void __launch_bounds__(kThreads) strided64(StridedArgs a, const uint8_t *__restrict__ src,
                                                      uint8_t *__restrict__ dst) {
  using T = typename WordOf<W>::type;
  const int64_t wpb = a.block / W, first = a.first / W, n = (a.last - a.first) / W;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t q = first + i;
    int64_t row = q / wpb;
    int64_t off = a.start + (q - row * wpb) * W;
    for (int d = 0; d < a.ndims; ++d) {
      off += (row % a.counts[d]) * a.strides[d];
      row /= a.counts[d];
    }
    if (ToPacked)
      reinterpret_cast<T *>(dst)[i] = reinterpret_cast<const T *>(src + off)[0];
    else
      reinterpret_cast<T *>(dst + off)[0] = reinterpret_cast<const T *>(src)[i];
  }
}


bool fits_32(const StridedArgs &a, int word) {
  const uint64_t limit = uint64_t(1) << 31;
  if (uint64_t(a.last / word) >= limit || uint64_t(a.block / word) >= limit) return false;
  uint64_t rows = 1;
  for (int d = 0; d < a.ndims; ++d) {
    rows *= uint64_t(a.counts[d]);
    if (rows >= limit) return false;
  }
  return true;
}

template <int W, bool ToPacked>
void launch_strided_w(const StridedArgs &a, const uint8_t *src, uint8_t *dst, cudaStream_t stream) {
  const int64_t nwords = (a.last - a.first) / W;
  const int grid = grid_for(nwords);
  if (fits_32(a, W)) {
    Strided32 s;
    s.start = a.start;
    s.ndims = a.ndims;
    s.words_per_block = uint32_t(a.block / W);
    s.per_block = FastDiv(s.words_per_block);
    for (int d = 0; d < a.ndims; ++d) {
      s.dims[d] = FastDiv(uint32_t(a.counts[d]));
      s.strides[d] = a.strides[d];
    }
    s.first_word = uint32_t(a.first / W);
    s.nwords = uint32_t(nwords);
    strided32<W, ToPacked><<<grid, kThreads, 0, stream>>>(s, src, dst);
  } else {
    strided64<W, ToPacked><<<grid, kThreads, 0, stream>>>(a, src, dst);
  }
}

template <bool ToPacked>
void dispatch_strided(const StridedArgs &a, int word, const uint8_t *src, uint8_t *dst, cudaStream_t s) {
  switch (word) {
    case 16: return launch_strided_w<16, ToPacked>(a, src, dst, s);
    case 8: return launch_strided_w<8, ToPacked>(a, src, dst, s);
    case 4: return launch_strided_w<4, ToPacked>(a, src, dst, s);
    case 2: return launch_strided_w<2, ToPacked>(a, src, dst, s);
    default: return launch_strided_w<1, ToPacked>(a, src, dst, s);
  }
}

}  // namespace

Status launch_strided(const StridedArgs &a, int word, const void *typed, void *packed, bool to_packed,
                      cudaStream_t stream) {
  if (a.last <= a.first) return Status::Ok;
  if (to_packed)
    dispatch_strided<true>(a, word, static_cast<const uint8_t *>(typed), static_cast<uint8_t *>(packed), stream);
  else
    dispatch_strided<false>(a, word, static_cast<const uint8_t *>(packed), static_cast<uint8_t *>(const_cast<void *>(typed)),
                            stream);
  TEMPI_CUDA(cudaGetLastError());
  return Status::Ok;
}

}  // namespace tempi
