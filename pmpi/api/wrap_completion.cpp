// Every call that can complete a request. Each first launches this thread's queued
// MPI_Pack moves (local_work.hpp), whatever the requests: the packed output is complete for
// the call and for work after it. While TEMPI tracks no request they then forward at
// once. Otherwise the engine first posts every deferred send (engine.hpp), the tracked
// entries among the call's requests are taken out of the table, and the library gets a
// copy of the array in which each deferred send's generalized request is replaced by the
// library's own request for it. After the call, the receives it completed are
// unpacked together (one wait per GPU), completed sends release their staging and their
// generalized requests, and the rest go back to the table.
//
// A request counts as completed when the call reports it complete: every request of
// MPI_Wait and MPI_Waitall (but one whose status says MPI_ERR_PENDING), MPI_Test's and
// MPI_Testall's when the flag is set, the index of MPI_Waitany/MPI_Testany, the indices of
// MPI_Waitsome/MPI_Testsome. A request that is not persistent must also have become
// MPI_REQUEST_NULL. A persistent request (persistent.hpp) must have been active (an
// inactive one completes at once with an empty status and has nothing to finish): its
// handle stays in the application's array, inactive, and its entry goes back to the table.
// Operations of higher wings (TrackedOp: nonblocking collectives) that complete together
// are finished together, by kind. Requests that TEMPI completes itself (zero-copy ones) are
// progressed through the progress room (base/progress.hpp), which names no mechanism.
#include <sched.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "base/errors.hpp"
#include "base/forward.hpp"
#include "phases.hpp"
#include "base/progress.hpp"
#include "base/runtime.hpp"
#include "base/validate.hpp"
#include "p2p/engine.hpp"
#include "p2p/persistent.hpp"
#include "p2p/requests.hpp"

namespace tempi {

namespace {

// Requests that TEMPI completes itself (zero-copy ones) are generalized requests, absent
// from the table: they complete only through the progress room's poll, which these calls run.
bool self_completed_pending() { return any_in_flight() || failures_pending(); }
bool tracking() { return active() && (!requests().empty() || self_completed_pending()); }

// Whether TEMPI takes part in a completion call: it tracks requests, and the call's
// arrays and outputs are there (else the MPI library reports the bad argument, touching
// no request).
bool tracking(int count, const MPI_Request *requests_, std::initializer_list<const void *> outputs = {}) {
  return tracking() && completion_args_present(count, requests_, outputs);
}

// MPI's empty status, for a request that carried no message: a deferred send whose message
// could not be posted has no status of the library's (MPI_ERROR is the caller's to set).
void set_empty(MPI_Status &st) {
  st.MPI_SOURCE = MPI_ANY_SOURCE;
  st.MPI_TAG = MPI_ANY_TAG;
  PMPI_Status_set_elements_x(&st, MPI_BYTE, 0);
  PMPI_Status_set_cancelled(&st, 0);
}

// The communicator whose error handler hears of a tracked request's error. A send posted
// at once keeps only its staging: MPI_COMM_WORLD, as for errors that name no communicator.
MPI_Comm comm_of(const Pending &p) {
  if (p.send) return p.send->comm;
  if (p.op) return p.op->error_comm();
  if (p.persistent) return p.persistent->comm;
  return p.in.comm != MPI_COMM_NULL ? p.in.comm : MPI_COMM_WORLD;
}

class Completion {
 public:
  // `call` names the application's call in an error.
  Completion(const char *call, int n, MPI_Request *reqs) : n_(n), user_(reqs) {
    flush_sends();
    poll_all();  // before the detached requests, which may be such starts
    if (self_completed_pending()) {  // a request TEMPI completes itself among these may fail
      clear_failed();
      original_.assign(reqs, reqs + n);
    }
    requests().progress_detached();
    if (requests().empty()) return;
    for (int i = 0; i < n; ++i)
      if (std::unique_ptr<Pending> p = requests().take(reqs[i])) entries_.push_back({i, reqs[i], std::move(p)});
    if (entries_.empty()) return;
    if (refuse_repeated(call, reqs)) return;
    actual_.assign(reqs, reqs + n);
    for (Entry &e : entries_) {
      // A persistent collective's handle is TEMPI's own: the library waits for the request
      // of its current start instead (none while inactive: it completes at once, empty).
      if (const PersistentOp *op = e.pending->persistent.get(); op && op->collective())
        actual_[size_t(e.index)] = op->active ? op->library : MPI_REQUEST_NULL;
      if (!e.pending->send) continue;
      int err = MPI_SUCCESS;
      forward_cancel(*e.pending->send);
      actual_[size_t(e.index)] = posted_request(*e.pending->send, err);
      if (err != MPI_SUCCESS && failed_ < 0) failed_ = e.index;
    }
  }
  Completion(const Completion &) = delete;
  Completion &operator=(const Completion &) = delete;
  ~Completion() { put_back(); }  // entries not completed (an early return of the caller included)

