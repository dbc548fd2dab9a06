// Pushes of zero-copy point-to-point (zero_copy/p2p_push.hpp says the contract): the futex,
// the pusher thread of each communicator, the landing buffers, and their end at MPI_Finalize.
#include "zero_copy/p2p_push.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <ctime>
#include <list>
#include <mutex>
#include <thread>
#include <vector>

#include "backend.hpp"
#include "log.hpp"
#include "zero_copy/p2p_flight.hpp"

namespace tempi {
namespace zcp2p {

namespace {

// A futex on a word of node-shared memory (so, not private): processes of the node wake
// each other through it (futex_wake, p2p_push.hpp).
void futex_wait(std::atomic<uint32_t> &word, uint32_t seen, long timeout_ns) {
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "a futex is a plain 32-bit word");
  const timespec t{0, timeout_ns};
  syscall(SYS_futex, reinterpret_cast<uint32_t *>(&word), FUTEX_WAIT, seen, &t, nullptr, 0);
}

}  // namespace

void futex_wake(std::atomic<uint32_t> &word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t *>(&word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

namespace {

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
    Status st;
    {
      const OnDevice on_its_gpu(b.device_of(typed));
      PeerMapping landing;  // held until the (synchronous) pack is done
      st = landing.map(pid_of(s, e.dest), e.landing);
      const Plan *plan = peer_plan(s, me, e.plan_at);  // this rank's own: always found
      if (st == Status::Ok)
        st = plan ? b.pack_accessible(*plan, typed, landing.base() + e.landing.offset, 0, e.bytes) : Status::Unsupported;
    }
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

}  // namespace

void start_pusher(std::shared_ptr<NodeShare> s) {
  std::lock_guard<std::mutex> lock(g_pushers_mutex);
  for (const auto &p : g_pushers)
    if (p->share() == s.get()) return;
  g_pushers.push_back(std::make_unique<Pusher>(std::move(s)));
}

namespace {
std::mutex g_landing_flights_mutex;
std::list<Landing> g_landings;
}  // namespace

Landing *take_landing(int device, int64_t bytes) {
  std::lock_guard<std::mutex> lock(g_landing_flights_mutex);
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
  std::lock_guard<std::mutex> lock(g_landing_flights_mutex);
  l->busy = false;
}

}  // namespace zcp2p

using namespace zcp2p;

void p2p_shutdown() {
  {
    std::lock_guard<std::mutex> lock(g_pushers_mutex);
    g_pushers.clear();
  }
  std::lock_guard<std::mutex> lock(g_landing_flights_mutex);
  for (const Landing &l : g_landings) gpu_backend().free_device(l.ptr);
  g_landings.clear();
}

}  // namespace tempi
