// The narrow interface between the MPI layer and the GPU. cuda/ implements it;
// with CUDA disabled at build time stub_backend.cpp does, reporting no GPU, so no
// code outside cuda/ needs to know whether CUDA exists.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "method.hpp"
#include "plan.hpp"

namespace tempi {

enum class MemorySpace { Host, PinnedHost, Device, Managed };

enum class Status { Ok, NoMemory, GpuError, Unsupported };
const char *to_string(Status s);

// Memory lent from the backend's pools: device memory, or pinned host memory that
// kernels can read and write directly (mapped). It goes back to its pool when the
// last copy of `owner` goes, so a request in flight keeps its staging alive.
enum class ScratchKind { Device, Pinned };
struct Scratch {
  void *ptr = nullptr;
  std::shared_ptr<void> owner;
};

// The end of a piece of asynchronous GPU work (docs/design.md, "Many messages in flight (the engine)"),
// holding what that work uses (device temporaries) until it is released. A default
// (empty) Fence is complete.
struct Fence {
  std::shared_ptr<void> state;
  explicit operator bool() const { return bool(state); }
};

// One object moving between a typed GPU buffer and its packed bytes [0, bytes):
// `packed` is device memory for Method::Device and pinned (mapped) host memory for
// OneShot (kernels or pitched copies touch it directly) and Staged (through device
// memory, in chunks of transfer.chunk bytes).
struct MoveJob {
  const Plan *plan = nullptr;
  void *typed = nullptr;
  void *packed = nullptr;
  int64_t bytes = 0;
  Transfer transfer{Method::OneShot, 0};
};

// A typed object moved straight into another typed object of the same packed size (a
// zero-copy read of a peer's send block into this rank's receive block): `bytes` packed
// bytes of `from` at `from_typed` become those of `to` at `to_typed`. `scratch` is device
// memory of `bytes` bytes for a pair that cannot move in one pass (pack, then unpack).
// Work described once for the device and issued many times (Backend::prepare_moves);
// empty: nothing prepared.
struct Prepared {
  std::shared_ptr<void> state;
  explicit operator bool() const { return state != nullptr; }
};

struct PairJob {
  const Plan *from = nullptr;
  const void *from_typed = nullptr;
  const Plan *to = nullptr;
  void *to_typed = nullptr;
  int64_t bytes = 0;
  void *scratch = nullptr;
};

// GPU memory exported to another process of this node (CUDA IPC): what the other process
// needs to map the allocation that holds a pointer.
struct IpcHandle {
  unsigned char bytes[64] = {};  // cudaIpcMemHandle_t (the emulated backend: its process id and memory file)
  uint64_t buffer_id = 0;        // the allocation's identity in its process, never reused for another
  int64_t offset = 0;            // of the exported pointer from the allocation's first byte
  int64_t size = 0;              // of the allocation
  // The allocation's first byte in its own process. A freed allocation's range may be given
  // to a new one while a peer still maps the old one; CUDA may then answer the new handle
  // with the old mapping, so a peer closes mappings of overlapping ranges first.
  uint64_t base = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // True when a usable GPU is present (false on machines without one, and in the stub).
  virtual bool has_gpu() = 0;
  virtual std::string device_name() = 0;

  // Where a pointer lives. Host for anything the GPU runtime does not know.
  virtual MemorySpace classify(const void *ptr) = 0;
  // While `on` (PointerScope below), the backend may answer classify() and device_of()
  // for an address it was already asked about on this thread from its first answer.
  virtual void remember_pointers(bool on) { (void)on; }

  // Bytes [first, last) of the packed stream of `plan`, between a typed buffer and a
  // packed one (packed[0] is stream byte `first`). Either side may be device,
  // managed or pinned host memory; completes before returning.
  virtual Status pack(const Plan &plan, const void *typed, void *packed, int64_t first, int64_t last) = 0;
  virtual Status unpack(const Plan &plan, const void *packed, void *typed, int64_t first, int64_t last) = 0;

  // pack and unpack for callers that know both buffers are GPU-accessible (device,
  // managed or mapped pinned memory): no pointer queries, no staging.
  virtual Status pack_accessible(const Plan &plan, const void *typed, void *packed, int64_t first, int64_t last) = 0;
  virtual Status unpack_accessible(const Plan &plan, const void *packed, void *typed, int64_t first,
                                   int64_t last) = 0;

