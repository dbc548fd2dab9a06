// Open launches (open_launch.hpp): one kernel per thread and device that takes the moves
// of a run of MPI_Pack or MPI_Unpack calls while it runs, closed by the thread's other
// work, when full, or by a timer thread a short while after the last join.
#include "open_launch.hpp"

#include <sched.h>
#include <sys/prctl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "check.hpp"
#include "log.hpp"
#include "policy.hpp"
#include "resources.hpp"

namespace tempi {

namespace {

using Clock = std::chrono::steady_clock;

// How long an open launch waits for another object before it closes by itself. Consecutive
constexpr auto kOpenIdle = std::chrono::microseconds(policy::kOpenIdleMicroseconds);

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

}  // namespace

// One open-launch object: its host and device areas, reused launch after launch once the
// kernel of the previous one has ended (`ended` recorded after it).
struct OpenLaunch {
  bool to_packed = false;
  Buffer host, area;  // pinned (mapped) and device memory of kOpenAreaBytes each
  Event ended;
  std::mutex mutex;        // guards the fields below and the host header
  bool closed = true;
  uint64_t epoch = 0;      // of the current (or last) launch
  uint32_t count = 0;      // objects published in it
  uint32_t tiles = 0;      // their tiles
  std::atomic<int64_t> last_join_ns{0};

  OpenHost *header() { return static_cast<OpenHost *>(host.get()); }
  void *slot(uint32_t k) { return static_cast<char *>(host.get()) + kOpenHeaderBytes + size_t(k) * kOpenSlotBytes; }
  uint32_t *ends() { return reinterpret_cast<uint32_t *>(static_cast<char *>(host.get()) + kOpenEndsOffset); }

  // Under `mutex`. The host writes the slot and its tile end before the count: the kernel
  // reads the count with acquire semantics, then the rest.
  void publish(const FusedObject &o) {
    tiles = ends()[count] = describe_open(o, to_packed, tiles, slot(count));
    __atomic_store_n(&header()->published, ++count, __ATOMIC_RELEASE);
    last_join_ns.store(now_ns(), std::memory_order_relaxed);
  }
  // Under `mutex`.
  void close_locked() {
    if (closed) return;
    closed = true;
    __atomic_store_n(&header()->closed, 1u, __ATOMIC_RELEASE);
  }
  void close_if(uint64_t e) {
    std::lock_guard<std::mutex> lock(mutex);
    if (epoch == e) close_locked();
  }
  // Whether the kernel of the last launch has ended (or none was launched).
  bool idle() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (!closed) return false;
    }
    const cudaError_t e = cudaEventQuery(ended.get());
    if (e == cudaErrorNotReady) return false;
    if (e != cudaSuccess) cudaGetLastError();  // a fault was reported by the wait of the work that met it
    return true;
  }
  ~OpenLaunch() {
    if (!header()) return;
    {
      std::lock_guard<std::mutex> lock(mutex);
      close_locked();
    }
    cudaEventSynchronize(ended.get());  // before its memory goes; fails harmlessly once the runtime is gone
  }
};

