// The CUDA implementation of Backend: classifies pointers, runs the pack/unpack
// kernels, and stages through device or pinned memory when one side is pageable host
// memory that kernels cannot touch.
#include <cuda.h>  // types of the driver's pointer queries and stream memory operations, reached through cudart
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "blocklist.hpp"
#include "check.hpp"
#include "config.hpp"
#include "host_packer.hpp"
#include "kernels.hpp"
#include "open_launch.hpp"
#include "log.hpp"
#include "resources.hpp"
#include "transpose.hpp"

namespace tempi {

namespace {

// Up to this many rows, a 2-D or 3-D strided object moves between GPU and pinned host
// memory as one pitched copy of the copy engines: 8.2-8.5 us with its synchronization
// for 1 KiB in 128 rows, against 11.2-11.3 us for a kernel on mapped host memory
// (H200, bench_p2p, 2026-11-22). The engines take each row separately, so objects of
// many short rows go to the kernel.
constexpr int64_t kMaxPitchedRows = 1024;

std::atomic<uint64_t> g_synchronizations{0};

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

using WriteValueFn = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
WriteValueFn write_value_fn() {
  static const auto fn = reinterpret_cast<WriteValueFn>(driver_entry("cuStreamWriteValue32"));
  return fn;
}

using PointerAttributesFn = CUresult (*)(unsigned, CUpointer_attribute *, void **, CUdeviceptr);
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

// A word of pinned, mapped host memory per thread and device: after the work it waits
// for, the stream writes the next sequence number there (cuStreamWriteValue32 fences the
// stream's earlier writes first), and the thread polls it. On an H100 (bench_call,
// 2026-11-23) an empty kernel's completion is seen this way 0.6-1.1 us sooner than
// through cudaStreamSynchronize.
class CompletionWord {
 public:
  CompletionWord() = default;
  CompletionWord(const CompletionWord &) = delete;
  CompletionWord &operator=(const CompletionWord &) = delete;
  ~CompletionWord() {
    if (host_) cudaFreeHost(host_);  // fails harmlessly once the runtime is gone at exit
  }
  // False when this thread cannot wait this way on the current device.
  bool ready() {
    if (host_) return true;
    if (refused_) return false;
    void *dev = nullptr;
    if (cudaHostAlloc(reinterpret_cast<void **>(&host_), sizeof(uint32_t), cudaHostAllocMapped | cudaHostAllocPortable) !=
            cudaSuccess ||
        cudaHostGetDevicePointer(&dev, host_, 0) != cudaSuccess) {
      cudaGetLastError();
      if (host_) cudaFreeHost(host_);
      host_ = nullptr;
      refused_ = true;
      return false;
    }
    *host_ = 0;
    dev_ = reinterpret_cast<CUdeviceptr>(dev);
    return true;
  }
  // Waits for the work issued so far on `stream`; false when the stream refused the write
  // (nothing was waited for).
  bool wait(cudaStream_t stream, cudaError_t &result) {
    const uint32_t target = ++sequence_;
    if (write_value_fn()(stream, dev_, target, 0) != CUDA_SUCCESS) {
      cudaGetLastError();
      refused_ = true;
      return false;
    }
    // A fault ends the stream's work before the write: every so often the stream is asked
    // too, which reports the fault (or that everything, the write included, is done).
    for (uint32_t spin = 1;; ++spin) {
      if (__atomic_load_n(host_, __ATOMIC_ACQUIRE) == target) {
        result = cudaSuccess;
        return true;
      }
      if ((spin & 4095) == 0) {
        const cudaError_t e = cudaStreamQuery(stream);
        if (e != cudaErrorNotReady) {
          result = e;
          return true;
        }
      }
    }
  }
  bool refused() const { return refused_; }

 private:
  uint32_t *host_ = nullptr;
  CUdeviceptr dev_ = 0;
  uint32_t sequence_ = 0;
  bool refused_ = false;
};

// Every wait for the GPU goes through here, so that it is counted.
cudaError_t synchronize(cudaStream_t stream) {
  g_synchronizations.fetch_add(1, std::memory_order_relaxed);
  if (config().wait_by_polling && write_value_fn()) {
    thread_local CompletionWord words[kMaxDevices];
    CompletionWord &w = words[current_device()];
    cudaError_t result = cudaSuccess;
    if (!w.refused() && w.ready() && w.wait(stream, result)) return result;
    static std::once_flag said;
    std::call_once(said, [] {
      TEMPI_LOG(Info, "the GPU refused a stream memory operation: waiting with cudaStreamSynchronize (TEMPI_WAIT)");
    });
  }
  return cudaStreamSynchronize(stream);
}

// Plan tables go up on a non-blocking stream of their own: a cudaMemcpy would first wait
// for whatever the application left on the legacy default stream (a hidden synchronization
// at a plan's first use, behind the application's kernels).
Status upload(void *device, const void *host, size_t bytes) {
  static std::mutex mutex;
  static cudaStream_t streams[kMaxDevices] = {};
  std::lock_guard<std::mutex> lock(mutex);
  cudaStream_t &s = streams[current_device()];
  if (!s) TEMPI_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  TEMPI_CUDA(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, s));
  TEMPI_CUDA(cudaStreamSynchronize(s));  // once per plan, like the cudaMemcpy it replaces: not counted
  return Status::Ok;
}

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

// Events that mark the end of asynchronous work, reused: creating one costs more than
// recording it. One pool per device (an event belongs to the device it was made on).
class EventPool {
 public:
  Status take(cudaEvent_t &out) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!free_.empty()) {
        out = free_.back();
        free_.pop_back();
        return Status::Ok;
      }
    }
    TEMPI_CUDA(cudaEventCreateWithFlags(&out, cudaEventDisableTiming));
    return Status::Ok;
  }
  void give_back(cudaEvent_t e) {
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(e);
  }

 private:
  std::mutex mutex_;
  std::vector<cudaEvent_t> free_;
};

EventPool &event_pool(int device) {
  static EventPool *pools = new EventPool[kMaxDevices];  // immortal, like the buffer pools
  return pools[device];
}

// What a Fence holds on the GPU: the event after the work, and the device memory the
// work uses until then.
struct CudaFence {
  int device = 0;
  cudaEvent_t event = nullptr;
  std::vector<std::shared_ptr<BufferPool::Lease>> temps;
  OpenMark open;  // the open launch whose end `event` marks (its event, not the pool's)
  ~CudaFence() {
    if (event && !open.launch) event_pool(device).give_back(event);
  }
};

int widest_word(uint64_t bits) {
  for (int w = 16; w > 1; w /= 2)
    if ((bits & uint64_t(w - 1)) == 0) return w;
  return 1;
}

