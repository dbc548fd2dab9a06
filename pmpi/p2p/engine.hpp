// The progress engine for many messages in flight (docs/design.md, "Many messages in
// flight (the engine)"). A nonblocking send of GPU data does not wait for the GPU: it queues its pack
// and returns a generalized request. Queued packs are issued together (one batch, small
// strided objects in one fused launch) at the next call that needs them, and each
// message is posted to the MPI library, in the order the application started them, as
// soon as its packed bytes are ready. Receives that complete together are unpacked
// together, with one synchronization.
//
// When the engine must run:
//   poll()   launches this thread's queued MPI_Pack moves (local_work.hpp) and posts the
//            sends whose packs finished; never waits (MPI_Isend, MPI_Irecv, nonblocking
//            collectives, MPI_Start).
//   flush()  issues every queued pack, waits for them and posts every message. Every
//            call that may block on another process runs it first, through progress.hpp's
//            flush_sends (completion calls, blocking point-to-point, probes, collectives,
//            communicator creation and release, MPI_Buffer_detach, MPI_Finalize), so that a
//            started send always reaches the library before this process waits for anyone.
// The engine registers itself there (ProgressSlot::Engine) when it is first used.
#pragma once

#include <mpi.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "backend.hpp"
#include "base/progress.hpp"
#include "p2p/local_work.hpp"
#include "p2p/messages.hpp"

namespace tempi {

using IsendFn = int (*)(const void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);

// A nonblocking send of GPU data, from the application's call until its message is posted.
struct DeferredSend {
  enum class State { Queued, Packing, Posted, Failed, Cancelled };
  State state = State::Queued;
  IsendFn post = nullptr;  // the next layer's MPI_Isend, MPI_Issend, MPI_Ibsend or MPI_Irsend
  const char *call = "";
  int dest = 0, tag = 0;
  MPI_Comm comm = MPI_COMM_NULL;
  Outgoing out;  // staging and the wire arguments
  std::shared_ptr<const TypeInfo> info;
  Plan plan;
  Transfer transfer{Method::OneShot, 0};
  const void *typed = nullptr;
  int device = -1;
  Fence packed;                        // the end of the pack, once issued
  MPI_Request inner = MPI_REQUEST_NULL;  // the library's request, once posted
  int error = MPI_SUCCESS;               // why posting failed (state Failed)
  // MPI_Cancel of the application's request (set by the generalized request's callback, where
  // the library's locks are held: no MPI call and no engine lock there). Not posted yet: it
  // never is (state Cancelled). Posted: the next completion call cancels the library's request.
  std::atomic<bool> cancel{false};
  bool cancel_forwarded = false;
};

class Engine {
 public:
  // True when some send is queued or packing (a relaxed check for the fast path).
  bool busy() const { return unposted_.load(std::memory_order_acquire) != 0; }

  // Takes a send whose pack is not issued yet. Large packs are issued at once (their
  // launch costs little beside the pack); small ones wait to be issued as a batch.
  void add(std::shared_ptr<DeferredSend> s);
  void poll();
  void flush();
  // MPI's non-overtaking rule: a send to (comm, dest) that goes to the library now is
  // posted after every earlier one, whichever mechanism queued it (progress.hpp).
  void before_send(MPI_Comm comm, int dest);
  // The same for a send that another mechanism queues (a zero-copy control message joins the
  // queue of those waiting to be posted, zero_copy/p2p_send.cpp): only the engine's earlier sends
  // to (comm, dest) are posted now, since that queue posts its own in order.
  void before_queued_send(MPI_Comm comm, int dest);

 private:
  void issue_locked();
  void post_ready_locked(bool wait);

  // Recursive, and held while the library is called (posting keeps the application's send
  // order) and while errors are raised: an error handler, or a tool below TEMPI, may make
  // an MPI call that comes back here on the same thread (see Reentry in engine.cpp).
  std::recursive_mutex mutex_;
  std::vector<std::shared_ptr<DeferredSend>> queued_;   // packs not issued, in start order
  std::vector<std::shared_ptr<DeferredSend>> packing_;  // issued, not posted, in start order
  std::atomic<size_t> unposted_{0};
};

Engine &engine();

// Starts a nonblocking send that TEMPI packs (plan_send gave SendPlan::Kind::Pack)
// through the engine, and hands the application a generalized request that stands for
// it. Returns an MPI error code; on success *request is set.
int start_deferred_send(IsendFn post, const char *call, const void *buf, SendPlan &sp, Outgoing &out, int dest,
                        int tag, MPI_Comm comm, MPI_Request *request);

// The library's request behind an application's request to a deferred send, after the
// engine posted it; MPI_REQUEST_NULL when posting failed (`error` says why).
MPI_Request posted_request(const DeferredSend &s, int &error);
// A completion call's part of MPI_Cancel of a posted deferred send: the library's request
// is cancelled once (out of the generalized request's callback, which may make no MPI call).
void forward_cancel(DeferredSend &s);

// The application's generalized request is finished: complete and free it.
void finish_outer(MPI_Request &outer);

}  // namespace tempi
