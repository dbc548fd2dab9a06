// The narrow interface between the MPI layer and the GPU. cuda/ implements it;
// with CUDA disabled at build time stub_backend.cpp does, reporting no GPU, so no
// code outside cuda/ needs to know whether CUDA exists.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "plan.hpp"

namespace tempi {

enum class MemorySpace { Host, PinnedHost, Device, Managed };

enum class Status { Ok, NoMemory, GpuError, Unsupported };
const char *to_string(Status s);

class Backend {
 public:
  virtual ~Backend() = default;

  // True when a usable GPU is present (false on machines without one, and in the stub).
  virtual bool has_gpu() = 0;
  virtual std::string device_name() = 0;

  // Where a pointer lives. Host for anything the GPU runtime does not know.
  virtual MemorySpace classify(const void *ptr) = 0;

  // Bytes [first, last) of the packed stream of `plan`, between a typed buffer and a
  // packed one (packed[0] is stream byte `first`). Either side may be device,
  // managed or pinned host memory; completes before returning.
  virtual Status pack(const Plan &plan, const void *typed, void *packed, int64_t first, int64_t last) = 0;
  virtual Status unpack(const Plan &plan, const void *packed, void *typed, int64_t first, int64_t last) = 0;

  // Plain device memory and copies between any two kinds (used by tools and
  // tests that must run with or without a GPU).
  virtual Status allocate_device(size_t bytes, void **out) = 0;
  virtual void free_device(void *ptr) = 0;
  virtual Status copy(void *dst, const void *src, size_t bytes) = 0;

  // Device memory that holds plan data (uploaded block lists) for plan `id` may go.
  virtual void release_plan(uint64_t id) = 0;
};

Backend &gpu_backend();

}  // namespace tempi