  // The one-shot method's moves: bytes [0, bytes) of `plan` between GPU memory and
  // pinned host memory, with no staging. The backend picks a kernel on mapped host
  // memory or, for small 2-D and 3-D strided objects, one pitched copy by the copy engines.
  virtual Status pack_to_host(const Plan &plan, const void *typed, void *host, int64_t bytes) = 0;
  virtual Status unpack_from_host(const Plan &plan, const void *host, void *typed, int64_t bytes) = 0;

  // Packs bytes [0, bytes) of `plan` from GPU memory into pinned host memory through
  // device memory: chunk k+1 is packed while chunk k is copied to the host (the staged
  // method; chunk >= bytes means one chunk). unpack_staged is the reverse: chunk k is
  // copied to the GPU while chunk k-1 is unpacked. Both complete before returning.
  virtual Status pack_staged(const Plan &plan, const void *typed, void *host, int64_t bytes, int64_t chunk) = 0;
  virtual Status unpack_staged(const Plan &plan, const void *host, void *typed, int64_t bytes, int64_t chunk) = 0;

  // Staging from the pools. When the GPU runtime cannot allocate, the pool gives its
  // idle buffers back and tries once more before it answers NoMemory (callers then fall
  // back: another method, a smaller chunk, or an MPI error).
  virtual Status acquire(ScratchKind kind, size_t bytes, Scratch &out) = 0;

  // Device and pinned host memory the backend holds now (pooled buffers, lent or idle,
  // and uploaded plan data) and the most it held at once: the log at MPI_Finalize says
  // it, and the soak test checks that it stays bounded.
  struct MemoryUse {
    uint64_t device_bytes = 0, device_peak = 0;
    uint64_t pinned_bytes = 0, pinned_peak = 0;
  };
  virtual MemoryUse memory_use() = 0;

  // Issue the moves of `jobs` (all on the current device) on the calling thread's
  // stream without waiting for them; `done` completes when every one has. Work that
  // is issued together is launched together: small strided objects share one launch.
  // Work on one thread's stream completes in issue order.
  virtual Status pack_async(const std::vector<MoveJob> &jobs, Fence &done) = 0;
  virtual Status unpack_async(const std::vector<MoveJob> &jobs, Fence &done) = 0;
  // One move (both sides device memory of the current GPU) joined to this thread's open
  // launch: a kernel already running on the thread's stream that takes further moves while
  // it runs, so that a run of deferred MPI_Pack or MPI_Unpack calls costs one launch
  // (docs/design.md, "Open launches"). The moves of one open launch run in no order among
  // themselves: join only moves that share no byte written by one of them, and call
  // close_open() first otherwise. A joined move may run before GPU work the application
  // queued on the legacy default stream after the launch opened. The launch closes by
  // itself when this thread issues other work, when it is full, and a short while after
  // the last join; waiting for (or
  // querying) `done` closes it too. A move it cannot take is issued alone, as by
  // pack_async and unpack_async (which is all a backend without open launches does).
  virtual Status join_open(const MoveJob &job, bool to_packed, Fence &done) {
    return to_packed ? pack_async({job}, done) : unpack_async({job}, done);
  }
  virtual void close_open() {}
  // The same for typed-to-typed moves (all on the current device, both sides GPU memory
  // it can reach): pairs whose plans are both strided share one launch that reads each
  // source word and writes it to its place, the others go through their scratch. On an
  // error, no work of the call is left running (the caller may release every buffer).
  virtual Status move_async(const std::vector<PairJob> &jobs, Fence &done) = 0;
  // Moves that repeat unchanged (a blocking collective called again with the same
  // arguments, docs/design.md "Repeated blocking calls"): prepare_moves describes `jobs`
  // once where the device can keep the description (the kernel's parameter, copied at every
  // launch, cost 4-8 us a call for a halo's 26 pairs); move_prepared then issues them as
  // move_async would. Unsupported: move_async them each time. The jobs' plans and addresses
  // must stay as they were while `out` is used.
  virtual Status prepare_moves(const std::vector<PairJob> &jobs, Prepared &out) {
    (void)jobs;
    out = Prepared{};
    return Status::Unsupported;
  }
  virtual Status move_prepared(const Prepared &p, Fence &done) {
    (void)p;
    done = Fence{};
    return Status::Unsupported;
  }
  // Whether the work before `f` finished (never blocks), and waiting for it. Each wait
  // that blocks is one synchronization (counted, see synchronizations()).
  virtual bool query(const Fence &f) = 0;
  virtual Status wait(const Fence &f) = 0;
  // query for a caller that polls until the work is done: `finished` is also true where the
  // work failed, and the status says how (never blocks, counts no synchronization).
  virtual Status poll(const Fence &f, bool &finished) {
    finished = query(f);
    return Status::Ok;
  }
  // How many times this process waited for the GPU (all synchronizing calls).
  virtual uint64_t synchronizations() = 0;
  // Waits for the work the application left on the legacy default stream of the current
  // GPU (no wait, and not counted, when there is none). TEMPI's own streams follow that
  // work by themselves; another process's GPU reading this process's memory through IPC
  // (zero-copy) does not, so an owner settles it before peers may read.
  virtual Status wait_default_stream() = 0;

