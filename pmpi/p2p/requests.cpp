#include "p2p/requests.hpp"

#include "base/forward.hpp"
#include "base/progress.hpp"
#include "p2p/engine.hpp"

namespace tempi {

void RequestTable::add(MPI_Request req, std::unique_ptr<Pending> p) {
  std::lock_guard<std::mutex> lock(mutex_);
  live_[req] = std::move(p);
  size_.store(live_.size() + detached_.size(), std::memory_order_release);
}

std::unique_ptr<Pending> RequestTable::take(MPI_Request req) {
  if (req == MPI_REQUEST_NULL || empty()) return nullptr;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(req);
  if (it == live_.end()) return nullptr;
  std::unique_ptr<Pending> p = std::move(it->second);
  live_.erase(it);
  size_.store(live_.size() + detached_.size(), std::memory_order_release);
  return p;
}

void RequestTable::detach(MPI_Request req, std::unique_ptr<Pending> p) {
  std::lock_guard<std::mutex> lock(mutex_);
  detached_.emplace_back(req, std::move(p));
  size_.store(live_.size() + detached_.size(), std::memory_order_release);
}

bool RequestTable::any_receive(const std::function<bool(const Incoming &)> &pred) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto &[req, p] : live_)
    if (p->in.comm != MPI_COMM_NULL && pred(p->in)) return true;
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
      if (inner != MPI_REQUEST_NULL) err = TEMPI_NEXT(MPI_Test)(&inner, &flag, &st);
      p->send->inner = inner;
      if (flag || err != MPI_SUCCESS) finish_outer(req);
    } else {
      err = TEMPI_NEXT(MPI_Test)(&req, &flag, &st);
    }
    if (flag || err != MPI_SUCCESS) {
      if (p->persistent) TEMPI_NEXT(MPI_Request_free)(&req);  // freed while active: now inactive, it goes
      complete(std::move(p), st, err);  // nobody is left to report an error to
    } else {
      still.emplace_back(req, std::move(p));
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto &e : still) detached_.push_back(std::move(e));
  size_.store(live_.size() + detached_.size(), std::memory_order_release);
}

void RequestTable::drain_detached() {
  std::vector<std::pair<MPI_Request, std::unique_ptr<Pending>>> mine;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    mine.swap(detached_);
    size_.store(live_.size(), std::memory_order_release);
  }
  flush_sends();
  for (auto &[req, p] : mine) {
    MPI_Status st;
    int err = MPI_SUCCESS;
    if (p->send) {
      MPI_Request inner = posted_request(*p->send, err);
      if (inner != MPI_REQUEST_NULL) err = TEMPI_NEXT(MPI_Wait)(&inner, &st);
      finish_outer(req);
    } else {
      err = TEMPI_NEXT(MPI_Wait)(&req, &st);
      if (p->persistent) TEMPI_NEXT(MPI_Request_free)(&req);
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
