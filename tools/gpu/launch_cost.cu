// What one kernel launch costs the CPU: the median of 3,000 launch calls (1,000 for
// launch + synchronize) of an empty kernel on a blocking, non-blocking and the legacy stream,
// with a 6 KB parameter or a pointer to it, an event record, and a launch followed by a
// stream synchronize; two rounds, GRID thread blocks of 256 (argument, default 104).
// docs/design.md ("Many messages in flight") quotes it for the fused launches' tables; run it
// alone, under MPS, and as two processes at once to see what sharing a GPU adds
// (data: docs/results/s22-h100-mps-2026-11-25/s22i/). Stand-alone (CUDA only):
//   nvcc -O2 -arch=sm_90 -o launch_cost tools/gpu/launch_cost.cu && ./launch_cost 104
//   nvidia-cuda-mps-control -d; ./launch_cost & ./launch_cost; wait; echo quit | nvidia-cuda-mps-control
#include <cuda_runtime.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>
struct Big { char b[6144]; };
__global__ void empty_k() {}
__global__ void big_k(const __grid_constant__ Big b) { if (threadIdx.x == 9999) printf("%d", b.b[0]); }
__global__ void ptr_k(const Big *b) { if (threadIdx.x == 9999) printf("%d", b->b[0]); }
double now() { return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
template <class F> double med(F f, int n = 3000) {
  std::vector<double> t;
  for (int i = 0; i < n; ++i) { double a = now(); f(); t.push_back(now() - a); if (i % 32 == 31) cudaDeviceSynchronize(); }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}
int main(int argc, char **argv) {
  cudaFree(0);
  cudaStream_t blocking, nonblocking;
  cudaStreamCreateWithFlags(&blocking, cudaStreamDefault);
  cudaStreamCreateWithFlags(&nonblocking, cudaStreamNonBlocking);
  Big h{}; Big *d; cudaMalloc(&d, sizeof(Big));
  const int grid = argc > 1 ? atoi(argv[1]) : 104;
  for (int round = 0; round < 2; ++round) {
    printf("grid %d round %d: launch CPU us (median of 3000)\n", grid, round);
    printf("  empty, blocking stream     %6.2f\n", med([&] { empty_k<<<grid, 256, 0, blocking>>>(); }));
    printf("  empty, non-blocking stream %6.2f\n", med([&] { empty_k<<<grid, 256, 0, nonblocking>>>(); }));
    printf("  empty, legacy stream       %6.2f\n", med([&] { empty_k<<<grid, 256, 0, 0>>>(); }));
    printf("  6KB param, blocking        %6.2f\n", med([&] { big_k<<<grid, 256, 0, blocking>>>(h); }));
    printf("  6KB param, non-blocking    %6.2f\n", med([&] { big_k<<<grid, 256, 0, nonblocking>>>(h); }));
    printf("  pointer, blocking          %6.2f\n", med([&] { ptr_k<<<grid, 256, 0, blocking>>>(d); }));
    printf("  pointer, non-blocking      %6.2f\n", med([&] { ptr_k<<<grid, 256, 0, nonblocking>>>(d); }));
    printf("  event record, blocking     %6.2f\n", med([&] { static cudaEvent_t e = [] { cudaEvent_t x; cudaEventCreateWithFlags(&x, cudaEventDisableTiming); return x; }(); cudaEventRecord(e, blocking); }));
    printf("  launch+sync, blocking      %6.2f\n", med([&] { empty_k<<<grid, 256, 0, blocking>>>(); cudaStreamSynchronize(blocking); }, 1000));
    printf("  launch+sync, non-blocking  %6.2f\n", med([&] { empty_k<<<grid, 256, 0, nonblocking>>>(); cudaStreamSynchronize(nonblocking); }, 1000));
  }
  return 0;
}