// A block-list pattern's device data on one device (blocklist.hpp): plans of long blocks
// (long_block_plan) take the warp-per-piece kernel and its pieces, small patterns
// (small_pattern_plan) the tiled kernel for whole instances and the byte-balanced kernel
// for parts of instances, the others the byte-balanced kernel and its run table.
struct DeviceBlockList {
  Buffer owned;
  bool long_blocks = false;
  bool small = false;
  BlockListTable table;                // short blocks
  SmallPatternTable small_table;       // small patterns
  const LongPiece *pieces = nullptr;   // long blocks: the pieces of one instance
  std::vector<int64_t> piece_starts;   // long blocks: their stream offsets, on the host
};

// A move's paired runs on the device (CudaBackend::paired_runs_for).
struct DevicePairedRuns {
  Buffer owned;
  const PairedRun *runs = nullptr;
  int64_t n = 0;
};

// The plan's start and repetition dimensions, as every kernel's arguments hold them.
template <class Args>
void set_dims(const Plan &plan, Args &a) {
  a.start = plan.start;
  a.ndims = int(plan.dims.size());
  for (int d = 0; d < a.ndims; ++d) {
    a.counts[d] = plan.dims[d].count;
    a.strides[d] = plan.dims[d].stride;
  }
}

// What both block-list kernels' arguments say alike: one pattern instance repeated over
// the plan's dimensions, restricted to stream bytes [first, last).
template <class Args>
void repeat_over_dims(const Plan &plan, int64_t first, int64_t last, Args &a) {
  set_dims(plan, a);
  a.pattern_size = plan.pattern_size;
  a.first = first;
  a.last = last;
}

class CudaBackend final : public Backend {
 public:
  bool has_gpu() override {
    static const bool present = [] {
      int n = 0;
      const cudaError_t err = cudaGetDeviceCount(&n);
      if (err != cudaSuccess) {
        cudaGetLastError();
        TEMPI_LOG(Info, "no usable GPU (%s): GPU buffers are not expected", cudaGetErrorString(err));
        return false;
      }
      return n > 0;
    }();
    return present;
  }

  std::string device_name() override {
    cudaDeviceProp prop;
    int dev = 0;
    if (!has_gpu() || cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess)
      return "none";
    return prop.name;
  }

  MemorySpace classify(const void *ptr) override {
    if (!ptr || !has_gpu()) return MemorySpace::Host;
    cudaPointerAttributes attr;
    if (!attributes(ptr, attr)) return MemorySpace::Host;
    switch (attr.type) {
      case cudaMemoryTypeDevice:
        return MemorySpace::Device;
      case cudaMemoryTypeManaged:
        return MemorySpace::Managed;
      case cudaMemoryTypeHost:
        return MemorySpace::PinnedHost;
      default:
        return MemorySpace::Host;
    }
  }

  Status pack(const Plan &plan, const void *typed, void *packed, int64_t first, int64_t last) override {
    return move(plan, const_cast<void *>(typed), packed, first, last, true);
  }

  Status unpack(const Plan &plan, const void *packed, void *typed, int64_t first, int64_t last) override {
    return move(plan, typed, const_cast<void *>(packed), first, last, false);
  }

  Status pack_accessible(const Plan &plan, const void *typed, void *packed, int64_t first, int64_t last) override {
    return run_synchronously(plan, const_cast<void *>(typed), packed, first, last, true);
  }

  Status unpack_accessible(const Plan &plan, const void *packed, void *typed, int64_t first, int64_t last) override {
    return run_synchronously(plan, typed, const_cast<void *>(packed), first, last, false);
  }

  Status pack_to_host(const Plan &plan, const void *typed, void *host, int64_t bytes) override {
    return to_or_from_host(plan, const_cast<void *>(typed), host, bytes, true);
  }

  Status unpack_from_host(const Plan &plan, const void *host, void *typed, int64_t bytes) override {
    return to_or_from_host(plan, typed, const_cast<void *>(host), bytes, false);
  }

