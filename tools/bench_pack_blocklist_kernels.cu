// The hand-written baselines of tools/bench_pack's block-list rows: the kernel an
// application would write to gather a triangular matrix (one thread block per column,
// issue 19), blocks at known offsets or an array of structs, all or picked ones (one
// thread per byte, issue 11), doubles picked from an array (one thread per element), and a fill of the typed buffers with varied bytes (timing on constant data
// can flatter a kernel).
//
// The interface is plain types, declared again in bench_pack.cpp (a signature mismatch
// is a link error).
#include <cuda_runtime.h>

namespace bench_pack_blocklist {
namespace {

constexpr int kThreads = 256;

// Column j of the lower (rows j..n-1) or upper (rows 0..j) triangle of a column-major
// n x n matrix, to or from its place in the packed columns.
template <bool Pack>
__global__ void columns(double *matrix, double *packed, long long n, bool lower) {
  const long long j = blockIdx.x;
  const long long len = lower ? n - j : j + 1;
  const long long at = lower ? j * n - j * (j - 1) / 2 : j * (j + 1) / 2;
  double *col = matrix + j * n + (lower ? j : 0);
  for (long long i = threadIdx.x; i < len; i += blockDim.x) {
    if (Pack)
      packed[at + i] = col[i];
    else
      col[i] = packed[at + i];
  }
}

// One thread per byte, as an application that knows its blocks would write it: byte b
// of block i (of `len` bytes at typed offset displs[i]) is packed byte i * len + b.
template <bool Pack>
__global__ void blocks_by_byte(unsigned char *typed, unsigned char *packed, const long long *displs, long long n,
                               int len) {
  const long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= n * len) return;
  unsigned char *t = typed + displs[j / len] + j % len;
  if (Pack)
    packed[j] = *t;
  else
    *t = packed[j];
}

// One thread per byte of `count` structs of an array, `extent` bytes apart (struct i the
// array's picked[i], or its i-th where `picked` is null), whose packed bytes are struct
// bytes offsets[0 .. size).
template <bool Pack>
__global__ void structs_by_byte(unsigned char *typed, unsigned char *packed, long long count, int extent,
                                const int *offsets, int size, const long long *picked) {
  const long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= count * size) return;
  const long long i = picked ? picked[j / size] : j / size;
  unsigned char *t = typed + i * extent + offsets[j % size];
  if (Pack)
    packed[j] = *t;
  else
    *t = packed[j];
}

// One thread per element, as an application gathers the elements picked[i] of an array
// of doubles: what a code that sends selected mesh nodes writes.
template <bool Pack>
__global__ void gather_doubles(double *typed, double *packed, const long long *picked, long long n) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  if (Pack)
    packed[i] = typed[picked[i]];
  else
    typed[picked[i]] = packed[i];
}

__global__ void fill(unsigned char *p, long long n, unsigned long long seed) {
  const long long step = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
    unsigned long long z = seed + 0x9e3779b97f4a7c15ull * (unsigned long long)(i / 8 + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    p[i] = (unsigned char)((z ^ (z >> 31)) >> (8 * (i % 8)));
  }
}

}  // namespace

// Packs (pack true) or unpacks the lower or upper triangle of the column-major n x n
// `matrix` to or from `packed` (its columns one after another); returns the launch's
// cudaError_t.
int triangle(double *matrix, double *packed, long long n, bool lower, bool pack, cudaStream_t stream) {
  if (pack)
    columns<true><<<unsigned(n), kThreads, 0, stream>>>(matrix, packed, n, lower);
  else
    columns<false><<<unsigned(n), kThreads, 0, stream>>>(matrix, packed, n, lower);
  return cudaGetLastError();
}

// Packs or unpacks n blocks of len bytes at typed offsets displs[] (device memory).
int blocks(void *typed, void *packed, const long long *displs, long long n, int len, bool pack, cudaStream_t stream) {
  const unsigned grid = unsigned((n * len + kThreads - 1) / kThreads);
  auto *t = static_cast<unsigned char *>(typed);
  auto *p = static_cast<unsigned char *>(packed);
  if (pack)
    blocks_by_byte<true><<<grid, kThreads, 0, stream>>>(t, p, displs, n, len);
  else
    blocks_by_byte<false><<<grid, kThreads, 0, stream>>>(t, p, displs, n, len);
  return cudaGetLastError();
}

// Packs or unpacks `count` structs (packed bytes at struct offsets[0 .. size), device memory;
// the structs picked[0 .. count) of the array, or its first `count` where `picked` is null).
int structs(void *typed, void *packed, long long count, int extent, const int *offsets, int size,
            const long long *picked, bool pack, cudaStream_t stream) {
  const unsigned grid = unsigned((count * size + kThreads - 1) / kThreads);
  auto *t = static_cast<unsigned char *>(typed);
  auto *p = static_cast<unsigned char *>(packed);
  if (pack)
    structs_by_byte<true><<<grid, kThreads, 0, stream>>>(t, p, count, extent, offsets, size, picked);
  else
    structs_by_byte<false><<<grid, kThreads, 0, stream>>>(t, p, count, extent, offsets, size, picked);
  return cudaGetLastError();
}
// Packs or unpacks the n doubles picked[0 .. n) (device memory) of the array at `typed`.
int doubles(void *typed, void *packed, const long long *picked, long long n, bool pack, cudaStream_t stream) {
  const unsigned grid = unsigned((n + kThreads - 1) / kThreads);
  auto *t = static_cast<double *>(typed);
  auto *p = static_cast<double *>(packed);
  if (pack)
    gather_doubles<true><<<grid, kThreads, 0, stream>>>(t, p, picked, n);
  else
    gather_doubles<false><<<grid, kThreads, 0, stream>>>(t, p, picked, n);
  return cudaGetLastError();
}

// Fills n bytes at p with a sequence that depends on `seed`.
int fill_bytes(void *p, long long n, unsigned long long seed, cudaStream_t stream) {
  fill<<<1024, kThreads, 0, stream>>>(static_cast<unsigned char *>(p), n, seed);
  return cudaGetLastError();
}

}  // namespace bench_pack_blocklist
