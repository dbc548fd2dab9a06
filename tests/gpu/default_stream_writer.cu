// For tests/pmpi/test_zero_copy.cpp on real GPUs: a copy that the application leaves on
// the legacy default stream behind a kernel that keeps that stream busy, so that the copy
// lands well after the host call that issued it returns. A zero-copy peer that read the
// destination without waiting for that stream would read the bytes from before the copy.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace {

__global__ void hold_stream(uint64_t ns) {
  uint64_t start = 0, now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}

}  // namespace

// Issues, on the legacy default stream, a kernel that runs for `ms` milliseconds and then
// a device-to-device copy of `bytes` from `src` to `dst`; returns at once. True when both
// were issued.
bool copy_on_default_stream_after(void *dst, const void *src, size_t bytes, double ms) {
  hold_stream<<<1, 1, 0, cudaStreamLegacy>>>(uint64_t(ms * 1e6));
  if (cudaGetLastError() != cudaSuccess) return false;
  return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cudaStreamLegacy) == cudaSuccess;
}
