// The hand-written baseline of tools/bench_alltoallw: what an FFT code writes instead of
// datatypes. One launch copies a set of boxes — each rows_z x rows_y rows of row_bytes
// contiguous bytes, at its own strides on each side — between the grid and a contiguous
// per-peer buffer (pack before MPI_Alltoallv, unpack after). Rows are whole elements of
// 16 bytes, so every thread moves 16-byte words.
//
// The interface is plain types, declared again in bench_alltoallw.cpp (a signature
// mismatch is a link error).
#include <cuda_runtime.h>

namespace bench_alltoallw {

struct Box {
  long long src_offset, dst_offset;          // bytes
  long long src_z, src_y, dst_z, dst_y;      // strides in bytes
  int rows_z, rows_y;
  int row_bytes;                             // a multiple of 16
};

constexpr int kMaxBoxes = 64;
struct Boxes {
  Box box[kMaxBoxes];
  int count;
};

namespace {

// gridDim.y: one box per y-block; x-blocks stride over the box's rows; each warp-sized
// group of threads copies one row in 16-byte words.
__global__ void copy_boxes_kernel(const char *__restrict__ src, char *__restrict__ dst, const __grid_constant__ Boxes b) {
  const Box &box = b.box[blockIdx.y];
  const long long rows = (long long)box.rows_z * box.rows_y;
  const int words = box.row_bytes / 16;
  const int lanes = 32, groups = blockDim.x / lanes;
  const int lane = threadIdx.x % lanes;
  for (long long row = (long long)blockIdx.x * groups + threadIdx.x / lanes; row < rows;
       row += (long long)gridDim.x * groups) {
    const long long z = row / box.rows_y, y = row % box.rows_y;
    const int4 *s = reinterpret_cast<const int4 *>(src + box.src_offset + z * box.src_z + y * box.src_y);
    int4 *d = reinterpret_cast<int4 *>(dst + box.dst_offset + z * box.dst_z + y * box.dst_y);
    for (int w = lane; w < words; w += lanes) d[w] = s[w];
  }
}

}  // namespace

// Copies every box in one launch on `stream` (0: the legacy default stream) and waits for
// it; returns the CUDA error code (0 = success).
int copy_boxes(const void *src, void *dst, const Box *boxes, int count, void *stream) {
  if (count <= 0) return 0;
  if (count > kMaxBoxes) return int(cudaErrorInvalidValue);
  Boxes b{};
  long long most_rows = 0;
  for (int i = 0; i < count; ++i) {
    b.box[i] = boxes[i];
    most_rows = most_rows > (long long)boxes[i].rows_z * boxes[i].rows_y ? most_rows
                                                                           : (long long)boxes[i].rows_z * boxes[i].rows_y;
  }
  b.count = count;
  const int threads = 256, groups = threads / 32;
  const long long blocks = (most_rows + groups - 1) / groups;
  const dim3 grid(unsigned(blocks < 4096 ? (blocks > 0 ? blocks : 1) : 4096), unsigned(count));
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  copy_boxes_kernel<<<grid, threads, 0, s>>>(static_cast<const char *>(src), static_cast<char *>(dst), b);
  cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) err = cudaStreamSynchronize(s);
  return int(err);
}

}  // namespace bench_alltoallw
