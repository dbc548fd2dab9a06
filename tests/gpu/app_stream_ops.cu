// The application's side of tests/pmpi/test_streams.cpp on a real GPU: a stream of its
// own and the work it queues there (test_streams.cpp, STREAMS_REAL_GPU).
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace {

__global__ void fill_kernel(unsigned char *dev, size_t bytes, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < bytes; i += size_t(gridDim.x) * blockDim.x)
    dev[i] = static_cast<unsigned char>((i * 131u + seed * 7919u + (i >> 8)) & 0xff);
}

}  // namespace

void *app_stream_create() {
  cudaStream_t s = nullptr;
  cudaStreamCreateWithFlags(&s, cudaStreamDefault);  // a blocking stream, as the codes that use streams do
  return s;
}
void app_stream_destroy(void *s) { cudaStreamDestroy(static_cast<cudaStream_t>(s)); }
void app_stream_fill(void *s, void *dev, size_t bytes, uint32_t seed) {
  fill_kernel<<<64, 256, 0, static_cast<cudaStream_t>(s)>>>(static_cast<unsigned char *>(dev), bytes, seed);
}
void app_stream_copy(void *s, void *dst, const void *src, size_t bytes) {
  cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(s));
}
void app_stream_synchronize(void *s) { cudaStreamSynchronize(static_cast<cudaStream_t>(s)); }
void *app_host_alloc(size_t bytes) {
  void *p = nullptr;
  cudaMallocHost(&p, bytes);
  return p;
}
void app_host_free(void *p) { cudaFreeHost(p); }
// Capture of the stream into a graph (the graph is dropped at the end).
bool app_stream_begin_capture(void *s) {
  return cudaStreamBeginCapture(static_cast<cudaStream_t>(s), cudaStreamCaptureModeRelaxed) == cudaSuccess;
}
void app_stream_end_capture(void *s) {
  cudaGraph_t g = nullptr;
  if (cudaStreamEndCapture(static_cast<cudaStream_t>(s), &g) == cudaSuccess && g) cudaGraphDestroy(g);
  cudaGetLastError();
}
