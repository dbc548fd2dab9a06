// The values that cross the backend interface (backend_hooks.hpp): where memory lives,
// statuses, lent scratch, fences, the jobs of batched moves and IPC handles. Plain data,
// no behaviour, so that core/, cuda/ and pmpi/ share them without depending on each other.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

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

// The two streams of work a backend keeps per thread and device: Work runs kernels (and
// copies that must follow them in order), Copy runs the staged method's copies beside them
// (docs/design.md, "Point-to-point": chunk k+1 packed while chunk k is copied).
enum class Lane { Work, Copy };

}  // namespace tempi
