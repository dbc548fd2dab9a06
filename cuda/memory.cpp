// Device and pinned buffers and their pools, streams and events per thread and device
// (resources.hpp): what a repeated call reuses instead of paying cudaMalloc or
// cudaStreamCreate again, and the memory use the log and the soak test read.
#include <cuda_runtime_api.h>

#include <atomic>

#include "check.hpp"
#include "log.hpp"
#include "open_launch.hpp"
#include "resources.hpp"

namespace tempi {

Status cuda_failure(cudaError_t err, const char *expr, const char *file, int line) {
  log(LogLevel::Error, "%s failed at %s:%d: %s", expr, file, line, cudaGetErrorString(err));
  cudaGetLastError();  // clear the error if it is not sticky, so later calls can work
  return err == cudaErrorMemoryAllocation ? Status::NoMemory : Status::GpuError;
}

// A blocking stream: it waits for work the application left on the legacy default
// stream. A cudaMemcpy from pageable memory may return before its data reaches the
// GPU, and a kernel on a non-blocking stream could then pack stale bytes (seen with
// two ranks sharing one H200).
Status Stream::create(Stream &out) {
  cudaStream_t s;
  TEMPI_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamDefault));
  out = Stream();
  out.s_ = s;
  return Status::Ok;
}

Stream::~Stream() {
  if (s_) cudaStreamDestroy(s_);
}

Status Event::create(Event &out) {
  cudaEvent_t e;
  TEMPI_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  out = Event();
  out.e_ = e;
  return Status::Ok;
}

Event::~Event() {
  if (e_) cudaEventDestroy(e_);
}

namespace {

// Bytes held in Buffers now, and the most at once, by kind (device, pinned).
std::atomic<uint64_t> g_held[2];
std::atomic<uint64_t> g_peak[2];

void count_allocation(Buffer::Kind kind, size_t bytes) {
  const int k = kind == Buffer::Kind::Device ? 0 : 1;
  const uint64_t now = g_held[k].fetch_add(bytes, std::memory_order_relaxed) + bytes;
  uint64_t peak = g_peak[k].load(std::memory_order_relaxed);
  while (now > peak && !g_peak[k].compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

}  // namespace

Status Buffer::allocate(Kind kind, size_t bytes, Buffer &out) {
  void *p = nullptr;
  if (kind == Kind::Device)
    TEMPI_CUDA(cudaMalloc(&p, bytes));
  else
    TEMPI_CUDA(cudaHostAlloc(&p, bytes, cudaHostAllocMapped | cudaHostAllocPortable));
  count_allocation(kind, bytes);
  out = Buffer();
  out.kind_ = kind;
  out.ptr_ = p;
  out.bytes_ = bytes;
  return Status::Ok;
}

Buffer::~Buffer() {
  if (!ptr_) return;
  g_held[kind_ == Kind::Device ? 0 : 1].fetch_sub(bytes_, std::memory_order_relaxed);
  if (kind_ == Kind::Device)
    cudaFree(ptr_);
  else
    cudaFreeHost(ptr_);
}

Backend::MemoryUse buffer_memory_use() {
  Backend::MemoryUse u;
  u.device_bytes = g_held[0].load(std::memory_order_relaxed);
  u.device_peak = g_peak[0].load(std::memory_order_relaxed);
  u.pinned_bytes = g_held[1].load(std::memory_order_relaxed);
  u.pinned_peak = g_peak[1].load(std::memory_order_relaxed);
  return u;
}

static size_t size_class(size_t bytes) {
  size_t c = 0;
  while ((size_t(1) << c) < bytes) ++c;
  return c;
}

Status BufferPool::acquire(size_t bytes, Lease &out) {
  const size_t c = size_class(bytes < 256 ? 256 : bytes);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (c < free_.size() && !free_[c].empty()) {
      Buffer b = std::move(free_[c].back());
      free_[c].pop_back();
      out = Lease(this, std::move(b));
      return Status::Ok;
    }
  }
  Buffer b;
  if (Buffer::allocate(kind_, size_t(1) << c, b) != Status::Ok) {
    // The pool's idle buffers (of every size) may be what the runtime is missing: give
    // them back and try once more before the caller falls back.
    if (release_idle() == 0) return Status::NoMemory;
    TEMPI_TRY(Buffer::allocate(kind_, size_t(1) << c, b));
  }
  out = Lease(this, std::move(b));
  return Status::Ok;
}

size_t BufferPool::release_idle() {
  std::vector<std::vector<Buffer>> idle;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    idle.swap(free_);
  }
  size_t bytes = 0;
  for (const auto &c : idle)
    for (const Buffer &b : c) bytes += b.size();
  if (bytes) TEMPI_LOG(Warn, "out of %s memory: released %zu idle pooled bytes to try again",
                       kind_ == Buffer::Kind::Device ? "device" : "pinned host", bytes);
  return bytes;
}

void BufferPool::give_back(Buffer b) {
  const size_t c = size_class(b.size());
  std::lock_guard<std::mutex> lock(mutex_);
  if (free_.size() <= c) free_.resize(c + 1);
  if (free_[c].size() < kKeepPerClass || (free_[c].size() + 1) * b.size() <= kKeepBytesPerClass)
    free_[c].push_back(std::move(b));
}

BufferPool::Lease::~Lease() {
  if (pool_ && buf_.get()) pool_->give_back(std::move(buf_));
}

int current_device() {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return device < kMaxDevices ? device : 0;
}

// Pools live as long as the process: buffers may be given back during static destruction.
BufferPool &device_pool() {
  static std::atomic<BufferPool *> pools[kMaxDevices];
  std::atomic<BufferPool *> &slot = pools[current_device()];
  BufferPool *p = slot.load(std::memory_order_acquire);
  if (p) return *p;
  auto *fresh = new BufferPool(Buffer::Kind::Device);
  if (slot.compare_exchange_strong(p, fresh, std::memory_order_acq_rel)) return *fresh;
  delete fresh;  // another thread made this device's pool first
  return *p;
}

BufferPool &pinned_pool() {
  static BufferPool *p = new BufferPool(Buffer::Kind::Pinned);
  return *p;
}

Status thread_stream(cudaStream_t &out) {
  thread_local Stream streams[kMaxDevices];
  const int device = current_device();
  close_thread_open(device);  // what is issued next runs after the open launch, never beside it
  Stream &stream = streams[device];
  if (!stream.get()) TEMPI_TRY(Stream::create(stream));
  out = stream.get();
  return Status::Ok;
}

Status thread_copy_resources(CopyResources &out) {
  thread_local Stream streams[kMaxDevices];
  thread_local Event events[kMaxDevices];
  const int device = current_device();
  if (!streams[device].get()) TEMPI_TRY(Stream::create(streams[device]));
  if (!events[device].get()) TEMPI_TRY(Event::create(events[device]));
  out = {streams[device].get(), events[device].get()};
  return Status::Ok;
}

}  // namespace tempi
