// The hand-written baselines of tools/bench_pack's transposes and permutations: what an
// application writes instead of a datatype. The classic shared-memory tiled transpose
// (32 × 32 tiles, rows padded by one element against bank conflicts, 32 × 8 threads that
// move 4 elements each), and the same tile over the (x, z) planes of a 3-D grid for the
// permutation (x, y, z) -> (z, x, y).
//
// The interface is plain types, declared again in bench_pack.cpp (a signature mismatch
// is a link error).
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace bench_pack_reorder {
namespace {

constexpr int kTile = 32, kRows = 8;

// out[c][r] = in[r][c]: `in` is rows × cols, `out` cols × rows, both row-major.
template <typename T>
__global__ void transpose_tiled(const T *__restrict__ in, T *__restrict__ out, int rows, int cols) {
  __shared__ T tile[kTile][kTile + 1];
  int c = blockIdx.x * kTile + threadIdx.x, r = blockIdx.y * kTile + threadIdx.y;
  for (int j = 0; j < kTile; j += kRows)
    if (c < cols && r + j < rows) tile[threadIdx.y + j][threadIdx.x] = in[size_t(r + j) * cols + c];
  __syncthreads();
  r = blockIdx.y * kTile + threadIdx.x;  // lanes along out's rows: r is out's column
  c = blockIdx.x * kTile + threadIdx.y;
  for (int j = 0; j < kTile; j += kRows)
    if (r < rows && c + j < cols) out[size_t(c + j) * rows + r] = tile[threadIdx.x][threadIdx.y + j];
}

// Pack: packed[y][x][z] = grid[z][y][x] of an n^3 grid (x fastest); unpack the reverse.
// One 32 × 32 tile over (z, x) of one y plane; both sides read and write rows.
template <bool Pack>
__global__ void permute_tiled(const float *__restrict__ src, float *__restrict__ dst, int n) {
  __shared__ float tile[kTile][kTile + 1];  // [z][x]
  const size_t y = blockIdx.z, nn = size_t(n);
  const int x0 = blockIdx.x * kTile, z0 = blockIdx.y * kTile, tx = threadIdx.x, ty = threadIdx.y;
  for (int j = 0; j < kTile; j += kRows) {
    if (Pack) {
      const int x = x0 + tx, z = z0 + ty + j;
      if (x < n && z < n) tile[ty + j][tx] = src[(z * nn + y) * nn + x];
    } else {
      const int z = z0 + tx, x = x0 + ty + j;
      if (x < n && z < n) tile[tx][ty + j] = src[(y * nn + x) * nn + z];
    }
  }
  __syncthreads();
  for (int j = 0; j < kTile; j += kRows) {
    if (Pack) {
      const int z = z0 + tx, x = x0 + ty + j;
      if (x < n && z < n) dst[(y * nn + x) * nn + z] = tile[tx][ty + j];
    } else {
      const int x = x0 + tx, z = z0 + ty + j;
      if (x < n && z < n) dst[(z * nn + y) * nn + x] = tile[ty + j][tx];
    }
  }
}

template <typename T>
int launch_transpose(const void *in, void *out, int rows, int cols, cudaStream_t stream) {
  const dim3 grid((cols + kTile - 1) / kTile, (rows + kTile - 1) / kTile), block(kTile, kRows);
  transpose_tiled<T><<<grid, block, 0, stream>>>(static_cast<const T *>(in), static_cast<T *>(out), rows, cols);
  return cudaGetLastError();
}

}  // namespace

// Transposes a rows × cols matrix of `element`-byte elements (4, 8 or 16) on `stream`;
// returns the launch's cudaError_t (cudaErrorInvalidValue for another element size).
int transpose(const void *in, void *out, int rows, int cols, int element, cudaStream_t stream) {
  switch (element) {
    case 4: return launch_transpose<uint32_t>(in, out, rows, cols, stream);
    case 8: return launch_transpose<uint64_t>(in, out, rows, cols, stream);
    case 16: return launch_transpose<uint4>(in, out, rows, cols, stream);
    default: return cudaErrorInvalidValue;
  }
}

// (x, y, z) -> (z, x, y) of an n^3 float grid (pack), or back (unpack), on `stream`.
int permute_zxy(const float *src, float *dst, int n, bool pack, cudaStream_t stream) {
  const dim3 grid((n + kTile - 1) / kTile, (n + kTile - 1) / kTile, n), block(kTile, kRows);
  if (pack)
    permute_tiled<true><<<grid, block, 0, stream>>>(src, dst, n);
  else
    permute_tiled<false><<<grid, block, 0, stream>>>(src, dst, n);
  return cudaGetLastError();
}

}  // namespace bench_pack_reorder
