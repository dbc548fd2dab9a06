// Move-only owners of CUDA handles, and pools so that a repeated call reuses its
// stream and buffers instead of paying cudaMalloc / cudaStreamCreate each time.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <mutex>
#include <utility>
#include <vector>

#include "backend.hpp"

namespace tempi {

class Stream {
 public:
  Stream() = default;
  static Status create(Stream &out);
  Stream(Stream &&o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
  Stream &operator=(Stream &&o) noexcept {
    std::swap(s_, o.s_);
    return *this;
  }
  Stream(const Stream &) = delete;
  Stream &operator=(const Stream &) = delete;
  ~Stream();
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

class Event {
 public:
  Event() = default;
  static Status create(Event &out);
  Event(Event &&o) noexcept : e_(std::exchange(o.e_, nullptr)) {}
  Event &operator=(Event &&o) noexcept {
    std::swap(e_, o.e_);
    return *this;
  }
  Event(const Event &) = delete;
  Event &operator=(const Event &) = delete;
  ~Event();
  cudaEvent_t get() const { return e_; }

 private:
  cudaEvent_t e_ = nullptr;
};

// Device or pinned (mapped) host memory, freed with the matching call.
class Buffer {
 public:
  enum class Kind { Device, Pinned };
  Buffer() = default;
  static Status allocate(Kind kind, size_t bytes, Buffer &out);
  Buffer(Buffer &&o) noexcept
      : kind_(o.kind_), ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  Buffer &operator=(Buffer &&o) noexcept {
    std::swap(kind_, o.kind_);
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;
  ~Buffer();
  void *get() const { return ptr_; }
  size_t size() const { return bytes_; }
  Kind kind() const { return kind_; }

 private:
  Kind kind_ = Kind::Device;
  void *ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Buffers by power-of-two size class; a Lease gives its buffer back when it goes.
class BufferPool {
 public:
  class Lease {
   public:
    Lease() = default;
    Lease(BufferPool *pool, Buffer b) : pool_(pool), buf_(std::move(b)) {}
    Lease(Lease &&o) noexcept : pool_(std::exchange(o.pool_, nullptr)), buf_(std::move(o.buf_)) {}
    Lease &operator=(Lease &&o) noexcept {
      std::swap(pool_, o.pool_);
      std::swap(buf_, o.buf_);
      return *this;
    }
    ~Lease();
    void *get() const { return buf_.get(); }

   private:
    BufferPool *pool_ = nullptr;
    Buffer buf_;
  };

  explicit BufferPool(Buffer::Kind kind) : kind_(kind) {}
  // A buffer of at least `bytes`; NoMemory when none can be had even after the pool's
  // idle buffers were freed.
  Status acquire(size_t bytes, Lease &out);

 private:
  void give_back(Buffer b);
  // Frees every idle buffer; returns their bytes.
  size_t release_idle();
  // Kept per size class: at least 4 buffers, and as many as fit in 64 MiB, so that the
  // tens of messages of one halo exchange (each with its staging) reuse their buffers
  // at the next exchange instead of paying cudaHostAlloc / cudaMalloc each time.
  static constexpr size_t kKeepPerClass = 4;
  static constexpr size_t kKeepBytesPerClass = size_t(64) << 20;
  Buffer::Kind kind_;
  std::mutex mutex_;
  std::vector<std::vector<Buffer>> free_;  // by log2 of size
};

// Streams, events, device pools and uploaded plan data belong to one GPU: each is kept
// per device, for the device current on the calling thread (the backend makes the
// user buffer's GPU current first). Devices past kMaxDevices share slot 0's.
constexpr int kMaxDevices = 64;
int current_device();

// Device and pinned bytes held in Buffers (pooled and uploaded plan data), and their peaks.
Backend::MemoryUse buffer_memory_use();

BufferPool &device_pool();  // the current device's
BufferPool &pinned_pool();  // portable: one for all devices

// A stream for the calling thread on the current device, created once. Asking for it closes
// the thread's open launch on that device (open_launch.hpp): the caller is about to issue
// work that must follow every object joined so far.
Status thread_stream(cudaStream_t &out);

// What a pipelined transfer needs per thread: a second stream for the copies (so they
// overlap the kernels on thread_stream) and an event to order the two. Reusing one
// event is safe: cudaStreamWaitEvent waits for the record made before it was called.
struct CopyResources {
  cudaStream_t copy;
  cudaEvent_t ready;
};
Status thread_copy_resources(CopyResources &out);

}  // namespace tempi
