// The hand-written baseline of tools/bench_pack_sequence: ONE kernel launch packs every
// halo region of every variable for every neighbour into the per-neighbour send buffers
// (and one launch unpacks them all), from a table of copies uploaded once.
//
// A copy is one Fortran-order subarray of doubles (x fastest) of one array, packed to or
// from a contiguous run of doubles: exactly the bytes MPI_Pack produces for
// MPI_Type_create_subarray(..., MPI_ORDER_FORTRAN, MPI_DOUBLE) with count 1 (x fastest,
// then y, then z). The launch covers the sum of all copies' elements; each thread finds
// its copy by binary search over the copies' first elements (a few dozen entries), so
// faces, edges and corners share the grid evenly.
//
// The interface is plain types and an opaque handle, declared again in
// bench_pack_sequence.cpp (a signature mismatch is a link error).
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

namespace bench_pack_sequence {
namespace {

struct Copy {
  double *array;        // the variable's (full[0] x full[1] x full[2]) array, x fastest
  double *packed;       // where the region's first element goes in the packed buffer
  int start[3], sub[3]; // the region, per axis (x, y, z)
  long long first;      // the index of this copy's first element in the whole launch
};

struct Table {
  Copy *copies = nullptr;  // device memory
  int count = 0;
  long long elements = 0;
  long long full[3] = {0, 0, 0};
  int blocks = 0;
};

constexpr int kThreads = 256;

template <bool Pack>
__global__ void fused(const Copy *__restrict__ copies, int count, long long elements, long long fx, long long fy) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x; g < elements; g += stride) {
    int lo = 0, hi = count - 1;  // the last copy whose first element is <= g
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (copies[mid].first <= g) lo = mid;
      else hi = mid - 1;
    }
    const Copy &c = copies[lo];
    const unsigned e = unsigned(g - c.first);  // < 2^31 (fused_table_create checks)
    const unsigned sx = unsigned(c.sub[0]), sy = unsigned(c.sub[1]);
    const unsigned i = e % sx, j = (e / sx) % sy, k = e / (sx * sy);
    const long long cell = ((c.start[2] + k) * fy + (c.start[1] + j)) * fx + (c.start[0] + i);
    if (Pack) c.packed[e] = c.array[cell];
    else c.array[cell] = c.packed[e];
  }
}

}  // namespace

// Uploads a table of `count` copies: copy q takes region (start[3q..3q+2], sub[3q..3q+2])
// of arrays[q] (full[0] x full[1] x full[2] doubles, x fastest) to packed[q]. Returns
// nullptr when an allocation or copy failed (cudaGetLastError says why) or a copy has
// 2^31 elements or more.
void *fused_table_create(int count, double *const *arrays, double *const *packed, const int *start, const int *sub,
                         const int full[3]) {
  std::vector<Copy> host(static_cast<size_t>(count));
  long long total = 0;
  for (int q = 0; q < count; ++q) {
    Copy &c = host[size_t(q)];
    c.array = arrays[q];
    c.packed = packed[q];
    long long n = 1;
    for (int k = 0; k < 3; ++k) {
      c.start[k] = start[3 * q + k];
      c.sub[k] = sub[3 * q + k];
      n *= sub[3 * q + k];
    }
    if (n >= (1LL << 31)) return nullptr;  // the kernel indexes within a copy in 32 bits
    c.first = total;
    total += n;
  }
  auto *t = new Table;
  t->count = count;
  t->elements = total;
  for (int k = 0; k < 3; ++k) t->full[k] = full[k];
  int device = 0, sms = 1;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  // One element per thread up to 8 blocks per SM, then the grid-stride loop.
  const long long wanted = (total + kThreads - 1) / kThreads;
  const long long cap = 8LL * sms;
  t->blocks = int(wanted < 1 ? 1 : wanted > cap ? cap : wanted);
  if (count > 0 &&
      (cudaMalloc(&t->copies, sizeof(Copy) * size_t(count)) != cudaSuccess ||
       cudaMemcpy(t->copies, host.data(), sizeof(Copy) * size_t(count), cudaMemcpyHostToDevice) != cudaSuccess)) {
    if (t->copies) cudaFree(t->copies);
    delete t;
    return nullptr;
  }
  return t;
}

// One launch on `stream` over every copy; returns the launch's cudaError_t.
int fused_pack(void *table, cudaStream_t stream) {
  auto *t = static_cast<Table *>(table);
  if (t->count == 0) return cudaSuccess;
  fused<true><<<t->blocks, kThreads, 0, stream>>>(t->copies, t->count, t->elements, t->full[0], t->full[1]);
  return cudaGetLastError();
}

int fused_unpack(void *table, cudaStream_t stream) {
  auto *t = static_cast<Table *>(table);
  if (t->count == 0) return cudaSuccess;
  fused<false><<<t->blocks, kThreads, 0, stream>>>(t->copies, t->count, t->elements, t->full[0], t->full[1]);
  return cudaGetLastError();
}

void fused_table_destroy(void *table) {
  auto *t = static_cast<Table *>(table);
  if (!t) return;
  if (t->copies) cudaFree(t->copies);
  delete t;
}

}  // namespace bench_pack_sequence
