#include "p2p/local_work.hpp"

#include <algorithm>
#include <climits>
#include <unordered_map>
#include <utility>

#include "base/errors.hpp"
#include "backend.hpp"
#include "base/progress.hpp"
#include "log.hpp"
#include "overlap.hpp"

namespace tempi {

namespace {

thread_local Status t_failure = Status::Ok;  // raise_deferred_failure's

void keep_failure(Status st) {
  if (t_failure == Status::Ok) t_failure = st;
}

}  // namespace

int raise_deferred_failure(MPI_Comm comm, const char *call) {
  if (t_failure == Status::Ok) return MPI_SUCCESS;
  const Status st = std::exchange(t_failure, Status::Ok);
  return raise_error(comm, error_class_of(st), "%s: deferred MPI_Pack/MPI_Unpack work of this thread failed: %s",
                     call, to_string(st));
}

void log_deferred_failure() {
  if (t_failure == Status::Ok) return;
  TEMPI_LOG(Error, "deferred MPI_Pack/MPI_Unpack work of this thread failed: %s",
            to_string(std::exchange(t_failure, Status::Ok)));
}

void LocalWork::add(const Fence &f, int device) {
  // The application's next work on the legacy default stream or on any blocking stream of
  // its own must start after this work (docs/using.md, "Sequences of MPI_Pack and
  // MPI_Unpack"): TEMPI's stream is a blocking stream, which the legacy stream waits for but
  // another blocking stream does not, so the legacy stream is made to wait for it here.
  {
    const OnDevice on(device);
    if (const Status st = gpu_backend().order_default_stream_after(f); st != Status::Ok) keep_failure(st);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  const std::thread::id me = std::this_thread::get_id();
  for (Entry &e : entries_)
    if (e.thread == me && e.device == device) {
      e.fence = f;
      return;
    }
  entries_.push_back({me, device, f});
  count_.store(entries_.size(), std::memory_order_release);
}

// The entries stay listed until waited for: a call on another thread that comes meanwhile
// must wait for them too (it may be ordered after the work by the application), not find
// nothing pending and read the buffers early.
void LocalWork::settle_if(bool others_only) {
  std::vector<Entry> waited;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const std::thread::id me = std::this_thread::get_id();
    for (const Entry &e : entries_)
      if (!others_only || e.thread != me) waited.push_back(e);
  }
  Backend &b = gpu_backend();
  for (const Entry &e : waited) {
    const OnDevice on(e.device);
    // A kernel that failed after its call returned (the wait clears CUDA's error).
    if (const Status st = b.wait(e.fence); st != Status::Ok) keep_failure(st);
  }
  if (waited.empty()) return;
  // Only entries that still hold a waited fence go: one that add() replaced meanwhile
  // holds later work.
  std::lock_guard<std::mutex> lock(mutex_);
  const auto was_waited = [&](const Entry &e) {
    return std::any_of(waited.begin(), waited.end(), [&](const Entry &w) { return w.fence.state == e.fence.state; });
  };
  entries_.erase(std::remove_if(entries_.begin(), entries_.end(), was_waited), entries_.end());
  count_.store(entries_.size(), std::memory_order_release);
}

void LocalWork::settle_other_threads() { settle_if(true); }
void LocalWork::settle() {
  launch_queued_moves();
  settle_if(false);
}

namespace {

struct Range {
  const char *lo, *hi;
  bool overlaps(const Range &o) const { return lo < o.hi && o.lo < hi; }
};

// A move with the bounds of its two sides, worked out once: a move is compared with every
// one listed before it, so a phase of n calls makes n^2/2 comparisons.
struct Listed {
  QueuedMove m;
  Range typed, packed;  // the typed object's bounds (not exact); the packed bytes
  explicit Listed(QueuedMove move) : m(std::move(move)) {
    const auto [lo, hi] = m.plan.typed_bounds();
    typed = {static_cast<const char *>(m.typed) + lo, static_cast<const char *>(m.typed) + hi};
    packed = {static_cast<const char *>(m.packed), static_cast<const char *>(m.packed) + m.bytes};
  }
};

thread_local std::vector<Listed> t_queued;  // TEMPI_DEFER_PACK=2's packs, not launched yet
// The moves this thread joined to its open launch since it last closed it (the backend
// may have closed it earlier by itself: then these only make the checks below stricter).
thread_local std::vector<Listed> t_open;

int64_t address(const void *p) { return int64_t(reinterpret_cast<uintptr_t>(p)); }

// Whether the packed bytes of `p` meet the typed object of `t` (bounds first, then the
// object's own bytes: a strided object's bounds may hold another's packed buffer, as
// when one allocation holds an array and the buffers its faces are packed into).
bool packed_meets_typed(const Listed &p, const Listed &t) {
  return p.packed.overlaps(t.typed) &&
         may_share_bytes(t.m.plan, address(t.m.typed), address(p.packed.lo), address(p.packed.hi));
}

// may_share_bytes for two typed objects, remembered: a halo exchange unpacks the same
// ghost regions of the same arrays every cycle, and within one array their bounds overlap,
// so each unpack would otherwise repeat the exact test against each earlier one. The key
// is what decides the answer: both plans (a datatype's plan id, never reused, and the
// packed size, which fixes the count) and the distance between the two objects.
bool typed_objects_meet(const Listed &x, const Listed &y) {
  if (!x.typed.overlaps(y.typed)) return false;
  const QueuedMove &a = x.m, &b = y.m;
  if (a.plan.id == 0 || b.plan.id == 0)
    return may_share_bytes(a.plan, address(a.typed), b.plan, address(b.typed));
  struct Key {
    uint64_t a, b;
    int64_t a_size, b_size, distance;
    bool operator==(const Key &o) const {
      return a == o.a && b == o.b && a_size == o.a_size && b_size == o.b_size && distance == o.distance;
    }
  };
  struct Hash {
    size_t operator()(const Key &k) const {
      uint64_t h = k.a * 0x9e3779b97f4a7c15ull;
      for (const uint64_t v : {k.b, uint64_t(k.a_size), uint64_t(k.b_size), uint64_t(k.distance)})
        h = (h ^ v) * 0x100000001b3ull;
      return size_t(h ^ (h >> 29));
    }
  };
  thread_local std::unordered_map<Key, bool, Hash> memo;
  const Key key{a.plan.id, b.plan.id, a.plan.packed_size(), b.plan.packed_size(), address(b.typed) - address(a.typed)};
  const auto it = memo.find(key);
  if (it != memo.end()) return it->second;
  if (memo.size() >= 4096) memo.clear();  // bounded: plans come and go
  const bool meet = may_share_bytes(a.plan, address(a.typed), b.plan, address(b.typed));
  memo.emplace(key, meet);
  return meet;
}

// Whether `m` must run after the moves `in` have run (not beside them in one launch): any
// byte that one of them writes, another reads or writes. A pack reads its typed object and
// writes its packed bytes; an unpack the reverse. Moves the other way, or on another GPU,
// are never put beside these.
bool conflicts(const Listed &m, const std::vector<Listed> &in) {
  if (in.empty()) return false;
  if (in.front().m.to_packed != m.m.to_packed || in.front().m.device != m.m.device) return true;
  for (const Listed &q : in) {
    if (packed_meets_typed(q, m) || packed_meets_typed(m, q)) return true;
    if (m.m.to_packed ? q.packed.overlaps(m.packed) : typed_objects_meet(q, m)) return true;
  }
  return false;
}

void launch_queue() {
  std::vector<Listed> batch;
  batch.swap(t_queued);
  t_open.clear();  // the launch below comes after the open one, which it closes
  std::vector<MoveJob> jobs;
  jobs.reserve(batch.size());
  for (Listed &l : batch) jobs.push_back({&l.m.plan, l.m.typed, l.m.packed, l.m.bytes, Transfer{Method::Device, l.m.bytes}});
  Backend &b = gpu_backend();
  const int device = batch.front().m.device;
  Fence done;
  Status st;
  {
    const OnDevice on(device);
    st = batch.front().m.to_packed ? b.pack_async(jobs, done) : b.unpack_async(jobs, done);
  }
  // The MPI calls that queued these moves have returned: a later call raises the failure.
  if (st != Status::Ok)
    keep_failure(st);
  else
    local_work().add(done, device);
}

void close_open_moves() {
  if (t_open.empty()) return;
  {
    const OnDevice on(t_open.front().m.device);
    gpu_backend().close_open();
  }
  t_open.clear();
}

}  // namespace

bool moves_queued() { return !t_queued.empty() || !t_open.empty(); }

namespace {

// The progress room's hooks (progress.hpp): the calling thread's queued moves are launched
// first of all when sends are flushed, and the deferred work of every thread is waited for
// at MPI_Finalize, after everything above it drained (a failure nobody took is logged).
void register_local_moves() {
  static const bool registered = [] {
    static ProgressHooks hooks;
    hooks.name = "local moves";
    hooks.flush = [](MPI_Comm comm, int) {
      if (comm == MPI_COMM_NULL) launch_own_moves();
    };
    hooks.drain = [] {
      local_work().settle();
      log_deferred_failure();
    };
    register_progress(ProgressSlot::LocalMoves, hooks);
    return true;
  }();
  (void)registered;
}

}  // namespace

void launch_queued_moves() {
  close_open_moves();
  if (!t_queued.empty()) launch_queue();
}

Status queue_move(QueuedMove m) {
  register_local_moves();
  Listed l(std::move(m));
  if (conflicts(l, t_queued)) launch_queue();
  t_queued.push_back(std::move(l));
  return Status::Ok;
}

Status join_open_move(QueuedMove m) {
  if (!t_queued.empty()) launch_queue();
  Listed l(std::move(m));
  // A full list is closed too: the backend's launch holds as many objects.
  if (t_open.size() >= 256 || conflicts(l, t_open)) close_open_moves();
  Backend &b = gpu_backend();
  const MoveJob job{&l.m.plan, l.m.typed, l.m.packed, l.m.bytes, Transfer{Method::Device, l.m.bytes}};
  Fence done;
  const Status st = b.join_open(job, l.m.to_packed, done);
  if (st != Status::Ok) return st;
  const int device = l.m.device;
  t_open.push_back(std::move(l));
  local_work().add(done, device);
  return Status::Ok;
}

LocalWork &local_work() {
  static LocalWork *w = [] {
    register_local_moves();
    return new LocalWork;  // immortal, like the engine
  }();
  return *w;
}

}  // namespace tempi
