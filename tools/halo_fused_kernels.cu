// The hand-written baseline of tools/tempi_halo ("hand-fused"): what a GPU stencil code
// writes instead of datatypes. ONE kernel launch packs all 26 interior slabs of the grid
// into one contiguous buffer (the slab for neighbour d at its own offset), and one launch
// unpacks all 26 received slabs into the ghost regions. The table of boxes is uploaded
// once. Each thread copies one element; it finds its box by binary search over the boxes'
// first elements (26 entries), so faces, edges and corners share the grid evenly.
//
// The interface is plain types, declared again in halo.cpp (a signature mismatch is a link
// error).
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

namespace halo_fused {

struct Box {
  int start[3], sub[3];  // z, y, x; in cells of the (full)^3 array, x fastest
  long long first;       // index of the box's first element in the packed buffer
};

namespace {

struct Table {
  Box *boxes = nullptr;  // device memory
  int count = 0;
  long long elements = 0;
  long long full = 0;
  int elem = 0;  // bytes per cell: 1, 2, 4, 8 or 16
  int blocks = 0;
};

template <typename Word, bool Pack>
__global__ void fused(const Box *__restrict__ boxes, int count, long long elements, long long full,
                      Word *__restrict__ grid, Word *__restrict__ packed) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x; g < elements; g += stride) {
    int lo = 0, hi = count - 1;  // the last box whose first element is <= g
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (boxes[mid].first <= g) lo = mid;
      else hi = mid - 1;
    }
    const Box &b = boxes[lo];
    const long long e = g - b.first;
    const long long sx = b.sub[2], sy = b.sub[1];
    const long long i = e % sx, j = (e / sx) % sy, k = e / (sx * sy);
    const long long cell = ((b.start[0] + k) * full + (b.start[1] + j)) * full + (b.start[2] + i);
    if (Pack) packed[g] = grid[cell];
    else grid[cell] = packed[g];
  }
}

struct alignas(16) Word16 {
  unsigned long long a, b;
};

template <bool Pack>
cudaError_t launch(const Table &t, void *grid, void *packed, cudaStream_t s, bool sync) {
  const int threads = 256;
  switch (t.elem) {
    case 1: fused<uint8_t, Pack><<<t.blocks, threads, 0, s>>>(t.boxes, t.count, t.elements, t.full, (uint8_t *)grid, (uint8_t *)packed); break;
    case 2: fused<uint16_t, Pack><<<t.blocks, threads, 0, s>>>(t.boxes, t.count, t.elements, t.full, (uint16_t *)grid, (uint16_t *)packed); break;
    case 4: fused<uint32_t, Pack><<<t.blocks, threads, 0, s>>>(t.boxes, t.count, t.elements, t.full, (uint32_t *)grid, (uint32_t *)packed); break;
    case 8: fused<uint64_t, Pack><<<t.blocks, threads, 0, s>>>(t.boxes, t.count, t.elements, t.full, (uint64_t *)grid, (uint64_t *)packed); break;
    case 16: fused<Word16, Pack><<<t.blocks, threads, 0, s>>>(t.boxes, t.count, t.elements, t.full, (Word16 *)grid, (Word16 *)packed); break;
    default: return cudaErrorInvalidValue;
  }
  cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess && sync) err = cudaStreamSynchronize(s);
  return err;
}

}  // namespace

// Uploads the boxes (in packed order; `first` filled here) and returns an opaque table;
// 0 on success, else the CUDA error code.
int create(const Box *boxes, int count, long long full, int elem, void **out) {
  auto *t = new Table;
  std::vector<Box> v(boxes, boxes + count);
  long long first = 0;
  for (Box &b : v) {
    b.first = first;
    first += (long long)b.sub[0] * b.sub[1] * b.sub[2];
  }
  t->count = count;
  t->elements = first;
  t->full = full;
  t->elem = elem;
  int device = 0, sms = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  const long long want = (first + 255) / 256;
  t->blocks = int(want < 8LL * sms ? (want > 0 ? want : 1) : 8LL * sms);
  cudaError_t err = cudaMalloc(&t->boxes, sizeof(Box) * v.size());
  if (err == cudaSuccess) err = cudaMemcpy(t->boxes, v.data(), sizeof(Box) * v.size(), cudaMemcpyHostToDevice);
  if (err != cudaSuccess) {
    cudaFree(t->boxes);
    delete t;
    return int(err);
  }
  *out = t;
  return 0;
}

// One launch over every box, then a synchronization of `stream` (0: the legacy stream).
int pack(void *table, const void *grid, void *packed, void *stream) {
  return int(launch<true>(*static_cast<Table *>(table), const_cast<void *>(grid), packed, cudaStream_t(stream), true));
}
int unpack(void *table, void *grid, const void *packed, void *stream) {
  return int(launch<false>(*static_cast<Table *>(table), grid, const_cast<void *>(packed), cudaStream_t(stream), true));
}
// The same launches, enqueued on `stream` without waiting (the fused-nccl variant puts
// pack, the NCCL group and unpack on one stream and synchronizes once).
int pack_async(void *table, const void *grid, void *packed, void *stream) {
  return int(launch<true>(*static_cast<Table *>(table), const_cast<void *>(grid), packed, cudaStream_t(stream), false));
}
int unpack_async(void *table, void *grid, const void *packed, void *stream) {
  return int(launch<false>(*static_cast<Table *>(table), grid, const_cast<void *>(packed), cudaStream_t(stream), false));
}
// The text of a code these functions returned.
const char *error_string(int code) { return cudaGetErrorString(cudaError_t(code)); }

void destroy(void *table) {
  auto *t = static_cast<Table *>(table);
  if (!t) return;
  cudaFree(t->boxes);
  delete t;
}

}  // namespace halo_fused

namespace halo_fused {

// The packed buffers: device memory, or pinned host memory that kernels reach directly.
int buffer(size_t bytes, bool pinned_host, void **out) {
  return int(pinned_host ? cudaMallocHost(out, bytes > 0 ? bytes : 1) : cudaMalloc(out, bytes > 0 ? bytes : 1));
}
void release(void *p, bool pinned_host) {
  if (!p) return;
  if (pinned_host) cudaFreeHost(p);
  else cudaFree(p);
}

void *stream_create() {
  cudaStream_t s = nullptr;
  return cudaStreamCreateWithFlags(&s, cudaStreamDefault) == cudaSuccess ? s : nullptr;
}
void stream_synchronize(void *s) { cudaStreamSynchronize(static_cast<cudaStream_t>(s)); }
void stream_destroy(void *s) { cudaStreamDestroy(static_cast<cudaStream_t>(s)); }

}  // namespace halo_fused