  // The call's error when it must not go on (a tracked request twice in an array of
  // several): every request is as it was, and the caller returns this at once.
  int refused() const { return refused_; }
  bool any() const { return !entries_.empty(); }
  // The array to give the library (the application's own when TEMPI tracks none of it).
  MPI_Request *actual() { return entries_.empty() ? user_ : actual_.data(); }
  // A deferred send among the requests whose message could not be posted (-1: none):
  // the calls that complete any one request report it at once.
  int failed_send() const { return failed_; }

  // The call reported request `index` complete, with `*status` and its error `err`.
  void completed(int index, MPI_Status *status, int err) {
    if (!original_.empty())
      if (const int err_of_ours = failed(original_[size_t(index)])) self_failed_.emplace_back(status, err_of_ours);
    // entries_ is in index order, one entry at most per index (a call on 52 requests would
    // otherwise look at 52 entries 52 times).
    const auto at = std::lower_bound(entries_.begin(), entries_.end(), index,
                                     [](const Entry &e, int i) { return e.index < i; });
    if (at == entries_.end() || at->index != index || !at->pending || at->done) return;
    Entry &e = *at;
    const PersistentOp *persistent = e.pending->persistent.get();
    const bool freed = actual_[size_t(index)] == MPI_REQUEST_NULL;  // by the library: complete
    const bool done = !persistent                 ? freed
                      : persistent->collective() ? persistent->active && freed
                                                  : persistent->active && err != MPI_ERR_PENDING;
    if (!done) return;
    e.status = status;
    e.err = err;
    e.done = true;
  }

  // Ends the call: TEMPI's part of every completed request, and the handles back into
  // the application's array. Returns TEMPI's first error.
  int finish() {
    int first = MPI_SUCCESS;
    for (const auto &f : self_failed_) {
      f.first->MPI_ERROR = f.second;
      if (first == MPI_SUCCESS) first = f.second;
    }
    if (entries_.empty()) return first;
    auto is_recv = [](const Entry &e) { return e.done && !e.pending->send && !e.pending->op; };
    std::vector<Finishing> recvs;
    for (Entry &e : entries_)
      if (is_recv(e)) recvs.push_back({&e.pending->in, *e.status, e.err});
    if (!recvs.empty()) {
      const PhaseTimer unpacking(Phase::Unpack);
      if (const int err = finish_recvs(recvs); first == MPI_SUCCESS) first = err;
    }
    for (size_t k = 0, r = 0; k < entries_.size(); ++k) {
      if (!is_recv(entries_[k])) continue;
      const Finishing &f = recvs[r++];
      *entries_[k].status = f.status;  // a zero-copy message's size replaced its control message's
      if (f.result != MPI_SUCCESS) entries_[k].status->MPI_ERROR = f.result;
    }
    if (const int err = finish_ops(); first == MPI_SUCCESS) first = err;
    const PhaseTimer sends(Phase::FinishSends);
    for (Entry &e : entries_) {
      if (!e.done || !e.pending->send) continue;
      int err = MPI_SUCCESS;
      posted_request(*e.pending->send, err);
      if (e.pending->send->state == DeferredSend::State::Cancelled) PMPI_Status_set_cancelled(e.status, 1);
      if (err != MPI_SUCCESS) {  // never posted: the library wrote no status for it
        set_empty(*e.status);
        e.status->MPI_ERROR = err;
        if (first == MPI_SUCCESS) first = err;
      }
      finish_outer(e.handle);
    }
    for (int i = 0; i < n_; ++i) user_[i] = actual_[size_t(i)];
    for (Entry &e : entries_) {
      if (e.done && e.pending->persistent) {
        user_[e.index] = e.handle;  // inactive now; the entry goes back to the table
        e.pending->persistent->active = false;
        e.pending->persistent->library = MPI_REQUEST_NULL;
      } else if (e.done) {
        user_[e.index] = MPI_REQUEST_NULL;
        e.pending.reset();
      } else {
        user_[e.index] = e.handle;  // still pending: the application keeps its own handle
      }
    }
    return first;
  }

