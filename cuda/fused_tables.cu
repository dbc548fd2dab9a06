// Device tables of fused launches' descriptions (kernel_common.cuh, place_table), kept
// per thread and stream so that a batch that repeats byte for byte launches with no transfer.
#include <atomic>
#include <vector>

#include "kernel_common.cuh"
#include "resources.hpp"

namespace tempi {

namespace {

// Descriptions of fused launches kept in device memory. A launch's parameter is copied at
// every launch: the 26 objects of a halo exchange (in the 48-object batch, 6 KB) took 13 us
// to launch on an H100 with two ranks under MPS (2026-11-25, an instrumented tempi_halo),
// a quarter of the exchange's own time. So a batch of more than policy::kParameterItems goes to the
// kernel as a pointer to a table. Each thread keeps, for each stream it launches on (TEMPI's
// own: they live as long as the thread), the last policy::kTablesPerStream tables it placed: a batch
// that repeats byte for byte (the same exchange again, with the same buffers and staging)
// launches from its table with no transfer; another is copied into the least recently used
// table, on that stream, so after every launch that read the table before. The copy goes from
// a pinned shadow of the table: from pageable memory the runtime may wait for the stream
// first. The tables go with their thread.
constexpr size_t kTableBytes = std::max(sizeof(FusedDev) * policy::kMaxFusedObjects, sizeof(PairDev) * policy::kMaxFusedPairs);

std::atomic<uint64_t> g_tables_placed{0}, g_tables_reused{0};

struct Table {
  cudaStream_t stream = nullptr;
  int device = -1;
  uint64_t last_use = 0;
  std::vector<unsigned char> bytes;  // what the device copy holds
  void *copy = nullptr;              // kTableBytes of device memory
  void *shadow = nullptr;            // kTableBytes of pinned host memory, the copy's source
  cudaEvent_t copied = nullptr;      // after the last copy from the shadow
};

// A thread's tables, freed when it ends (cudaFree waits for the launches that read them).
struct Tables {
  std::vector<Table> all;
  uint64_t clock = 0;
  Tables() = default;
  Tables(const Tables &) = delete;
  Tables &operator=(const Tables &) = delete;
  ~Tables() {
    for (Table &t : all) {
      const OnDevice on(t.device);  // a table's memory and event belong to its device
      cudaFree(t.copy);
      cudaFreeHost(t.shadow);
      cudaEventDestroy(t.copied);
    }
    cudaGetLastError();  // at process exit the runtime may be gone: nothing to report
  }
};

// A new table for `stream` on `device` (the current one), or Unsupported.
Status add_table(Tables &t, cudaStream_t stream, int device) {
  Table n{stream, device, 0, {}, nullptr, nullptr, nullptr};
  if (cudaMalloc(&n.copy, kTableBytes) == cudaSuccess && cudaMallocHost(&n.shadow, kTableBytes) == cudaSuccess &&
      cudaEventCreateWithFlags(&n.copied, cudaEventDisableTiming) == cudaSuccess) {
    t.all.push_back(std::move(n));
    return Status::Ok;
  }
  cudaGetLastError();
  if (n.copy) cudaFree(n.copy);
  if (n.shadow) cudaFreeHost(n.shadow);
  return Status::Unsupported;
}

thread_local bool t_parameter_only = false;

}  // namespace

ParameterOnly::ParameterOnly() : before_(t_parameter_only) { t_parameter_only = true; }
ParameterOnly::~ParameterOnly() { t_parameter_only = before_; }

Status place_table(const void *host, size_t bytes, cudaStream_t stream, const void *&out) {
  if (t_parameter_only) return Status::Unsupported;
  thread_local Tables t;
  std::vector<Table> &tables = t.all;
  uint64_t &clock = t.clock;
  const int device = current_device();
  Table *reuse = nullptr;
  int on_stream = 0;
  for (Table &t : tables) {
    if (t.stream != stream || t.device != device) continue;
    ++on_stream;
    if (t.bytes.size() == bytes && std::memcmp(t.bytes.data(), host, bytes) == 0) {
      t.last_use = ++clock;
      out = t.copy;
      g_tables_reused.fetch_add(1, std::memory_order_relaxed);
      return Status::Ok;
    }
    if (!reuse || t.last_use < reuse->last_use) reuse = &t;
  }
  if (on_stream < policy::kTablesPerStream) {
    if (add_table(t, stream, device) == Status::Ok) reuse = &tables.back();
    else if (!reuse) return Status::Unsupported;
  }
  // The shadow is rewritten once its last copy is done: policy::kTablesPerStream placements ago, so
  // almost always at once.
  TEMPI_CUDA(cudaEventSynchronize(reuse->copied));
  std::memcpy(reuse->shadow, host, bytes);
  TEMPI_CUDA(cudaMemcpyAsync(reuse->copy, reuse->shadow, bytes, cudaMemcpyHostToDevice, stream));
  TEMPI_CUDA(cudaEventRecord(reuse->copied, stream));
  const unsigned char *from = static_cast<const unsigned char *>(host);
  reuse->bytes.assign(from, from + bytes);
  reuse->last_use = ++clock;
  out = reuse->copy;
  g_tables_placed.fetch_add(1, std::memory_order_relaxed);
  return Status::Ok;
}

FusedTableCounts fused_table_counts() {
  return {g_tables_placed.load(std::memory_order_relaxed), g_tables_reused.load(std::memory_order_relaxed)};
}

}  // namespace tempi
