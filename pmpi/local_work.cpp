#include "local_work.hpp"

#include <algorithm>
#include <climits>

#include "log.hpp"
#include "overlap.hpp"

namespace tempi {

void LocalWork::add(const Fence &f, int device) {
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

void LocalWork::settle_if(bool others_only) {
  std::vector<Entry> mine;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const std::thread::id me = std::this_thread::get_id();
    std::vector<Entry> keep;
    for (Entry &e : entries_) (others_only && e.thread == me ? keep : mine).push_back(std::move(e));
    entries_.swap(keep);
    count_.store(entries_.size(), std::memory_order_release);
  }
  Backend &b = gpu_backend();
  for (Entry &e : mine) {
    const int previous = e.device >= 0 ? b.use_device(e.device) : -1;
    // A failed kernel was reported by the call that launched it; the wait clears it.
    if (b.wait(e.fence) != Status::Ok) TEMPI_LOG(Error, "a deferred MPI_Pack/MPI_Unpack kernel failed");
    if (previous >= 0) b.use_device(previous);
  }
}

void LocalWork::settle_other_threads() { settle_if(true); }
void LocalWork::settle() {
  launch_queued_moves();
  settle_if(false);
}

namespace {

thread_local std::vector<QueuedMove> t_queued;

struct Range {
  const char *lo, *hi;
  bool overlaps(const Range &o) const { return lo < o.hi && o.lo < hi; }
};

// The bytes a queued move's typed object may touch (bounds, not exact).
Range typed_range(const QueuedMove &m) {
  const auto [lo, hi] = m.plan.typed_bounds();
  return {static_cast<const char *>(m.typed) + lo, static_cast<const char *>(m.typed) + hi};
}
Range packed_range(const QueuedMove &m) {
  return {static_cast<const char *>(m.packed), static_cast<const char *>(m.packed) + m.bytes};
}

int64_t address(const void *p) { return int64_t(reinterpret_cast<uintptr_t>(p)); }

// Whether the packed bytes of `p` meet the typed object of `t` (bounds first, then the
// object's own bytes: a strided object's bounds may hold another's packed buffer, as
// when one allocation holds an array and the buffers its faces are packed into).
bool packed_meets_typed(const QueuedMove &p, const QueuedMove &t) {
  const Range pr = packed_range(p);
  return pr.overlaps(typed_range(t)) && may_share_bytes(t.plan, address(t.typed), address(pr.lo), address(pr.hi));
}

// Whether `m` must run after the queued packs have run (not beside them in one launch):
// a queued pack's output is `m`'s output or input, or `m` writes a queued pack's input.
bool depends_on_queue(const QueuedMove &m) {
  if (t_queued.empty()) return false;
  if (t_queued.front().to_packed != m.to_packed || t_queued.front().device != m.device) return true;
  const Range mw = packed_range(m);
  for (const QueuedMove &q : t_queued)
    if (packed_range(q).overlaps(mw) || packed_meets_typed(q, m) || packed_meets_typed(m, q)) return true;
  return false;
}

}  // namespace

bool moves_queued() { return !t_queued.empty(); }

void launch_queued_moves() {
  if (t_queued.empty()) return;
  std::vector<QueuedMove> batch;
  batch.swap(t_queued);
  std::vector<MoveJob> jobs;
  jobs.reserve(batch.size());
  for (QueuedMove &m : batch) jobs.push_back({&m.plan, m.typed, m.packed, m.bytes, Transfer{Method::Device, m.bytes}});
  Backend &b = gpu_backend();
  const int device = batch.front().device;
  const int previous = device >= 0 ? b.use_device(device) : -1;
  Fence done;
  const Status st = batch.front().to_packed ? b.pack_async(jobs, done) : b.unpack_async(jobs, done);
  if (previous >= 0) b.use_device(previous);
  // The MPI calls that queued these moves returned long ago: nobody is left to take an
  // error code, so the failure is logged where it is decided.
  if (st != Status::Ok)
    TEMPI_LOG(Error, "%zu deferred MPI_Pack/MPI_Unpack moves could not be launched: %s", batch.size(), to_string(st));
  else
    local_work().add(done, device);
}

Status queue_move(QueuedMove m) {
  if (depends_on_queue(m)) launch_queued_moves();
  t_queued.push_back(std::move(m));
  return Status::Ok;
}

LocalWork &local_work() {
  static LocalWork *w = new LocalWork;  // immortal, like the engine
  return *w;
}

}  // namespace tempi