  // The current GPU's identity on this node (its PCI bus id; "" without a GPU), and
  // whether its contexts are shared through the Multi-Process Service.
  virtual std::string device_id() = 0;
  virtual bool mps_enabled() = 0;

  // GPUs visible to this process, and the one this thread's calls use.
  virtual int device_count() = 0;
  virtual Status select_device(int device) = 0;
  // The GPU that holds `ptr` (device or managed memory), else -1.
  virtual int device_of(const void *ptr) = 0;
  // Makes `device` current on this thread; returns the device that was current.
  virtual int use_device(int device) = 0;

  // Plain device memory and copies between any two kinds (used by tools and
  // tests that must run with or without a GPU).
  virtual Status allocate_device(size_t bytes, void **out) = 0;
  virtual void free_device(void *ptr) = 0;
  virtual Status copy(void *dst, const void *src, size_t bytes) = 0;
  // Several copies that return together: on a GPU, issued on one stream and waited for
  // once, where copy() waits for each (zero-copy point-to-point reads the heads of the
  // messages a CUDA-aware library received into device staging this way: one wait for a
  // halo exchange's 26, not 26). Device sources are on the current device; the waits
  // overlap only where the destinations are pinned host memory.
  struct CopyJob {
    void *dst;
    const void *src;
    size_t bytes;
  };
  virtual Status copy_all(const std::vector<CopyJob> &jobs) {
    for (const CopyJob &j : jobs)
      if (const Status st = copy(j.dst, j.src, j.bytes); st != Status::Ok) return st;
    return Status::Ok;
  }

  // Zero-copy between processes of one node (docs/design.md, "Zero-copy collectives").
  // ipc_export describes the allocation that holds device pointer `ptr` (Unsupported for
  // memory that cannot be exported: stream-ordered pools, virtual-memory mappings, managed
  // memory); ipc_open maps another process's allocation for the current device and gives
  // its first byte; ipc_close unmaps it. ipc_peer_access: whether kernels on the current
  // device can read memory of the GPU with identity `device` (a device_id() of this node).
  virtual Status ipc_export(const void *ptr, IpcHandle &out) = 0;
  virtual Status ipc_open(const IpcHandle &handle, void **base) = 0;
  virtual void ipc_close(void *base) = 0;
  virtual bool ipc_peer_access(const std::string &device) = 0;

  // Device memory that holds plan data (uploaded block lists) for plan `id` may go.
  virtual void release_plan(uint64_t id) = 0;
};

Backend &gpu_backend();

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

// For the life of a scope, the GPU that holds `ptr` is the calling thread's current
// device (every new thread starts on device 0, whatever GPU its buffers are on), so
// that TEMPI's streams, pools and kernels are that GPU's. The thread's own choice
// comes back at the end of the scope.
class OnDeviceOf {
 public:
  explicit OnDeviceOf(const void *ptr) {
    const int device = gpu_backend().device_of(ptr);
    if (device >= 0) previous_ = gpu_backend().use_device(device);
  }
  ~OnDeviceOf() {
    if (previous_ >= 0) gpu_backend().use_device(previous_);
  }
  OnDeviceOf(const OnDeviceOf &) = delete;
  OnDeviceOf &operator=(const OnDeviceOf &) = delete;

 private:
  int previous_ = -1;
};

}  // namespace tempi
