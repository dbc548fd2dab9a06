// The CUDA implementation of Backend's hooks (core/backend_hooks.hpp): pointer queries,
// the narrow steps of the pipelines (core/pipelines.cpp), fences, memory and IPC, each
// forwarded to the room of cuda/ that does it (dispatch.cpp picks kernels, batches.cpp and
// pairs.cpp issue the engine's moves, waits.cpp counts every wait); pack and unpack stage
// through device or pinned memory where one side is pageable host memory that kernels
// cannot touch.
#include <cuda_runtime.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "app_streams.hpp"
#include "batches.hpp"
#include "check.hpp"
#include "config.hpp"
#include "dispatch.hpp"
#include "host_packer.hpp"
#include "kernels.hpp"
#include "phases.hpp"
#include "ipc.hpp"
#include "log.hpp"
#include "open_launch.hpp"
#include "pairs.hpp"
#include "pointers.hpp"
#include "resources.hpp"
#include "waits.hpp"

namespace tempi {

namespace {

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

  // The pipelines' narrow steps (core/pipelines.cpp): the Work lane is the thread's
  // stream, the Copy lane its copy stream, ordered by the thread's copy event.
  Status queue_range(const Plan &plan, void *typed, void *packed, int64_t first, int64_t last,
                     bool to_packed) override {
    last = std::min(last, plan.packed_size());
    if (last <= first) return Status::Ok;
    cudaStream_t stream;
    TEMPI_TRY(thread_stream(stream));
    return run_kernel(plan, typed, packed, first, last, to_packed, stream);
  }

  Status queue_whole_copy(const Plan &plan, void *typed, void *host, int64_t bytes, bool to_host,
                          bool &queued) override {
    cudaStream_t stream;
    TEMPI_TRY(thread_stream(stream));
    return pitched_copy(plan, typed, host, bytes, to_host, stream, queued);
  }