namespace {

std::atomic<uint64_t> g_epoch{0};

Status create_open(cudaStream_t stream, std::shared_ptr<OpenLaunch> &out) {
  auto l = std::make_shared<OpenLaunch>();
  TEMPI_TRY(Buffer::allocate(Buffer::Kind::Pinned, kOpenAreaBytes, l->host));
  TEMPI_TRY(Buffer::allocate(Buffer::Kind::Device, kOpenAreaBytes, l->area));
  TEMPI_TRY(Event::create(l->ended));
  // The mirror and the election word start at 0, below every epoch: no launch mistakes
  // them for its own.
  TEMPI_CUDA(cudaMemsetAsync(l->area.get(), 0, kOpenAreaBytes, stream));
  out = std::move(l);
  return Status::Ok;
}

// Closes launches that nothing joined for kOpenIdle. Its own thread, started with the
// first open launch. Closing is a store to host memory, no CUDA call, so a thread that
// holds the runtime (a first launch that loads a module, a cudaDeviceSynchronize) never
// keeps it from closing. (It may drop the last reference to the launch object of a thread
// that has ended; that launch is closed by then.)
class IdleCloser {
 public:
  void watch(const std::shared_ptr<OpenLaunch> &l, uint64_t epoch) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!started_) {
      std::thread([this] { run(); }).detach();
      started_ = true;
    }
    open_.push_back({l, epoch});
    wake_.notify_one();
  }

 private:
  struct Watched {
    std::shared_ptr<OpenLaunch> launch;
    uint64_t epoch;
  };
  void run() {
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);  // wake when asked, not up to 50 us later
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      if (open_.empty()) {
        wake_.wait(lock);
        continue;
      }
      const int64_t now = now_ns(), idle = std::chrono::nanoseconds(kOpenIdle).count();
      int64_t next = INT64_MAX;
      for (size_t k = 0; k < open_.size();) {
        OpenLaunch &l = *open_[k].launch;
        bool done = false;
        {
          std::lock_guard<std::mutex> guard(l.mutex);
          if (l.epoch != open_[k].epoch || l.closed) {
            done = true;
          } else if (l.last_join_ns.load(std::memory_order_relaxed) + idle <= now) {
            l.close_locked();
            done = true;
          } else {
            next = std::min(next, l.last_join_ns.load(std::memory_order_relaxed) + idle);
          }
        }
        if (done) {
          open_[k] = std::move(open_.back());
          open_.pop_back();
        } else {
          ++k;
        }
      }
      if (next != INT64_MAX) wake_.wait_until(lock, Clock::time_point(std::chrono::nanoseconds(next)));
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<Watched> open_;
  bool started_ = false;
};

IdleCloser &idle_closer() {
  static IdleCloser *c = new IdleCloser;  // immortal: its thread outlives static destruction
  return *c;
}

// This thread's open-launch objects by device: the current one, and spares whose kernels
// may still run.
struct ThreadOpen {
  static_assert(kMaxDevices <= 64, "one bit a device");
  uint64_t open_devices = 0;  // bit d: current[d] may be open
  std::shared_ptr<OpenLaunch> current[kMaxDevices];
  std::vector<std::shared_ptr<OpenLaunch>> spares[kMaxDevices];
};

ThreadOpen &thread_open() {
  thread_local ThreadOpen t;
  return t;
}

uint64_t device_bit(int device) { return uint64_t(1) << device; }  // current_device() < kMaxDevices

// Whether this GPU's kernels can read pinned host memory where the host has it (UVA).
bool open_launches_usable(int device) {
  static std::atomic<int> usable[kMaxDevices];  // 0 unknown, 1 yes, 2 no
  std::atomic<int> &u = usable[device];
  int v = u.load(std::memory_order_acquire);
  if (v == 0) {
    int map = 0, unified = 0;
    const bool ok = cudaDeviceGetAttribute(&map, cudaDevAttrCanMapHostMemory, device) == cudaSuccess &&
                    cudaDeviceGetAttribute(&unified, cudaDevAttrUnifiedAddressing, device) == cudaSuccess &&
                    map && unified;
    if (!ok) {
      cudaGetLastError();
      TEMPI_LOG(Info, "GPU %d cannot read mapped host memory: deferred MPI_Pack/MPI_Unpack launch one kernel each",
                device);
    }
    v = ok ? 1 : 2;
    u.store(v, std::memory_order_release);
  }
  return v == 1;
}

// A launch object of this thread for `device` whose last kernel has ended; Unsupported
// when kMaxSpares are all still running (the move then goes alone, as without open launches).
Status idle_launch(ThreadOpen &t, int device, cudaStream_t stream, std::shared_ptr<OpenLaunch> &out) {
  constexpr size_t kMaxSpares = 4;
  std::vector<std::shared_ptr<OpenLaunch>> &spares = t.spares[device];
  for (size_t k = 0; k < spares.size(); ++k)
    if (spares[k]->idle()) {
      out = std::move(spares[k]);
      spares.erase(spares.begin() + long(k));
      return Status::Ok;
    }
  if (spares.size() >= kMaxSpares) return Status::Unsupported;
  return create_open(stream, out);
}

