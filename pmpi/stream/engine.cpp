// TEMPI's stream thread (engine.hpp). It alone hands enqueued operations to the MPI
// library (so the library must run under MPI_THREAD_MULTIPLE): an operation goes when its
// stream wrote its `arrived` word, in the order the operations of its communicator were
// enqueued, which is the order the stream reaches them, so the library matches them as it
// would have matched the same calls made by the stream. When the library finished one, the
// thread writes its `done` word, for which the stream waits at the operation's completion.
// (A device receive's staging already holds its buffer's packed bytes, packed by the
// stream at its start, enqueue.cpp: a shorter message overwrites only its own bytes.)
#include "stream/engine.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <thread>
#include <vector>

#include "base/next.hpp"
#include "log.hpp"

namespace tempi {
namespace streams {

namespace {

class Engine {
 public:
  void add(std::shared_ptr<Op> op) {
    bool asleep;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
      ++unposted_[op->comm];
      incoming_.push_back(std::move(op));
      incoming_n_.store(incoming_.size(), std::memory_order_release);
      asleep = asleep_;
    }
    if (asleep) wake_.notify_one();  // a system call: only where the thread sleeps
  }
  bool unposted(MPI_Comm comm) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = unposted_.find(comm);
    return it != unposted_.end() && it->second > 0;
  }
  // Operations handed to the library and not finished, or not yet handed.
  bool busy() {
    std::lock_guard<std::mutex> lock(mutex_);
    return !incoming_.empty() || busy_.load(std::memory_order_acquire);
  }
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void run();
  bool post(const std::shared_ptr<Op> &op);
  void finish(const std::shared_ptr<Op> &op, const MPI_Status &st);
  void signal_done(const std::shared_ptr<Op> &op);
  bool step();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<std::shared_ptr<Op>> incoming_;
  // incoming_.size(), read without the lock: the thread's passes take the lock only where
  // there is something to take (an enqueue call then rarely waits for the lock).
  std::atomic<size_t> incoming_n_{0};
  std::map<MPI_Comm, int> unposted_;
  std::atomic<bool> busy_{false};
  bool asleep_ = false;  // the thread waits for `wake_`
  bool stopping_ = false;
  std::thread thread_;

