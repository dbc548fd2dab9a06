// What bounds a gather or scatter of 64-byte blocks at random byte offsets (one per 4 KiB
// of a 1 GiB buffer, bench_pack's irregular-64B-random; issue 11): the simplest kernels
// over a plain offset array, timed by CUDA events (median of 60 after warm-up), beside a
// memcpy of the packed bytes, an empty kernel, a write-only and a read-only kernel, and the
// same scatter over the blocks moved onto 32-byte and odd 16-byte boundaries (partial
// sectors). They may read bytes next to a block, inside its aligned chunks, which TEMPI's
// kernels do not. Stand-alone (no MPI, no TEMPI); docs/benchmarks.md quotes it:
//   nvcc -O3 -arch=sm_90 -o gather_bounds tools/gpu/gather_bounds.cu && ./gather_bounds
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <algorithm>
#include <random>
#include <chrono>
#include <functional>

#include "../../cuda/blocklist_device.cuh"  // realign: the funnel shifts TEMPI's kernels use
using tempi::realign;

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); exit(1);} } while (0)

__device__ __forceinline__ uint4 shfl(uint4 v, int d) {
  return make_uint4(__shfl_down_sync(~0u, v.x, d), __shfl_down_sync(~0u, v.y, d), __shfl_down_sync(~0u, v.z, d),
                    __shfl_down_sync(~0u, v.w, d));
}
__device__ __forceinline__ uint4 shflu(uint4 v, int d) {
  return make_uint4(__shfl_up_sync(~0u, v.x, d), __shfl_up_sync(~0u, v.y, d), __shfl_up_sync(~0u, v.z, d),
                    __shfl_up_sync(~0u, v.w, d));
}

// P2: lane per output word, two aligned loads (may over-read inside the aligned chunks).
__global__ void pack2(const char *typed, uint4 *packed, const long long *displs, int n) {
  const long long w = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (w >= 4LL * n) return;
  const long long s = displs[w >> 2] + 16 * (w & 3);
  const long long a = s & ~15LL;
  const unsigned sh = unsigned(s - a);
  const uint4 c0 = *reinterpret_cast<const uint4 *>(typed + a);
  const uint4 c1 = sh ? *reinterpret_cast<const uint4 *>(typed + a + 16) : c0;
  packed[w] = sh ? realign(c0, c1, sh) : c0;
}

// P3: lane k loads chunk k of its block, the next chunk from lane k+1 (lane 3 loads chunk 4).
__global__ void pack3(const char *typed, uint4 *packed, const long long *displs, int n) {
  const long long w = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const bool live = w < 4LL * n;
  const long long s0 = live ? displs[w >> 2] : 0;
  const long long a = (s0 & ~15LL) + 16 * (w & 3);
  const unsigned sh = unsigned(s0 & 15);
  uint4 c0 = make_uint4(0, 0, 0, 0), c4 = c0;
  if (live) c0 = *reinterpret_cast<const uint4 *>(typed + a);
  if (live && (w & 3) == 3 && sh) c4 = *reinterpret_cast<const uint4 *>(typed + a + 16);
  uint4 c1 = shfl(c0, 1);
  if ((w & 3) == 3) c1 = c4;
  if (live) packed[w] = sh ? realign(c0, c1, sh) : c0;
}

// P3b: one thread per block, five loads in flight, four stores.
__global__ void pack_thread(const char *typed, uint4 *packed, const long long *displs, int n) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const long long s = displs[i], a = s & ~15LL;
  const unsigned sh = unsigned(s - a);
  uint4 c[5];
#pragma unroll
  for (int k = 0; k < 4; ++k) c[k] = *reinterpret_cast<const uint4 *>(typed + a + 16 * k);
  c[4] = sh ? *reinterpret_cast<const uint4 *>(typed + a + 64) : c[3];
#pragma unroll
  for (int k = 0; k < 4; ++k) packed[4 * i + k] = sh ? realign(c[k], c[k + 1], sh) : c[k];
}

