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

#include <mpi.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "backend.hpp"
#include "base/type_cache.hpp"

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

// TEMPI_DEFER_PACK=2: moves of MPI_Pack not launched yet, this thread's, in call order.
// (QueuedMove also describes a move joined to an open launch.)
// The thread's next MPI call other than MPI_Pack launches them (one backend call, so that
// small strided objects share one fused kernel), and so does a move that depends on a
// queued one (overlapping buffers, the other direction, another GPU).
struct QueuedMove {
  std::shared_ptr<const TypeInfo> info;  // keeps device-side plan data alive
  Plan plan;
  void *typed = nullptr;
  void *packed = nullptr;
  int64_t bytes = 0;
  bool to_packed = true;
  int device = -1;
};
Status queue_move(QueuedMove m);
// TEMPI_DEFER_PACK=3: a move joined to this thread's open launch (backend.hpp,
// join_open), after the queued packs, and in a new launch when it shares a byte with a
// move joined before (one writes what the other reads or writes) or goes the other way.
Status join_open_move(QueuedMove m);
// Whether this thread has queued moves or an open launch, and launching the one and
// closing the other: what every MPI call that hands GPU data on does first.
bool moves_queued();
void launch_queued_moves();
// The first thing of every intercepted call that may hand data on or complete a request
// (docs/using.md: queued packs are complete for the thread's later such calls and for
// work after them), also where the call itself touches no GPU data.
inline void launch_own_moves() {
  if (moves_queued()) launch_queued_moves();
}

// A launch of queued moves, or a wait for deferred work, that failed where no call could
// return the error (the calls that issued the work had returned): the first such failure
// seen on this thread is kept until this thread's next MPI_Pack or MPI_Unpack raises it
// on its communicator (MPI_SUCCESS: none). MPI_Finalize logs one left untaken.
int raise_deferred_failure(MPI_Comm comm, const char *call);
void log_deferred_failure();

// For calls about to work on GPU data: this thread's queued moves launched, and what
// other threads left pending waited for.
inline void settle_other_threads() {
  launch_own_moves();
  if (local_work().pending()) local_work().settle_other_threads();
}

}  // namespace tempi
