#include "zero_copy/zero_copy_p2p.hpp"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <list>
#include <memory>
#include <mutex>
#include <thread>

#include "config.hpp"
#include "base/errors.hpp"
#include "base/forward.hpp"
#include "log.hpp"
#include "node/node_share.hpp"
#include "p2p/requests.hpp"
#include "base/runtime.hpp"
#include "zero_copy/zero_copy.hpp"

namespace tempi {

namespace {

constexpr uint64_t kMagic = 0x3143'5a49'504d'4554ull;  // "TEMPIZC1"

// What the MPI library carries for a zero-copy message: kControlBytes, MPI_BYTE.
struct Control {
  uint64_t magic = kMagic;
  uint64_t nonce = 0;   // the sender's segment's
  uint64_t serial = 0;  // the entry's
  int64_t bytes = 0;    // the message's packed size
  uint32_t entry = 0;   // index in the sender's board
  int32_t sender = 0;   // the sender's node rank
  uint64_t reserved = 0;
};
static_assert(sizeof(Control) == kControlBytes, "the control message has a fixed size");

std::atomic<uint64_t> g_serial{0}, g_reads{0}, g_sends{0}, g_probed{0}, g_pushed{0}, g_staged_for_control{0};

// An entry's states: P2pEntry::state's 0, 1 and 2, and these. Filling: taken by a thread of
// this process that fills it (no receiver looks at it, no other thread takes it). A push,
// where the receiver cannot map the send buffer (CUDA maps an allocation once per process,
// and the receiver's MPI library may hold it): the receiver sets Refused with its landing
// buffer in the entry, the sender's pusher takes it (Pushing) and packs the message into that
// buffer (Pushed, or PushFailed), then the receiver sets 2 and unpacks.
constexpr uint32_t kFilling = 3;
constexpr uint32_t kRefused = 4;
constexpr uint32_t kPushing = 5;
constexpr uint32_t kPushed = 6;
constexpr uint32_t kPushFailed = 7;

// ---- Pushes ------------------------------------------------------------------------------

// A futex on a word of node-shared memory (so, not private): processes of the node wake
// each other through it.
void futex_wait(std::atomic<uint32_t> &word, uint32_t seen, long timeout_ns) {
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "a futex is a plain 32-bit word");
  const timespec t{0, timeout_ns};
  syscall(SYS_futex, reinterpret_cast<uint32_t *>(&word), FUTEX_WAIT, seen, &t, nullptr, 0);
}
void futex_wake(std::atomic<uint32_t> &word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t *>(&word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

// Packs every entry of this rank's board that its receiver refused into the receiver's
// landing buffer, on the send buffer's GPU.
void push_refused(NodeShare &s) {
  Backend &b = gpu_backend();
  const int me = my_node_rank(s);
  P2pEntry *board = board_of(s, me);
  for (int i = 0; i < kP2pEntries; ++i) {
    P2pEntry &e = board[i];
    uint32_t refused = kRefused;
    if (!e.state.compare_exchange_strong(refused, kPushing, std::memory_order_acq_rel)) continue;
    const char *typed = reinterpret_cast<const char *>(uintptr_t(e.handle.base)) + e.offset;
    const int device = b.device_of(typed);
    const int previous = device >= 0 ? b.use_device(device) : -1;
    PeerMapping landing;  // held until the (synchronous) pack is done
    Status st = landing.map(pid_of(s, e.dest), e.landing);
    const Plan *plan = peer_plan(s, me, e.plan_at);  // this rank's own: always found
    if (st == Status::Ok)
      st = plan ? b.pack_accessible(*plan, typed, landing.base() + e.landing.offset, 0, e.bytes) : Status::Unsupported;
    if (previous >= 0) b.use_device(previous);
    if (st != Status::Ok)
      TEMPI_LOG(Error, "zero-copy: packing a message into node rank %d's landing buffer failed: %s", e.dest,
                to_string(st));
    e.state.store(st == Status::Ok ? kPushed : kPushFailed, std::memory_order_release);
  }
}

// One per communicator with zero-copy point-to-point: a thread that pushes this rank's
// refused messages. A thread, so that a receiver waits for no MPI call of this process (a
// posted send must complete while its sender waits elsewhere, even in the library). It
// sleeps on its segment's push word; the timeout only bounds a wake-up that got lost.
class Pusher {
 public:
  explicit Pusher(std::shared_ptr<NodeShare> s) : share_(std::move(s)), thread_([this] { run(); }) {}
  ~Pusher() {
    stop_ = true;
    word().fetch_add(1, std::memory_order_acq_rel);
    futex_wake(word());
    thread_.join();
  }
  const NodeShare *share() const { return share_.get(); }

 private:
  std::atomic<uint32_t> &word() { return push_word(*share_, my_node_rank(*share_)); }
  void run() {
    while (!stop_.load(std::memory_order_acquire)) {
      const uint32_t seen = word().load(std::memory_order_acquire);
      push_refused(*share_);
      futex_wait(word(), seen, 100'000'000);  // returns at once if a receiver asked since `seen`
    }
  }
  std::shared_ptr<NodeShare> share_;
  std::atomic<bool> stop_{false};
  std::thread thread_;  // last: starts once the members it uses exist
};

std::mutex g_pushers_mutex;
std::vector<std::unique_ptr<Pusher>> g_pushers;

void start_pusher(std::shared_ptr<NodeShare> s) {
  std::lock_guard<std::mutex> lock(g_pushers_mutex);
  for (const auto &p : g_pushers)
    if (p->share() == s.get()) return;
  g_pushers.push_back(std::make_unique<Pusher>(std::move(s)));
}

// Landing buffers: device memory of this process that a sender packs a message into when
// this process cannot map the sender's buffer. Allocated like the application's memory so
// that senders can map it, never given to the MPI library (so no library maps it), and
// kept for the next push until MPI_Finalize.
struct Landing {
  int device = -1;
  void *ptr = nullptr;
  size_t bytes = 0;
  IpcHandle handle;
  bool busy = false;
};
std::mutex g_landing_mutex;
std::list<Landing> g_landings;

// A free landing buffer of at least `bytes` on `device` (current), taken; null on failure.
Landing *take_landing(int device, int64_t bytes) {
  std::lock_guard<std::mutex> lock(g_landing_mutex);
  for (Landing &l : g_landings)
    if (!l.busy && l.device == device && l.bytes >= size_t(bytes)) {
      l.busy = true;
      return &l;
    }
  Backend &b = gpu_backend();
  Landing l;
  l.device = device;
  l.bytes = (size_t(std::max<int64_t>(bytes, 1)) + (size_t(1) << 20) - 1) & ~((size_t(1) << 20) - 1);
  if (b.allocate_device(l.bytes, &l.ptr) != Status::Ok) return nullptr;
  if (b.ipc_export(l.ptr, l.handle) != Status::Ok) {
    b.free_device(l.ptr);
    return nullptr;
  }
  l.busy = true;
  g_landings.push_back(l);
  return &g_landings.back();
}

void give_landing(Landing *l) {
  std::lock_guard<std::mutex> lock(g_landing_mutex);
  l->busy = false;
}

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

// ---- The requests the application holds ------------------------------------------------

struct Flight {
  bool is_send = false;
  MPI_Request outer = MPI_REQUEST_NULL;  // the application's generalized request (null: a blocking call)
  MPI_Request inner = MPI_REQUEST_NULL;  // the library's request
  MPI_Comm comm = MPI_COMM_NULL;
  bool done = false;                     // outer completed (or, blocking, finished)
  MPI_Status status{};                   // what the query reports
  int error = MPI_SUCCESS;
  // A send: its entry, the control message the library carries, and how to post it.
  std::shared_ptr<NodeShare> share;
  int entry = -1;
  IsendFn post = nullptr;
  int dest = 0, tag = 0, device = -1;
  Control control;
  bool inner_done = false;
  bool reading = false;  // a receive whose control message's read is on the GPU
  std::atomic<bool> cancel{false};  // MPI_Cancel asked; progress cancels the library's request
  // A receive.
  Incoming in;
};

std::atomic<int> g_failures{0};  // finished with an error, the handle not yet freed
thread_local std::vector<std::pair<MPI_Request, int>> t_failed;  // freed with an error in this thread's call

std::mutex g_queue_mutex;  // g_queue: zero-copy sends whose control messages are not posted yet
std::list<std::shared_ptr<Flight>> g_queue;
// The sends in g_queue and those a thread took from it and is posting: a thread that finds
// none can post a send of its own with no earlier send of its to the same rank behind it.
std::atomic<size_t> g_unposted{0};
// Held from taking sends out of g_queue until they are posted, so that two threads posting
// never reorder one thread's sends (MPI's non-overtaking rule), whichever thread takes them.
// Recursive: an error handler that raise_error runs meanwhile may make MPI calls that post.
std::recursive_mutex g_post_mutex;

std::mutex g_mutex;  // g_flights; p2p_progress runs on one thread at a time
std::list<std::shared_ptr<Flight>> g_flights;
std::atomic<size_t> g_flight_count{0};

int query_flight(void *extra, MPI_Status *status) {
  const Flight &f = **static_cast<std::shared_ptr<Flight> *>(extra);
  int is_cancelled = 0;
  PMPI_Test_cancelled(&f.status, &is_cancelled);
  MPI_Count bytes = 0;
  if (!f.is_send) PMPI_Get_elements_x(&f.status, MPI_BYTE, &bytes);
  PMPI_Status_set_elements_x(status, MPI_BYTE, bytes);
  PMPI_Status_set_cancelled(status, is_cancelled);
  status->MPI_SOURCE = f.is_send ? MPI_ANY_SOURCE : f.status.MPI_SOURCE;
  status->MPI_TAG = f.is_send ? MPI_ANY_TAG : f.status.MPI_TAG;
  status->MPI_ERROR = f.error;
  return MPI_SUCCESS;  // the error was raised already; the completion call returns it (p2p_failed)
}

int free_flight(void *extra) {
  auto *holder = static_cast<std::shared_ptr<Flight> *>(extra);
  if ((*holder)->error != MPI_SUCCESS && (*holder)->done) {
    t_failed.emplace_back((*holder)->outer, (*holder)->error);
    --g_failures;
  }
  delete holder;
  return MPI_SUCCESS;
}

// MPI_Cancel of the application's request: the library's request is cancelled if it can be
// (a send whose control message no receive matched yet, a receive that matched nothing);
// progress then completes the request as cancelled, or as usual.
// It only asks: the library calls this holding its own locks, which progress (holding
// g_mutex) may be waiting for.
int cancel_flight(void *extra, int complete) {
  if (!complete) (*static_cast<std::shared_ptr<Flight> *>(extra))->cancel = true;
  return MPI_SUCCESS;
}

// Cancels the library's request of `f` once, where MPI_Cancel asked for it (under g_mutex).
void cancel_if_asked(Flight &f) {
  if (f.cancel.exchange(false) && f.inner != MPI_REQUEST_NULL) PMPI_Cancel(&f.inner);
}

int start_outer(std::shared_ptr<Flight> f, MPI_Request *request) {
  auto *holder = new std::shared_ptr<Flight>(f);
  const int err = PMPI_Grequest_start(query_flight, free_flight, cancel_flight, holder, request);
  if (err != MPI_SUCCESS) {
    delete holder;
    return err;
  }
  f->outer = *request;
  return MPI_SUCCESS;
}

void add_flight(std::shared_ptr<Flight> f) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_flights.push_back(std::move(f));
  g_flight_count = g_flights.size();
}

// Spins until `f` finished, progressing every zero-copy message of this process (and the
// library) meanwhile; says once every half minute what it waits for.
void wait_flight(const Flight &f, const char *call) {
  auto began = std::chrono::steady_clock::now();
  for (uint64_t n = 1;; ++n) {
    zero_copy_progress();
    {
      std::lock_guard<std::mutex> lock(g_mutex);
      if (f.done) return;
    }
    if (n % 64 == 0) sched_yield();
    if (n % 4096 == 0 && std::chrono::steady_clock::now() - began > std::chrono::seconds(30)) {
      TEMPI_LOG(Warn, "%s: still waiting for a zero-copy message after 30 s", call);
      began = std::chrono::steady_clock::now();
    }
  }
}

// A send whose control message the library reported done (`err`: its error): true when
// that finished the send (the message failed or was cancelled, so nobody reads the buffer).
bool control_done(Flight &f, const MPI_Status &st, int err) {
  P2pEntry &e = board_of(*f.share, my_node_rank(*f.share))[f.entry];
  f.inner_done = true;
  if (err != MPI_SUCCESS) {
    f.error = err;
    give_entry(e);
    return true;
  }
  int cancelled = 0;
  PMPI_Test_cancelled(&st, &cancelled);
  if (!cancelled) return false;
  PMPI_Status_set_cancelled(&f.status, 1);
  give_entry(e);
  return true;
}

// A send whose control message went: true when its receiver has read the data.
bool read_by_receiver(Flight &f) {
  P2pEntry &e = board_of(*f.share, my_node_rank(*f.share))[f.entry];
  if (e.state.load(std::memory_order_acquire) != 2) return false;
  give_entry(e);
  return true;
}

// Tests the library's requests of `flights` in one MPI_Testsome (one call of the library's
// progress for all of them) and calls `done(flight, status, error)` for each completed one.
template <class Done>
void test_inner(const std::vector<std::shared_ptr<Flight>> &flights, Done done) {
  if (flights.empty()) return;
  std::vector<MPI_Request> inner(flights.size());
  for (size_t k = 0; k < flights.size(); ++k) inner[k] = flights[k]->inner;
  std::vector<int> index(flights.size());
  std::vector<MPI_Status> st(flights.size());
  int n = 0;
  const int err = TEMPI_NEXT(MPI_Testsome)(int(inner.size()), inner.data(), &n, index.data(), st.data());
  if (err != MPI_SUCCESS && err != MPI_ERR_IN_STATUS) {  // no statuses: test each for its own error
    n = 0;
    for (size_t k = 0; k < flights.size(); ++k) {
      int flag = 0;
      const int e = TEMPI_NEXT(MPI_Test)(&inner[k], &flag, &st[size_t(n)]);
      if (flag || e != MPI_SUCCESS) {
        st[size_t(n)].MPI_ERROR = e;
        index[size_t(n++)] = int(k);
      }
    }
  }
  for (int d = 0; d < n && n != MPI_UNDEFINED; ++d) {
    const size_t k = size_t(index[size_t(d)]);
    flights[k]->inner = inner[k];
    done(flights[k], st[size_t(d)], err == MPI_SUCCESS ? MPI_SUCCESS : st[size_t(d)].MPI_ERROR);
  }
}

// Whether control bytes `c` from node rank `sender` on (`status`'s tag) name a live entry of
// that sender's board for this rank.
bool is_control(NodeShare &s, int sender, const Control &c, const MPI_Status &status) {
  if (c.magic != kMagic || c.sender != sender || c.nonce != nonce_of(s, sender) || c.entry >= uint32_t(kP2pEntries))
    return false;
  const P2pEntry &e = board_of(s, sender)[c.entry];
  return e.state.load(std::memory_order_acquire) == 1 && e.serial == c.serial && e.dest == my_node_rank(s) &&
         e.tag == status.MPI_TAG && e.bytes == c.bytes;
}

// Before the setting of `comm` changes: this rank's zero-copy sends on it, sent under the old
// setting, finish, and every rank goes on moving the messages that reach it until all have
// (a rank's last send may wait for a receiver that has none left of its own). Returns an MPI
// error code.
int settle_sends(MPI_Comm comm) {
  p2p_post_queued(MPI_COMM_NULL, MPI_ANY_SOURCE);
  MPI_Request all_settled = MPI_REQUEST_NULL;
  auto said = std::chrono::steady_clock::now();
  for (int done = 0; !done; std::this_thread::yield()) {
    zero_copy_progress();
    if (all_settled != MPI_REQUEST_NULL) {
      if (const int err = PMPI_Test(&all_settled, &done, MPI_STATUS_IGNORE)) return err;
      continue;
    }
    bool sending = false;
    {
      std::lock_guard<std::mutex> lock(g_mutex);
      for (const auto &f : g_flights) sending = sending || (f->is_send && f->comm == comm);
    }
    if (!sending) {
      if (const int err = PMPI_Ibarrier(comm, &all_settled)) return err;
    } else if (std::chrono::steady_clock::now() - said > std::chrono::seconds(30)) {
      TEMPI_LOG(Warn, "TEMPIX_Comm_enable_zero_copy: a zero-copy send on this communicator is still not received "
                "after 30 s (its receive must be posted before the call)");
      said = std::chrono::steady_clock::now();
    }
  }
  return MPI_SUCCESS;
}

}  // namespace

// ---- Enabling ------------------------------------------------------------------------------

int p2p_enable(MPI_Comm comm, bool on, int *enabled) {
  if (enabled) *enabled = 0;
  if (comm == MPI_COMM_NULL) return raise_error(MPI_COMM_WORLD, MPI_ERR_COMM, "TEMPIX_Comm_enable_zero_copy: MPI_COMM_NULL");
  int inter = 0;
  if (const int err = PMPI_Comm_test_inter(comm, &inter)) return err;
  // Every rank must agree, whatever it asked: the same decision at both ends of each message.
  int all = on && !inter && active() ? 1 : 0;
  if (const int err = PMPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_MIN, comm)) return err;
  if (inter) return MPI_SUCCESS;
  std::shared_ptr<NodeShare> share = all ? node_share(comm) : p2p_share(comm);  // collective the first time
  if (!share) {
    if (all) TEMPI_LOG(Info, "TEMPIX_Comm_enable_zero_copy: zero-copy is off on this communicator (TEMPI_IPC=off, or a rank without a GPU)");
    return MPI_SUCCESS;
  }
  // A GPU receive posted, or a persistent one made, before zero-copy was on cannot tell a
  // control message from data (the contract's item 5, docs/using.md): every rank refuses.
  int quiet = !all || !requests().any_receive([&](const Incoming &in) {
    return in.comm == comm && !in.p2p && (in.peer == MPI_ANY_SOURCE || node_rank_of(*share, in.peer) >= 0);
  });
  if (all)
    if (const int err = PMPI_Allreduce(MPI_IN_PLACE, &quiet, 1, MPI_INT, MPI_MIN, comm)) return err;
  if (!quiet)
    return raise_error(comm, MPI_ERR_PENDING,
                       "TEMPIX_Comm_enable_zero_copy: a rank has a GPU receive on this communicator from before the "
                       "call; call it when no receive on the communicator is pending, and make persistent receives "
                       "after it");
  if (const int err = settle_sends(comm)) return err;
  if (all) start_pusher(share);
  set_p2p(*share, all != 0);
  if (enabled) *enabled = all;
  return MPI_SUCCESS;
}