// Read-only bound: the chunks of pack3, xor-reduced.
__global__ void readonly(const char *typed, uint4 *sink, const long long *displs, int n) {
  const long long w = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (w >= 4LL * n) return;
  const long long s0 = displs[w >> 2];
  const long long a = (s0 & ~15LL) + 16 * (w & 3);
  uint4 c0 = *reinterpret_cast<const uint4 *>(typed + a);
  if ((w & 3) == 3 && (s0 & 15)) {
    const uint4 c4 = *reinterpret_cast<const uint4 *>(typed + a + 16);
    c0.x ^= c4.x; c0.y ^= c4.y; c0.z ^= c4.z; c0.w ^= c4.w;
  }
  if ((c0.x ^ c0.y ^ c0.z ^ c0.w) == 0x12345678u) sink[0] = c0;
}

__global__ void writeonly(uint4 *packed, long long nw) {
  const long long w = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (w < nw) packed[w] = make_uint4(unsigned(w), 1, 2, 3);
}

// Bytes [lo, hi) of v into the aligned chunk at p, widest stores inside them.
__device__ __forceinline__ void store_part(char *p, uint4 v, int lo, int hi) {
  if (lo >= hi) return;
  if (lo == 0 && hi == 16) { *reinterpret_cast<uint4 *>(p) = v; return; }
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
  for (int b = lo; b < hi;) {
    if ((b & 7) == 0 && b + 8 <= hi) { *reinterpret_cast<uint2 *>(p + b) = make_uint2(w[b >> 2], w[(b >> 2) + 1]); b += 8; }
    else if ((b & 3) == 0 && b + 4 <= hi) { *reinterpret_cast<uint32_t *>(p + b) = w[b >> 2]; b += 4; }
    else if ((b & 1) == 0 && b + 2 <= hi) { *reinterpret_cast<uint16_t *>(p + b) = uint16_t(w[b >> 2] >> (8 * (b & 3))); b += 2; }
    else { p[b] = char(w[b >> 2] >> (8 * (b & 3))); b += 1; }
  }
}

// P4: lane k reads packed word k (coalesced), writes aligned typed chunk k of the block
// (lane 3 also chunk 4): chunk k holds block bytes 16k - sh .. 16k - sh + 15. With
// Prefetch, the two end chunks go into L2 before the partial stores reach it.
template <bool Prefetch>
__global__ void unpack4(char *typed, const uint4 *packed, const long long *displs, int n) {
  const long long w = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const bool live = w < 4LL * n;
  const int k = int(w & 3);
  const long long s0 = live ? displs[w >> 2] : 0;
  const unsigned sh = unsigned(s0 & 15);
  char *a = typed + (s0 & ~15LL) + 16 * k;
  if (Prefetch && live && sh) {
    if (k == 0) asm volatile("prefetch.global.L2 [%0];" ::"l"(a));
    if (k == 3) asm volatile("prefetch.global.L2 [%0];" ::"l"(a + 16));
  }
  const uint4 z = make_uint4(0, 0, 0, 0);
  const uint4 mine = live ? packed[w] : z;
  uint4 prev = shflu(mine, 1);
  if (k == 0) prev = z;
  if (!live) return;
  if (sh == 0) { *reinterpret_cast<uint4 *>(a) = mine; return; }
  const uint4 v = realign(prev, mine, 16 - sh);
  store_part(a, v, k == 0 ? int(sh) : 0, 16);
  if (k == 3) store_part(a + 16, realign(mine, z, 16 - sh), 0, int(sh));
}

// P4b: lane per output word with unaligned destination: two partial stores (naive).
__global__ void unpack2(char *typed, const uint4 *packed, const long long *displs, int n) {
  const long long w = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (w >= 4LL * n) return;
  const long long s = displs[w >> 2] + 16 * (w & 3);
  const long long a = s & ~15LL;
  const int sh = int(s - a);
  const uint4 v = packed[w], z = make_uint4(0, 0, 0, 0);
  if (!sh) { *reinterpret_cast<uint4 *>(typed + a) = v; return; }
  store_part(typed + a, realign(z, v, 16 - sh), sh, 16);
  store_part(typed + a + 16, realign(v, z, 16 - sh), 0, sh);
}

