#include "p2p/requests.hpp"

#include "base/next.hpp"
#include "base/progress.hpp"
#include "p2p/engine.hpp"

namespace tempi {

// Entries taken out leave their slot (an empty one) in the map: the MPI library hands out
// the same request handles again and again (a halo exchange's 52 every step), so the next
// add finds its slot and allocates nothing. Empty slots are swept once they outnumber the
// live entries by far.
constexpr size_t kSweepSlots = 4096;

void RequestTable::add(MPI_Request req, std::unique_ptr<Pending> p) {
  if (!p) return;
  std::lock_guard<std::mutex> lock(mutex_);
  std::unique_ptr<Pending> &slot = live_[req];
  if (!slot) ++live_count_;
  slot = std::move(p);
  size_.store(live_count_ + detached_.size(), std::memory_order_release);
}

std::unique_ptr<Pending> RequestTable::take(MPI_Request req) {
  if (req == MPI_REQUEST_NULL || empty()) return nullptr;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(req);
  if (it == live_.end() || !it->second) return nullptr;
  std::unique_ptr<Pending> p = std::move(it->second);
  --live_count_;
  if (live_.size() > kSweepSlots && live_.size() > 4 * live_count_)
    for (auto i = live_.begin(); i != live_.end();) i = i->second ? std::next(i) : live_.erase(i);
  size_.store(live_count_ + detached_.size(), std::memory_order_release);
  return p;
}

void RequestTable::detach(MPI_Request req, std::unique_ptr<Pending> p) {
  std::lock_guard<std::mutex> lock(mutex_);
  detached_.emplace_back(req, std::move(p));
  size_.store(live_count_ + detached_.size(), std::memory_order_release);
}

bool RequestTable::any_receive(const std::function<bool(const Incoming &)> &pred) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto &[req, p] : live_)
    if (p && p->in.comm != MPI_COMM_NULL && pred(p->in)) return true;
  for (const auto &[req, p] : detached_)
    if (p->in.comm != MPI_COMM_NULL && pred(p->in)) return true;
  return false;
}

void RequestTable::progress_detached() {
  std::vector<std::pair<MPI_Request, std::unique_ptr<Pending>>> mine;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (detached_.empty()) return;
    mine.swap(detached_);
  }
  std::vector<std::pair<MPI_Request, std::unique_ptr<Pending>>> still;
  for (auto &[req, p] : mine) {
    int flag = 0, err = MPI_SUCCESS;
    MPI_Status st;
    if (p->send) {  // a deferred send: the library's request, once the engine posted it
      MPI_Request inner = posted_request(*p->send, err);
      if (inner != MPI_REQUEST_NULL) err = next::MPI_Test(&inner, &flag, &st);
      p->send->inner = inner;
      if (flag || err != MPI_SUCCESS) finish_outer(req);
    } else {
      err = next::MPI_Test(&req, &flag, &st);
    }
    if (flag || err != MPI_SUCCESS) {
      if (p->persistent) next::MPI_Request_free(&req);  // freed while active: now inactive, it goes
      complete(std::move(p), st, err);  // nobody is left to report an error to
    } else {
      still.emplace_back(req, std::move(p));
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto &e : still) detached_.push_back(std::move(e));
  size_.store(live_count_ + detached_.size(), std::memory_order_release);
}

void RequestTable::drain_detached() {
  std::vector<std::pair<MPI_Request, std::unique_ptr<Pending>>> mine;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    mine.swap(detached_);
    size_.store(live_count_, std::memory_order_release);
  }
  flush_sends();
  for (auto &[req, p] : mine) {
    MPI_Status st;
    int err = MPI_SUCCESS;
    if (p->send) {
      MPI_Request inner = posted_request(*p->send, err);
      if (inner != MPI_REQUEST_NULL) err = next::MPI_Wait(&inner, &st);
      finish_outer(req);
    } else {
      err = next::MPI_Wait(&req, &st);
      if (p->persistent) next::MPI_Request_free(&req);
    }
    complete(std::move(p), st, err);
  }
}

RequestTable &requests() {
  static RequestTable *table = [] {
    static ProgressHooks hooks;
    hooks.name = "detached requests";
    hooks.drain = [] { requests().drain_detached(); };
    register_progress(ProgressSlot::Detached, hooks);
    return new RequestTable;  // immortal: entries may be released at exit
  }();
  return *table;
}

int finish_one(TrackedOp &op, int err) {
  std::vector<OpFinishing> one{{&op, err}};
  return op.finisher()(one);
}

int complete(std::unique_ptr<Pending> p, const MPI_Status &status, int err) {
  if (!p) return MPI_SUCCESS;
  if (p->op) return finish_one(*p->op, err);
  MPI_Status copy = status;
  return finish_recv(p->in, copy, err);  // a send has nothing to do: its staging goes with p
}

}  // namespace tempi
