#include "p2p/engine.hpp"

#include <algorithm>

#include "base/errors.hpp"
#include "backend.hpp"
#include "base/next.hpp"
#include "phases.hpp"
#include "log.hpp"
#include "p2p/requests.hpp"

namespace tempi {

namespace {

// Packs at least this large are issued at once instead of waiting for a batch: their
// launch costs little beside the pack, and issuing early overlaps it with the caller.
constexpr int64_t kIssueAtOnceBytes = 256 * 1024;

// The generalized request's callbacks. TEMPI completes the request itself in every
// completion call and writes the status of the library's send, so the status these
// give is only seen by a path that bypasses TEMPI.
int query_send(void *, MPI_Status *status) {
  PMPI_Status_set_elements(status, MPI_BYTE, 0);
  PMPI_Status_set_cancelled(status, 0);
  status->MPI_SOURCE = MPI_UNDEFINED;
  status->MPI_TAG = MPI_UNDEFINED;
  return MPI_SUCCESS;
}
int free_send(void *) { return MPI_SUCCESS; }
// MPI_Cancel of the generalized request (`extra` is the DeferredSend, alive while the
// request is tracked): see DeferredSend::cancel.
int cancel_send(void *extra, int complete) {
  if (!complete) static_cast<DeferredSend *>(extra)->cancel.store(true, std::memory_order_release);
  return MPI_SUCCESS;
}

bool same_comm(MPI_Comm a, MPI_Comm b) {
  if (a == b) return true;
  int result = MPI_UNEQUAL;
  return PMPI_Comm_compare(a, b, &result) == MPI_SUCCESS && result == MPI_IDENT;
}

void post(DeferredSend &s) {
  if (s.cancel.load(std::memory_order_acquire)) {
    s.state = DeferredSend::State::Cancelled;
    s.packed = Fence{};
    return;
  }
  const PhaseTimer timed(Phase::Post);
  const int err = s.post(s.out.buf, s.out.count, s.out.type, s.dest, s.tag, s.comm, &s.inner);
  if (err == MPI_SUCCESS) {
    s.state = DeferredSend::State::Posted;
  } else {
    s.state = DeferredSend::State::Failed;
    s.error = err;
    s.inner = MPI_REQUEST_NULL;
  }
  s.packed = Fence{};  // device temporaries go back to their pools
}

// Whether this thread is inside the engine's work on its queue: posting a send (the
// library may run the communicator's error handler) or raising an error. An MPI call made
// from there comes back to the engine on this thread; it may queue a send, but it neither
// issues nor posts (the outer call is in the middle of both, and posting from inside
// would reorder sends or post one twice): the outer call posts it before it returns.
thread_local int t_engine_depth = 0;
struct Reentry {
  Reentry() { ++t_engine_depth; }
  ~Reentry() { --t_engine_depth; }
  Reentry(const Reentry &) = delete;
  Reentry &operator=(const Reentry &) = delete;
};
bool reentered() { return t_engine_depth > 0; }

}  // namespace

void Engine::add(std::shared_ptr<DeferredSend> s) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  const bool large = s->plan.packed_size() >= kIssueAtOnceBytes;
  queued_.push_back(std::move(s));
  unposted_.fetch_add(1, std::memory_order_release);
  if (large && !reentered()) issue_locked();
}

// Issues every queued pack: one backend call per GPU, so that they launch together.
void Engine::issue_locked() {
  if (queued_.empty()) return;
  const PhaseTimer timed(Phase::PackLaunch);
  const Reentry inside;
  // The packs run on this thread's stream, which does not follow another thread's deferred
  // MPI_Pack or MPI_Unpack (TEMPI_DEFER_PACK) that may have written a send buffer.
  settle_other_threads();
  Backend &b = gpu_backend();
  std::vector<std::shared_ptr<DeferredSend>> batch;
  batch.swap(queued_);
  std::vector<bool> issued(batch.size(), false);
  for (size_t first = 0; first < batch.size(); ++first) {
    if (issued[first]) continue;
    const int device = batch[first]->device;
    std::vector<MoveJob> jobs;
    std::vector<DeferredSend *> owners;
    for (size_t i = first; i < batch.size(); ++i) {
      DeferredSend &s = *batch[i];
      if (issued[i] || s.device != device) continue;
      issued[i] = true;
      jobs.push_back({&s.plan, const_cast<void *>(s.typed), s.out.staging.ptr, s.plan.packed_size(), s.transfer});
      owners.push_back(&s);
    }
    Fence done;
    const Status st = [&] {
      const OnDevice on(device);
      return b.pack_async(jobs, done);
    }();
    for (DeferredSend *s : owners) {
      if (st == Status::Ok) {
        s->state = DeferredSend::State::Packing;
        s->packed = done;
      } else {
        s->state = DeferredSend::State::Failed;
        s->error = raise_error(s->comm, error_class_of(st), "%s: packing GPU data (%s method) failed: %s", s->call,
                               to_string(s->transfer.method), to_string(st));
      }
    }
  }
  for (auto &s : batch) packing_.push_back(std::move(s));
}

