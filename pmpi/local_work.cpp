#include "local_work.hpp"

#include "log.hpp"

namespace tempi {

void LocalWork::add(const Fence &f, int device) {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::thread::id me = std::this_thread::get_id();
  for (Entry &e : entries_)
    if (e.thread == me && e.device == device) {
      e.fence = f;
      return;
    }
  entries_.push_back({me, device, f});
  count_.store(entries_.size(), std::memory_order_release);
}

void LocalWork::settle_if(bool others_only) {
  std::vector<Entry> mine;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const std::thread::id me = std::this_thread::get_id();
    std::vector<Entry> keep;
    for (Entry &e : entries_) (others_only && e.thread == me ? keep : mine).push_back(std::move(e));
    entries_.swap(keep);
    count_.store(entries_.size(), std::memory_order_release);
  }
  Backend &b = gpu_backend();
  for (Entry &e : mine) {
    const int previous = e.device >= 0 ? b.use_device(e.device) : -1;
    // A failed kernel was reported by the call that launched it; the wait clears it.
    if (b.wait(e.fence) != Status::Ok) TEMPI_LOG(Warn, "a deferred MPI_Pack/MPI_Unpack kernel failed");
    if (previous >= 0) b.use_device(previous);
  }
}

void LocalWork::settle_other_threads() { settle_if(true); }
void LocalWork::settle() { settle_if(false); }

LocalWork &local_work() {
  static LocalWork *w = new LocalWork;  // immortal, like the engine
  return *w;
}

}  // namespace tempi
