// What a GPU backend implements, grouped by purpose (as yaksa groups its GPU driver's hooks):
// the device and its pointers, ranged pack/unpack, batched asynchronous moves, fences and
// streams, memory, IPC, and work on the application's streams. Each group is a small
// abstract class; Backend (backend.hpp)
// joins them and writes the pipelines (staged, one-shot, accessible) once above them
// (pipelines.cpp), so a backend implements only the narrow steps: cuda/ with kernels and
// streams, tests/support/emulated_backend.cpp with the host packer, stub_backend.cpp with
// nothing at all.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "backend_types.hpp"

namespace tempi {

// The GPUs, and where a pointer lives.
class DeviceHooks {
 public:
  // True when a usable GPU is present (false on machines without one, and in the stub).
  virtual bool has_gpu() = 0;
  virtual std::string device_name() = 0;
  // The current GPU's identity on this node (its PCI bus id; "" without a GPU), and
  // whether its contexts are shared through the Multi-Process Service.
  virtual std::string device_id() = 0;
  virtual bool mps_enabled() = 0;
  // GPUs visible to this process, and the one this thread's calls use.
  virtual int device_count() = 0;
  virtual Status select_device(int device) = 0;
  // The GPU that holds `ptr` (device or managed memory), else -1.
  virtual int device_of(const void *ptr) = 0;
  // Makes `device` current on this thread; returns the device that was current. Callers
  // in core/ and cuda/ go through OnDevice (backend.hpp), which gives it back.
  virtual int use_device(int device) = 0;
  // Where a pointer lives. Host for anything the GPU runtime does not know.
  virtual MemorySpace classify(const void *ptr) = 0;
  // While `on` (PointerScope, backend.hpp), the backend may answer classify() and
  // device_of() for an address it was already asked about on this thread from its first answer.
  virtual void remember_pointers(bool on) { (void)on; }

 protected:
  ~DeviceHooks() = default;
};

// Bytes [first, last) of a plan's packed stream moved by the device.
class RangeHooks {
 public:
  // Between a typed buffer and a packed one (packed[0] is stream byte `first`). Either
  // side may be device, managed, pinned or pageable host memory; completes before returning.
  virtual Status pack(const Plan &plan, const void *typed, void *packed, int64_t first, int64_t last) = 0;
  virtual Status unpack(const Plan &plan, const void *packed, void *typed, int64_t first, int64_t last) = 0;
  // The narrow step of every pipeline: the move of bytes [first, last) between a typed
  // and a packed buffer that the GPU can both reach (device, managed or mapped pinned
  // memory), queued on the Work lane without waiting. The backend picks the kernel.
  virtual Status queue_range(const Plan &plan, void *typed, void *packed, int64_t first, int64_t last,
                             bool to_packed) = 0;
  // The whole object [0, bytes) between GPU memory and pinned host memory by the copy
  // engines (one pitched copy) on the Work lane, where the backend can and it pays;
  // `queued` says whether it did. The one-shot pipeline asks this before queue_range.
  virtual Status queue_whole_copy(const Plan &plan, void *typed, void *host, int64_t bytes, bool to_host,
                                  bool &queued) {
    (void)plan, (void)typed, (void)host, (void)bytes, (void)to_host;
    queued = false;
    return Status::Ok;
  }

 protected:
  ~RangeHooks() = default;
};

// Batched moves issued without waiting (docs/design.md, "Many messages in flight (the engine)").
class MoveHooks {
 public:
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
  // the last join; waiting for (or querying) `done` closes it too. A move it cannot take
  // is issued alone, as by pack_async and unpack_async (which is all a backend without
  // open launches does).
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

