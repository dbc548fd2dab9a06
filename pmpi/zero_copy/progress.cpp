// Progress of zero-copy work in flight (zero_copy.hpp): the starts of persistent zero-copy
// collectives until their generalized requests complete (zero_copy/in_flight.hpp), TEMPI's
// zero-copy thread that issues their reads, zero-copy point-to-point's progress
// (zero_copy_p2p.hpp), and what MPI_Finalize does with all of it.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "log.hpp"
#include "node/node_share.hpp"
#include "zero_copy/in_flight.hpp"
#include "zero_copy/zero_copy.hpp"
#include "zero_copy/zero_copy_p2p.hpp"

namespace tempi {

namespace {

// TEMPI's zero-copy thread: issues the reads of started persistent collectives once the
// peers they read from have started the same instance, and tells those peers when the reads
// are done, unless a thread of the application got there first (try_advance: its MPI_Start
// when the peers started before it, its completion calls while it waits). It never calls MPI; it exists so that no start waits for another process and
// no peer's completion depends on whether this process is inside an MPI call.
class ZeroCopyThread {
 public:
  // The thread holds its starts weakly: one that a thread of the application finished meanwhile
  // must not outlive its request on this list, since it holds mappings of its peers' buffers
  // (a buffer freed and allocated again could not be mapped anew while the old mapping stays).
  // A start in flight is held by the list that completes it (track_start) until it finished.
  void add(const std::shared_ptr<ZeroCopyPersistent> &op) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
      work_.push_back(op);
    }
    wake_.notify_one();
  }
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_one();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void run() {
    std::vector<std::weak_ptr<ZeroCopyPersistent>> mine;
    for (unsigned idle = 0;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        if (mine.empty()) wake_.wait(lock, [&] { return stopping_ || !work_.empty(); });
        if (stopping_) return;
        for (auto &op : work_) mine.push_back(std::move(op));
        work_.clear();
      }
      const size_t before = mine.size();
      mine.erase(std::remove_if(mine.begin(), mine.end(),
                                [](const std::weak_ptr<ZeroCopyPersistent> &w) {
                                  const std::shared_ptr<ZeroCopyPersistent> op = w.lock();
                                  return !op || op->try_advance();
                                }),
                 mine.end());
      // Peers start within microseconds in a tight loop, or much later: spin a little,
      // then yield, then sleep briefly, so that a waiting start costs no core.
      idle = mine.size() < before ? 0 : idle + 1;
      if (idle > 2000) std::this_thread::sleep_for(std::chrono::microseconds(50));
      else if (idle > 200) std::this_thread::yield();
    }
  }
  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<std::weak_ptr<ZeroCopyPersistent>> work_;
  std::thread thread_;
  bool stopping_ = false;
};

ZeroCopyThread &zero_copy_thread() {
  static ZeroCopyThread *t = new ZeroCopyThread;  // stopped at MPI_Finalize, never destroyed
  return *t;
}

// Started persistent collectives whose generalized request is not completed yet.
struct InFlight {
  std::shared_ptr<ZeroCopyPersistent> op;
  MPI_Request gated;
};
std::mutex g_flight_mutex;
std::vector<InFlight> g_in_flight;
std::atomic<size_t> g_in_flight_count{0};

}  // namespace

void track_start(std::shared_ptr<ZeroCopyPersistent> op, MPI_Request gated) {
  std::lock_guard<std::mutex> lock(g_flight_mutex);
  g_in_flight.push_back({std::move(op), gated});
  g_in_flight_count = g_in_flight.size();
}

void advance_on_thread(const std::shared_ptr<ZeroCopyPersistent> &op) { zero_copy_thread().add(op); }

void zero_copy_progress() {
  p2p_progress();
  if (g_in_flight_count.load(std::memory_order_relaxed) == 0) return;
  std::unique_lock<std::mutex> lock(g_flight_mutex, std::try_to_lock);
  if (!lock.owns_lock()) return;  // another thread is at it
  for (auto it = g_in_flight.begin(); it != g_in_flight.end();)
    if (it->op->try_advance(), it->op->finished_now()) {
      PMPI_Grequest_complete(it->gated);
      it = g_in_flight.erase(it);
    } else {
      ++it;
    }
  g_in_flight_count = g_in_flight.size();
}

bool zero_copy_in_flight() { return g_in_flight_count.load(std::memory_order_relaxed) > 0 || p2p_in_flight(); }


void zero_copy_shutdown() {
  zero_copy_thread().stop();
  node_finalizing();
  p2p_shutdown();
  node_close();
}

}  // namespace tempi