  // MPI_Request_get_status found request 0 complete: a receive's data must be in place
  // now, but the request lives until a completion call frees it.
  int finish_early(MPI_Status &status) {
    Entry &e = entries_.front();
    if (e.pending->send) return MPI_SUCCESS;
    if (e.pending->persistent && !e.pending->persistent->active) return MPI_SUCCESS;  // nothing in flight
    if (e.pending->op) return finish_one(*e.pending->op, MPI_SUCCESS);  // runs once
    return finish_recv_early(e.pending->in, status);
  }

 private:
  // The operations of higher wings that completed, finished together by kind (one
  // finisher call per kind); each one's error goes into its status. Returns the first.
  int finish_ops() {
    int first = MPI_SUCCESS;
    std::vector<TrackedOp::Finisher> kinds;
    for (const Entry &e : entries_)
      if (e.done && e.pending->op && std::find(kinds.begin(), kinds.end(), e.pending->op->finisher()) == kinds.end())
        kinds.push_back(e.pending->op->finisher());
    for (TrackedOp::Finisher finish : kinds) {
      std::vector<OpFinishing> batch;
      std::vector<Entry *> owners;
      for (Entry &e : entries_)
        if (e.done && e.pending->op && e.pending->op->finisher() == finish) {
          batch.push_back({e.pending->op.get(), e.err});
          owners.push_back(&e);
        }
      if (const int err = finish(batch); first == MPI_SUCCESS) first = err;
      for (size_t k = 0; k < batch.size(); ++k)
        if (batch[k].result != MPI_SUCCESS) owners[k]->status->MPI_ERROR = batch[k].result;
    }
    return first;
  }

  void put_back() {
    for (Entry &e : entries_)
      if (e.pending) requests().add(e.handle, std::move(e.pending));
  }

  // A tracked request twice in the array (MPI makes it erroneous): its first occurrence was
  // taken out of the table and the second was not, so the library would get the second as
  // the application's handle: a deferred send's generalized request, which TEMPI completes
  // only after the library's call (a wait hangs), or a receive's request beside itself
  // (MPICH frees it twice and aborts). Refused with MPI_ERR_REQUEST instead. The handles
  // taken are sorted and the others looked up: long arrays with few tracked requests stay cheap.
  bool refuse_repeated(const char *call, const MPI_Request *reqs) {
    if (entries_.size() == size_t(n_)) return false;  // each handle was found in the table once
    std::vector<std::pair<MPI_Request, size_t>> taken;  // a handle, its place in entries_
    for (size_t k = 0; k < entries_.size(); ++k) taken.emplace_back(entries_[k].handle, k);
    const auto by_handle = [](const std::pair<MPI_Request, size_t> &a, const std::pair<MPI_Request, size_t> &b) {
      return std::less<MPI_Request>()(a.first, b.first);
    };
    std::sort(taken.begin(), taken.end(), by_handle);
    for (int i = 0, next = 0; i < n_; ++i) {
      if (size_t(next) < entries_.size() && entries_[size_t(next)].index == i) {  // entries_ is in index order
        ++next;
        continue;
      }
      const auto it = std::lower_bound(taken.begin(), taken.end(), std::make_pair(reqs[i], size_t(0)), by_handle);
      if (it == taken.end() || it->first != reqs[i]) continue;
      const Entry &first = entries_[it->second];
      const MPI_Comm comm = comm_of(*first.pending);
      const int first_index = first.index;
      put_back();  // first: the error handler may make MPI calls on these requests
      entries_.clear();
      refused_ = raise_error(comm, MPI_ERR_REQUEST, "%s: requests %d and %d of the array are the same request", call,
                             first_index, i);
      return true;
    }
    return false;
  }