// ---- Sends ---------------------------------------------------------------------------------

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
    const int previous = f->device >= 0 ? b.use_device(f->device) : -1;
    waited.emplace_back(f->device, b.wait_default_stream());
    if (previous >= 0) b.use_device(previous);
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
    std::lock_guard<std::mutex> lock(g_mutex);
    f->done = true;
    if (f->error != MPI_SUCCESS) ++g_failures;
    PMPI_Grequest_complete(f->outer);
  }
}

// ---- Receives ------------------------------------------------------------------------------

bool p2p_stage_for_control(NodeShare &s, int source) {
  const int from = source == MPI_ANY_SOURCE ? -1 : node_rank_of(s, source);
  if (source != MPI_ANY_SOURCE && from < 0) return false;  // on another node: data only
  if (!expects_control(s, from)) return false;
  g_staged_for_control.fetch_add(1, std::memory_order_relaxed);
  return true;
}

namespace {

std::shared_ptr<Flight> post_recv(Incoming &in, int source, int tag, MPI_Comm comm, int &err) {
  auto f = std::make_shared<Flight>();
  f->comm = comm;
  err = TEMPI_NEXT(MPI_Irecv)(in.buf, in.count, in.type, source, tag, comm, &f->inner);
  if (err != MPI_SUCCESS) return nullptr;
  f->in = std::move(in);
  return f;
}

}  // namespace

