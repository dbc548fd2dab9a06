// The CUDA runtime's and driver's answers about pointers, shared by cuda/: the driver's
// entry points reached through cudart, the extent of an allocation, and this thread's
// memo of pointer attributes inside a PointerScope (core/backend.hpp).
#include "pointers.hpp"

namespace tempi {

// A driver function of CUDA 12's interface, reached through cudart (TEMPI does not link
// the driver library); null where the driver has none.
void *driver_entry(const char *name) {
  void *f = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion(name, &f, 12000, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  return f;
}

PointerAttributesFn pointer_attributes_fn() {
  static const auto fn = reinterpret_cast<PointerAttributesFn>(driver_entry("cuPointerGetAttributes"));
  return fn;
}

// The bytes [lo, hi) of the allocation that holds `ptr`, as the driver maps it; an empty
// range where the driver does not know the address. A pack kernel may read whole aligned
// chunks inside it beyond a block's ends (SmallPatternArgs::readable_lo).
void allocation_range(const void *ptr, uint64_t &lo, uint64_t &hi) {
  lo = hi = 0;
  const PointerAttributesFn get = pointer_attributes_fn();
  if (!ptr || !get) return;
  CUdeviceptr start = 0;
  size_t size = 0;
  CUpointer_attribute which[] = {CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE};
  void *values[] = {&start, &size};
  if (get(2, which, values, reinterpret_cast<CUdeviceptr>(ptr)) != CUDA_SUCCESS || !start) return;
  lo = uint64_t(start);
  hi = lo + uint64_t(size);
}

namespace {

// This thread's answers to pointer queries, kept inside a PointerScope (backend.hpp).
// A call names at most a few buffers; the last kMemo addresses asked about are kept.
struct PointerMemo {
  static constexpr int kMemo = 4;
  int depth = 0;
  int size = 0;
  int next = 0;  // the slot the next answer replaces once all are used
  const void *ptr[kMemo] = {};
  bool known[kMemo] = {};  // the runtime knew the address (its attributes are valid)
  cudaPointerAttributes attr[kMemo] = {};
};

PointerMemo &pointer_memo() {
  thread_local PointerMemo memo;
  return memo;
}

}  // namespace

// cudaPointerGetAttributes, answered from the memo inside a PointerScope. False when the
// runtime does not know the address (pageable host memory).
bool attributes(const void *ptr, cudaPointerAttributes &out) {
  PointerMemo &m = pointer_memo();
  for (int i = 0; i < m.size; ++i)
    if (m.ptr[i] == ptr) {
      out = m.attr[i];
      return m.known[i];
    }
  const bool known = cudaPointerGetAttributes(&out, ptr) == cudaSuccess;
  if (!known) cudaGetLastError();
  if (m.depth > 0) {
    const int slot = m.size < PointerMemo::kMemo ? m.size++ : (m.next++ % PointerMemo::kMemo);
    m.ptr[slot] = ptr;
    m.known[slot] = known;
    m.attr[slot] = out;
  }
  return known;
}

void remember_pointers(bool on) {
  PointerMemo &m = pointer_memo();
  if (on) {
    ++m.depth;
  } else if (--m.depth == 0) {
    m.size = 0;
  }
}

}  // namespace tempi