// Whether the calling thread may run on two CPUs or more. An open launch ends when the
// closer thread closes it; on one CPU the closer waits for the application's thread, which
// spins in its own synchronization (cudaDeviceSynchronize) until the scheduler takes the CPU
// away: a time slice per launch. Measured: CUDA-aware Open MPI 4.1 binds each rank to one
// core when it runs two, and bench_pack_sequence's 78 unpacks then took 1.5 ms a cycle with
// open launches against 0.17 ms with --bind-to none and 0.5 ms one launch each (one H100,
// two ranks under MPS, 2026-11-24). Asked once per thread.
bool thread_has_a_second_cpu() {
  thread_local const int answer = [] {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;  // unknown: assume it can
    if (CPU_COUNT(&set) >= 2) return 1;
    static std::once_flag said;
    std::call_once(said, [] {
      TEMPI_LOG(Warn, "TEMPI_DEFER_PACK=3: this thread may run on one CPU only (the launcher binds each rank "
                      "to one core?): deferred MPI_Pack/MPI_Unpack launch one kernel each, as with "
                      "TEMPI_DEFER_PACK=2. Bind each rank to two CPUs or more for open launches "
                      "(Open MPI: --bind-to none, or --map-by ...:PE=2; docs/using.md)");
    });
    return 0;
  }();
  return answer == 1;
}

}  // namespace

Status join_open(const FusedObject &o, bool to_packed, cudaEvent_t &event, OpenMark &mark) {
  const int device = current_device();
  if (!open_launches_usable(device) || !thread_has_a_second_cpu()) return Status::Unsupported;
  ThreadOpen &t = thread_open();
  std::shared_ptr<OpenLaunch> &cur = t.current[device];
  if (cur && cur->to_packed == to_packed) {
    std::lock_guard<std::mutex> lock(cur->mutex);
    if (!cur->closed && cur->count < kOpenCapacity) {
      cur->publish(o);
      event = cur->ended.get();
      mark = {cur, cur->epoch};
      return Status::Ok;
    }
  }
  // A new launch, after every earlier piece of work on this thread's stream: the stream
  // accessor closes the current launch.
  cudaStream_t stream;
  TEMPI_TRY(thread_stream(stream));
  std::shared_ptr<OpenLaunch> next;
  TEMPI_TRY(idle_launch(t, device, stream, next));
  if (cur) t.spares[device].push_back(std::move(cur));
  uint64_t epoch;
  {
    std::lock_guard<std::mutex> lock(next->mutex);
    do
      epoch = g_epoch.fetch_add(1, std::memory_order_relaxed) + 1;
    while ((epoch & 0xffffffffu) == 0);  // the device mirror tells launches apart by these bits
    next->epoch = epoch;
    next->to_packed = to_packed;
    next->count = 0;
    next->tiles = 0;
    next->closed = false;
    next->header()->published = 0;
    next->header()->closed = 0;
    next->publish(o);
  }
  const OpenArgs args{next->header(), static_cast<uint8_t *>(next->area.get()), epoch};
  const Status launched = launch_open(args, to_packed, stream);
  const cudaError_t recorded = launched == Status::Ok ? cudaEventRecord(next->ended.get(), stream) : cudaSuccess;
  if (launched != Status::Ok || recorded != cudaSuccess) {
    next->close_if(epoch);
    t.spares[device].push_back(std::move(next));
    TEMPI_TRY(launched);
    TEMPI_CUDA(recorded);
  }
  idle_closer().watch(next, epoch);
  event = next->ended.get();
  mark = {next, epoch};
  cur = std::move(next);
  t.open_devices |= device_bit(device);
  return Status::Ok;
}

void close_open(const OpenMark &mark) {
  if (mark.launch) mark.launch->close_if(mark.epoch);
}

void close_thread_open(int device) {
  ThreadOpen &t = thread_open();
  if (!t.open_devices) return;
  if (device >= 0 && !(t.open_devices & device_bit(device))) return;
  for (int d = device >= 0 ? device : 0; d < (device >= 0 ? device + 1 : kMaxDevices); ++d)
    if (t.current[d]) {
      std::lock_guard<std::mutex> lock(t.current[d]->mutex);
      t.current[d]->close_locked();
    }
  t.open_devices = device < 0 ? 0 : t.open_devices & ~device_bit(device);
}

}  // namespace tempi