int p2p_irecv(Incoming &in, int source, int tag, MPI_Comm comm, MPI_Request *request) {
  int err = MPI_SUCCESS;
  std::shared_ptr<Flight> f = post_recv(in, source, tag, comm, err);
  if (!f) return err;
  if ((err = start_outer(f, request)) != MPI_SUCCESS) {
    PMPI_Cancel(&f->inner);
    PMPI_Wait(&f->inner, MPI_STATUS_IGNORE);
    return err;
  }
  add_flight(std::move(f));
  return MPI_SUCCESS;
}

int p2p_recv(Incoming &in, int source, int tag, MPI_Comm comm, MPI_Status *status) {
  int err = MPI_SUCCESS;
  std::shared_ptr<Flight> f = post_recv(in, source, tag, comm, err);
  if (!f) return err;
  add_flight(f);
  wait_flight(*f, "MPI_Recv");
  if (status != MPI_STATUS_IGNORE) {
    MPI_Status out;
    query_flight(&f, &out);
    *status = out;
  }
  return f->error;
}

// ---- Completing ----------------------------------------------------------------------------

namespace {

// The reads of control messages that arrived together, on one GPU: issued at once, finished
// (their senders told, their receives complete) when the GPU is done.
struct Reads {
  int device = -1;
  struct Read {
    Finishing *f;  // null once the batch outlives its Finishing entries (progress: `flights`)
    const Plan *from;
    const void *from_typed;
    int64_t bytes;
    P2pEntry *entry;
    Incoming *in;
  };
  std::vector<Read> reads;
  std::vector<PeerMapping> mapped;  // the senders' buffers the reads read through, held until done
  std::vector<PairJob> jobs;
  Scratch scratch;
  Fence fence;
  Landing *landing = nullptr;  // a push: its one message arrives in this buffer, not through a read
  Status status = Status::Ok;
  std::vector<std::shared_ptr<Flight>> flights;  // progress: the receives these reads finish
};

// The bytes that arrived for a zero-copy receive of `batch` that completed whole (no error,
// not cancelled, not handled yet), else -1.
int64_t arrived_bytes(const Finishing &f) {
  if (!f.in->p2p || f.in->finished || f.err != MPI_SUCCESS) return -1;
  int cancelled = 0;
  PMPI_Test_cancelled(&f.status, &cancelled);
  if (cancelled) return -1;
  MPI_Count received = 0;
  PMPI_Get_elements_x(&f.status, MPI_BYTE, &received);
  return int64_t(received);
}

// The first kControlBytes of each receive in `batch` that may hold a control message (a
// zero-copy receive, completed, not cancelled, of exactly that size from a rank of the
// node), by batch index; the others' heads are not read. Heads in device staging (a
// CUDA-aware library's) come back with one wait per GPU.
std::vector<Control> read_heads(std::vector<Finishing> &batch, std::vector<bool> &has_head) {
  Backend &b = gpu_backend();
  std::vector<Control> heads(batch.size());
  has_head.assign(batch.size(), false);
  std::vector<std::pair<int, size_t>> on_device;  // (GPU, batch index)
  for (size_t i = 0; i < batch.size(); ++i) {
    Finishing &f = batch[i];
    Incoming &in = *f.in;
    if (arrived_bytes(f) != kControlBytes || node_rank_of(*in.p2p, f.status.MPI_SOURCE) < 0) continue;
    if (in.transfer.method == Method::Device) {
      on_device.emplace_back(b.device_of(in.user), i);
    } else {
      std::memcpy(&heads[i], in.staging.ptr, sizeof(Control));
      has_head[i] = true;
    }
  }
  if (on_device.empty()) return heads;
  std::sort(on_device.begin(), on_device.end());
  Scratch pinned;  // where the copies land; the heads vector itself where none can be had
  const bool have_pinned = b.acquire(ScratchKind::Pinned, on_device.size() * sizeof(Control), pinned) == Status::Ok;
  Control *landing = have_pinned ? static_cast<Control *>(pinned.ptr) : nullptr;
  for (size_t k = 0; k < on_device.size();) {
    const int device = on_device[k].first;
    std::vector<Backend::CopyJob> jobs;
    size_t end = k;
    for (; end < on_device.size() && on_device[end].first == device; ++end) {
      const size_t i = on_device[end].second;
      jobs.push_back({landing ? &landing[end] : &heads[i], batch[i].in->staging.ptr, sizeof(Control)});
    }
    const int previous = device >= 0 ? b.use_device(device) : -1;
    const Status st = b.copy_all(jobs);
    if (previous >= 0) b.use_device(previous);
    for (; k < end; ++k) {
      const size_t i = on_device[k].second;
      if (st == Status::Ok) {
        if (landing) heads[i] = landing[k];
        has_head[i] = true;
        continue;
      }
      // Unread, it could be a control message: never unpacked as data.
      batch[i].in->finished = true;
      batch[i].result = raise_error(batch[i].in->comm, error_class_of(st),
                                    "reading a received message's head from device staging failed: %s", to_string(st));
    }
  }
  return heads;
}

// Recognizes the control messages among receives that completed together, checks their
// sizes, and issues their reads (one launch per GPU). Marks every receive it handled
// finished; data beyond a receive's capacity is a truncation.
std::vector<Reads> issue_reads(std::vector<Finishing> &batch) {
  std::vector<Reads> gpus;
  Backend &b = gpu_backend();
  std::vector<bool> has_head;
  const std::vector<Control> heads = read_heads(batch, has_head);
  for (size_t i = 0; i < batch.size(); ++i) {
    Finishing &f = batch[i];
    Incoming &in = *f.in;
    const int64_t received = arrived_bytes(f);
    if (received < 0) continue;
    NodeShare &s = *in.p2p;
    const int sender = node_rank_of(s, f.status.MPI_SOURCE);
    const Control &c = heads[i];
    const bool control = has_head[i] && is_control(s, sender, c, f.status);
    const int64_t bytes = control ? c.bytes : received;
    if (control || bytes >= config().p2p_zero_copy_min) saw_message(s, sender, control);
    if (bytes > in.capacity) {  // a sender of a control message completes; the receive reports it
      in.finished = true;
      if (control) board_of(s, sender)[c.entry].state.store(2, std::memory_order_release);
      f.result = raise_error(in.comm, MPI_ERR_TRUNCATE, "a message of %lld bytes arrived for a receive of %lld",
                             static_cast<long long>(bytes), static_cast<long long>(in.capacity));
      PMPI_Status_set_elements_x(&f.status, MPI_BYTE, in.capacity);
      continue;
    }
    if (!control) continue;  // data: the usual unpack
    in.finished = true;
    P2pEntry &e = board_of(s, sender)[c.entry];
    const int device = b.device_of(in.user);
    // This rank's own buffer is read where it is; a peer's through its (cached) mapping.
    char *base = reinterpret_cast<char *>(uintptr_t(e.handle.base));
    PeerMapping mapped;
    Status st = Status::Ok;
    Landing *landing = nullptr;
    // The sender's plan (null where its shared-memory block cannot be read: peer_plan says
    // why, and the sender pushes the message as for a buffer that cannot be mapped).
    const Plan *plan = peer_plan(s, sender, e.plan_at);
    if (sender != my_node_rank(s)) {
      const int previous = device >= 0 ? b.use_device(device) : -1;
      st = plan ? mapped.map(pid_of(s, sender), e.handle) : Status::Unsupported;
      if (st == Status::Ok) base = mapped.base();
      // Refused (first time: GpuError; remembered: Unsupported): the sender pushes instead.
      if (st != Status::Ok) landing = take_landing(device, c.bytes);
      if (previous >= 0) b.use_device(previous);
      if (st == Status::GpuError)
        TEMPI_LOG(Info, "comm rank %d's GPU buffer cannot be mapped here (CUDA IPC refused it; the MPI library may map "
                        "it already): its zero-copy messages to this rank are pushed by the sender from now on",
                  f.status.MPI_SOURCE);
    }
    if (st != Status::Ok && !landing) {
      e.state.store(2, std::memory_order_release);
      f.result = raise_error(in.comm, MPI_ERR_NO_MEM, "zero-copy: no landing buffer for a node peer's message whose "
                             "GPU buffer cannot be mapped here");
      continue;
    }
    PMPI_Status_set_elements_x(&f.status, MPI_BYTE, c.bytes);
    if (landing) {
      e.landing = landing->handle;
      e.state.store(kRefused, std::memory_order_release);
      std::atomic<uint32_t> &word = push_word(s, sender);
      word.fetch_add(1, std::memory_order_acq_rel);
      futex_wake(word);
      Reads push;
      push.device = device;
      push.landing = landing;
      push.reads.push_back({&f, nullptr, nullptr, c.bytes, &e, &in});
      gpus.push_back(std::move(push));
      continue;
    }
    auto g = std::find_if(gpus.begin(), gpus.end(), [&](const Reads &o) { return o.device == device && !o.landing; });
    if (g == gpus.end()) {
      g = gpus.insert(gpus.end(), Reads{});
      g->device = device;
    }
    g->reads.push_back({&f, plan, base + e.offset, c.bytes, &e, &in});
    if (mapped.base()) g->mapped.push_back(std::move(mapped));
  }
  for (Reads &g : gpus) {
    if (g.landing) continue;
    const int previous = g.device >= 0 ? b.use_device(g.device) : -1;
    for (const Reads::Read &r : g.reads) g.jobs.push_back({r.from, r.from_typed, &r.in->plan, r.in->user, r.bytes});
    lend_scratch(g.jobs, g.scratch);
    g.status = move_pairs(g.jobs, g.fence);
    if (previous >= 0) b.use_device(previous);
  }
  return gpus;
}

// reads_done for a push: whether the sender packed the message into the landing buffer
// (wait: until it has; its pusher thread needs no MPI call of the sender's); then releases
// the sender and unpacks into the receive buffer.
bool push_done(Reads &g, bool wait, int &err) {
  const Reads::Read &r = g.reads.front();
  auto pending = [&] {
    const uint32_t st = r.entry->state.load(std::memory_order_acquire);
    return st == kRefused || st == kPushing;
  };
  for (auto began = std::chrono::steady_clock::now(); pending();) {
    if (!wait) return false;
    sched_yield();
    if (std::chrono::steady_clock::now() - began > std::chrono::seconds(30)) {
      TEMPI_LOG(Warn, "still waiting for a node peer to push a zero-copy message after 30 s");
      began = std::chrono::steady_clock::now();
    }
  }
  const bool pushed = r.entry->state.load(std::memory_order_acquire) == kPushed;
  r.entry->state.store(2, std::memory_order_release);  // the sender's buffer is free
  Backend &b = gpu_backend();
  Status st = Status::GpuError;
  if (pushed) {
    const int previous = g.device >= 0 ? b.use_device(g.device) : -1;
    st = b.unpack_accessible(r.in->plan, g.landing->ptr, r.in->user, 0, r.bytes);
    if (previous >= 0) b.use_device(previous);
  }
  give_landing(g.landing);
  g.landing = nullptr;
  if (!pushed)
    err = raise_error(r.in->comm, MPI_ERR_OTHER, "zero-copy: the sender could not pack its message for this rank");
  else if (st != Status::Ok)
    err = raise_error(r.in->comm, error_class_of(st), "zero-copy: unpacking a pushed message failed: %s",
                      to_string(st));
  else
    g_pushed.fetch_add(1, std::memory_order_relaxed);
  return true;
}

// Whether the reads of `g` finished (wait: until they have); then tells their senders and
// returns the error (raised on the receive's communicator) in `err`.
bool reads_done(Reads &g, bool wait, int &err) {
  Backend &b = gpu_backend();
  err = MPI_SUCCESS;
  if (g.landing) return push_done(g, wait, err);
  if (g.status == Status::Ok) {
    const int previous = g.device >= 0 ? b.use_device(g.device) : -1;
    bool finished = false;  // then nothing to wait for (failed included: g.status says so)
    if (!wait) g.status = b.poll(g.fence, finished);
    if (!wait && !finished) {
      if (previous >= 0) b.use_device(previous);
      return false;
    }
    if (!finished) g.status = b.wait(g.fence);
    if (previous >= 0) b.use_device(previous);
  }
  g.mapped.clear();  // the GPU is done with the senders' buffers
  for (const Reads::Read &r : g.reads) r.entry->state.store(2, std::memory_order_release);  // the sender's buffer is free
  if (g.status != Status::Ok)
    err = raise_error(g.reads.front().in->comm, error_class_of(g.status),
                      "reading a node peer's GPU buffer (zero-copy) failed: %s", to_string(g.status));
  else
    g_reads.fetch_add(g.reads.size(), std::memory_order_relaxed);
  return true;
}

std::list<Reads> g_reading;  // under g_mutex: reads issued by progress, not finished

}  // namespace