  Status queue_copy(void *dst, const void *src, size_t bytes, Lane lane) override {
    cudaStream_t stream;
    TEMPI_TRY(lane_stream(lane, stream));
    TEMPI_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream));
    return Status::Ok;
  }

  Status order(Lane waiter, Lane waited) override {
    cudaStream_t first, then;
    CopyResources cr;
    TEMPI_TRY(lane_stream(waited, first));
    TEMPI_TRY(lane_stream(waiter, then));
    TEMPI_TRY(thread_copy_resources(cr));
    TEMPI_CUDA(cudaEventRecord(cr.ready, first));
    TEMPI_CUDA(cudaStreamWaitEvent(then, cr.ready, 0));
    return Status::Ok;
  }

  Status finish(Lane lane) override {
    cudaStream_t stream;
    TEMPI_TRY(lane_stream(lane, stream));
    TEMPI_CUDA(synchronize(stream));
    return Status::Ok;
  }

  Status pack_async(const std::vector<MoveJob> &jobs, Fence &done) override { return issue_moves(*this, jobs, true, done); }
  Status unpack_async(const std::vector<MoveJob> &jobs, Fence &done) override { return issue_moves(*this, jobs, false, done); }

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
    count_synchronization();
    const CudaFence &fence = *static_cast<CudaFence *>(f.state.get());
    ::tempi::close_open(fence.open);
    const PhaseTimer waiting(Phase::GpuWait);
    TEMPI_CUDA(cudaEventSynchronize(fence.event));
    return Status::Ok;
  }

  // A move that cannot share the launch (dispatch.hpp, shares_launch) is issued alone.
  Status join_open(const MoveJob &j, bool to_packed, Fence &done) override {
    done = Fence{};
    if (j.bytes <= 0 || j.plan->packed_size() <= 0) return Status::Ok;
    FusedObject o;
    if (!describe_fused(j, j.packed, o) || !shares_launch(o.bytes))
      return issue_moves(*this, {j}, to_packed, done);
    auto fence = std::make_shared<CudaFence>();
    fence->device = current_device();
    const Status st = ::tempi::join_open(o, to_packed, fence->event, fence->open);
    if (st == Status::Unsupported) return issue_moves(*this, {j}, to_packed, done);
    TEMPI_TRY(st);
    done.state = std::move(fence);
    return Status::Ok;
  }

  void close_open() override { close_thread_open(current_device()); }

  uint64_t synchronizations() override { return synchronization_count(); }
  uint64_t tables_placed() override { return fused_table_counts().placed; }
  uint64_t tables_reused() override { return fused_table_counts().reused; }

  Status wait_default_stream() override {
    close_thread_open(current_device());  // work on the legacy stream may wait for it
    const cudaError_t idle = cudaStreamQuery(cudaStreamLegacy);
    if (idle == cudaSuccess) return Status::Ok;
    if (idle != cudaErrorNotReady) TEMPI_CUDA(idle);
    TEMPI_CUDA(synchronize(cudaStreamLegacy));
    return Status::Ok;
  }

  // The unpacks that join one open launch share its end: the legacy stream waits for it once.
  Status order_default_stream_after(const Fence &f) override {
    if (!f) return Status::Ok;
    const CudaFence &fence = *static_cast<CudaFence *>(f.state.get());
    thread_local OpenMark ordered;  // the open launch this thread last ordered the legacy stream after
    if (fence.open.launch && fence.open.launch == ordered.launch && fence.open.epoch == ordered.epoch)
      return Status::Ok;
    TEMPI_CUDA(cudaStreamWaitEvent(cudaStreamLegacy, fence.event, 0));
    ordered = fence.open;
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
    count_synchronization();
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

  void release_plan(uint64_t id) override { release_plan_units(id); }

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

  Status move_async(const std::vector<PairJob> &jobs, Fence &done) override { return move_pairs(*this, jobs, done); }
  Status prepare_moves(const std::vector<PairJob> &jobs, Prepared &out) override { return prepare_pairs(jobs, out); }
  Status move_prepared(const Prepared &p, Fence &done) override { return move_prepared_pairs(p, done); }

  Status ipc_export(const void *ptr, IpcHandle &out) override { return ipc_export_of(ptr, out); }
  Status ipc_open(const IpcHandle &handle, void **base) override { return ipc_map(handle, base); }
  void ipc_close(void *base) override { ipc_unmap(base); }
  bool ipc_peer_access(const std::string &device) override { return has_gpu() && ipc_reaches(device); }

  void remember_pointers(bool on) override { ::tempi::remember_pointers(on); }

  int stream_device(void *stream) override {
    return has_gpu() ? app_stream_device(static_cast<cudaStream_t>(stream)) : -1;
  }
  Status stream_capturing(void *stream, bool &capturing) override {
    return app_stream_capturing(static_cast<cudaStream_t>(stream), capturing);
  }
  Status stream_moves(void *stream, const std::vector<MoveJob> &jobs, bool to_packed) override {
    return app_stream_moves(*this, static_cast<cudaStream_t>(stream), jobs, to_packed);
  }
  Status stream_write(void *stream, const std::vector<uint32_t *> &words, uint32_t value) override {
    return app_stream_write(static_cast<cudaStream_t>(stream), words, value);
  }
  Status stream_wait(void *stream, const std::vector<uint32_t *> &words, uint32_t value) override {
    return app_stream_wait(static_cast<cudaStream_t>(stream), words, value);
  }

 private:
  static Status lane_stream(Lane lane, cudaStream_t &out) {
    if (lane == Lane::Work) return thread_stream(out);
    CopyResources cr;
    TEMPI_TRY(thread_copy_resources(cr));
    out = cr.copy;
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
    if (packed_on_gpu)
      return to_packed ? pack_accessible(plan, typed, packed, first, last)
                       : unpack_accessible(plan, packed, typed, first, last);
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
};

}  // namespace

Backend &gpu_backend() {
  static Backend *backend = new CudaBackend;  // immortal: plans may be released during static destruction
  return *backend;
}

}  // namespace tempi