  Status pack_staged(const Plan &plan, const void *typed, void *host, int64_t bytes, int64_t chunk) override {
    bytes = std::min(bytes, plan.packed_size());
    if (bytes <= 0) return Status::Ok;
    cudaStream_t stream;
    TEMPI_TRY(thread_stream(stream));
    if (plan.contiguous()) {  // one DMA copy, no kernel
      const char *src = static_cast<const char *>(typed) + plan.start + plan.pattern[0].offset;
      TEMPI_CUDA(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDefault, stream));
      TEMPI_CUDA(synchronize(stream));
      return Status::Ok;
    }
    BufferPool::Lease staging;
    if (device_pool().acquire(bytes, staging) != Status::Ok) {
      TEMPI_LOG(Warn, "no device memory to stage %lld bytes: packing straight into host memory",
                (long long)bytes);
      return pack(plan, typed, host, 0, bytes);
    }
    CopyResources cr;
    TEMPI_TRY(thread_copy_resources(cr));
    char *dev = static_cast<char *>(staging.get());
    for (int64_t off = 0; off < bytes; off += chunk) {
      const int64_t end = std::min(bytes, off + chunk);
      TEMPI_TRY(run_kernel(plan, const_cast<void *>(typed), dev + off, off, end, true, stream));
      TEMPI_CUDA(cudaEventRecord(cr.ready, stream));
      TEMPI_CUDA(cudaStreamWaitEvent(cr.copy, cr.ready, 0));
      TEMPI_CUDA(cudaMemcpyAsync(static_cast<char *>(host) + off, dev + off, end - off, cudaMemcpyDeviceToHost,
                                 cr.copy));
    }
    TEMPI_CUDA(synchronize(cr.copy));
    return Status::Ok;
  }

  Status unpack_staged(const Plan &plan, const void *host, void *typed, int64_t bytes, int64_t chunk) override {
    bytes = std::min(bytes, plan.packed_size());
    if (bytes <= 0) return Status::Ok;
    cudaStream_t stream;
    TEMPI_TRY(thread_stream(stream));
    if (plan.contiguous()) {
      char *dst = static_cast<char *>(typed) + plan.start + plan.pattern[0].offset;
      TEMPI_CUDA(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyDefault, stream));
      TEMPI_CUDA(synchronize(stream));
      return Status::Ok;
    }
    BufferPool::Lease staging;
    if (device_pool().acquire(bytes, staging) != Status::Ok) {
      TEMPI_LOG(Warn, "no device memory to stage %lld bytes: unpacking straight from host memory",
                (long long)bytes);
      return unpack(plan, host, typed, 0, bytes);
    }
    CopyResources cr;
    TEMPI_TRY(thread_copy_resources(cr));
    char *dev = static_cast<char *>(staging.get());
    for (int64_t off = 0; off < bytes; off += chunk) {
      const int64_t end = std::min(bytes, off + chunk);
      TEMPI_CUDA(cudaMemcpyAsync(dev + off, static_cast<const char *>(host) + off, end - off, cudaMemcpyHostToDevice,
                                 cr.copy));
      TEMPI_CUDA(cudaEventRecord(cr.ready, cr.copy));
      TEMPI_CUDA(cudaStreamWaitEvent(stream, cr.ready, 0));
      TEMPI_TRY(run_kernel(plan, typed, dev + off, off, end, false, stream));
    }
    TEMPI_CUDA(synchronize(stream));
    return Status::Ok;
  }

  Status pack_async(const std::vector<MoveJob> &jobs, Fence &done) override { return issue(jobs, true, done); }
  Status unpack_async(const std::vector<MoveJob> &jobs, Fence &done) override { return issue(jobs, false, done); }

  // Asking about an open launch's work closes the launch: the asker waits for its end.
  bool query(const Fence &f) override {
    if (!f) return true;
    const CudaFence &fence = *static_cast<CudaFence *>(f.state.get());
    ::tempi::close_open(fence.open);
    const cudaError_t err = cudaEventQuery(fence.event);
    if (err == cudaErrorNotReady) return false;
    if (err != cudaSuccess) cudaGetLastError();  // wait() reports it
    return err == cudaSuccess;
  }

  Status poll(const Fence &f, bool &finished) override {
    finished = true;
    if (!f) return Status::Ok;
    const CudaFence &fence = *static_cast<CudaFence *>(f.state.get());
    ::tempi::close_open(fence.open);
    const cudaError_t err = cudaEventQuery(fence.event);
    if (err == cudaErrorNotReady) {
      finished = false;
      return Status::Ok;
    }
    TEMPI_CUDA(err);
    return Status::Ok;
  }

  Status wait(const Fence &f) override {
    if (!f) return Status::Ok;
    g_synchronizations.fetch_add(1, std::memory_order_relaxed);
    const CudaFence &fence = *static_cast<CudaFence *>(f.state.get());
    ::tempi::close_open(fence.open);
    TEMPI_CUDA(cudaEventSynchronize(fence.event));
    return Status::Ok;
  }

  // Objects above this go alone: an object's own kernel (tiled, a grid sized to it), or
  // the copy engines for one contiguous run, beat the open launch's tiles by more than a
  // launch costs (about 4 us on an H100, bench_call) once it moves megabytes. Below it, a
  // contiguous run joins too: a halo's corners and x-edges are single runs, and each one
  // sent alone would close the launch between two ghost faces.
  static constexpr int64_t kOpenMaxBytes = int64_t(1) << 20;

  Status join_open(const MoveJob &j, bool to_packed, Fence &done) override {
    done = Fence{};
    if (j.bytes <= 0 || j.plan->packed_size() <= 0) return Status::Ok;
    FusedObject o;
    if (!describe_fused(j, j.packed, o) || o.bytes > kOpenMaxBytes)
      return issue({j}, to_packed, done);
    auto fence = std::make_shared<CudaFence>();
    fence->device = current_device();
    const Status st = ::tempi::join_open(o, to_packed, fence->event, fence->open);
    if (st == Status::Unsupported) return issue({j}, to_packed, done);
    TEMPI_TRY(st);
    done.state = std::move(fence);
    return Status::Ok;
  }

  void close_open() override { close_thread_open(current_device()); }

  uint64_t synchronizations() override { return g_synchronizations.load(std::memory_order_relaxed); }

  Status wait_default_stream() override {
    close_thread_open(current_device());  // work on the legacy stream may wait for it
    const cudaError_t idle = cudaStreamQuery(cudaStreamLegacy);
    if (idle == cudaSuccess) return Status::Ok;
    if (idle != cudaErrorNotReady) TEMPI_CUDA(idle);
    TEMPI_CUDA(synchronize(cudaStreamLegacy));
    return Status::Ok;
  }

  std::string device_id() override {
    char bus[32] = "";
    int dev = 0;
    if (!has_gpu() || cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetPCIBusId(bus, sizeof bus, dev) != cudaSuccess) {
      cudaGetLastError();
      return "";
    }
    return bus;
  }

  bool mps_enabled() override {
    int dev = 0, on = 0;
    if (!has_gpu() || cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&on, cudaDevAttrMpsEnabled, dev) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    return on != 0;
  }

  Status acquire(ScratchKind kind, size_t bytes, Scratch &out) override {
    auto lease = std::make_shared<BufferPool::Lease>();
    TEMPI_TRY((kind == ScratchKind::Device ? device_pool() : pinned_pool()).acquire(bytes, *lease));
    out.ptr = lease->get();
    out.owner = std::move(lease);
    return Status::Ok;
  }

  MemoryUse memory_use() override { return buffer_memory_use(); }

  int device_count() override {
    int n = 0;
    if (!has_gpu() || cudaGetDeviceCount(&n) != cudaSuccess) return 0;
    return n;
  }

  Status select_device(int device) override {
    TEMPI_CUDA(cudaSetDevice(device));
    return Status::Ok;
  }

  Status allocate_device(size_t bytes, void **out) override {
    TEMPI_CUDA(cudaMalloc(out, bytes));
    return Status::Ok;
  }

  void free_device(void *ptr) override {
    close_thread_open(-1);  // cudaFree waits for the GPU
    cudaFree(ptr);
  }

  Status copy(void *dst, const void *src, size_t bytes) override {
    close_thread_open(-1);  // the copy follows this thread's open launches; no need to wait for them to idle
    g_synchronizations.fetch_add(1, std::memory_order_relaxed);
    TEMPI_CUDA(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
    return Status::Ok;
  }

  Status copy_all(const std::vector<CopyJob> &jobs) override {
    if (jobs.empty()) return Status::Ok;
    close_thread_open(-1);
    cudaStream_t stream;
    TEMPI_TRY(thread_stream(stream));  // a blocking stream: it follows the legacy default stream, as copy() does
    for (const CopyJob &j : jobs) TEMPI_CUDA(cudaMemcpyAsync(j.dst, j.src, j.bytes, cudaMemcpyDefault, stream));
    TEMPI_CUDA(synchronize(stream));
    return Status::Ok;
  }

  void release_plan(uint64_t id) override {
    std::lock_guard<std::mutex> lock(units_mutex_);
    for (int device = 0; device < kMaxDevices; ++device) units_.erase(units_key(id, device));
  }

  Status ipc_export(const void *ptr, IpcHandle &out) override {
    // The allocation's identity and extent in one driver query (cudart has none for them).
    const PointerAttributesFn get_attributes = pointer_attributes_fn();
    if (!ptr || !get_attributes) return Status::Unsupported;
    unsigned long long id = 0;
    CUdeviceptr start = 0;
    size_t size = 0;
    int capable = 0, type = 0;
    CUpointer_attribute which[] = {CU_POINTER_ATTRIBUTE_BUFFER_ID, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                   CU_POINTER_ATTRIBUTE_RANGE_SIZE, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
                                   CU_POINTER_ATTRIBUTE_MEMORY_TYPE};
    void *values[] = {&id, &start, &size, &capable, &type};
    if (get_attributes(5, which, values, reinterpret_cast<CUdeviceptr>(ptr)) != CUDA_SUCCESS || !capable ||
        type != CU_MEMORYTYPE_DEVICE)
      return Status::Unsupported;
    {
      std::lock_guard<std::mutex> lock(ipc_mutex_);
      auto it = exported_.find(id);
      if (it == exported_.end()) {
        cudaIpcMemHandle_t h;
        if (cudaIpcGetMemHandle(&h, reinterpret_cast<void *>(start)) != cudaSuccess) {
          cudaGetLastError();
          return Status::Unsupported;
        }
        if (exported_.size() >= kMaxExported) exported_.clear();  // handles of freed memory go too
        it = exported_.emplace(id, h).first;
      }
      static_assert(sizeof(cudaIpcMemHandle_t) <= sizeof(out.bytes), "IpcHandle holds a CUDA IPC handle");
      std::memcpy(out.bytes, &it->second, sizeof(cudaIpcMemHandle_t));
    }
    out.buffer_id = id;
    out.offset = int64_t(reinterpret_cast<CUdeviceptr>(ptr) - start);
    out.size = int64_t(size);
    out.base = uint64_t(start);
    return Status::Ok;
  }

  Status ipc_open(const IpcHandle &handle, void **base) override {
    cudaIpcMemHandle_t h;
    std::memcpy(&h, handle.bytes, sizeof h);
    const cudaError_t err = cudaIpcOpenMemHandle(base, h, cudaIpcMemLazyEnablePeerAccess);
    if (err == cudaSuccess) return Status::Ok;
    cudaGetLastError();
    // The caller retries or falls back, and says so. Already mapped: this process mapped the
    // allocation through another handle (the MPI library's own IPC cache), which CUDA allows once.
    if (log_enabled(LogLevel::Debug)) log(LogLevel::Debug, "cudaIpcOpenMemHandle: %s", cudaGetErrorString(err));
    return Status::GpuError;
  }

  void ipc_close(void *base) override {
    if (cudaIpcCloseMemHandle(base) != cudaSuccess) cudaGetLastError();
  }

  bool ipc_peer_access(const std::string &device) override {
    int mine = 0, theirs = -1, can = 0;
    if (!has_gpu() || cudaGetDevice(&mine) != cudaSuccess || cudaDeviceGetByPCIBusId(&theirs, device.c_str()) !=
                                                                   cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    if (theirs == mine) return true;
    if (cudaDeviceCanAccessPeer(&can, mine, theirs) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    return can != 0;
  }

  void remember_pointers(bool on) override {
    PointerMemo &m = pointer_memo();
    if (on) {
      ++m.depth;
    } else if (--m.depth == 0) {
      m.size = 0;
    }
  }

  int device_of(const void *ptr) override {
    if (!ptr || !has_gpu()) return -1;
    cudaPointerAttributes attr;
    if (!attributes(ptr, attr)) return -1;
    return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged ? attr.device : -1;
  }

  int use_device(int device) override {
    const int previous = current_device();
    if (device != previous && cudaSetDevice(device) != cudaSuccess) {
      cudaGetLastError();
      return previous;
    }
    return previous;
  }

 private:
  // Exported allocations by buffer id: cudaIpcGetMemHandle costs microseconds per call.
  static constexpr size_t kMaxExported = 4096;
  std::mutex ipc_mutex_;
  std::unordered_map<unsigned long long, cudaIpcMemHandle_t> exported_;

  // Runs the kernel between a GPU-accessible typed buffer and a GPU-accessible packed buffer.
  Status run_kernel(const Plan &plan, void *typed, void *packed, int64_t first, int64_t last, bool to_packed,
                    cudaStream_t stream) {
    if (plan.contiguous()) return copy_run(plan, typed, packed, first, last, to_packed, stream);
    const uint64_t addr_bits = uint64_t(reinterpret_cast<uintptr_t>(typed)) |
                               uint64_t(reinterpret_cast<uintptr_t>(packed)) | uint64_t(first) | uint64_t(last) |
                               uint64_t(plan.start);
    uint64_t dim_bits = 0;
    for (const Dim &d : plan.dims) dim_bits |= uint64_t(d.stride);
    if (int(plan.dims.size()) > kMaxKernelDims) return Status::Unsupported;

    if (plan.strided()) {
      StridedArgs a;
      set_dims(plan, a);
      a.block = plan.pattern_size;
      a.first = first;
      a.last = last;
      const int word = widest_word(addr_bits | dim_bits | uint64_t(a.block));
      if (tiled_transpose_fits(a, word)) return launch_tiled_transpose(a, word, typed, packed, to_packed, stream);
      return launch_strided(a, word, typed, packed, to_packed, stream);
    }

    std::shared_ptr<DeviceBlockList> list;
    TEMPI_TRY(units_for(plan, list));
    if (list->long_blocks) {
      LongBlockArgs a;
      a.pieces = list->pieces;
      a.npieces = int64_t(list->piece_starts.size());
      repeat_over_dims(plan, first, last, a);
      return launch_long_blocks(a, list->piece_starts, typed, packed, to_packed, stream);
    }
    if (list->small) return move_small_pattern(plan, *list, typed, packed, first, last, to_packed, stream);
    BlockListArgs a;
    a.table = list->table;
    repeat_over_dims(plan, first, last, a);
    return launch_blocklist(a, typed, packed, to_packed, stream);
  }

  // A small pattern's whole instances (repetitions, or groups of them) in [first, last)
  // through the tiled kernel, the parts of instances at the range's two ends (pipelined
  // chunks cut them) through the byte-balanced one.
  static Status move_small_pattern(const Plan &plan, const DeviceBlockList &list, void *typed, void *packed,
                                   int64_t first, int64_t last, bool to_packed, cudaStream_t stream) {
    const int64_t size = list.small_table.size;
    const int64_t whole_first = (first + size - 1) / size, whole_end = last / size;
    auto part = [&](int64_t lo, int64_t hi) {
      BlockListArgs a;
      a.table = list.table;
      repeat_over_dims(plan, lo, hi, a);
      return launch_blocklist(a, typed, static_cast<char *>(packed) + (lo - first), to_packed, stream);
    };
    if (whole_end <= whole_first) return part(first, last);
    SmallPatternArgs s;
    s.table = list.small_table;
    set_dims(plan, s);
    s.inst_first = whole_first;
    s.inst_count = whole_end - whole_first;
    if (to_packed) allocation_range(typed, s.readable_lo, s.readable_hi);
    TEMPI_TRY(launch_small_pattern(s, typed, static_cast<char *>(packed) + (whole_first * size - first), to_packed,
                                   stream));
    if (first < whole_first * size) TEMPI_TRY(part(first, whole_first * size));
    if (whole_end * size < last) TEMPI_TRY(part(whole_end * size, last));
    return Status::Ok;
  }

  // A job that can join a fused launch: a strided plan of few dimensions, 32-bit indices.
  static bool describe_fused(const MoveJob &j, void *packed, FusedObject &o) {
    const Plan &plan = *j.plan;
    if (!plan.strided() || int(plan.dims.size()) > kMaxFusedDims) return false;
    uint64_t bits = uint64_t(reinterpret_cast<uintptr_t>(j.typed)) | uint64_t(reinterpret_cast<uintptr_t>(packed)) |
                    uint64_t(plan.start) | uint64_t(plan.pattern_size) | uint64_t(j.bytes);
    for (const Dim &d : plan.dims) bits |= uint64_t(d.stride);
    o.typed = j.typed;
    o.packed = packed;
    o.start = plan.start;
    o.block = plan.pattern_size;
    o.ndims = int(plan.dims.size());
    for (int d = 0; d < o.ndims; ++d) {
      o.counts[d] = plan.dims[d].count;
      o.strides[d] = plan.dims[d].stride;
    }
    o.bytes = std::min(j.bytes, plan.packed_size());
    o.word = widest_word(bits);
    return fusable(o.ndims, o.bytes, o.word);
  }

  // Pairs whose plans are both strided: one fused launch per kMaxFusedPairs, one access
  // width for both sides of a pair. A large transpose or permutation whose other side is
  // contiguous is a pack into that side or an unpack from it, for the tiled kernels (word
  // by word, a zero-copy 128 MiB transpose took 1.3 ms a round trip on one H200, 2026-11-24,
  // writing 8-byte words at a pitch of N). Block lists of long runs move as paired runs
  // (one pass; a triangle through scratch made two). The others are packed into their
  // scratch and unpacked from it. All on the same stream.
  Status move_async(const std::vector<PairJob> &jobs, Fence &done) override {
    done = Fence{};
    cudaStream_t stream;
    TEMPI_TRY(thread_stream(stream));
    const Status st = issue_pairs(jobs, stream, done);
    // A failure after some launches: they may still read the sources and write the scratch,
    // which a caller gives back at once on an error (and a zero-copy sender's buffer is
    // released), so they finish first. The failure itself is what the caller reports.
    if (st != Status::Ok) synchronize(stream);
    return st;
  }

  // Repeated moves (Backend::prepare_moves): where every pair is one of a fused launch (two
  // strided plans, neither a large transpose), their descriptions go to device memory once.
  struct PreparedPairs {
    BufferPool::Lease items;
    int n = 0;
    uint32_t blocks = 0;
    int device = 0;
  };
  Status prepare_moves(const std::vector<PairJob> &jobs, Prepared &out) override {
    out = Prepared{};
    std::vector<FusedPair> fused;
    for (const PairJob &j : jobs) {
      const int64_t bytes = std::min({j.bytes, j.from->packed_size(), j.to->packed_size()});
      if (bytes <= 0) continue;
      const MoveJob from{j.from, const_cast<void *>(j.from_typed), nullptr, bytes, Transfer{Method::Device, bytes}};
      const MoveJob to{j.to, j.to_typed, nullptr, bytes, Transfer{Method::Device, bytes}};
      FusedPair p;
      if (!describe_fused(from, nullptr, p.from) || !describe_fused(to, nullptr, p.to)) return Status::Unsupported;
      if ((j.to->contiguous() && runs_alone(p.from)) || (j.from->contiguous() && runs_alone(p.to)))
        return Status::Unsupported;
      p.from.word = p.to.word = std::min(p.from.word, p.to.word);
      if (!fusable(p.from.ndims, bytes, p.from.word) || !fusable(p.to.ndims, bytes, p.to.word))
        return Status::Unsupported;
      fused.push_back(p);
    }
    if (fused.empty()) return Status::Unsupported;
    auto state = std::make_shared<PreparedPairs>();
    state->n = int(fused.size());
    state->device = current_device();
    cudaStream_t stream;
    TEMPI_TRY(thread_stream(stream));
    TEMPI_TRY(device_pool().acquire(fused_pairs_bytes(state->n), state->items));
    TEMPI_TRY(prepare_fused_pairs(fused.data(), state->n, state->items.get(), state->blocks, stream));
    out.state = std::move(state);
    return Status::Ok;
  }

  Status move_prepared(const Prepared &p, Fence &done) override {
    done = Fence{};
    const auto *state = static_cast<const PreparedPairs *>(p.state.get());
    if (!state) return Status::Unsupported;
    cudaStream_t stream;
    TEMPI_TRY(thread_stream(stream));
    auto fence = std::make_shared<CudaFence>();
    fence->device = current_device();
    TEMPI_TRY(launch_prepared_pairs(state->items.get(), state->n, state->blocks, stream));
    TEMPI_TRY(event_pool(fence->device).take(fence->event));
    TEMPI_CUDA(cudaEventRecord(fence->event, stream));
    done.state = std::move(fence);
    return Status::Ok;
  }

  Status issue_pairs(const std::vector<PairJob> &jobs, cudaStream_t stream, Fence &done) {
    auto fence = std::make_shared<CudaFence>();
    fence->device = current_device();
    std::vector<FusedPair> fused;
    std::vector<MoveJob> packs, unpacks, into_runs, from_runs;
    bool launched = false;  // paired runs
    for (const PairJob &j : jobs) {
      const int64_t bytes = std::min({j.bytes, j.from->packed_size(), j.to->packed_size()});
      if (bytes <= 0) continue;
      const MoveJob from{j.from, const_cast<void *>(j.from_typed), nullptr, bytes, Transfer{Method::Device, bytes}};
      const MoveJob to{j.to, j.to_typed, nullptr, bytes, Transfer{Method::Device, bytes}};
      FusedPair p;
      if (describe_fused(from, nullptr, p.from) && describe_fused(to, nullptr, p.to)) {
        if (j.to->contiguous() && runs_alone(p.from)) {
          into_runs.push_back({j.from, from.typed, run_of(*j.to, j.to_typed), bytes, from.transfer});
          continue;
        }
        if (j.from->contiguous() && runs_alone(p.to)) {
          from_runs.push_back({j.to, j.to_typed, run_of(*j.from, from.typed), bytes, to.transfer});
          continue;
        }
        p.from.word = p.to.word = std::min(p.from.word, p.to.word);  // powers of two: the smaller divides both
        if (fusable(p.from.ndims, bytes, p.from.word) && fusable(p.to.ndims, bytes, p.to.word)) {
          fused.push_back(p);
          continue;
        }
      }
      if (const std::shared_ptr<const DevicePairedRuns> runs = paired_runs_for(*j.from, *j.to, bytes)) {
        TEMPI_TRY(launch_paired_runs(runs->runs, runs->n, j.from_typed, j.to_typed, stream));
        launched = true;
        continue;
      }
      if (!j.scratch) return Status::Unsupported;
      packs.push_back({j.from, const_cast<void *>(j.from_typed), j.scratch, bytes, Transfer{Method::Device, bytes}});
      unpacks.push_back({j.to, j.to_typed, j.scratch, bytes, Transfer{Method::Device, bytes}});
    }
    for (size_t k = 0; k < fused.size(); k += kMaxFusedPairs)
      TEMPI_TRY(launch_fused_pairs(fused.data() + k, int(std::min<size_t>(kMaxFusedPairs, fused.size() - k)), stream));
    Fence issued;  // on this stream too: the fence below follows every launch
    if (!into_runs.empty()) TEMPI_TRY(issue(into_runs, true, issued));
    if (!from_runs.empty()) TEMPI_TRY(issue(from_runs, false, issued));
    if (!packs.empty()) {
      TEMPI_TRY(issue(packs, true, issued));
      TEMPI_TRY(issue(unpacks, false, issued));
    }
    if (fused.empty() && packs.empty() && into_runs.empty() && from_runs.empty() && !launched) return Status::Ok;
    TEMPI_TRY(event_pool(fence->device).take(fence->event));
    TEMPI_CUDA(cudaEventRecord(fence->event, stream));
    done.state = std::move(fence);
    return Status::Ok;
  }

  // A large transpose or permutation leaves the fused launch for the tiled kernels
  // (transpose.hpp). The fused strided kernel moves it 0.66-0.87 us per MB slower (issue
  // 19's H200 table: N = 2000 and 4000 doubles), a launch of its own costs about 4 us
  // (bench_call on an H100), so from 4 MiB up it runs alone.
  static bool runs_alone(const FusedObject &o) {
    constexpr int64_t kAloneTranspose = int64_t(4) << 20;
    if (o.bytes < kAloneTranspose) return false;
    StridedArgs a;
    a.start = o.start;
    a.block = o.block;
    a.ndims = o.ndims;
    for (int d = 0; d < o.ndims; ++d) {
      a.counts[d] = o.counts[d];
      a.strides[d] = o.strides[d];
    }
    a.first = 0;
    a.last = o.bytes;
    return tiled_transpose_fits(a, o.word);
  }

  // Issues the jobs on this thread's stream and records the fence after them. Small
  // strided objects share fused launches, and so do contiguous runs up to kOpenMaxBytes (a
  // halo's corners and x-edges: a copy each cost about 4 us a call, 36 of them 150 us of
  // a 26-neighbour exchange of 3 variables); the staged method's copies are issued around
  // them (packed into one device area, then one copy per job to the host).
  Status issue(const std::vector<MoveJob> &jobs, bool to_packed, Fence &done) {
    cudaStream_t stream;
    TEMPI_TRY(thread_stream(stream));
    auto fence = std::make_shared<CudaFence>();
    fence->device = current_device();
    if (jobs.size() == 1) {
      TEMPI_TRY(issue_one(jobs[0], to_packed, stream, *fence));
    } else {
      std::vector<FusedObject> fused;
      std::vector<const MoveJob *> staged;  // fused jobs of the staged method
      std::vector<size_t> staged_at;        // their offsets in the device area
      std::vector<size_t> staged_object;    // their places in `fused`
      size_t area = 0;
      for (const MoveJob &j : jobs) {
        if (j.bytes <= 0) continue;
        FusedObject o;
        const bool whole = j.transfer.method != Method::Staged || j.transfer.chunk >= j.bytes;
        // (The staged method keeps its one copy per contiguous job straight to the host.)
        const bool copy_engine =
            j.plan->contiguous() && (j.bytes > kOpenMaxBytes || j.transfer.method == Method::Staged);
        if (copy_engine || !whole || !describe_fused(j, j.packed, o) || runs_alone(o)) {
          TEMPI_TRY(issue_one(j, to_packed, stream, *fence));
          continue;
        }
        if (j.transfer.method == Method::Staged) {
          staged.push_back(&j);
          staged_at.push_back(area);
          staged_object.push_back(fused.size());
          area += (size_t(j.bytes) + 255) & ~size_t(255);
        }
        fused.push_back(o);
      }
      char *dev = nullptr;
      if (area > 0) {
        auto lease = std::make_shared<BufferPool::Lease>();
        TEMPI_TRY(device_pool().acquire(area, *lease));
        dev = static_cast<char *>(lease->get());
        fence->temps.push_back(std::move(lease));
        for (size_t k = 0; k < staged.size(); ++k) {
          fused[staged_object[k]].packed = dev + staged_at[k];
          if (!to_packed)
            TEMPI_CUDA(cudaMemcpyAsync(dev + staged_at[k], staged[k]->packed, size_t(staged[k]->bytes),
                                       cudaMemcpyHostToDevice, stream));
        }
      }
      for (size_t k = 0; k < fused.size(); k += kMaxFusedObjects)
        TEMPI_TRY(launch_fused(fused.data() + k, int(std::min<size_t>(kMaxFusedObjects, fused.size() - k)),
                               to_packed, stream));
      if (to_packed)
        for (size_t k = 0; k < staged.size(); ++k)
          TEMPI_CUDA(cudaMemcpyAsync(staged[k]->packed, dev + staged_at[k], size_t(staged[k]->bytes),
                                     cudaMemcpyDeviceToHost, stream));
    }
    TEMPI_TRY(event_pool(fence->device).take(fence->event));
    TEMPI_CUDA(cudaEventRecord(fence->event, stream));
    done.state = std::move(fence);
    return Status::Ok;
  }

  // One job alone, as the synchronous entry points do it but without waiting.
  Status issue_one(const MoveJob &j, bool to_packed, cudaStream_t stream, CudaFence &fence) {
    const Plan &plan = *j.plan;
    const int64_t bytes = std::min(j.bytes, plan.packed_size());
    if (bytes <= 0) return Status::Ok;
    void *typed = j.typed;
    if (plan.contiguous()) {  // one copy by the copy engines
      char *run = run_of(plan, typed);
      TEMPI_CUDA(cudaMemcpyAsync(to_packed ? j.packed : run, to_packed ? run : j.packed, size_t(bytes),
                                 cudaMemcpyDefault, stream));
      return Status::Ok;
    }
    switch (j.transfer.method) {
      case Method::OneShot: {
        bool copied = false;
        TEMPI_TRY(pitched_copy(plan, typed, j.packed, bytes, to_packed, stream, copied));
        if (copied) return Status::Ok;
        return run_kernel(plan, typed, j.packed, 0, bytes, to_packed, stream);
      }
      case Method::Staged:
        return issue_staged(j, bytes, to_packed, stream, fence);
      default:
        return run_kernel(plan, typed, j.packed, 0, bytes, to_packed, stream);
    }
  }

  // The staged method without waiting: chunk k+1 packed while chunk k is copied (or the
  // reverse), the copies on a second stream that the thread's stream then waits for.
  Status issue_staged(const MoveJob &j, int64_t bytes, bool to_packed, cudaStream_t stream, CudaFence &fence) {
    auto lease = std::make_shared<BufferPool::Lease>();
    TEMPI_TRY(device_pool().acquire(size_t(bytes), *lease));
    char *dev = static_cast<char *>(lease->get());
    fence.temps.push_back(std::move(lease));
    const int64_t chunk = j.transfer.chunk > 0 ? j.transfer.chunk : bytes;
    char *host = static_cast<char *>(j.packed);
    if (chunk >= bytes) {  // one chunk: all on one stream
      if (!to_packed) TEMPI_CUDA(cudaMemcpyAsync(dev, host, size_t(bytes), cudaMemcpyHostToDevice, stream));
      TEMPI_TRY(run_kernel(*j.plan, j.typed, dev, 0, bytes, to_packed, stream));
      if (to_packed) TEMPI_CUDA(cudaMemcpyAsync(host, dev, size_t(bytes), cudaMemcpyDeviceToHost, stream));
      return Status::Ok;
    }
    CopyResources cr;
    TEMPI_TRY(thread_copy_resources(cr));
    // The copy stream must not start before earlier work on this thread's stream.
    TEMPI_CUDA(cudaEventRecord(cr.ready, stream));
    TEMPI_CUDA(cudaStreamWaitEvent(cr.copy, cr.ready, 0));
    for (int64_t off = 0; off < bytes; off += chunk) {
      const int64_t end = std::min(bytes, off + chunk);
      if (to_packed) {
        TEMPI_TRY(run_kernel(*j.plan, j.typed, dev + off, off, end, true, stream));
        TEMPI_CUDA(cudaEventRecord(cr.ready, stream));
        TEMPI_CUDA(cudaStreamWaitEvent(cr.copy, cr.ready, 0));
        TEMPI_CUDA(cudaMemcpyAsync(host + off, dev + off, size_t(end - off), cudaMemcpyDeviceToHost, cr.copy));
      } else {
        TEMPI_CUDA(cudaMemcpyAsync(dev + off, host + off, size_t(end - off), cudaMemcpyHostToDevice, cr.copy));
        TEMPI_CUDA(cudaEventRecord(cr.ready, cr.copy));
        TEMPI_CUDA(cudaStreamWaitEvent(stream, cr.ready, 0));
        TEMPI_TRY(run_kernel(*j.plan, j.typed, dev + off, off, end, false, stream));
      }
    }
    if (to_packed) {  // the fence on this thread's stream covers the last copy
      TEMPI_CUDA(cudaEventRecord(cr.ready, cr.copy));
      TEMPI_CUDA(cudaStreamWaitEvent(stream, cr.ready, 0));
    }
    return Status::Ok;
  }

  Status run_synchronously(const Plan &plan, void *typed, void *packed, int64_t first, int64_t last, bool to_packed) {
    last = std::min(last, plan.packed_size());
    if (last <= first) return Status::Ok;
    cudaStream_t stream;
    TEMPI_TRY(thread_stream(stream));
    TEMPI_TRY(run_kernel(plan, typed, packed, first, last, to_packed, stream));
    TEMPI_CUDA(synchronize(stream));
    return Status::Ok;
  }

  Status to_or_from_host(const Plan &plan, void *typed, void *host, int64_t bytes, bool to_host) {
    bytes = std::min(bytes, plan.packed_size());
    if (bytes <= 0) return Status::Ok;
    cudaStream_t stream;
    TEMPI_TRY(thread_stream(stream));
    bool copied = false;
    TEMPI_TRY(pitched_copy(plan, typed, host, bytes, to_host, stream, copied));
    if (!copied) return run_synchronously(plan, typed, host, 0, bytes, to_host);
    TEMPI_CUDA(synchronize(stream));
    return Status::Ok;
  }

  // One pitched copy between a whole 2-D or 3-D strided object and its packed bytes in
  // host memory, where the layout allows one; `copied` says whether it did.
  static Status pitched_copy(const Plan &plan, void *typed, void *host, int64_t bytes, bool to_host,
                             cudaStream_t stream, bool &copied) {
    copied = false;
    const std::vector<Dim> &d = plan.dims;
    if (!plan.strided() || bytes != plan.packed_size() || d.size() > 2 || plan.instances() > kMaxPitchedRows)
      return Status::Ok;
    char *base = run_of(plan, typed);
    const cudaMemcpyKind kind = to_host ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice;
    if (d.empty()) {  // one run
      TEMPI_CUDA(cudaMemcpyAsync(to_host ? host : base, to_host ? base : host, size_t(bytes), kind, stream));
      copied = true;
      return Status::Ok;
    }
    const size_t width = size_t(plan.pattern_size);
    // Rows must not overlap or run backwards, and pitches must stay within the engines' limit.
    constexpr int64_t kMaxPitch = int64_t(1) << 30;
    if (d[0].stride < int64_t(width) || d.back().stride >= kMaxPitch) return Status::Ok;
    if (d.size() == 1) {
      const size_t pitch = size_t(d[0].stride), rows = size_t(d[0].count);
      if (to_host)
        TEMPI_CUDA(cudaMemcpy2DAsync(host, width, base, pitch, width, rows, kind, stream));
      else
        TEMPI_CUDA(cudaMemcpy2DAsync(base, pitch, host, width, width, rows, kind, stream));
      copied = true;
      return Status::Ok;
    }
    // 3-D: planes must be whole numbers of rows apart, and not overlap.
    if (d[1].stride % d[0].stride != 0 || d[1].stride / d[0].stride < d[0].count) return Status::Ok;
    cudaMemcpy3DParms p = {};
    const cudaPitchedPtr object = make_cudaPitchedPtr(base, size_t(d[0].stride), width,
                                                      size_t(d[1].stride / d[0].stride));
    const cudaPitchedPtr packed = make_cudaPitchedPtr(host, width, width, size_t(d[0].count));
    p.srcPtr = to_host ? object : packed;
    p.dstPtr = to_host ? packed : object;
    p.extent = make_cudaExtent(width, size_t(d[0].count), size_t(d[1].count));
    p.kind = kind;
    TEMPI_CUDA(cudaMemcpy3DAsync(&p, stream));
    copied = true;
    return Status::Ok;
  }

  // The plan's block-list table on the current device, built and uploaded at its first use.
  Status units_for(const Plan &plan, std::shared_ptr<DeviceBlockList> &out) {
    std::lock_guard<std::mutex> lock(units_mutex_);
    const uint64_t key = units_key(plan.id, current_device());
    auto it = units_.find(key);
    if (it != units_.end()) {
      out = it->second;
      return Status::Ok;
    }
    auto list = std::make_shared<DeviceBlockList>();
    list->long_blocks = long_block_plan(plan);
    if (list->long_blocks) {
      const std::vector<LongPiece> pieces = long_pieces(plan);
      const size_t bytes = pieces.size() * sizeof(LongPiece);
      TEMPI_TRY(Buffer::allocate(Buffer::Kind::Device, bytes, list->owned));
      TEMPI_TRY(upload(list->owned.get(), pieces.data(), bytes));
      list->pieces = static_cast<const LongPiece *>(list->owned.get());
      for (const LongPiece &p : pieces) list->piece_starts.push_back(p.packed);
    } else {
      const BlockListImage image = blocklist_image(plan);
      list->small = small_pattern_plan(plan);
      const SmallPatternImage small = list->small ? small_pattern_image(plan) : SmallPatternImage{};
      const size_t at = (image.bytes() + 15) / 16 * 16;  // the small-pattern table follows, 16-byte aligned
      std::vector<char> host(at + (list->small ? small.bytes() : 0));
      TEMPI_TRY(Buffer::allocate(Buffer::Kind::Device, host.size(), list->owned));
      char *device = static_cast<char *>(list->owned.get());
      image.lay_out(host.data(), device, list->table);
      if (list->small) small.lay_out(host.data() + at, device + at, list->small_table);
      TEMPI_TRY(upload(device, host.data(), host.size()));
    }
    // Plans made without an id (tests of one-off plans) are not cached.
    if (plan.id != 0) units_.emplace(key, list);
    out = list;
    return Status::Ok;
  }

  // The first byte of a contiguous plan's one run.
  static char *run_of(const Plan &plan, void *typed) {
    return static_cast<char *>(typed) + plan.start + plan.pattern[0].offset;
  }

  // A plan that is one contiguous run: stream bytes [first, last) are one copy, which
  // cudaMemcpyAsync does at the copy rate (a kernel took 12% longer at 64 MiB, issue 11).
  static Status copy_run(const Plan &plan, void *typed, void *packed, int64_t first, int64_t last, bool to_packed,
                         cudaStream_t stream) {
    char *run = run_of(plan, typed) + first;
    TEMPI_CUDA(cudaMemcpyAsync(to_packed ? packed : run, to_packed ? run : packed, size_t(last - first),
                               cudaMemcpyDefault, stream));
    return Status::Ok;
  }

  Status move(const Plan &plan, void *typed, void *packed, int64_t first, int64_t last, bool to_packed) {
    last = std::min(last, plan.packed_size());
    if (last <= first) return Status::Ok;
    const int64_t bytes = last - first;
    cudaStream_t stream;
    TEMPI_TRY(thread_stream(stream));
    if (plan.contiguous()) {  // one copy between any kinds of memory: no pointer queries
      TEMPI_TRY(copy_run(plan, typed, packed, first, last, to_packed, stream));
      TEMPI_CUDA(synchronize(stream));
      return Status::Ok;
    }
    const bool typed_on_gpu = classify(typed) != MemorySpace::Host;
    const bool packed_on_gpu = classify(packed) != MemorySpace::Host;

    if (!typed_on_gpu) {  // the CPU does the layout; only the packed bytes cross
      BufferPool::Lease staging;
      TEMPI_TRY(pinned_pool().acquire(bytes, staging));
      if (to_packed) {
        host_pack(plan, typed, staging.get(), first, last);
        TEMPI_CUDA(cudaMemcpyAsync(packed, staging.get(), bytes, cudaMemcpyDefault, stream));
        TEMPI_CUDA(synchronize(stream));
      } else {
        TEMPI_CUDA(cudaMemcpyAsync(staging.get(), packed, bytes, cudaMemcpyDefault, stream));
        TEMPI_CUDA(synchronize(stream));
        host_unpack(plan, staging.get(), typed, first, last);
      }
      return Status::Ok;
    }
    if (packed_on_gpu) return run_synchronously(plan, typed, packed, first, last, to_packed);
    // Typed data on the GPU, packed bytes in pageable host memory: stage in device memory.
    BufferPool::Lease staging;
    TEMPI_TRY(device_pool().acquire(bytes, staging));
    if (to_packed) {
      TEMPI_TRY(run_kernel(plan, typed, staging.get(), first, last, true, stream));
      TEMPI_CUDA(cudaMemcpyAsync(packed, staging.get(), bytes, cudaMemcpyDeviceToHost, stream));
    } else {
      TEMPI_CUDA(cudaMemcpyAsync(staging.get(), packed, bytes, cudaMemcpyHostToDevice, stream));
      TEMPI_TRY(run_kernel(plan, typed, staging.get(), first, last, false, stream));
    }
    TEMPI_CUDA(synchronize(stream));
    return Status::Ok;
  }

  // Block-list tables live on the device that uploaded them: one entry per plan and device.
  static uint64_t units_key(uint64_t id, int device) { return id * kMaxDevices + uint64_t(device); }
  std::mutex units_mutex_;
  std::unordered_map<uint64_t, std::shared_ptr<DeviceBlockList>> units_;

  // The paired runs of a move between two plans (core/paired_runs.hpp) on this device,
  // made and uploaded once per pair of plans, sizes and device; null where the move is not
  // worth them (runs of under kMinPairedRun bytes on average, more than kMaxPairedRuns
  // runs, a plan without an id) or the cache is full. Plan ids are never reused, so an
  // entry is never wrong, only perhaps unused: entries are kept (at most kMaxPairedBytes
  // of device memory), and a kernel that reads one never outlives it.
  static constexpr int64_t kMinPairedRun = 256;
  static constexpr size_t kMaxPairedRuns = size_t(1) << 18;
  static constexpr size_t kMaxPairedBytes = size_t(64) << 20;
  std::shared_ptr<const DevicePairedRuns> paired_runs_for(const Plan &from, const Plan &to, int64_t bytes) {
    if (from.id == 0 || to.id == 0) return nullptr;
    const PairedKey key{from.id, to.id, from.packed_size(), to.packed_size(), bytes, current_device()};
    std::lock_guard<std::mutex> lock(paired_mutex_);
    const auto it = paired_.find(key);
    if (it != paired_.end()) return it->second;
    std::shared_ptr<DevicePairedRuns> made;
    const std::vector<PairedRun> runs = paired_runs(from, to, bytes, kPairedRunBytes, kMaxPairedRuns);
    const size_t size = runs.size() * sizeof(PairedRun);
    if (!runs.empty() && bytes / int64_t(runs.size()) >= kMinPairedRun && paired_bytes_ + size <= kMaxPairedBytes) {
      made = std::make_shared<DevicePairedRuns>();
      if (Buffer::allocate(Buffer::Kind::Device, size, made->owned) != Status::Ok ||
          upload(made->owned.get(), runs.data(), size) != Status::Ok) {
        cudaGetLastError();
        made.reset();
      } else {
        made->runs = static_cast<const PairedRun *>(made->owned.get());
        made->n = int64_t(runs.size());
        paired_bytes_ += size;
      }
    }
    paired_.emplace(key, made);  // a null entry too: the pair is not looked at again
    return made;
  }
  struct PairedKey {
    uint64_t from_id, to_id;
    int64_t from_size, to_size, bytes;
    int device;
    bool operator<(const PairedKey &o) const {
      return std::tie(from_id, to_id, from_size, to_size, bytes, device) <
             std::tie(o.from_id, o.to_id, o.from_size, o.to_size, o.bytes, o.device);
    }
  };
  std::mutex paired_mutex_;
  std::map<PairedKey, std::shared_ptr<const DevicePairedRuns>> paired_;
  size_t paired_bytes_ = 0;
};

}  // namespace

Backend &gpu_backend() {
  static Backend *backend = new CudaBackend;  // immortal: plans may be released during static destruction
  return *backend;
}

}  // namespace tempi
