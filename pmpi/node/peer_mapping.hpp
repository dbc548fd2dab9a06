// Allocations of other processes of the node, mapped on this process's GPUs through CUDA IPC
// (docs/design.md, "Zero-copy between GPUs of one node"): opening a handle costs
// milliseconds, so each allocation is mapped once and kept in a process-wide cache keyed by
// the owner's process and the allocation's id, never by address (node/peer_mapping.cpp).
// A PeerMapping holds one mapping in use; the cache unmaps only mappings nobody holds.
// Thread-safe.
#pragma once

#include <cstdint>

#include "backend.hpp"

namespace tempi {

// An allocation of another process of the node, mapped on the current GPU through the
// process's cache of mappings (keyed by the owner's process and the allocation's id, never
// by address) and held mapped while this object holds it: the cache unmaps only mappings
// that nobody holds, so GPU work reading through one never loses it. Hold it until that
// work is finished.
class PeerMapping {
 public:
  PeerMapping() = default;
  PeerMapping(PeerMapping &&other) noexcept { *this = std::move(other); }
  PeerMapping &operator=(PeerMapping &&other) noexcept;
  PeerMapping(const PeerMapping &) = delete;
  PeerMapping &operator=(const PeerMapping &) = delete;
  ~PeerMapping() { release(); }
  // Maps (or finds) the allocation named by `h` of process `pid`; base() is its first byte.
  Status map(int32_t pid, const IpcHandle &h);
  char *base() const { return static_cast<char *>(base_); }
  uint64_t buffer_id() const { return base_ ? buffer_id_ : 0; }  // 0: none held
  int32_t pid() const { return pid_; }
  void release();

 private:
  int32_t pid_ = 0;
  uint64_t buffer_id_ = 0;
  void *base_ = nullptr;
};

// Peer allocations this process has mapped so far (tests, the log at MPI_Finalize).
uint64_t mappings_opened();
// Unmaps every peer allocation (at MPI_Finalize, once no GPU work reads through one).
void unmap_all_peers();

}  // namespace tempi
