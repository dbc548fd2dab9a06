// The process's cache of mapped peer allocations and the PeerMapping handles that hold its
// entries (node/peer_mapping.hpp says the contract).
#include "node/peer_mapping.hpp"

#include <list>
#include <mutex>
#include <set>
#include <utility>

namespace tempi {

namespace {

struct Mapping {
  int32_t pid;
  uint64_t buffer_id;
  void *base;
  uint64_t peer_base, peer_size;  // the allocation's range in its own process
  int users;                      // PeerMappings that hold it (never unmapped while held)
};

class Mappings {
 public:
  // The peer allocation named by `h`, mapped on the current device, and held by one more
  // user until release(). Most recently used first; the oldest that nobody holds beyond kMax
  // are unmapped (a peer's freed allocation stays alive while mapped). A mapping in use is
  // never unmapped: a kernel of this process or of another thread may be reading through it.
  // An allocation CUDA refused to map is remembered: the refusal returns the backend's error
  // the first time and Status::Unsupported afterwards, without asking CUDA again.
  Status get(int32_t pid, const IpcHandle &h, void **base) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (refused_.count({pid, h.buffer_id})) return Status::Unsupported;
    for (auto it = list_.begin(); it != list_.end(); ++it)
      if (it->pid == pid && it->buffer_id == h.buffer_id) {
        list_.splice(list_.begin(), list_, it);
        *base = it->base;
        ++it->users;
        return Status::Ok;
      }
    // A mapping of an allocation whose range the new one overlaps is of a freed allocation:
    // CUDA may answer the new handle with it (the old bytes, silently) or refuse the handle
    // ("resource already mapped"), so it goes first.
    close_unused([&](const Mapping &m) {
      return m.pid == pid && m.peer_base < h.base + uint64_t(h.size) && h.base < m.peer_base + m.peer_size;
    });
    Status st = gpu_backend().ipc_open(h, base);
    if (st != Status::Ok) {
      // CUDA refuses a second mapping of memory the owner freed and allocated again while an
      // older mapping of it is open here ("resource already mapped"): that process's other
      // mappings are of freed allocations or of buffers not in use; unmap them, retry once.
      close_unused([&](const Mapping &m) { return m.pid == pid; });
      st = gpu_backend().ipc_open(h, base);
      if (st != Status::Ok) {
        // Most often this process maps the allocation already through another handle: the
        // MPI library's own IPC cache (a CUDA-aware library's transport), which CUDA allows
        // once and which lasts as long as that cache keeps it. Buffer ids are never reused,
        // so the memory never refuses an allocation it has not seen.
        if (refused_.size() >= kMaxRefused) refused_.clear();
        refused_.insert({pid, h.buffer_id});
        return st;
      }
    }
    ++opened_;
    list_.push_front({pid, h.buffer_id, *base, h.base, uint64_t(h.size), 1});
    for (auto it = list_.end(); list_.size() > kMax && it != list_.begin();) {
      --it;
      if (it->users) continue;
      gpu_backend().ipc_close(it->base);
      it = list_.erase(it);
    }
    return Status::Ok;
  }
  void release(int32_t pid, uint64_t buffer_id) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Mapping &m : list_)
      if (m.pid == pid && m.buffer_id == buffer_id && m.users > 0) {
        --m.users;
        return;
      }
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const Mapping &m : list_) gpu_backend().ipc_close(m.base);
    list_.clear();
  }
  uint64_t opened() {
    std::lock_guard<std::mutex> lock(mutex_);
    return opened_;
  }

 private:
  // Unmaps the mappings that `which` selects and nobody holds (under mutex_).
  template <class Which>
  void close_unused(Which which) {
    for (auto it = list_.begin(); it != list_.end();)
      if (!it->users && which(*it)) {
        gpu_backend().ipc_close(it->base);
        it = list_.erase(it);
      } else {
        ++it;
      }
  }
  static constexpr size_t kMax = 64;
  static constexpr size_t kMaxRefused = 4096;
  std::mutex mutex_;
  std::list<Mapping> list_;
  std::set<std::pair<int32_t, uint64_t>> refused_;  // (process, allocation) that CUDA would not map
  uint64_t opened_ = 0;
};

Mappings &mappings() {
  static Mappings *m = new Mappings;  // immortal: used until MPI_Finalize
  return *m;
}

}  // namespace

PeerMapping &PeerMapping::operator=(PeerMapping &&other) noexcept {
  if (this != &other) {
    release();
    pid_ = other.pid_;
    buffer_id_ = other.buffer_id_;
    base_ = other.base_;
    other.base_ = nullptr;
  }
  return *this;
}

Status PeerMapping::map(int32_t pid, const IpcHandle &h) {
  release();
  void *base = nullptr;
  const Status st = mappings().get(pid, h, &base);
  if (st != Status::Ok) return st;
  pid_ = pid;
  buffer_id_ = h.buffer_id;
  base_ = base;
  return Status::Ok;
}

void PeerMapping::release() {
  if (base_) mappings().release(pid_, buffer_id_);
  base_ = nullptr;
}

uint64_t mappings_opened() { return mappings().opened(); }

void unmap_all_peers() { mappings().clear(); }

}  // namespace tempi
