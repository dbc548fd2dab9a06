// What bounds a gather or scatter of short blocks at a large pitch (64 MiB of 8-, 16-, 32-
// and 64-byte blocks, one every 512 bytes: bench_pack's strided rows "block B, pitch 512";
// issue 11): the simplest kernels for that one shape, timed by CUDA events (median of 20
// after warm-up), beside a memcpy of the packed bytes. Each kernel knows the shape at
// compile time and does nothing else: one lane per 8- or 16-byte word, a block's words in
// consecutive lanes, and a variant whose lanes each keep four blocks' loads in flight.
// Stand-alone (no MPI, no TEMPI); docs/benchmarks.md quotes it:
//   nvcc -O3 -arch=sm_90 -o strided_bounds tools/gpu/strided_bounds.cu && ./strided_bounds
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#define CK(x)                                                          \
  do {                                                                 \
    cudaError_t e = (x);                                               \
    if (e != cudaSuccess) {                                            \
      printf("%s: %s\n", #x, cudaGetErrorString(e));                   \
      exit(1);                                                         \
    }                                                                  \
  } while (0)

constexpr long long kPitch = 512, kPacked = 64ll << 20;

// Word w of the packed bytes (words of W bytes, blocks of B bytes) is word w % (B / W) of
// block w / (B / W).
template <int B, typename W>
__device__ __forceinline__ long long typed_word(long long w) {
  constexpr int per = B / int(sizeof(W));
  return (w / per) * (kPitch / (long long)sizeof(W)) + w % per;
}

template <int B, typename W>
__global__ void gather(const W *typed, W *packed, long long words) {
  const long long step = (long long)gridDim.x * blockDim.x;
  for (long long w = (long long)blockIdx.x * blockDim.x + threadIdx.x; w < words; w += step)
    packed[w] = typed[typed_word<B, W>(w)];
}

template <int B, typename W>
__global__ void scatter(W *typed, const W *packed, long long words) {
  const long long step = (long long)gridDim.x * blockDim.x;
  for (long long w = (long long)blockIdx.x * blockDim.x + threadIdx.x; w < words; w += step)
    typed[typed_word<B, W>(w)] = packed[w];
}

// Four words a lane, a quarter of the grid apart: four loads in flight before any store.
template <int B, typename W>
__global__ void gather4(const W *typed, W *packed, long long words) {
  const long long quarter = words / 4, w = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (w >= quarter) return;
  W v[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) v[k] = typed[typed_word<B, W>(w + k * quarter)];
#pragma unroll
  for (int k = 0; k < 4; ++k) packed[w + k * quarter] = v[k];
}

template <int B, typename W>
__global__ void scatter4(W *typed, const W *packed, long long words) {
  const long long quarter = words / 4, w = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (w >= quarter) return;
  W v[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) v[k] = packed[w + k * quarter];
#pragma unroll
  for (int k = 0; k < 4; ++k) typed[typed_word<B, W>(w + k * quarter)] = v[k];
}

float median_us(const std::function<void()> &f) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) f();
  std::vector<float> t;
  for (int i = 0; i < 20; ++i) {
    CK(cudaEventRecord(a));
    f();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(1000 * ms);
  }
  CK(cudaGetLastError());
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

template <int B, typename W>
void row(char *typed, char *packed) {
  const long long words = kPacked / (long long)sizeof(W);
  const unsigned grid = unsigned(std::min<long long>((words + 255) / 256, 132 * 64)),
                 grid4 = unsigned((words / 4 + 255) / 256);
  W *t = reinterpret_cast<W *>(typed), *p = reinterpret_cast<W *>(packed);
  const float g = median_us([&] { gather<B, W><<<grid, 256>>>(t, p, words); });
  const float g4 = median_us([&] { gather4<B, W><<<grid4, 256>>>(t, p, words); });
  const float s = median_us([&] { scatter<B, W><<<grid, 256>>>(t, p, words); });
  const float s4 = median_us([&] { scatter4<B, W><<<grid4, 256>>>(t, p, words); });
  printf("| %d | %d | %zu | %.1f | %.1f | %.1f | %.1f |\n", B, int(kPitch), sizeof(W), g, g4, s, s4);
  printf("csv,%d,%d,%zu,%.2f,%.2f,%.2f,%.2f\n", B, int(kPitch), sizeof(W), g, g4, s, s4);
}

int main() {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const long long span = kPacked / 8 * kPitch;  // the typed span of the 8-byte blocks: 4 GiB
  char *typed, *packed, *copy;
  CK(cudaMalloc(&typed, size_t(span)));
  CK(cudaMalloc(&packed, size_t(kPacked)));
  CK(cudaMalloc(&copy, size_t(kPacked)));
  CK(cudaMemset(typed, 1, size_t(span)));
  CK(cudaMemset(packed, 2, size_t(kPacked)));
  const float memcpy_us = median_us([&] { CK(cudaMemcpyAsync(copy, packed, size_t(kPacked), cudaMemcpyDeviceToDevice)); });
  printf("%s; 64 MiB packed, pitch 512; memcpy of the packed bytes %.1f us (kernel times, CUDA events, median of 20)\n",
         prop.name, memcpy_us);
  printf("| block B | pitch B | word B | gather | gather, 4 in flight | scatter | scatter, 4 in flight |\n|---|---|---|---|---|---|---|\n");
  row<8, unsigned long long>(typed, packed);
  row<16, unsigned long long>(typed, packed);
  row<16, uint4>(typed, packed);
  row<32, uint4>(typed, packed);
  row<64, uint4>(typed, packed);
  printf("csv,memcpy,%.2f\n", memcpy_us);
  return 0;
}
