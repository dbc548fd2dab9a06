// The side table of requests that TEMPI handed to the application for GPU-buffer
// operations. The requests are the MPI library's own; the table says what must
// happen when each completes (unpack a receive, give back a send's staging, finish an
// operation of a higher wing through its TrackedOp), and every completion call consults it
// (api/wrap_completion.cpp), so no path skips it. Requests the application freed while
// active are finished by the progress room (progress.hpp, ProgressSlot::Detached).
#pragma once

#include <mpi.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "p2p/messages.hpp"

namespace tempi {

struct DeferredSend;   // engine.hpp
struct PersistentOp;   // persistent.hpp

class TrackedOp;
// One operation of a batch that completed together, and its own result.
struct OpFinishing {
  TrackedOp *op;
  int err;  // the library's error for its request
  int result = MPI_SUCCESS;
};

// Work that a request's completion finishes beyond a receive's unpack: a nonblocking
// collective's receive side (coll/), and any later kind. Operations that one completion
// call completed are finished together by their kind's finisher (unpacks issued together,
// one wait per GPU); each runs once.
class TrackedOp {
 public:
  virtual ~TrackedOp() = default;
  // The communicator whose error handler hears of the operation's errors.
  virtual MPI_Comm error_comm() const = 0;
  // Finishes a batch of operations of this one's kind; returns the first error.
  using Finisher = int (*)(std::vector<OpFinishing> &batch);
  virtual Finisher finisher() const = 0;
};
// Finishes one operation (a batch of one).
int finish_one(TrackedOp &op, int err);

// What a tracked request's completion must do. The application's handle is the
// library's own request for receives and for sends posted at once; for a send that the
// engine defers it is a generalized request standing for `send`.
struct Pending {
  Outgoing out;                        // a send: its packed bytes live until it completes
  Incoming in;                         // a receive: unpacked when it completes
  std::shared_ptr<DeferredSend> send;  // a deferred send
  std::shared_ptr<TrackedOp> op;       // an operation of a higher wing (a nonblocking collective)
  // A persistent request (MPI_Send_init, MPI_Recv_init, ...): the handle is the library's
  // own persistent request, and the entry stays in the table across completions until
  // MPI_Request_free (`in` is the receive's unpack, `out` the send's staging).
  std::shared_ptr<PersistentOp> persistent;
  // What a library call in flight still reads: the arrays of a persistent collective freed
  // while active (its start runs on as a detached nonblocking collective).
  std::shared_ptr<const void> in_flight_arrays;
};

class RequestTable {
 public:
  // True when nothing is tracked: completion calls then forward without looking.
  bool empty() const { return size_.load(std::memory_order_acquire) == 0; }

  void add(MPI_Request req, std::unique_ptr<Pending> p);
  // Removes and returns the entry of a live request (null when untracked). A caller
  // that finds the request still incomplete puts it back: the handle stays live
  // meanwhile, so the MPI library cannot hand it to another operation.
  std::unique_ptr<Pending> take(MPI_Request req);

  // MPI_Request_free of a tracked request: TEMPI keeps the request and completes it
  // at a later completion call (or at MPI_Finalize).
  void detach(MPI_Request req, std::unique_ptr<Pending> p);
  void progress_detached();
  void drain_detached();  // waits for every detached request (MPI_Finalize)
  // Whether a tracked receive, live or detached, satisfies `pred`.
  bool any_receive(const std::function<bool(const Incoming &)> &pred);

 private:
  std::mutex mutex_;
  std::unordered_map<MPI_Request, std::unique_ptr<Pending>> live_;  // empty slots too (requests.cpp)
  size_t live_count_ = 0;                                           // the slots that hold an entry
  std::vector<std::pair<MPI_Request, std::unique_ptr<Pending>>> detached_;
  std::atomic<size_t> size_{0};  // live entries plus detached_
};

RequestTable &requests();

// TEMPI's part of completing a request that the MPI library completed with `status`
// and error `err` (this request's own error). Returns the error to report. The
// application's generalized request of a deferred send is finished by the caller.
int complete(std::unique_ptr<Pending> p, const MPI_Status &status, int err);

}  // namespace tempi