int main(int argc, char **argv) {
  const int n = 262144;
  std::mt19937_64 rng(42);
  std::vector<long long> displs(n);
  for (int i = 0; i < n; ++i) displs[i] = (long long)i * 4096 + (long long)(rng() % 4033);
  const size_t span = size_t(n) * 4096, bytes = size_t(n) * 64;
  char *typed, *packed, *ref, *back;
  long long *dd;
  CK(cudaMalloc(&typed, span));
  CK(cudaMalloc(&back, span));
  CK(cudaMalloc(&packed, bytes));
  CK(cudaMalloc(&ref, bytes));
  CK(cudaMalloc(&dd, n * 8));
  CK(cudaMemcpy(dd, displs.data(), n * 8, cudaMemcpyHostToDevice));
  std::vector<unsigned char> h(span);
  for (size_t i = 0; i < span; ++i) h[i] = (unsigned char)(i * 2654435761u >> 13);
  CK(cudaMemcpy(typed, h.data(), span, cudaMemcpyHostToDevice));
  std::vector<unsigned char> expect(bytes), got(bytes);
  for (int i = 0; i < n; ++i) memcpy(&expect[64 * size_t(i)], &h[displs[i]], 64);
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  auto timed = [&](const char *name, std::function<void()> op, bool check_pack, bool check_unpack) {
    for (int i = 0; i < 5; ++i) op();
    CK(cudaStreamSynchronize(s));
    std::vector<float> ev;
    std::vector<double> wall;
    for (int i = 0; i < 60; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      CK(cudaEventRecord(e0, s));
      op();
      CK(cudaEventRecord(e1, s));
      CK(cudaEventSynchronize(e1));
      auto t1 = std::chrono::steady_clock::now();
      float ms;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      ev.push_back(ms * 1000);
      wall.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
    CK(cudaGetLastError());
    std::sort(ev.begin(), ev.end());
    std::sort(wall.begin(), wall.end());
    const char *ok = "";
    if (check_pack) {
      CK(cudaMemcpy(got.data(), packed, bytes, cudaMemcpyDeviceToHost));
      ok = memcmp(got.data(), expect.data(), bytes) ? "WRONG" : "ok";
    }
    if (check_unpack) {
      std::vector<unsigned char> hb(span);
      CK(cudaMemcpy(hb.data(), back, span, cudaMemcpyDeviceToHost));
      bool good = true;
      for (int i = 0; i < n && good; ++i) good = memcmp(&hb[displs[i]], &h[displs[i]], 64) == 0;
      // bytes outside blocks must stay as filled (0xA5)
      for (int i = 0; i < n && good; ++i) {
        long long lo = (long long)i * 4096, b = displs[i];
        for (long long x = lo; x < lo + 4096; ++x)
          if ((x < b || x >= b + 64) && hb[x] != 0xA5) { good = false; break; }
      }
      ok = good ? "ok" : "WRONG";
    }
    printf("%-34s kernel %7.1f us (p10 %7.1f)  call+sync %7.1f us  %s\n", name, ev[ev.size() / 2], ev[ev.size() / 10],
           wall[wall.size() / 2], ok);
  };
  const int T = 256;
  const long long nw = 4LL * n;
  const int gw = int((nw + T - 1) / T), gb = (n + T - 1) / T;
  timed("memcpy 16.8 MB d2d", [&] { CK(cudaMemcpyAsync(ref, packed, bytes, cudaMemcpyDeviceToDevice, s)); }, false, false);
  timed("empty kernel", [&] { writeonly<<<1, 32, 0, s>>>(reinterpret_cast<uint4 *>(ref), 0); }, false, false);
  timed("write-only 16.8 MB", [&] { writeonly<<<gw, T, 0, s>>>(reinterpret_cast<uint4 *>(ref), nw); }, false, false);
  timed("read-only chunks (5/block)", [&] { readonly<<<gw, T, 0, s>>>(typed, reinterpret_cast<uint4 *>(ref), dd, n); }, false, false);
  CK(cudaMemset(packed, 0, bytes));
  timed("pack2 lane/word, 2 loads", [&] { pack2<<<gw, T, 0, s>>>(typed, reinterpret_cast<uint4 *>(packed), dd, n); }, true, false);
  CK(cudaMemset(packed, 0, bytes));
  timed("pack3 lane/chunk + shfl", [&] { pack3<<<gw, T, 0, s>>>(typed, reinterpret_cast<uint4 *>(packed), dd, n); }, true, false);
  CK(cudaMemset(packed, 0, bytes));
  timed("pack thread/block, 5 loads", [&] { pack_thread<<<gb, T, 0, s>>>(typed, reinterpret_cast<uint4 *>(packed), dd, n); }, true, false);
  CK(cudaMemset(back, 0xA5, span));
  timed("unpack4 lane/chunk + shfl", [&] { unpack4<false><<<gw, T, 0, s>>>(back, reinterpret_cast<uint4 *>(packed), dd, n); }, false, true);
  CK(cudaMemset(back, 0xA5, span));
  timed("unpack4p prefetch.L2 edges", [&] { unpack4<true><<<gw, T, 0, s>>>(back, reinterpret_cast<uint4 *>(packed), dd, n); }, false, true);
  CK(cudaMemset(back, 0xA5, span));
  timed("unpack2 lane/word, 2 part stores", [&] { unpack2<<<gw, T, 0, s>>>(back, reinterpret_cast<uint4 *>(packed), dd, n); }, false, true);
  // Same again with L2 flushed before each op (a 200 MB write), kernel time only.
  char *flush;
  CK(cudaMalloc(&flush, 200 << 20));
  auto cold = [&](const char *name, std::function<void()> op) {
    std::vector<float> ev;
    for (int i = 0; i < 30; ++i) {
      CK(cudaMemsetAsync(flush, i, 200 << 20, s));
      CK(cudaEventRecord(e0, s));
      op();
      CK(cudaEventRecord(e1, s));
      CK(cudaEventSynchronize(e1));
      float ms;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      ev.push_back(ms * 1000);
    }
    std::sort(ev.begin(), ev.end());
    printf("cold L2: %-25s kernel %7.1f us\n", name, ev[ev.size() / 2]);
  };
  cold("memcpy 16.8 MB", [&] { CK(cudaMemcpyAsync(ref, packed, bytes, cudaMemcpyDeviceToDevice, s)); });
  cold("read-only chunks", [&] { readonly<<<gw, T, 0, s>>>(typed, reinterpret_cast<uint4 *>(ref), dd, n); });
  cold("pack3", [&] { pack3<<<gw, T, 0, s>>>(typed, reinterpret_cast<uint4 *>(packed), dd, n); });
  cold("pack_thread", [&] { pack_thread<<<gb, T, 0, s>>>(typed, reinterpret_cast<uint4 *>(packed), dd, n); });
  cold("unpack4", [&] { unpack4<false><<<gw, T, 0, s>>>(back, reinterpret_cast<uint4 *>(packed), dd, n); });
  {
    std::vector<long long> al(displs);
    for (auto &x : al) x &= ~31LL;
    CK(cudaMemcpy(dd, al.data(), n * 8, cudaMemcpyHostToDevice));
    timed("32B-aligned blocks: pack3", [&] { pack3<<<gw, T, 0, s>>>(typed, reinterpret_cast<uint4 *>(packed), dd, n); }, false, false);
    timed("32B-aligned blocks: unpack4", [&] { unpack4<false><<<gw, T, 0, s>>>(back, reinterpret_cast<uint4 *>(packed), dd, n); }, false, false);
    for (auto &x : al) x |= 16;
    CK(cudaMemcpy(dd, al.data(), n * 8, cudaMemcpyHostToDevice));
    timed("16B-aligned (odd 16) unpack4", [&] { unpack4<false><<<gw, T, 0, s>>>(back, reinterpret_cast<uint4 *>(packed), dd, n); }, false, false);
    timed("16B-aligned (odd 16) unpack4p", [&] { unpack4<true><<<gw, T, 0, s>>>(back, reinterpret_cast<uint4 *>(packed), dd, n); }, false, false);
  }
  return 0;
}
