// For tests/pmpi/test_pack_sequence.cpp on a real GPU: the application's own blocking
// stream (cudaStreamCreate, i.e. cudaStreamDefault: it waits for earlier work on the legacy
// default stream, not for another blocking stream such as TEMPI's) and a kernel on it that
// counts the bytes of an object that differ from what they should be, queued right after
// an MPI call returns, as a halo code's own kernels are.
#include <cuda_runtime.h>

#include <cstddef>

namespace {

__global__ void count_wrong(const unsigned char *got, const unsigned char *want, size_t bytes,
                            unsigned long long *wrong) {
  unsigned long long mine = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < bytes; i += size_t(gridDim.x) * blockDim.x)
    mine += got[i] != want[i];
  if (mine) atomicAdd(wrong, mine);
}

}  // namespace

struct BlockingReader {
  cudaStream_t stream = nullptr;
  unsigned char *want = nullptr;
  unsigned long long *wrong = nullptr;
  size_t bytes = 0;
};

// Uploads `want` (host memory, `bytes` long) and makes the stream and the counter; null on failure.
BlockingReader *blocking_reader_new(const void *want, size_t bytes) {
  auto *r = new BlockingReader;
  r->bytes = bytes;
  if (cudaStreamCreateWithFlags(&r->stream, cudaStreamDefault) != cudaSuccess ||
      cudaMalloc(&r->want, bytes) != cudaSuccess || cudaMalloc(&r->wrong, sizeof *r->wrong) != cudaSuccess ||
      cudaMemcpy(r->want, want, bytes, cudaMemcpyHostToDevice) != cudaSuccess ||
      cudaMemset(r->wrong, 0, sizeof *r->wrong) != cudaSuccess)
    return nullptr;
  return r;
}

// Queues the count of `object`'s wrong bytes on the stream and returns at once.
bool blocking_reader_check(BlockingReader *r, const void *object) {
  count_wrong<<<1024, 256, 0, r->stream>>>(static_cast<const unsigned char *>(object), r->want, r->bytes, r->wrong);
  return cudaGetLastError() == cudaSuccess;
}

// Waits for the stream: the bytes found wrong so far (~0ull on a CUDA error).
unsigned long long blocking_reader_wrong(BlockingReader *r) {
  unsigned long long wrong = 0;
  if (cudaStreamSynchronize(r->stream) != cudaSuccess ||
      cudaMemcpy(&wrong, r->wrong, sizeof wrong, cudaMemcpyDeviceToHost) != cudaSuccess)
    return ~0ull;
  return wrong;
}

void blocking_reader_delete(BlockingReader *r) {
  if (!r) return;
  cudaStreamSynchronize(r->stream);
  cudaStreamDestroy(r->stream);
  cudaFree(r->want);
  cudaFree(r->wrong);
  delete r;
}