void p2p_take_controls(std::vector<Finishing> &batch) {
  std::vector<Reads> gpus = issue_reads(batch);
  for (Reads &g : gpus) {
    int err = MPI_SUCCESS;
    reads_done(g, true, err);
    if (err != MPI_SUCCESS)
      for (const Reads::Read &r : g.reads)
        if (r.f->result == MPI_SUCCESS) r.f->result = err;
  }
}

void p2p_progress() {
  if (g_flight_count.load(std::memory_order_relaxed) == 0) return;
  std::unique_lock<std::mutex> lock(g_mutex, std::try_to_lock);
  if (!lock.owns_lock()) return;  // another thread is at it
  std::vector<std::shared_ptr<Flight>> finished;
  // Reads issued in earlier rounds: their receives finish once the GPU is done.
  for (auto it = g_reading.begin(); it != g_reading.end();) {
    int err = MPI_SUCCESS;
    if (!reads_done(*it, false, err)) {
      ++it;
      continue;
    }
    for (auto &f : it->flights) {
      if (f->error == MPI_SUCCESS) f->error = err;
      finished.push_back(f);
    }
    it = g_reading.erase(it);
  }
  // Sends whose control message is still the library's, and receives waiting for the
  // library: each kind tested in one call.
  std::vector<std::shared_ptr<Flight>> unsent, waiting;
  for (const auto &p : g_flights) {
    Flight &f = *p;
    if (f.is_send && !f.inner_done) {
      cancel_if_asked(f);
      unsent.push_back(p);
    } else if (!f.is_send && !f.reading) {
      cancel_if_asked(f);
      waiting.push_back(p);
    }
  }
  std::vector<std::shared_ptr<Flight>> over;  // sends that ended with their control message
  test_inner(unsent, [&](const std::shared_ptr<Flight> &f, const MPI_Status &st, int e) {
    if (control_done(*f, st, e)) over.push_back(f);
  });
  for (auto it = g_flights.begin(); it != g_flights.end();) {
    Flight &f = **it;
    const bool ended = std::find(over.begin(), over.end(), *it) != over.end();
    if (f.is_send && (ended || (f.inner_done && read_by_receiver(f)))) {
      finished.push_back(*it);
      it = g_flights.erase(it);
      continue;
    }
    ++it;
  }
  std::vector<Finishing> arrived;
  std::vector<std::shared_ptr<Flight>> receivers;
  // Once one has arrived, tested again until kQuietTests tests in a row find no more: Open
  // MPI hands over a few messages per test call while its sender is still sending, and the
  // reads issued per round cost a launch (and, on device staging, a wait for the heads)
  // each, 19 rounds a halo exchange where MPICH's 26 messages came in 1 or 2.
  constexpr int kQuietTests = 8;
  size_t seen = 0;
  for (int quiet = 0; !waiting.empty() && quiet < kQuietTests;) {
    test_inner(waiting, [&](const std::shared_ptr<Flight> &p, const MPI_Status &one, int e) {
      Flight &f = *p;
      f.status = one;
      f.error = e;
      arrived.push_back({&f.in, one, e});
      receivers.push_back(p);
    });
    if (receivers.empty()) break;  // nothing yet: this round does not wait for it
    quiet = receivers.size() == seen ? quiet + 1 : 0;
    for (size_t k = seen; k < receivers.size(); ++k)
      waiting.erase(std::find(waiting.begin(), waiting.end(), receivers[k]));
    seen = receivers.size();
  }
  if (!arrived.empty()) {
    // Control messages: their reads are issued now and finish in a later round, so that
    // messages arriving one after another overlap on the GPU instead of waiting in turn.
    std::vector<Reads> issued = issue_reads(arrived);
    for (Reads &g : issued) {
      for (Reads::Read &r : g.reads) {
        const size_t k = size_t(r.f - arrived.data());
        receivers[k]->status = r.f->status;
        receivers[k]->reading = true;
        g.flights.push_back(receivers[k]);
        r.f = nullptr;
      }
      g_reading.push_back(std::move(g));
    }
    finish_recvs(arrived);  // data (the rest are finished already)
    for (size_t k = 0; k < arrived.size(); ++k) {
      Flight &f = *receivers[k];
      if (f.reading) continue;
      f.status = arrived[k].status;
      if (f.error == MPI_SUCCESS) f.error = arrived[k].result;
      finished.push_back(receivers[k]);
    }
  }
  for (auto &f : finished) {
    if (!f->is_send) g_flights.remove(f);
    f->done = true;
    if (f->outer == MPI_REQUEST_NULL) continue;
    if (f->error != MPI_SUCCESS) ++g_failures;
    PMPI_Grequest_complete(f->outer);
  }
  g_flight_count = g_flights.size();
}