  struct Entry {
    int index;
    MPI_Request handle;  // the application's
    std::unique_ptr<Pending> pending;
    MPI_Status *status = nullptr;
    int err = MPI_SUCCESS;
    bool done = false;
  };
  int n_;
  MPI_Request *user_;
  std::vector<MPI_Request> actual_;
  std::vector<Entry> entries_;
  int failed_ = -1;
  int refused_ = MPI_SUCCESS;
  std::vector<MPI_Request> original_;  // the application's handles, where one TEMPI completes may fail
  std::vector<std::pair<MPI_Status *, int>> self_failed_;  // such requests completed with an error
};

// A blocking completion call while requests that TEMPI completes itself are in flight
// (zero-copy ones): they complete only through the progress room's poll, so the call runs
// as its test form in a loop. `test(done)` makes one test call and says whether the call may return.
template <class Test>
int until_done(Test test) {
  for (;;) {
    bool done = false;
    const int err = test(done);
    if (done || err != MPI_SUCCESS) return err;
    poll_all();
    sched_yield();
  }
}

// Statuses the multi-request calls can write, even when the user ignores them.
MPI_Status *statuses_for(MPI_Status *user, int n, std::vector<MPI_Status> &local) {
  if (user != MPI_STATUSES_IGNORE) return user;
  local.resize(size_t(n > 0 ? n : 1));
  return local.data();
}

// This request's error in a call that returned `err`.
int error_of(int err, const MPI_Status &st) { return err == MPI_ERR_IN_STATUS ? st.MPI_ERROR : err; }
// A request's error after MPI_Waitall or MPI_Testall: where the call failed as a whole (not
// MPI_ERR_IN_STATUS), the library completed nothing, so a persistent request stays active
// (MPI_ERR_PENDING); requests the library did free are still seen as complete by their handle.
int all_error_of(int err, const MPI_Status &st) {
  return err == MPI_SUCCESS || err == MPI_ERR_IN_STATUS ? error_of(err, st) : MPI_ERR_PENDING;
}

int first_error(int mpi_err, int tempi_err) { return mpi_err != MPI_SUCCESS ? mpi_err : tempi_err; }

// Finishes a call on several requests that the library answered with `err`: TEMPI's
// errors go into their requests' statuses (the others say MPI_SUCCESS) and make the
// result MPI_ERR_IN_STATUS, or TEMPI's first error where statuses are ignored.
int finish_multi(Completion &c, int err, MPI_Status *st, int n, bool statuses_ignored) {
  if (err == MPI_SUCCESS)
    for (int i = 0; i < n; ++i) st[i].MPI_ERROR = MPI_SUCCESS;
  const int ours = c.finish();
  if (err != MPI_SUCCESS || ours == MPI_SUCCESS) return err;
  return statuses_ignored ? ours : MPI_ERR_IN_STATUS;
}

// Waitsome and Testsome: a deferred send that could not be posted is reported alone, its
// error returned as finish_multi returns TEMPI's (the request's own where statuses are ignored).
int some_with_failed_send(Completion &c, int *outcount, int indices[], MPI_Status *st, bool statuses_ignored) {
  *outcount = 1;
  indices[0] = c.failed_send();
  c.completed(indices[0], &st[0], MPI_SUCCESS);
  return finish_multi(c, MPI_SUCCESS, st, 1, statuses_ignored);
}

}  // namespace

}  // namespace tempi