 protected:
  ~MoveHooks() = default;
};

// The thread's lanes and the ends of work on them.
class FenceHooks {
 public:
  // A copy between any two kinds of memory queued on `lane` (a device range must lie in
  // one allocation), and `waiter` made to wait for the work issued so far on `waited`.
  virtual Status queue_copy(void *dst, const void *src, size_t bytes, Lane lane) = 0;
  virtual Status order(Lane waiter, Lane waited) = 0;
  // Waits for the work issued so far on `lane`: one synchronization (counted).
  virtual Status finish(Lane lane) = 0;
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
  // Fused launches whose descriptions went up to a device table (placed), and those that
  // found the same table there already (reused); 0 where a backend keeps no tables.
  virtual uint64_t tables_placed() { return 0; }
  virtual uint64_t tables_reused() { return 0; }
  // Waits for the work the application left on the legacy default stream of the current
  // GPU (no wait, and not counted, when there is none). TEMPI's own streams follow that
  // work by themselves; another process's GPU reading this process's memory through IPC
  // (zero-copy) does not, so an owner settles it before peers may read.
  virtual Status wait_default_stream() = 0;
  // Makes the legacy default stream of the current GPU wait for the work before `f`, so
  // that work the application queues after this call on that stream, or on any blocking
  // stream of its own (cudaStreamCreate, cudaStreamDefault, the per-thread default stream,
  // which all wait for earlier legacy-stream work), starts after it. No wait on the host.
  virtual Status order_default_stream_after(const Fence &f) = 0;

 protected:
  ~FenceHooks() = default;
};

// Memory: the pools, plain device memory and synchronous copies.
class MemoryHooks {
 public:
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
  // Device memory that holds plan data (uploaded block lists) for plan `id` may go.
  virtual void release_plan(uint64_t id) = 0;

 protected:
  ~MemoryHooks() = default;
};

// Work ordered on an application's own stream (the TEMPIX_ enqueue calls, docs/design.md
// "Stream-ordered communication"). `stream` is the application's handle (a cudaStream_t;
// the emulated backend's own handle on CI). Every hook queues its work on that stream and
// returns without waiting; the stream runs it in its order, after the work queued there
// before. A backend without streams (the stub) refuses them all.
class StreamHooks {
 public:
  // The GPU the stream belongs to (-1: not a stream this backend knows).
  virtual int stream_device(void *stream) {
    (void)stream;
    return -1;
  }
  // Whether the stream is being captured into a graph now.
  virtual Status stream_capturing(void *stream, bool &capturing) {
    (void)stream;
    capturing = false;
    return Status::Unsupported;
  }
  // The moves of `jobs` (typed GPU memory of the stream's device, packed pinned host memory
  // that the GPU maps) queued on the stream; small strided objects share one launch.
  virtual Status stream_moves(void *stream, const std::vector<MoveJob> &jobs, bool to_packed) {
    (void)stream, (void)jobs, (void)to_packed;
    return Status::Unsupported;
  }
  // The stream writes `value` into each word (pinned host memory), after the work before
  // it and the memory it wrote; and waits until each word holds `value`.
  virtual Status stream_write(void *stream, const std::vector<uint32_t *> &words, uint32_t value) {
    (void)stream, (void)words, (void)value;
    return Status::Unsupported;
  }
  virtual Status stream_wait(void *stream, const std::vector<uint32_t *> &words, uint32_t value) {
    (void)stream, (void)words, (void)value;
    return Status::Unsupported;
  }

 protected:
  ~StreamHooks() = default;
};

// Zero-copy between processes of one node (docs/design.md, "Zero-copy collectives").
// ipc_export describes the allocation that holds device pointer `ptr` (Unsupported for
// memory that cannot be exported: stream-ordered pools, virtual-memory mappings, managed
// memory); ipc_open maps another process's allocation for the current device and gives
// its first byte; ipc_close unmaps it. ipc_peer_access: whether kernels on the current
// device can read memory of the GPU with identity `device` (a device_id() of this node).
class IpcHooks {
 public:
  virtual Status ipc_export(const void *ptr, IpcHandle &out) = 0;
  virtual Status ipc_open(const IpcHandle &handle, void **base) = 0;
  virtual void ipc_close(void *base) = 0;
  virtual bool ipc_peer_access(const std::string &device) = 0;

 protected:
  ~IpcHooks() = default;
};

}  // namespace tempi
