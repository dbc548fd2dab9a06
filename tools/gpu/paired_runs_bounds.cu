// What bounds zero-copy's paired runs on a triangle (issue 20's large messages): the lower
// triangle of an N x N matrix of doubles moved into the upper triangle of another, as the
// runs core/paired_runs.hpp cuts (both sides' rows, at most 2016 bytes), by the kernel of
// cuda/kernels.cu (one warp per run, move_piece), beside cudaMemcpy and a plain 16-byte copy
// kernel of the same number of bytes, all in one GPU's memory, timed by CUDA events
// (median of 20 after 5 warm-up). Stand-alone (no MPI, no TEMPI); docs/benchmarks.md quotes it:
//   nvcc -O3 -std=c++17 -arch=sm_90 -o paired_runs_bounds tools/gpu/paired_runs_bounds.cu
//   ./paired_runs_bounds 4096   # N; default 4096 (64 MiB)
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <vector>
#include "../../cuda/blocklist_device.cuh"  // move_piece: the warp move TEMPI's kernel uses
using namespace tempi;
struct PairedRun { int64_t from, to, length; };
constexpr int kT = 256;
constexpr int64_t kMax = 2016;

// cuda/kernels.cu's paired_runs_kernel.
__global__ void __launch_bounds__(kT) paired(const PairedRun *runs, int64_t n, const uint8_t *from, uint8_t *to) {
  const int lane = int(threadIdx.x % 32);
  const int64_t warps = int64_t(gridDim.x) * blockDim.x / 32;
  for (int64_t w = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32; w < n; w += warps) {
    const PairedRun r = runs[w];
    move_piece(reinterpret_cast<uintptr_t>(to + r.to), reinterpret_cast<uintptr_t>(from + r.from), r.length, lane);
  }
}
__global__ void copy16(const uint4 *a, uint4 *b, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) b[i] = a[i];
}

int main(int argc, char **argv) {
  const int N = argc > 1 ? atoi(argv[1]) : 4096;
  // sender: lower triangle rows (row i: (i+1) doubles at i*N); receiver: upper triangle rows (row j: N-j at j*N+j)
  std::vector<std::pair<int64_t, int64_t>> a, b;
  for (int i = 0; i < N; ++i) a.push_back({int64_t(i) * N * 8, int64_t(i + 1) * 8});
  for (int j = 0; j < N; ++j) b.push_back({(int64_t(j) * N + j) * 8, int64_t(N - j) * 8});
  std::vector<PairedRun> runs;
  size_t ia = 0, ib = 0; int64_t oa = 0, ob = 0;
  while (ia < a.size() && ib < b.size()) {
    int64_t len = std::min({a[ia].second - oa, b[ib].second - ob, kMax});
    runs.push_back({a[ia].first + oa, b[ib].first + ob, len});
    oa += len; ob += len;
    if (oa == a[ia].second) { ++ia; oa = 0; }
    if (ob == b[ib].second) { ++ib; ob = 0; }
  }
  int64_t bytes = 0; for (auto &r : runs) bytes += r.length;
  const size_t mat = size_t(N) * N * 8;
  uint8_t *src, *dst, *d2; PairedRun *druns;
  cudaMalloc(&src, mat); cudaMalloc(&dst, mat); cudaMalloc(&d2, mat);
  cudaMalloc(&druns, runs.size() * sizeof(PairedRun));
  cudaMemcpy(druns, runs.data(), runs.size() * sizeof(PairedRun), cudaMemcpyHostToDevice);
  std::vector<uint8_t> h(mat); for (size_t i = 0; i < mat; ++i) h[i] = uint8_t(i * 131 + (i >> 9));
  cudaMemcpy(src, h.data(), mat, cudaMemcpyHostToDevice);
  int dev = 0, sms = 0; cudaGetDevice(&dev); cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  const int64_t n = int64_t(runs.size());
  auto grid = [&](int64_t threads, int per_sm_blocks) { int64_t g = (threads + kT - 1) / kT; return int(std::min<int64_t>(g, int64_t(sms) * per_sm_blocks)); };
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  auto time = [&](auto launch) {
    std::vector<float> t;
    for (int k = 0; k < 25; ++k) { cudaEventRecord(e0); launch(); cudaEventRecord(e1); cudaEventSynchronize(e1); float ms; cudaEventElapsedTime(&ms, e0, e1); if (k >= 5) t.push_back(ms * 1000); }
    std::sort(t.begin(), t.end()); return t[t.size() / 2];
  };
  // The expected destination: every run's bytes where the runs put them, zeros elsewhere.
  std::vector<uint8_t> want(mat, 0);
  for (const PairedRun &r : runs) std::copy_n(h.begin() + r.from, r.length, want.begin() + r.to);
  bool all_right = true;
  auto check = [&](const char *name) {
    std::vector<uint8_t> o(mat);
    cudaMemcpy(o.data(), dst, mat, cudaMemcpyDeviceToHost);
    long bad = 0;
    for (size_t i = 0; i < mat; ++i) bad += o[i] != want[i];
    if (bad) printf("  %s: %ld wrong bytes\n", name, bad);
    all_right = all_right && bad == 0;
  };
  printf("N=%d runs=%lld bytes=%lld (%.1f MiB) sms=%d\n", N, (long long)n, (long long)bytes, bytes / 1048576.0, sms);
  const float ce = time([&] { cudaMemcpyAsync(d2, src, bytes, cudaMemcpyDeviceToDevice); });
  const float ck = time([&] { copy16<<<sms * 8, kT>>>((const uint4 *)src, (uint4 *)d2, bytes / 16); });
  printf("%-28s %8.1f us  %6.0f GB/s (r+w)\n", "cudaMemcpy d2d", ce, 2 * bytes / ce / 1e3);
  printf("%-28s %8.1f us  %6.0f GB/s\n", "copy kernel uint4", ck, 2 * bytes / ck / 1e3);
  cudaMemset(dst, 0, mat);
  // cuda/kernels.cu's launch: grid_for covers the runs' threads up to the resident capacity
  const float t = time([&] { paired<<<grid(n * 32, 2048 / kT), kT>>>(druns, n, src, dst); });
  check("paired runs");
  printf("%-28s %8.1f us  %6.0f GB/s  %.2f of cudaMemcpy\n", "paired runs", t, 2 * bytes / t / 1e3, ce / t);
  const cudaError_t err = cudaGetLastError();
  printf("%s (CUDA: %s)\n", all_right ? "every byte in place" : "WRONG BYTES", cudaGetErrorString(err));
  return all_right && err == cudaSuccess ? 0 : 1;
}
