// Every wait for the GPU goes through here, so that it is counted (the tests count
// them): stream synchronizations by polling a completion word or by the runtime, plan
// uploads, and the events that end the fences of asynchronous work.
#include <atomic>
#include <mutex>

#include "check.hpp"
#include "config.hpp"
#include "log.hpp"
#include "pointers.hpp"
#include "resources.hpp"
#include "waits.hpp"

namespace tempi {

namespace {

std::atomic<uint64_t> g_synchronizations{0};

using WriteValueFn = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
WriteValueFn write_value_fn() {
  static const auto fn = reinterpret_cast<WriteValueFn>(driver_entry("cuStreamWriteValue32"));
  return fn;
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

}  // namespace

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

void count_synchronization() { g_synchronizations.fetch_add(1, std::memory_order_relaxed); }

uint64_t synchronization_count() { return g_synchronizations.load(std::memory_order_relaxed); }

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

Status EventPool::take(cudaEvent_t &out) {
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

void EventPool::give_back(cudaEvent_t e) {
  std::lock_guard<std::mutex> lock(mutex_);
  free_.push_back(e);
}

EventPool &event_pool(int device) {
  static EventPool *pools = new EventPool[kMaxDevices];  // immortal, like the buffer pools
  return pools[device];
}

CudaFence::~CudaFence() {
  if (event && !open.launch) event_pool(device).give_back(event);
}

Status record_fence(std::shared_ptr<CudaFence> fence, cudaStream_t stream, Fence &done) {
  TEMPI_TRY(event_pool(fence->device).take(fence->event));
  TEMPI_CUDA(cudaEventRecord(fence->event, stream));
  done.state = std::move(fence);
  return Status::Ok;
}

}  // namespace tempi
