// The interface between the MPI layer and the GPU: Backend joins the hook groups that a
// backend implements (backend_hooks.hpp: device, ranges, moves, fences, memory, IPC, application streams) and
// adds the pipelines written once above them (pipelines.cpp). cuda/ implements the hooks;
// with CUDA disabled at build time stub_backend.cpp does, reporting no GPU, so no code
// outside cuda/ needs to know whether CUDA exists.
#pragma once

#include <cstdint>

#include "backend_hooks.hpp"

namespace tempi {

class Backend : public DeviceHooks,
                public RangeHooks,
                public MoveHooks,
                public FenceHooks,
                public MemoryHooks,
                public IpcHooks,
                public StreamHooks {
 public:
  virtual ~Backend() = default;

  // pack and unpack for callers that know both buffers are GPU-accessible (device,
  // managed or mapped pinned memory): no pointer queries, no staging.
  Status pack_accessible(const Plan &plan, const void *typed, void *packed, int64_t first, int64_t last);
  Status unpack_accessible(const Plan &plan, const void *packed, void *typed, int64_t first, int64_t last);

  // The one-shot method's moves: bytes [0, bytes) of `plan` between GPU memory and
  // pinned host memory, with no staging: one pitched copy by the copy engines where the
  // backend takes one (small 2-D and 3-D strided objects), else a kernel on mapped host memory.
  Status pack_to_host(const Plan &plan, const void *typed, void *host, int64_t bytes);
  Status unpack_from_host(const Plan &plan, const void *host, void *typed, int64_t bytes);

  // Packs bytes [0, bytes) of `plan` from GPU memory into pinned host memory through
  // device memory: chunk k+1 is packed while chunk k is copied to the host (the staged
  // method; chunk >= bytes means one chunk). unpack_staged is the reverse: chunk k is
  // copied to the GPU while chunk k-1 is unpacked. Both complete before returning.
  Status pack_staged(const Plan &plan, const void *typed, void *host, int64_t bytes, int64_t chunk);
  Status unpack_staged(const Plan &plan, const void *host, void *typed, int64_t bytes, int64_t chunk);
};

Backend &gpu_backend();

// The staged method's moves queued without waiting (the engine's batches, pack_async):
// bytes [0, bytes) of `plan` between GPU memory at `typed` and host memory at `host`
// through `staging` (device memory of `bytes` bytes, which the caller keeps until the work
// ends), in chunks of `chunk` bytes: chunk k+1 is packed on the Work lane while chunk k is
// copied on the Copy lane (one chunk: everything on the Work lane). The Work lane follows
// all of it, so a fence recorded there after this call covers the move.
Status queue_staged(Backend &b, const Plan &plan, void *typed, void *host, void *staging, int64_t bytes,
                    int64_t chunk, bool to_packed);

// One intercepted call: the wrapper, the method choice and the backend each ask where the
// call's buffers live (each question is a driver query of about 0.1 us), and the answers
// cannot change during the call, since the calling thread allocates and frees nothing
// meanwhile (another thread freeing a buffer during a call that uses it is erroneous
// in MPI already). Scopes nest; the memory of answers ends with the outermost.
class PointerScope {
 public:
  PointerScope() { gpu_backend().remember_pointers(true); }
  ~PointerScope() { gpu_backend().remember_pointers(false); }
  PointerScope(const PointerScope &) = delete;
  PointerScope &operator=(const PointerScope &) = delete;
};

// For the life of a scope, GPU `device` is the calling thread's current device (a
// negative number: the thread's choice stays). The thread's own choice comes back at the
// end of the scope, so no caller writes the save and restore by hand.
class OnDevice {
 public:
  explicit OnDevice(int device) {
    if (device >= 0) previous_ = gpu_backend().use_device(device);
  }
  ~OnDevice() {
    if (previous_ >= 0) gpu_backend().use_device(previous_);
  }
  OnDevice(const OnDevice &) = delete;
  OnDevice &operator=(const OnDevice &) = delete;

  // The GPU that was current before (-1 where the scope changed nothing).
  int previous() const { return previous_; }

 private:
  int previous_ = -1;
};

// For the life of a scope, the GPU that holds `ptr` is the calling thread's current
// device (every new thread starts on device 0, whatever GPU its buffers are on), so
// that TEMPI's streams, pools and kernels are that GPU's.
class OnDeviceOf : public OnDevice {
 public:
  explicit OnDeviceOf(const void *ptr) : OnDevice(gpu_backend().device_of(ptr)) {}
};

}  // namespace tempi
