// Baselines for tools/bench_call.cpp: what an application launches instead of a call,
// an empty kernel (the launch floor) and a hand-written copy of a 3-D strided object.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace bench_call {

namespace {

__global__ void empty_kernel() {}

// Completion seen through host memory: the kernel's last act is a store the CPU polls.
__global__ void flag_kernel(volatile unsigned *flag, unsigned value) {
  __threadfence_system();
  *flag = value;
}

// counts[0] blocks of `block` bytes with stride strides[0], repeated counts[1] times
// (strides[1]) and counts[2] times (strides[2]); one thread per `Word` of a block.
template <typename Word>
__global__ void strided_copy(const char *typed, char *packed, int64_t block, int64_t c0, int64_t c1, int64_t c2,
                             int64_t s0, int64_t s1, int64_t s2, bool to_packed) {
  const int64_t words = block / int64_t(sizeof(Word));
  const int64_t total = words * c0 * c1 * c2;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t w = i % words, b = i / words;
    const int64_t i0 = b % c0, i1 = (b / c0) % c1, i2 = b / (c0 * c1);
    const int64_t at = i0 * s0 + i1 * s1 + i2 * s2 + w * int64_t(sizeof(Word));
    Word *p = reinterpret_cast<Word *>(packed) + i;
    Word *t = reinterpret_cast<Word *>(const_cast<char *>(typed) + at);
    if (to_packed)
      *p = *t;
    else
      *t = *p;
  }
}

}  // namespace

int launch_empty(cudaStream_t stream) {
  empty_kernel<<<1, 32, 0, stream>>>();
  return int(cudaGetLastError());
}

int launch_flag(unsigned *flag, unsigned value, cudaStream_t stream) {
  flag_kernel<<<1, 1, 0, stream>>>(flag, value);
  return int(cudaGetLastError());
}

int launch_strided(const void *typed, void *packed, int64_t block, const int64_t counts[3], const int64_t strides[3],
                   bool to_packed, cudaStream_t stream) {
  uint64_t bits = uint64_t(block) | uint64_t(strides[0]) | uint64_t(strides[1]) | uint64_t(strides[2]) |
                  uint64_t(reinterpret_cast<uintptr_t>(typed)) | uint64_t(reinterpret_cast<uintptr_t>(packed));
  const int word = (bits & 15) == 0 ? 16 : (bits & 7) == 0 ? 8 : (bits & 3) == 0 ? 4 : 1;
  const int64_t total = block / word * counts[0] * counts[1] * counts[2];
  const int threads = 256;
  const int blocks = int(std::min<int64_t>((total + threads - 1) / threads, 132 * 16));
  const char *t = static_cast<const char *>(typed);
  char *p = static_cast<char *>(packed);
#define BENCH_CALL_LAUNCH(W)                                                                                   \
  strided_copy<W><<<blocks, threads, 0, stream>>>(t, p, block, counts[0], counts[1], counts[2], strides[0], \
                                                   strides[1], strides[2], to_packed)
  if (word == 16)
    BENCH_CALL_LAUNCH(int4);
  else if (word == 8)
    BENCH_CALL_LAUNCH(int2);
  else if (word == 4)
    BENCH_CALL_LAUNCH(int);
  else
    BENCH_CALL_LAUNCH(char);
#undef BENCH_CALL_LAUNCH
  return int(cudaGetLastError());
}

}  // namespace bench_call
