// GPU work that MPI_Pack and MPI_Unpack issued without waiting for it (the opt-in
// TEMPI_DEFER_PACK=1; docs/using.md, "Sequences of MPI_Pack and MPI_Unpack"). Work on
// one thread's stream runs in issue order, so TEMPI's later work on the same thread
// (the copy of a packed buffer that a send stages, a later unpack) follows it without
// a wait. What must wait for it:
//   settle_other_threads()  before TEMPI works on GPU data on another thread's stream;
//   settle()                before a GPU buffer goes to the MPI library untouched (a
//                           CUDA-aware library reads it on its own streams), and at
//                           MPI_Finalize.
#pragma once

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "backend.hpp"

namespace tempi {

class LocalWork {
 public:
  bool pending() const { return count_.load(std::memory_order_acquire) != 0; }
  // Work just issued on this thread's stream of `device`; only the latest fence of a
  // stream is kept (it completes after every earlier one).
  void add(const Fence &f, int device);
  void settle_other_threads();
  void settle();

 private:
  struct Entry {
    std::thread::id thread;
    int device;
    Fence fence;
  };
  void settle_if(bool others_only);
  std::mutex mutex_;
  std::vector<Entry> entries_;
  std::atomic<size_t> count_{0};
};

LocalWork &local_work();

// For calls about to work on GPU data: what other threads left pending.
inline void settle_other_threads() {
  if (local_work().pending()) local_work().settle_other_threads();
}

}  // namespace tempi