  // The thread's own.
  std::map<MPI_Comm, std::deque<std::shared_ptr<Op>>> waiting_;  // for their stream, by communicator
  std::vector<std::shared_ptr<Op>> posted_;
  std::vector<MPI_Request> requests_;
  std::vector<std::shared_ptr<Op>> consuming_;  // until their stream passed their completion
};

Engine &engine() {
  static Engine *e = new Engine;  // stopped at MPI_Finalize, never destroyed
  return *e;
}

void complete_request(const std::shared_ptr<Op> &op) {
  if (op->request == MPI_REQUEST_NULL) return;
  if (const int err = PMPI_Grequest_complete(op->request))
    TEMPI_LOG(Error, "enqueue: completing an enqueued operation's request failed (MPI error %d)", err);
}

bool Engine::post(const std::shared_ptr<Op> &op) {
  MPI_Request r = MPI_REQUEST_NULL;
  const int err = op->is_send ? next::MPI_Isend(op->buf, op->count, op->type, op->peer, op->tag, op->comm, &r)
                              : next::MPI_Irecv(op->buf, op->count, op->type, op->peer, op->tag, op->comm, &r);
  if (err != MPI_SUCCESS) {
    TEMPI_LOG(Error, "enqueue: the MPI library refused an enqueued %s (peer %d, tag %d): MPI error %d",
              op->is_send ? "send" : "receive", op->peer, op->tag, err);
    MPI_Status st{};
    st.MPI_SOURCE = op->peer;
    st.MPI_TAG = op->tag;
    st.MPI_ERROR = err;
    finish(op, st);
    return true;
  }
  posted_.push_back(op);
  requests_.push_back(r);
  return true;
}

void Engine::signal_done(const std::shared_ptr<Op> &op) {
  word(op->words->done).store(1, std::memory_order_release);
  complete_request(op);
  // The stream still waits for `done` (and a device receive unpacks its staging): the
  // operation's memory stays until the stream wrote `consumed`. A device send's stream
  // touched it last when it wrote `arrived`.
  if (!(op->is_send && op->device)) consuming_.push_back(op);
}

void Engine::finish(const std::shared_ptr<Op> &op, const MPI_Status &st) {
  if (st.MPI_ERROR != MPI_SUCCESS)
    TEMPI_LOG(Error, "enqueue: an enqueued %s (peer %d, tag %d) failed in the MPI library: MPI error %d",
              op->is_send ? "send" : "receive", op->peer, op->tag, st.MPI_ERROR);
  op->deliver(st);
  signal_done(op);
}

// One pass: takes new operations, posts those whose stream arrived, finishes those the
// library finished. Whether anything happened.
bool Engine::step() {
  bool moved = false;
  if (incoming_n_.load(std::memory_order_acquire) > 0) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto &op : incoming_) waiting_[op->comm].push_back(std::move(op));
    incoming_.clear();
    incoming_n_.store(0, std::memory_order_release);
  }
  std::vector<MPI_Comm> posted_comms;
  for (auto &[comm, queue] : waiting_)
    while (!queue.empty() && word(queue.front()->words->arrived).load(std::memory_order_acquire) == 1) {
      post(queue.front());
      queue.pop_front();
      posted_comms.push_back(comm);
      moved = true;
    }
  if (!posted_comms.empty()) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (MPI_Comm c : posted_comms)
      if (--unposted_[c] == 0) unposted_.erase(c);
  }
  if (!requests_.empty()) {
    const int n = int(requests_.size());
    std::vector<int> indices(static_cast<size_t>(n), 0);
    std::vector<MPI_Status> statuses(static_cast<size_t>(n));
    int outcount = 0;
    const int err = next::MPI_Testsome(n, requests_.data(), &outcount, indices.data(), statuses.data());
    if (err != MPI_SUCCESS && err != MPI_ERR_IN_STATUS) {
      TEMPI_LOG(Error, "enqueue: testing the library's requests failed: MPI error %d", err);
      outcount = 0;
    }
    if (outcount != MPI_UNDEFINED && outcount > 0) {
      moved = true;
      std::vector<bool> gone(static_cast<size_t>(n), false);
      for (int k = 0; k < outcount; ++k) {
        const int i = indices[size_t(k)];
        MPI_Status st = statuses[size_t(k)];
        if (err != MPI_ERR_IN_STATUS) st.MPI_ERROR = MPI_SUCCESS;
        finish(posted_[size_t(i)], st);
        gone[size_t(i)] = true;
      }
      size_t keep = 0;
      for (size_t i = 0; i < size_t(n); ++i)
        if (!gone[i]) {
          posted_[keep] = std::move(posted_[i]);
          requests_[keep] = requests_[i];
          ++keep;
        }
      posted_.resize(keep);
      requests_.resize(keep);
    }
  }
  const size_t before = consuming_.size();
  consuming_.erase(std::remove_if(consuming_.begin(), consuming_.end(),
                                  [](const std::shared_ptr<Op> &op) {
                                    return word(op->words->consumed).load(std::memory_order_acquire) == 1;
                                  }),
                   consuming_.end());
  moved = moved || consuming_.size() < before;
  bool any_waiting = false;
  for (const auto &[comm, queue] : waiting_) any_waiting = any_waiting || !queue.empty();
  const bool busy = any_waiting || !posted_.empty();
  if (busy != busy_.load(std::memory_order_relaxed)) {
    std::lock_guard<std::mutex> lock(mutex_);  // busy_ changes under the lock: run() sleeps on it
    busy_.store(busy, std::memory_order_release);
  }
  return moved;
}

void Engine::run() {
  for (unsigned idle = 0;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (stopping_) return;
      // Nothing at all to watch: sleep until an operation comes.
      if (incoming_.empty() && !busy_.load(std::memory_order_acquire) && consuming_.empty()) {
        asleep_ = true;
        wake_.wait(lock, [&] { return stopping_ || !incoming_.empty(); });
        asleep_ = false;
      }
      if (stopping_) return;
    }
    // A stream reaches its operations within microseconds in a loop of exchanges, or much
    // later: spin a little, then yield, then sleep briefly, so that waiting costs no core.
    idle = step() ? 0 : idle + 1;
    if (idle > 4000) std::this_thread::sleep_for(std::chrono::microseconds(20));
    else if (idle > 400) std::this_thread::yield();
  }
}

}  // namespace

void engine_add(std::shared_ptr<Op> op) { engine().add(std::move(op)); }

bool engine_unposted(MPI_Comm comm) { return engine().unposted(comm); }

void engine_drain() {
  const auto start = std::chrono::steady_clock::now();
  auto warned = start;
  while (engine().busy()) {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
    const auto now = std::chrono::steady_clock::now();
    if (now - warned > std::chrono::seconds(30)) {
      warned = now;
      TEMPI_LOG(Warn,
                "MPI_Finalize: enqueued operations are still waiting for their streams or their peers after %lld s "
                "(synchronize every stream before MPI_Finalize)",
                (long long)std::chrono::duration_cast<std::chrono::seconds>(now - start).count());
    }
  }
}

void engine_shutdown() { engine().stop(); }

}  // namespace streams
}  // namespace tempi