// Posts, in start order, every send whose pack finished; `wait` waits for the packs.
// A send whose pack is not done stops the posting of later ones, so that messages
// reach the library in the order the application started them.
void Engine::post_ready_locked(bool wait) {
  const Reentry inside;
  Backend &b = gpu_backend();
  const void *finished = nullptr;  // the last fence found complete: sends of one batch share it
  size_t done = 0;
  for (; done < packing_.size(); ++done) {
    DeferredSend &s = *packing_[done];
    if (s.state == DeferredSend::State::Packing && s.packed.state.get() == finished) {
      post(s);
      continue;
    }
    if (s.state == DeferredSend::State::Packing) {
      bool ready = false;
      Status st = Status::Ok;
      {
        const OnDevice on(s.device);
        st = b.poll(s.packed, ready);  // a failed pack is ready too, with its error
        if (!ready && wait) {
          const PhaseTimer waiting(Phase::PackWait);
          st = b.wait(s.packed);
          ready = true;
        }
        if (st != Status::Ok) {
          s.state = DeferredSend::State::Failed;
          s.error = raise_error(s.comm, error_class_of(st), "%s: packing GPU data (%s method) failed: %s", s.call,
                                to_string(s.transfer.method), to_string(st));
        }
      }
      if (!ready) break;
      if (st == Status::Ok) finished = s.packed.state.get();  // a failed fence fails each of its sends
      if (s.state == DeferredSend::State::Packing) post(s);
    }
  }
  packing_.erase(packing_.begin(), packing_.begin() + std::ptrdiff_t(done));
  unposted_.store(queued_.size() + packing_.size(), std::memory_order_release);
}

void Engine::poll() {
  launch_own_moves();
  if (!busy() || reentered()) return;
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  post_ready_locked(false);
}

void Engine::flush() {
  if (reentered()) return;
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  issue_locked();
  post_ready_locked(true);
}

void Engine::before_send(MPI_Comm comm, int dest) { flush_before_send(comm, dest); }

void Engine::before_queued_send(MPI_Comm comm, int dest) {
  if (!busy() || reentered()) return;
  bool earlier = false;
  {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    for (const auto *list : {&queued_, &packing_})
      for (const auto &s : *list) earlier = earlier || (s->dest == dest && same_comm(s->comm, comm));
  }
  if (earlier) flush();
}

namespace {

bool engine_busy() { return engine().busy(); }

// Every queued send (comm MPI_COMM_NULL), or those that must precede a send to (comm, dest).
void engine_flush(MPI_Comm comm, int dest) {
  if (comm == MPI_COMM_NULL)
    engine().flush();
  else
    engine().before_queued_send(comm, dest);
}

Engine *make_engine() {
  static const ProgressHooks hooks = [] {
    ProgressHooks h;
    h.name = "engine";
    h.queued = engine_busy;
    h.flush = engine_flush;
    return h;
  }();
  auto *e = new Engine;  // immortal: requests may be finished during exit
  register_progress(ProgressSlot::Engine, hooks);
  return e;
}

}  // namespace

Engine &engine() {
  static Engine *e = make_engine();
  return *e;
}

int start_deferred_send(IsendFn post_fn, const char *call, const void *buf, SendPlan &sp, Outgoing &out, int dest,
                        int tag, MPI_Comm comm, MPI_Request *request) {
  flush_before_send(comm, dest, ProgressSlot::Engine);  // earlier sends of other mechanisms to dest go first
  const PhaseTimer timed(Phase::Request);
  auto s = std::make_shared<DeferredSend>();
  MPI_Request outer = MPI_REQUEST_NULL;
  if (const int err = PMPI_Grequest_start(query_send, free_send, cancel_send, s.get(), &outer))
    return raise_error(comm, err, "%s: cannot create the request for a GPU send", call);
  s->post = post_fn;
  s->call = call;
  s->dest = dest;
  s->tag = tag;
  s->comm = comm;
  s->out = std::move(out);
  s->info = std::move(sp.info);
  s->plan = std::move(sp.plan);
  s->transfer = sp.transfer;
  s->typed = buf;
  s->device = gpu_backend().device_of(buf);
  auto p = std::make_unique<Pending>();
  p->send = s;
  requests().add(outer, std::move(p));
  engine().add(std::move(s));
  *request = outer;
  return MPI_SUCCESS;
}

void forward_cancel(DeferredSend &s) {
  if (s.state != DeferredSend::State::Posted || s.cancel_forwarded || !s.cancel.load(std::memory_order_acquire))
    return;
  s.cancel_forwarded = true;
  PMPI_Cancel(&s.inner);
}

MPI_Request posted_request(const DeferredSend &s, int &error) {
  error = s.state == DeferredSend::State::Failed ? s.error : MPI_SUCCESS;
  return s.state == DeferredSend::State::Posted ? s.inner : MPI_REQUEST_NULL;
}

void finish_outer(MPI_Request &outer) {
  if (outer == MPI_REQUEST_NULL) return;
  PMPI_Grequest_complete(outer);
  next::MPI_Request_free(&outer);  // no progress call, unlike a wait
  outer = MPI_REQUEST_NULL;
}

}  // namespace tempi