using namespace tempi;

extern "C" {

int TEMPI_WRAPPER(MPI_Wait)(MPI_Request *request, MPI_Status *status) {
  launch_own_moves();
  if (!tracking(1, request)) return TEMPI_NEXT(MPI_Wait)(request, status);
  const PhaseTimer timed(Phase::Completion);
  Completion c("MPI_Wait", 1, request);
  if (!c.any() && !self_completed_pending()) return TEMPI_NEXT(MPI_Wait)(request, status);
  MPI_Status local;
  MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
  const int err = [&] {
    const PhaseTimer library(Phase::LibraryWait);
    return !any_in_flight() ? TEMPI_NEXT(MPI_Wait)(c.actual(), st) : until_done([&](bool &done) {
      int flag = 0;
      const int e = TEMPI_NEXT(MPI_Test)(c.actual(), &flag, st);
      done = flag;
      return e;
    });
  }();
  c.completed(0, st, err);
  return first_error(err, c.finish());
}

int TEMPI_WRAPPER(MPI_Test)(MPI_Request *request, int *flag, MPI_Status *status) {
  launch_own_moves();
  if (!tracking(1, request, {flag})) return TEMPI_NEXT(MPI_Test)(request, flag, status);
  Completion c("MPI_Test", 1, request);
  if (!c.any() && !self_completed_pending()) return TEMPI_NEXT(MPI_Test)(request, flag, status);
  MPI_Status local;
  MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
  const int err = TEMPI_NEXT(MPI_Test)(c.actual(), flag, st);
  if (*flag || err != MPI_SUCCESS) c.completed(0, st, err);
  return first_error(err, c.finish());
}

int TEMPI_WRAPPER(MPI_Waitall)(int count, MPI_Request requests_[], MPI_Status statuses[]) {
  launch_own_moves();
  if (!tracking(count, requests_)) return TEMPI_NEXT(MPI_Waitall)(count, requests_, statuses);
  const PhaseTimer timed(Phase::Completion);
  Completion c("MPI_Waitall", count, requests_);
  if (const int err = c.refused()) return err;
  if (!c.any() && !self_completed_pending()) return TEMPI_NEXT(MPI_Waitall)(count, requests_, statuses);
  std::vector<MPI_Status> local;
  MPI_Status *st = statuses_for(statuses, count, local);
  const int err = [&] {
    const PhaseTimer library(Phase::LibraryWait);
    return !any_in_flight() ? TEMPI_NEXT(MPI_Waitall)(count, c.actual(), st) : until_done([&](bool &done) {
      int flag = 0;
      const int e = TEMPI_NEXT(MPI_Testall)(count, c.actual(), &flag, st);
      done = flag;
      return e;
    });
  }();
  for (int i = 0; i < count; ++i) c.completed(i, &st[i], all_error_of(err, st[i]));
  return finish_multi(c, err, st, count, statuses == MPI_STATUSES_IGNORE);
}

int TEMPI_WRAPPER(MPI_Testall)(int count, MPI_Request requests_[], int *flag, MPI_Status statuses[]) {
  launch_own_moves();
  if (!tracking(count, requests_, {flag})) return TEMPI_NEXT(MPI_Testall)(count, requests_, flag, statuses);
  Completion c("MPI_Testall", count, requests_);
  if (const int err = c.refused()) return err;
  if (!c.any() && !self_completed_pending()) return TEMPI_NEXT(MPI_Testall)(count, requests_, flag, statuses);
  std::vector<MPI_Status> local;
  MPI_Status *st = statuses_for(statuses, count, local);
  const int err = TEMPI_NEXT(MPI_Testall)(count, c.actual(), flag, st);
  if (*flag || err != MPI_SUCCESS)
    for (int i = 0; i < count; ++i) c.completed(i, &st[i], all_error_of(err, st[i]));
  return finish_multi(c, err, st, count, statuses == MPI_STATUSES_IGNORE);
}

int TEMPI_WRAPPER(MPI_Waitany)(int count, MPI_Request requests_[], int *index, MPI_Status *status) {
  launch_own_moves();
  if (!tracking(count, requests_, {index})) return TEMPI_NEXT(MPI_Waitany)(count, requests_, index, status);
  Completion c("MPI_Waitany", count, requests_);
  if (const int err = c.refused()) return err;
  if (!c.any() && !self_completed_pending()) return TEMPI_NEXT(MPI_Waitany)(count, requests_, index, status);
  MPI_Status local;
  MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
  int err = MPI_SUCCESS;
  if (c.failed_send() >= 0) {
    *index = c.failed_send();
  } else {
    err = !any_in_flight() ? TEMPI_NEXT(MPI_Waitany)(count, c.actual(), index, st) : until_done([&](bool &done) {
      int flag = 0;
      const int e = TEMPI_NEXT(MPI_Testany)(count, c.actual(), index, &flag, st);
      done = flag;
      return e;
    });
  }
  if (*index != MPI_UNDEFINED) c.completed(*index, st, err);
  return first_error(err, c.finish());
}

int TEMPI_WRAPPER(MPI_Testany)(int count, MPI_Request requests_[], int *index, int *flag, MPI_Status *status) {
  launch_own_moves();
  if (!tracking(count, requests_, {index, flag}))
    return TEMPI_NEXT(MPI_Testany)(count, requests_, index, flag, status);
  Completion c("MPI_Testany", count, requests_);
  if (const int err = c.refused()) return err;
  if (!c.any() && !self_completed_pending()) return TEMPI_NEXT(MPI_Testany)(count, requests_, index, flag, status);
  MPI_Status local;
  MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
  int err = MPI_SUCCESS;
  if (c.failed_send() >= 0) {
    *index = c.failed_send();
    *flag = 1;
  } else {
    err = TEMPI_NEXT(MPI_Testany)(count, c.actual(), index, flag, st);
  }
  if (*flag && *index != MPI_UNDEFINED) c.completed(*index, st, err);
  return first_error(err, c.finish());
}

int TEMPI_WRAPPER(MPI_Waitsome)(int incount, MPI_Request requests_[], int *outcount, int indices[],
                                MPI_Status statuses[]) {
  launch_own_moves();
  if (!tracking(incount, requests_, {outcount, indices}))
    return TEMPI_NEXT(MPI_Waitsome)(incount, requests_, outcount, indices, statuses);
  Completion c("MPI_Waitsome", incount, requests_);
  if (const int err = c.refused()) return err;
  if (!c.any() && !self_completed_pending()) return TEMPI_NEXT(MPI_Waitsome)(incount, requests_, outcount, indices, statuses);
  std::vector<MPI_Status> local;
  MPI_Status *st = statuses_for(statuses, incount, local);
  if (c.failed_send() >= 0) return some_with_failed_send(c, outcount, indices, st, statuses == MPI_STATUSES_IGNORE);
  const int err = !any_in_flight() ? TEMPI_NEXT(MPI_Waitsome)(incount, c.actual(), outcount, indices, st)
                                          : until_done([&](bool &done) {
                                              const int e = TEMPI_NEXT(MPI_Testsome)(incount, c.actual(), outcount, indices, st);
                                              done = *outcount != 0;
                                              return e;
                                            });
  if (*outcount != MPI_UNDEFINED)
    for (int k = 0; k < *outcount; ++k) c.completed(indices[k], &st[k], error_of(err, st[k]));
  return finish_multi(c, err, st, *outcount == MPI_UNDEFINED ? 0 : *outcount, statuses == MPI_STATUSES_IGNORE);
}

int TEMPI_WRAPPER(MPI_Testsome)(int incount, MPI_Request requests_[], int *outcount, int indices[],
                                MPI_Status statuses[]) {
  launch_own_moves();
  if (!tracking(incount, requests_, {outcount, indices}))
    return TEMPI_NEXT(MPI_Testsome)(incount, requests_, outcount, indices, statuses);
  Completion c("MPI_Testsome", incount, requests_);
  if (const int err = c.refused()) return err;
  if (!c.any() && !self_completed_pending()) return TEMPI_NEXT(MPI_Testsome)(incount, requests_, outcount, indices, statuses);
  std::vector<MPI_Status> local;
  MPI_Status *st = statuses_for(statuses, incount, local);
  if (c.failed_send() >= 0) return some_with_failed_send(c, outcount, indices, st, statuses == MPI_STATUSES_IGNORE);
  const int err = TEMPI_NEXT(MPI_Testsome)(incount, c.actual(), outcount, indices, st);
  if (*outcount != MPI_UNDEFINED)
    for (int k = 0; k < *outcount; ++k) c.completed(indices[k], &st[k], error_of(err, st[k]));
  return finish_multi(c, err, st, *outcount == MPI_UNDEFINED ? 0 : *outcount, statuses == MPI_STATUSES_IGNORE);
}

int TEMPI_WRAPPER(MPI_Request_get_status)(MPI_Request request, int *flag, MPI_Status *status) {
  launch_own_moves();
  if (!tracking(1, &request, {flag})) return TEMPI_NEXT(MPI_Request_get_status)(request, flag, status);
  Completion c("MPI_Request_get_status", 1, &request);  // the handle is a copy: the request stays live and goes back
  if (!c.any() && !self_completed_pending()) return TEMPI_NEXT(MPI_Request_get_status)(request, flag, status);
  MPI_Status local;
  MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
  if (c.failed_send() >= 0) {
    *flag = 1;
    set_empty(*st);
    st->MPI_ERROR = MPI_SUCCESS;  // the error comes with the completion call that frees it
    return MPI_SUCCESS;
  }
  const int err = TEMPI_NEXT(MPI_Request_get_status)(c.actual()[0], flag, st);
  return first_error(err, err == MPI_SUCCESS && *flag ? c.finish_early(*st) : MPI_SUCCESS);
}

int TEMPI_WRAPPER(MPI_Request_free)(MPI_Request *request) {
  launch_own_moves();
  if (!tracking(1, request)) return TEMPI_NEXT(MPI_Request_free)(request);
  std::unique_ptr<Pending> p = requests().take(*request);
  if (!p) return TEMPI_NEXT(MPI_Request_free)(request);
  if (p->persistent && p->persistent->collective()) {
    // A persistent collective: TEMPI's handle goes now; a start in flight is finished
    // later as a nonblocking collective (its library request, detached).
    if (p->persistent->active) {
      const MPI_Request library = p->persistent->library;
      p->in_flight_arrays = p->persistent->arrays;  // the library's call may still read them
      p->persistent.reset();
      requests().detach(library, std::move(p));
    }
    return persistent_free_handle(request);
  }
  // An inactive persistent request has nothing in flight: it goes with its entry.
  if (p->persistent && !p->persistent->active) return TEMPI_NEXT(MPI_Request_free)(request);
  // TEMPI keeps the request to finish the operation later (see RequestTable::detach).
  requests().detach(*request, std::move(p));
  *request = MPI_REQUEST_NULL;
  return MPI_SUCCESS;
}

// MPI_Cancel needs no wrapper: a receive's request is the MPI library's own, and the
// completion that follows a cancel skips the unpack (finish_recv checks
// MPI_Test_cancelled); a deferred send's generalized request marks the send (DeferredSend::
// cancel: one not posted yet never is, a posted one is the library's to cancel at the next
// completion call).

}  // extern "C"
