// Zero-copy sends (zero_copy_p2p.hpp, p2p_isend): an entry of this rank's board filled, the
// application's generalized request made, and the control message queued until the next
// call that posts sends (p2p_post_queued, in the order the application made them).
#include <algorithm>
#include <atomic>
#include <list>
#include <memory>
#include <mutex>

#include "base/errors.hpp"
#include "backend.hpp"
#include "config.hpp"
#include "log.hpp"
#include "zero_copy/p2p_flight.hpp"

namespace tempi {
namespace zcp2p {

// A free entry of this rank's board, taken, or -1.
int take_entry(NodeShare &s) {
  static std::atomic<uint32_t> cursor{0};
  P2pEntry *board = board_of(s, my_node_rank(s));
  const uint32_t from = cursor.load(std::memory_order_relaxed);
  for (int k = 0; k < kP2pEntries; ++k) {
    const int i = int((from + uint32_t(k)) % kP2pEntries);
    uint32_t free_state = 0;
    if (board[i].state.compare_exchange_strong(free_state, kFilling, std::memory_order_acq_rel)) {
      cursor.store(uint32_t(i + 1), std::memory_order_relaxed);
      return i;
    }
  }
  return -1;
}

void give_entry(P2pEntry &e) {
  e.serial = 0;
  e.state.store(0, std::memory_order_release);
}

}  // namespace zcp2p

using namespace zcp2p;

namespace {

std::mutex g_queue_mutex;  // g_queue: zero-copy sends whose control messages are not posted yet
std::list<std::shared_ptr<Flight>> g_queue;
// The sends in g_queue and those a thread took from it and is posting: a thread that finds
// none can post a send of its own with no earlier send of its to the same rank behind it.
std::atomic<size_t> g_unposted{0};
// Held from taking sends out of g_queue until they are posted, so that two threads posting
// never reorder one thread's sends (MPI's non-overtaking rule), whichever thread takes them.
// Recursive: an error handler that raise_error runs meanwhile may make MPI calls that post.
std::recursive_mutex g_post_mutex;

}  // namespace

bool p2p_isend(IsendFn post, const char *call, const void *buf, int count, const SendPlan &sp, int dest, int tag,
               MPI_Comm comm, MPI_Request *request, int &err) {
  err = MPI_SUCCESS;
  if (sp.kind != SendPlan::Kind::Pack || !sp.info || !sp.info->plan) return false;
  std::shared_ptr<NodeShare> share = p2p_share(comm);
  if (!share) return false;
  const int to = node_rank_of(*share, dest);  // this rank itself: a local move, through the same protocol
  if (to < 0) return false;
  const int64_t bytes = sp.plan.packed_size();
  if (bytes < config().p2p_zero_copy_min) return false;
  Backend &b = gpu_backend();
  const OnDeviceOf on_its_gpu(buf);
  if (!reads_gpu(*share, to, gpu_identity(b.device_of(buf)))) return false;
  IpcHandle handle;
  if (b.ipc_export(buf, handle) != Status::Ok) return false;
  const int64_t plan_at = publish_plan(*share, sp.plan, sp.info->plan->id, count);
  if (plan_at < 0) return false;
  const uint64_t serial = ++g_serial;
  const int at = take_entry(*share);
  if (at < 0) {
    static std::atomic<bool> said{false};
    if (!said.exchange(true))
      TEMPI_LOG(Debug, "%s: %d zero-copy sends in flight on a communicator; more take the pack path", call, kP2pEntries);
    return false;
  }
  // MPI's order: this message reaches the library after every earlier send to `dest` (the
  // queued control messages to it go first when the queue is posted, in their order).
  engine().before_queued_send(comm, dest);
  P2pEntry &e = board_of(*share, my_node_rank(*share))[at];
  e.dest = to;
  e.tag = tag;
  e.bytes = bytes;
  e.plan_at = plan_at;
  e.offset = handle.offset;
  e.handle = handle;
  e.serial = serial;

  auto f = std::make_shared<Flight>();
  f->is_send = true;
  f->comm = comm;
  f->share = share;
  f->entry = at;
  f->post = post;
  f->dest = dest;
  f->tag = tag;
  f->device = b.device_of(buf);
  f->control.nonce = nonce_of(*share, my_node_rank(*share));
  f->control.serial = serial;
  f->control.bytes = bytes;
  f->control.entry = uint32_t(at);
  f->control.sender = my_node_rank(*share);
  PMPI_Status_set_cancelled(&f->status, 0);
  PMPI_Status_set_elements_x(&f->status, MPI_BYTE, 0);
  if ((err = start_outer(f, request)) != MPI_SUCCESS) {
    give_entry(e);
    return true;
  }
  // The control message waits for the next call that posts sends (flush_sends, a send to
  // the same destination that is not zero-copy): the sends started together then wait for
  // the default stream once.
  std::lock_guard<std::mutex> lock(g_queue_mutex);
  g_queue.push_back(std::move(f));
  g_unposted.fetch_add(1, std::memory_order_acq_rel);
  g_sends.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool p2p_queued() { return g_unposted.load(std::memory_order_acquire) > 0; }

void p2p_post_queued(MPI_Comm comm, int dest) {
  std::unique_lock<std::recursive_mutex> posting(g_post_mutex);
  std::vector<std::shared_ptr<Flight>> ready;
  {
    std::lock_guard<std::mutex> lock(g_queue_mutex);
    for (auto it = g_queue.begin(); it != g_queue.end();)
      if (comm == MPI_COMM_NULL || ((*it)->comm == comm && (*it)->dest == dest)) {
        ready.push_back(std::move(*it));
        it = g_queue.erase(it);
      } else {
        ++it;
      }
  }
  if (ready.empty()) return;
  const size_t taken = ready.size();
  // The receiving GPUs read the buffers directly: the application's work on them (the legacy
  // default stream of each buffer's GPU) must be done first.
  Backend &b = gpu_backend();
  std::vector<std::pair<int, Status>> waited;
  for (const auto &f : ready) {
    if (std::any_of(waited.begin(), waited.end(), [&](const auto &w) { return w.first == f->device; })) continue;
    const OnDevice on_its_gpu(f->device);
    waited.emplace_back(f->device, b.wait_default_stream());
  }
  // Sends that end without a control message in flight (cancelled, or failed: the wait's
  // status), finished after the lock is let go, since raising an error runs the
  // application's error handler, which may make MPI calls.
  std::vector<std::pair<std::shared_ptr<Flight>, Status>> ended;
  for (auto &f : ready) {
    P2pEntry &e = board_of(*f->share, my_node_rank(*f->share))[f->entry];
    const Status st = std::find_if(waited.begin(), waited.end(), [&](const auto &w) { return w.first == f->device; })->second;
    if (f->cancel.exchange(false)) {  // MPI_Cancel before it was posted: no error to report
      give_entry(e);
      PMPI_Status_set_cancelled(&f->status, 1);
      ended.emplace_back(std::move(f), Status::Ok);
      continue;
    }
    if (st != Status::Ok) {
      give_entry(e);
    } else {
      e.state.store(1, std::memory_order_release);
      const int err = f->post(&f->control, kControlBytes, MPI_BYTE, f->dest, f->tag, f->comm, &f->inner);
      if (err == MPI_SUCCESS) {
        add_flight(std::move(f));
        continue;
      }
      give_entry(e);
      f->error = err;
    }
    ended.emplace_back(std::move(f), st);
  }
  g_unposted.fetch_sub(taken, std::memory_order_acq_rel);  // after add_flight: p2p_in_flight never sees a gap
  posting.unlock();
  for (auto &[f, st] : ended) {
    if (st != Status::Ok && f->error == MPI_SUCCESS)
      f->error = raise_error(f->comm, error_class_of(st), "waiting for the GPU's default stream failed: %s",
                             to_string(st));
    std::lock_guard<std::mutex> lock(g_flights_mutex);
    f->done = true;
    if (f->error != MPI_SUCCESS) ++g_failures;
    PMPI_Grequest_complete(f->outer);
  }
}

}  // namespace tempi