bool p2p_in_flight() { return g_flight_count.load(std::memory_order_relaxed) > 0 || p2p_queued(); }

bool p2p_failures_pending() { return g_failures.load(std::memory_order_relaxed) > 0; }

void p2p_clear_failed() { t_failed.clear(); }

int p2p_failed(MPI_Request handle) {
  for (auto it = t_failed.begin(); it != t_failed.end(); ++it)
    if (it->first == handle) {
      const int err = it->second;
      t_failed.erase(it);
      return err;
    }
  return MPI_SUCCESS;
}

void p2p_after_probe(MPI_Comm comm, const MPI_Status &status) {
  std::shared_ptr<NodeShare> share = p2p_share(comm);
  if (!share) return;
  MPI_Count bytes = 0;
  PMPI_Get_elements_x(&status, MPI_BYTE, &bytes);
  const int sender = node_rank_of(*share, status.MPI_SOURCE);
  if (bytes != kControlBytes || sender < 0) return;
  const P2pEntry *board = board_of(*share, sender);
  const int me = my_node_rank(*share);
  for (int i = 0; i < kP2pEntries; ++i)
    if (board[i].state.load(std::memory_order_acquire) == 1 && board[i].dest == me && board[i].tag == status.MPI_TAG) {
      g_probed.fetch_add(1, std::memory_order_relaxed);
      static std::atomic<bool> said{false};
      if (!said.exchange(true))
        TEMPI_LOG(Warn, "a probe on a communicator with zero-copy point-to-point found a 48-byte message from rank %d "
                        "that is likely a zero-copy control message: probes report its size, not the message's "
                        "(docs/using.md, \"Zero-copy point-to-point\")",
                  status.MPI_SOURCE);
      return;
    }
}

P2pCounts p2p_counts() {
  return {g_reads.load(), g_sends.load(), g_probed.load(), g_pushed.load(), g_staged_for_control.load()};
}

void p2p_shutdown() {
  {
    std::lock_guard<std::mutex> lock(g_pushers_mutex);
    g_pushers.clear();
  }
  std::lock_guard<std::mutex> lock(g_landing_mutex);
  for (const Landing &l : g_landings) gpu_backend().free_device(l.ptr);
  g_landings.clear();
}

}  // namespace tempi
