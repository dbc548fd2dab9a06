// A backend for machines without a GPU that emulates one: packing runs the host
// reference packer, and the memory it calls "device" memory is memory the process
// cannot touch, exactly as with a GPU (docs/design.md, "Emulated GPU memory (CI)").
// Linked into a second copy of the TEMPI archive that only tests use, it drives every
// GPU-buffer path of the MPI layer (methods, pipelining, the request table, completion
// calls) on CI, where no GPU exists, and a GPU buffer that reaches the MPI library (or
// any host code) crashes there with one line that says so, not first on a user's node.
//
// Device memory: one memory file (memfd) per allocation, mapped twice. The address the
// program gets is a PROT_NONE view; the backend's "kernels" (host_pack, host_unpack)
// and copies work through a read-write alias, to which every entry point translates
// device pointers (interior ones included). A guard page beyond each view and each
// alias catches overruns. Pinned memory is ordinary host memory, as on a GPU machine.
// Where the MPI library is declared CUDA-aware (TEMPI_CUDA_AWARE=yes), the view is
// readable and writable too: a CUDA-aware library reads GPU memory itself.
//
// Streams: pack_async, unpack_async and the pipelines' steps (queue_range, queue_copy)
// queue their work on the calling thread's emulated stream and return; it runs when a
// fence at or after it is waited for (or queried a second time), or when a synchronous
// call on that thread runs (stream order). So code that reads packed bytes before waiting
// reads stale bytes on CI too.
//
// IPC: an application's device allocation keeps its memory file open, and another process
// of the node maps it (through /proc/<pid>/fd/<fd>) as device memory of its own, the
// stand-in for cudaIpcOpenMemHandle: so zero-copy collectives run their whole protocol on CI
// and a peer's "GPU" memory faults on host access there too.
//
// Faults (emulated_faults.hpp): a test can make the n-th next device or pinned
// allocation, kernel launch or copy fail, as cudaMalloc, cudaHostAlloc, a launch or
// cudaMemcpy can, to drive TEMPI's fallbacks and error paths on CI.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>

#include "backend.hpp"
#include "config.hpp"
#include "emulated_faults.hpp"
#include "emulated_streams.hpp"
#include "host_packer.hpp"
#include "paired_runs.hpp"

namespace tempi {

namespace {

// ---- What the fault handler can read without a lock ------------------------------

// One live device allocation: its view, its alias, its size and the bytes mapped for
// each (size rounded up to pages, plus the guard page). `base` is written last and
// cleared first, so a handler that sees it non-zero sees the rest.
struct Slot {
  std::atomic<uintptr_t> base{0};
  std::atomic<uintptr_t> alias{0};
  std::atomic<uint64_t> bytes{0};
  std::atomic<uint64_t> span{0};
};
// Up to 32768 live device allocations are named in fault messages (each is two
// mappings; Linux allows 65530 by default). More still work, unnamed.
constexpr size_t kSlots = size_t(1) << 15;
Slot g_slots[kSlots];

struct sigaction g_previous[2];          // SIGSEGV, SIGBUS: what was installed before us
std::atomic<bool> g_chained{false};      // the previous handler was called once already

char *put_str(char *out, const char *s) {
  while (*s) *out++ = *s++;
  return out;
}

char *put_hex(char *out, uint64_t v) {
  out = put_str(out, "0x");
  char digits[16];
  int n = 0;
  do {
    digits[n++] = "0123456789abcdef"[v & 15];
    v >>= 4;
  } while (v);
  while (n) *out++ = digits[--n];
  return out;
}

char *put_dec(char *out, uint64_t v) {
  char digits[20];
  int n = 0;
  do {
    digits[n++] = char('0' + v % 10);
    v /= 10;
  } while (v);
  while (n) *out++ = digits[--n];
  return out;
}

void write_all(const char *p, size_t n) {
  while (n) {
    const ssize_t w = write(STDERR_FILENO, p, n);
    if (w <= 0) {
      if (w < 0 && errno == EINTR) continue;
      return;
    }
    p += w;
    n -= size_t(w);
  }
}

// One line on stderr when `addr` lies in emulated device memory (async-signal-safe).
void report_fault(uintptr_t addr) {
  for (Slot &s : g_slots) {
    const uintptr_t base = s.base.load(std::memory_order_acquire);
    if (!base) continue;
    const uintptr_t alias = s.alias.load(std::memory_order_relaxed);
    const uint64_t bytes = s.bytes.load(std::memory_order_relaxed);
    const uint64_t span = s.span.load(std::memory_order_relaxed);
    char line[320];
    char *p = line;
    if (addr - base < span) {
      p = put_str(p, "[tempi emulated GPU] host access to GPU memory at ");
      p = put_hex(p, addr);
      p = put_str(p, ": offset ");
      p = put_dec(p, addr - base);
      p = put_str(p, " of a ");
      p = put_dec(p, bytes);
      p = put_str(p, "-byte device allocation at ");
      p = put_hex(p, base);
      if (addr - base >= bytes) p = put_str(p, " (past its end)");
    } else if (alias && addr - alias < span) {
      p = put_str(p, "[tempi emulated GPU] emulated GPU work out of bounds at offset ");
      p = put_dec(p, addr - alias);
      p = put_str(p, " of a ");
      p = put_dec(p, bytes);
      p = put_str(p, "-byte device allocation at ");
      p = put_hex(p, base);
    } else {
      continue;
    }
    *p++ = '\n';
    write_all(line, size_t(p - line));
    return;
  }
}

// Says what happened (when the fault is in emulated device memory), then lets the
// handler that was there before run, or the default action kill the process with the
// same signal.
void on_fault(int sig, siginfo_t *info, void *context) {
  const int saved_errno = errno;
  if (info && info->si_code > 0) report_fault(reinterpret_cast<uintptr_t>(info->si_addr));  // a real fault
  const struct sigaction &prev = g_previous[sig == SIGBUS ? 1 : 0];
  if (!g_chained.exchange(true)) {
    if ((prev.sa_flags & SA_SIGINFO) && prev.sa_sigaction && prev.sa_sigaction != on_fault) {
      prev.sa_sigaction(sig, info, context);
      errno = saved_errno;
      return;  // a fault repeats on return, reaching whatever is installed then
    }
    if (!(prev.sa_flags & SA_SIGINFO) && prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN) {
      prev.sa_handler(sig);
      errno = saved_errno;
      return;
    }
  }
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);
  raise(sig);  // pending until this handler returns, then the default action: death by `sig`
  errno = saved_errno;
}

// Puts on_fault on top of SIGSEGV and SIGBUS unless it is there already (a test
// framework may have installed its own handlers since; they run after ours).
void ensure_fault_handler() {
  const int sigs[2] = {SIGSEGV, SIGBUS};
  for (int i = 0; i < 2; ++i) {
    struct sigaction current;
    if (sigaction(sigs[i], nullptr, &current) != 0) continue;
    if ((current.sa_flags & SA_SIGINFO) && current.sa_sigaction == on_fault) continue;
    g_previous[i] = current;
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(sigs[i], &sa, nullptr);
  }
}

// ---- Emulated streams ---------------------------------------------------------------

// One thread's stream: work in issue order, run by whichever thread needs it done.
struct Stream {
  std::mutex mutex;
  struct Work {
    uint64_t seq;
    std::function<void()> run;
  };
  std::deque<Work> queue;
  uint64_t issued = 0;
  uint64_t completed = 0;

  uint64_t enqueue(std::function<void()> run) {
    std::lock_guard<std::mutex> lock(mutex);
    queue.push_back({++issued, std::move(run)});
    return issued;
  }
  // Runs the work up to and including `seq`; true when there was some.
  bool run_until(uint64_t seq) {
    std::lock_guard<std::mutex> lock(mutex);
    bool ran = false;
    while (!queue.empty() && queue.front().seq <= seq) {
      Work w = std::move(queue.front());
      queue.pop_front();
      w.run();
      completed = w.seq;
      ran = true;
    }
    return ran;
  }
  bool done(uint64_t seq) {
    std::lock_guard<std::mutex> lock(mutex);
    return completed >= seq;
  }
};

struct FenceState {
  std::shared_ptr<Stream> stream;
  uint64_t seq = 0;
  std::atomic<bool> asked{false};
};

// Every thread's stream, for cudaFree's implicit synchronization. Immortal, so that a
// device buffer freed during exit still finds it.
struct Streams {
  std::mutex mutex;
  std::vector<std::weak_ptr<Stream>> all;
};
Streams &streams() {
  static Streams *s = new Streams;
  return *s;
}

const std::shared_ptr<Stream> &this_thread_stream() {
  thread_local const std::shared_ptr<Stream> stream = [] {
    auto s = std::make_shared<Stream>();
    Streams &reg = streams();
    std::lock_guard<std::mutex> lock(reg.mutex);
    reg.all.erase(std::remove_if(reg.all.begin(), reg.all.end(),
                                 [](const std::weak_ptr<Stream> &w) { return w.expired(); }),
                  reg.all.end());
    reg.all.push_back(s);
    return s;
  }();
  return stream;
}

void drain_this_thread() { this_thread_stream()->run_until(UINT64_MAX); }

void drain_all_streams() {
  std::vector<std::shared_ptr<Stream>> live;
  {
    Streams &reg = streams();
    std::lock_guard<std::mutex> lock(reg.mutex);
    for (const auto &w : reg.all)
      if (auto s = w.lock()) live.push_back(std::move(s));
  }
  for (auto &s : live) s->run_until(UINT64_MAX);
}

// Fences that TEMPI made the legacy default stream wait for (order_default_stream_after):
// what the application's blocking streams wait for before their next work, and nothing
// else of TEMPI's streams (a blocking stream does not wait for another blocking stream).
struct LegacyWaits {
  std::mutex mutex;
  std::vector<std::shared_ptr<void>> fences;  // FenceState
};
LegacyWaits &legacy_waits() {
  static LegacyWaits *w = new LegacyWaits;
  return *w;
}

// ---- Injected faults --------------------------------------------------------------------

// Per kind: how many more operations succeed before one fails (0: none is armed).
std::atomic<int> g_fail_in[4];

// Whether this operation of `kind` is the one that must fail.
bool injected(EmulatedFault kind) {
  std::atomic<int> &left = g_fail_in[int(kind)];
  int n = left.load(std::memory_order_relaxed);
  while (n > 0)
    if (left.compare_exchange_weak(n, n - 1, std::memory_order_relaxed)) return n == 1;
  return false;
}

// ---- The backend ---------------------------------------------------------------------

// The GPU's identity: "emulated:0", unless a test places this process on another "GPU" of
// the host (tests/pmpi/test_peers.cpp: peers on one GPU and on another GPU of the node).
std::mutex g_identity_mutex;
std::string g_identity = "emulated:0";

class EmulatedBackend final : public Backend {
 public:
  // Each live application allocation holds a descriptor (its memory file, for IPC): allow
  // as many as the system does, not the customary 1024.
  EmulatedBackend() {
    struct rlimit files;
    if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
      files.rlim_cur = files.rlim_max;
      setrlimit(RLIMIT_NOFILE, &files);
    }
  }
  bool has_gpu() override { return true; }
  std::string device_name() override { return "emulated GPU (host memory behind PROT_NONE)"; }

  MemorySpace classify(const void *ptr) override {
    std::lock_guard<std::mutex> lock(mutex_);
    const Region *r = find_locked(ptr);
    return r ? r->space : MemorySpace::Host;
  }

  Status pack(const Plan &plan, const void *typed, void *packed, int64_t first, int64_t last) override {
    return synchronous([&] { return run_pack(plan, typed, packed, first, last); });
  }
  Status unpack(const Plan &plan, const void *packed, void *typed, int64_t first, int64_t last) override {
    return synchronous([&] { return run_unpack(plan, packed, typed, first, last); });
  }

  // The pipelines' narrow steps (core/pipelines.cpp) queue on this thread's stream, which
  // is both lanes (one stream keeps issue order, so ordering lanes is nothing to do). A
  // "kernel" cannot touch pageable host memory: both sides must be GPU-accessible.
  Status queue_range(const Plan &plan, void *typed, void *packed, int64_t first, int64_t last,
                     bool to_packed) override {
    if (injected(EmulatedFault::Launch)) return Status::GpuError;
    char *t = nullptr, *p = nullptr;
    if (!gpu_side(typed, t) || !gpu_side(packed, p)) return Status::GpuError;
    last = std::min(last, plan.packed_size());
    if (first >= last) return Status::Ok;
    auto kept = std::make_shared<const Plan>(plan);  // a launch takes its arguments with it
    close_thread_open();
    this_thread_stream()->enqueue([kept, t, p, first, last, to_packed] {
      if (to_packed)
        host_pack(*kept, t, p, first, last);
      else
        host_unpack(*kept, p, t, first, last);
    });
    return Status::Ok;
  }
  // Like cudaMemcpyAsync: any two kinds of memory; a device range must lie in one allocation.
  Status queue_copy(void *dst, const void *src, size_t bytes, Lane) override {
    if (!bytes) return Status::Ok;
    char *d = nullptr, *s = nullptr;
    if (!translate(dst, d, false, bytes) || !translate(src, s, false, bytes)) return Status::GpuError;
    close_thread_open();
    this_thread_stream()->enqueue([d, s, bytes] { std::memmove(d, s, bytes); });
    return Status::Ok;
  }
  Status order(Lane, Lane) override { return Status::Ok; }
  Status finish(Lane) override {
    drain_this_thread();
    syncs_.fetch_add(1, std::memory_order_relaxed);
    return Status::Ok;
  }

  Status acquire(ScratchKind kind, size_t bytes, Scratch &out) override {
    void *p = nullptr;
    if (Status st =
            allocate(bytes, kind == ScratchKind::Device ? MemorySpace::Device : MemorySpace::PinnedHost, &p, true);
        st != Status::Ok)
      return st;
    out.ptr = p;
    out.owner = std::shared_ptr<void>(p, [this](void *q) { release(q); });
    return Status::Ok;
  }

  Status pack_async(const std::vector<MoveJob> &jobs, Fence &done) override { return issue(jobs, true, done); }
  Status unpack_async(const std::vector<MoveJob> &jobs, Fence &done) override { return issue(jobs, false, done); }

  // Repeated moves are prepared where the CUDA backend prepares them (every pair two
  // strided plans): the jobs are kept and moved again, so that the layer above runs the same
  // path as on a GPU.
  Status prepare_moves(const std::vector<PairJob> &jobs, Prepared &out) override {
    out = Prepared{};
    if (jobs.empty()) return Status::Unsupported;
    for (const PairJob &j : jobs)
      if (!j.from || !j.to || !j.from->strided() || !j.to->strided()) return Status::Unsupported;
    out.state = std::make_shared<std::vector<PairJob>>(jobs);
    return Status::Ok;
  }
  Status move_prepared(const Prepared &p, Fence &done) override {
    done = Fence{};
    if (!p) return Status::Unsupported;
    return move_async(*static_cast<const std::vector<PairJob> *>(p.state.get()), done);
  }

  // Each pair through a host buffer of its packed bytes (the host packer has no
  // typed-to-typed form), all pairs as one piece of work on this thread's stream.
  Status move_async(const std::vector<PairJob> &jobs, Fence &done) override {
    done = Fence{};
    if (injected(EmulatedFault::Launch)) return Status::GpuError;
    std::vector<std::function<void()>> work;
    for (const PairJob &j : jobs) {
      if (!j.from || !j.to || j.bytes < 0) return Status::Unsupported;
      const int64_t bytes = std::min({j.bytes, j.from->packed_size(), j.to->packed_size()});
      if (bytes <= 0) continue;
      char *from = nullptr, *to = nullptr;
      if (!gpu_side(j.from_typed, from) || !gpu_side(j.to_typed, to)) return Status::GpuError;
      // As paired runs where the plans allow them (the CUDA backend's one-pass moves of
      // block lists, core/paired_runs.hpp), so that every zero-copy test checks them
      // against the library; packed and unpacked through the host otherwise.
      auto runs = std::make_shared<const std::vector<PairedRun>>(paired_runs(*j.from, *j.to, bytes, 4096, 1 << 18));
      // Scratch is asked for where the CUDA backend needs it: a pair that is neither two
      // strided plans (one fused launch) nor paired runs of 256 bytes on average.
      const bool one_pass = (j.from->strided() && j.to->strided()) ||
                            (!runs->empty() && bytes / int64_t(runs->size()) >= 256);
      if (!one_pass && !j.scratch) return Status::Unsupported;
      if (!runs->empty()) {
        work.push_back([runs, from, to] {
          for (const PairedRun &r : *runs) std::memcpy(to + r.to, from + r.from, size_t(r.length));
        });
        continue;
      }
      auto plans = std::make_shared<const std::pair<Plan, Plan>>(*j.from, *j.to);
      work.push_back([plans, from, to, bytes] {
        std::vector<char> packed(static_cast<size_t>(bytes));
        host_pack(plans->first, from, packed.data(), 0, bytes);
        host_unpack(plans->second, packed.data(), to, 0, bytes);
      });
    }
    if (work.empty()) return Status::Ok;
    close_thread_open();
    auto state = std::make_shared<FenceState>();
    state->stream = this_thread_stream();
    state->seq = state->stream->enqueue([work = std::move(work)] {
      for (const auto &w : work) w();
    });
    done.state = std::move(state);
    return Status::Ok;
  }

  // The first question about unfinished work gets "not yet": the GPU is busy.
  bool query(const Fence &f) override {
    if (!f) return true;
    FenceState &s = *static_cast<FenceState *>(f.state.get());
    if (s.stream->done(s.seq)) {
      s.asked = true;
      return true;
    }
    if (!s.asked.exchange(true)) return false;
    s.stream->run_until(s.seq);
    return true;
  }

  Status wait(const Fence &f) override {
    if (!f) return Status::Ok;
    FenceState &s = *static_cast<FenceState *>(f.state.get());
    s.asked = true;
    if (s.stream->run_until(s.seq)) syncs_.fetch_add(1, std::memory_order_relaxed);
    return Status::Ok;
  }

  std::string device_id() override {
    std::lock_guard<std::mutex> lock(g_identity_mutex);
    return g_identity;
  }
  bool mps_enabled() override { return false; }
  uint64_t synchronizations() override { return syncs_.load(std::memory_order_relaxed); }
  // The emulated GPU has no stream of the application's: its work is all TEMPI's.
  Status wait_default_stream() override { return Status::Ok; }
  Status order_default_stream_after(const Fence &f) override {
    if (!f) return Status::Ok;
    LegacyWaits &w = legacy_waits();
    std::lock_guard<std::mutex> lock(w.mutex);
    w.fences.push_back(f.state);
    return Status::Ok;
  }

  int device_count() override { return 1; }
  Status select_device(int device) override { return device == 0 ? Status::Ok : Status::Unsupported; }
  int device_of(const void *ptr) override { return classify(ptr) == MemorySpace::Device ? 0 : -1; }
  int use_device(int) override { return 0; }

  Status allocate_device(size_t bytes, void **out) override { return allocate(bytes, MemorySpace::Device, out); }
  // Like cudaFree, waits for the GPU's work first.
  void free_device(void *ptr) override {
    drain_all_streams();
    release(ptr);
  }
  // Like cudaMemcpy: any two kinds of memory; a device range must lie in one allocation.
  Status copy(void *dst, const void *src, size_t bytes) override {
    syncs_.fetch_add(1, std::memory_order_relaxed);
    if (injected(EmulatedFault::Copy)) return Status::GpuError;
    if (!bytes) return Status::Ok;
    char *d = nullptr, *s = nullptr;
    if (!translate(dst, d, false, bytes) || !translate(src, s, false, bytes)) return Status::GpuError;
    std::memmove(d, s, bytes);
    return Status::Ok;
  }
  void release_plan(uint64_t) override {}

  // The handle names the memory file: its owner's process id and descriptor.
  struct EmulatedHandle {
    int32_t pid, fd;
  };
  Status ipc_export(const void *ptr, IpcHandle &out) override {
    size_t offset = 0;
    std::lock_guard<std::mutex> lock(mutex_);
    const Region *r = find_locked(ptr, &offset);
    if (!r || r->space != MemorySpace::Device || r->fd < 0) return Status::Unsupported;
    const EmulatedHandle h{int32_t(getpid()), r->fd};
    std::memcpy(out.bytes, &h, sizeof h);
    out.buffer_id = r->id;
    out.offset = int64_t(offset);
    out.size = int64_t(r->bytes);
    out.base = uint64_t(reinterpret_cast<uintptr_t>(ptr)) - uint64_t(offset);
    return Status::Ok;
  }
  // Like cudaIpcOpenMemHandle: a handle to an allocation whose range overlaps that of a freed
  // allocation of the same process still mapped here is refused ("resource already mapped").
  Status ipc_open(const IpcHandle &handle, void **base) override {
    EmulatedHandle h;
    std::memcpy(&h, handle.bytes, sizeof h);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (const auto &kv : regions_) {
        const Region &r = kv.second;
        if (r.imported.pid == h.pid && r.imported.id != handle.buffer_id &&
            r.imported.base < handle.base + uint64_t(handle.size) && handle.base < r.imported.base + r.imported.size)
          return Status::GpuError;
      }
    }
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%d/fd/%d", int(h.pid), int(h.fd));
    const int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) return Status::GpuError;
    const Status st = allocate_from(fd, size_t(handle.size), MemorySpace::Device, base, false);
    if (st != Status::Ok) return st;
    std::lock_guard<std::mutex> lock(mutex_);
    regions_.at(reinterpret_cast<uintptr_t>(*base)).imported = {h.pid, handle.buffer_id, handle.base,
                                                               uint64_t(handle.size)};
    return Status::Ok;
  }
  void ipc_close(void *base) override { release(base); }
  bool ipc_peer_access(const std::string &device) override { return device == device_id(); }

  // The application's streams: threads of their own (emulated_streams.cpp).
  int stream_device(void *stream) override { return emulated_stream_known(stream) ? 0 : -1; }
  Status stream_capturing(void *, bool &capturing) override {
    capturing = false;
    return Status::Ok;
  }
  Status stream_moves(void *stream, const std::vector<MoveJob> &jobs, bool to_packed) override {
    if (!jobs.empty() && injected(EmulatedFault::Launch)) return Status::GpuError;
    return emulated_stream_moves(stream, jobs, to_packed);
  }
  Status stream_write(void *stream, const std::vector<uint32_t *> &words, uint32_t value) override {
    return emulated_stream_write(stream, words, value);
  }
  Status stream_wait(void *stream, const std::vector<uint32_t *> &words, uint32_t value) override {
    return emulated_stream_wait(stream, words, value);
  }

  MemoryUse memory_use() override {
    std::lock_guard<std::mutex> lock(mutex_);
    return use_;
  }

 private:
  struct Region {
    size_t bytes;        // as asked for
    MemorySpace space;
    char *alias;         // device memory: where the backend reads and writes it; else null
    size_t span;         // device memory: bytes mapped at the view and at the alias
    size_t slot;         // device memory: its entry in g_slots, or kSlots
    bool staging;        // lent by acquire (what memory_use counts, as the CUDA pools do)
    int fd = -1;         // an application's device allocation: its memory file, for IPC
    uint64_t id = 0;     // device memory: the allocation's identity (never reused)
    struct {
      int32_t pid = 0;  // mapped by ipc_open: the owner's process, allocation and its range there
      uint64_t id = 0, base = 0, size = 0;
    } imported;
  };

  // A synchronous call: it follows the work queued on this thread's stream and is one
  // synchronization with the GPU.
  template <class F>
  Status synchronous(F &&f) {
    drain_this_thread();
    syncs_.fetch_add(1, std::memory_order_relaxed);
    if (injected(EmulatedFault::Launch)) return Status::GpuError;
    return f();
  }

  // pack and unpack: either side any memory, as the CUDA backend stages what a kernel cannot reach.
  Status run_pack(const Plan &plan, const void *typed, void *packed, int64_t first, int64_t last) {
    char *t = nullptr, *p = nullptr;
    if (!any_side(typed, t) || !any_side(packed, p)) return Status::GpuError;
    last = std::min(last, plan.packed_size());
    if (first < last) host_pack(plan, t, p, first, last);
    return Status::Ok;
  }
  Status run_unpack(const Plan &plan, const void *packed, void *typed, int64_t first, int64_t last) {
    char *t = nullptr, *p = nullptr;
    if (!any_side(typed, t) || !any_side(packed, p)) return Status::GpuError;
    last = std::min(last, plan.packed_size());
    if (first < last) host_unpack(plan, p, t, first, last);
    return Status::Ok;
  }

  // `typed` and `host` already translated.
  static void staged(const Plan &plan, char *typed, char *host, int64_t bytes, int64_t chunk, bool packing) {
    bytes = std::min(bytes, plan.packed_size());
    if (chunk <= 0) chunk = bytes;
    for (int64_t off = 0; off < bytes; off += chunk) {
      const int64_t end = std::min(bytes, off + chunk);
      if (packing)
        host_pack(plan, typed, host + off, off, end);
      else
        host_unpack(plan, host + off, typed, off, end);
    }
  }

  // This thread's open launch (join_open): one piece of work on its stream whose moves
  // grow until it runs (a wait reaches it) or closes (the thread queues other work).
  struct OpenWork {
    std::mutex mutex;
    bool packing = false, closed = false;
    std::vector<std::function<void()>> work;
    std::shared_ptr<FenceState> fence;
  };
  static std::shared_ptr<OpenWork> &thread_open() {
    thread_local std::shared_ptr<OpenWork> open;
    return open;
  }
  static void close_thread_open() {
    std::shared_ptr<OpenWork> &open = thread_open();
    if (!open) return;
    std::lock_guard<std::mutex> lock(open->mutex);
    open->closed = true;
    open.reset();
  }

 public:
  Status join_open(const MoveJob &job, bool packing, Fence &done) override {
    done = Fence{};
    if (injected(EmulatedFault::Launch)) return Status::GpuError;
    std::vector<std::function<void()>> work;
    if (const Status st = moves({job}, packing, work); st != Status::Ok) return st;
    if (work.empty()) return Status::Ok;
    std::shared_ptr<OpenWork> &open = thread_open();
    if (open && open->packing == packing) {
      std::lock_guard<std::mutex> lock(open->mutex);
      if (!open->closed) {
        open->work.push_back(std::move(work.front()));
        done.state = open->fence;
        return Status::Ok;
      }
    }
    close_thread_open();
    auto next = std::make_shared<OpenWork>();
    next->packing = packing;
    next->work.push_back(std::move(work.front()));
    next->fence = std::make_shared<FenceState>();
    next->fence->stream = this_thread_stream();
    // Run last to first, like a launch's moves (see issue()).
    next->fence->seq = next->fence->stream->enqueue([next] {
      std::vector<std::function<void()>> all;
      {
        std::lock_guard<std::mutex> lock(next->mutex);
        next->closed = true;
        all.swap(next->work);
      }
      for (auto w = all.rbegin(); w != all.rend(); ++w) (*w)();
    });
    done.state = next->fence;
    open = std::move(next);
    return Status::Ok;
  }
  void close_open() override { close_thread_open(); }

 private:
  // One "kernel" per job: the moves of `jobs`, to run on a stream later.
  Status moves(const std::vector<MoveJob> &jobs, bool packing, std::vector<std::function<void()>> &work) {
    for (const MoveJob &j : jobs) {
      if (!j.plan || j.bytes < 0) return Status::Unsupported;
      const int64_t bytes = std::min(j.bytes, j.plan->packed_size());
      if (bytes <= 0) continue;
      // The typed side is GPU memory; the packed side is reached by a kernel, except
      // that the staged method copies it with the copy engines (any host memory).
      char *typed = nullptr, *packed = nullptr;
      const bool staged_copy = j.transfer.method == Method::Staged;
      if (!gpu_side(j.typed, typed) || !(staged_copy ? any_side(j.packed, packed) : gpu_side(j.packed, packed)))
        return Status::GpuError;
      const int64_t chunk = staged_copy && j.transfer.chunk > 0 ? j.transfer.chunk : bytes;
      auto plan = std::make_shared<const Plan>(*j.plan);  // a launch takes its arguments with it
      work.push_back(
          [plan, typed, packed, bytes, chunk, packing] { staged(*plan, typed, packed, bytes, chunk, packing); });
    }
    return Status::Ok;
  }

  Status issue(const std::vector<MoveJob> &jobs, bool packing, Fence &done) {
    done = Fence{};
    if (injected(EmulatedFault::Launch)) return Status::GpuError;
    std::vector<std::function<void()>> work;
    if (const Status st = moves(jobs, packing, work); st != Status::Ok) return st;
    if (work.empty()) return Status::Ok;
    close_thread_open();  // work queued after the open launch is never overtaken by a later join
    // The moves of one launch run in no particular order on a GPU: here last to first, so
    // that a caller that puts dependent moves in one launch gets wrong bytes on CI too.
    std::reverse(work.begin(), work.end());
    // Issued together, launched together: one piece of work on this thread's stream.
    // The fence names the stream, so that any thread can finish the work.
    auto state = std::make_shared<FenceState>();
    state->stream = this_thread_stream();
    state->seq = state->stream->enqueue([work = std::move(work)] {
      for (const auto &w : work) w();
    });
    done.state = std::move(state);
    return Status::Ok;
  }

  // The allocation holding `ptr` and its offset there, or null. An allocation of zero
  // bytes still owns its address, as with CUDA.
  const Region *find_locked(const void *ptr, size_t *offset = nullptr) const {
    const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
    auto it = regions_.upper_bound(p);
    if (it == regions_.begin()) return nullptr;
    --it;
    if (p - it->first >= std::max<size_t>(it->second.bytes, 1)) return nullptr;
    if (offset) *offset = p - it->first;
    return &it->second;
  }

  // Where the backend touches `ptr`: device memory at its alias, anything else as it
  // is. With `bytes`, the range [ptr, ptr + bytes) of device memory must lie in its
  // allocation (a copy); `gpu` says a kernel touches it, so it must be device, managed
  // or pinned memory: a GPU cannot reach pageable host memory.
  bool translate(const void *ptr, char *&out, bool gpu, size_t bytes = 0) {
    size_t offset = 0;
    std::lock_guard<std::mutex> lock(mutex_);
    const Region *r = find_locked(ptr, &offset);
    if (!r) {
      out = static_cast<char *>(const_cast<void *>(ptr));
      return !gpu;
    }
    if (!r->alias) {
      out = static_cast<char *>(const_cast<void *>(ptr));
      return true;
    }
    if (bytes && offset + bytes > r->bytes) return false;
    out = r->alias + offset;
    return true;
  }
  bool any_side(const void *ptr, char *&out) { return translate(ptr, out, false); }
  bool gpu_side(const void *ptr, char *&out) { return translate(ptr, out, true); }

  // Staging bytes held and their peak, by kind (called with mutex_ held).
  void count_locked(const Region &r, bool allocated) {
    if (!r.staging) return;
    const MemorySpace space = r.space;
    const size_t bytes = r.bytes;
    const bool device = space == MemorySpace::Device;
    uint64_t &held = device ? use_.device_bytes : use_.pinned_bytes;
    uint64_t &peak = device ? use_.device_peak : use_.pinned_peak;
    held = allocated ? held + bytes : held - bytes;
    peak = std::max(peak, held);
  }

  Status allocate(size_t bytes, MemorySpace space, void **out, bool staging = false) {
    return allocate_from(-1, bytes, space, out, staging);
  }

  // Device memory from memory file `fd` (another process's, mapped by ipc_open), or from a
  // new one when fd < 0.
  Status allocate_from(int import_fd, size_t bytes, MemorySpace space, void **out, bool staging) {
    if (injected(space == MemorySpace::Device ? EmulatedFault::DeviceAlloc : EmulatedFault::PinnedAlloc))
      return Status::NoMemory;
    if (space != MemorySpace::Device) {  // pinned host memory is host memory
      void *p = std::malloc(bytes ? bytes : 1);
      if (!p) return Status::NoMemory;
      std::lock_guard<std::mutex> lock(mutex_);
      const Region &r = regions_[reinterpret_cast<uintptr_t>(p)] = {bytes, space, nullptr, 0, kSlots, staging, -1, 0, {}};
      count_locked(r, true);
      *out = p;
      return Status::Ok;
    }
    static const size_t page = size_t(sysconf(_SC_PAGESIZE));
    // Declared CUDA-aware, the MPI library reads GPU memory: so may the process.
    static const bool host_may_touch = config().cuda_aware.value_or(false);
    const size_t want = std::max<size_t>(bytes, 1);
    if (want > SIZE_MAX / 2) return Status::NoMemory;
    const size_t len = (want + page - 1) / page * page;
    const size_t span = len + page;  // the last page lies past the file's end: a guard
    const bool imported = import_fd >= 0;
    const int fd = imported ? import_fd : memfd_create("tempi-emulated-gpu", MFD_CLOEXEC);
    if (fd < 0) return Status::NoMemory;
    if (!imported && ftruncate(fd, off_t(len)) != 0) {  // sparse: pages cost memory once written
      close(fd);
      return Status::NoMemory;
    }
    void *alias = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
    void *view = alias == MAP_FAILED ? MAP_FAILED
                                     : mmap(nullptr, span, host_may_touch ? PROT_READ | PROT_WRITE : PROT_NONE,
                                            MAP_SHARED | MAP_NORESERVE, fd, 0);
    // An application's allocation keeps its file for peers to map (TEMPI's staging is never exported).
    const bool exportable = !imported && !staging;
    if (!exportable || view == MAP_FAILED) close(fd);
    if (view == MAP_FAILED) {
      if (alias != MAP_FAILED) munmap(alias, span);
      return Status::NoMemory;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    ensure_fault_handler();
    size_t slot = kSlots;
    for (size_t k = 0; k < kSlots; ++k) {
      const size_t i = (next_slot_ + k) % kSlots;
      if (!g_slots[i].base.load(std::memory_order_relaxed)) {
        slot = i;
        next_slot_ = i + 1;
        break;
      }
    }
    if (slot < kSlots) {
      g_slots[slot].alias.store(reinterpret_cast<uintptr_t>(alias), std::memory_order_relaxed);
      g_slots[slot].bytes.store(bytes, std::memory_order_relaxed);
      g_slots[slot].span.store(span, std::memory_order_relaxed);
      g_slots[slot].base.store(reinterpret_cast<uintptr_t>(view), std::memory_order_release);
    }
    Region &r = regions_[reinterpret_cast<uintptr_t>(view)] = {bytes, space, static_cast<char *>(alias), span,
                                                               slot, staging, -1, 0, {}};
    r.fd = exportable ? fd : -1;
    r.id = ++next_id_;
    count_locked(r, true);
    *out = view;
    return Status::Ok;
  }

  void release(void *p) {
    if (!p) return;
    Region r;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = regions_.find(reinterpret_cast<uintptr_t>(p));
      if (it == regions_.end()) return;  // not ours (cudaFree would say so; nothing to free)
      r = it->second;
      regions_.erase(it);
      count_locked(r, false);
      if (r.slot < kSlots) g_slots[r.slot].base.store(0, std::memory_order_release);
    }
    if (!r.alias) {
      std::free(p);
      return;
    }
    if (r.fd >= 0) close(r.fd);
    munmap(p, r.span);
    munmap(r.alias, r.span);
  }

  std::mutex mutex_;
  std::map<uintptr_t, Region> regions_;
  size_t next_slot_ = 0;
  uint64_t next_id_ = 0;
  MemoryUse use_;
  std::atomic<uint64_t> syncs_{0};
};

}  // namespace

Backend &gpu_backend() {
  static Backend *backend = new EmulatedBackend;  // immortal, like the CUDA one
  return *backend;
}

// What cudaDeviceSynchronize is to a program on a GPU: every queued piece of work runs.
// Tests of the deferred MPI_Pack contract (TEMPI_DEFER_PACK=1) use it as the
// application's synchronization.
void emulated_device_synchronize() { drain_all_streams(); }

// What work the application queues on a blocking stream of its own sees first: the work
// TEMPI ordered the legacy default stream after, and no other of TEMPI's work.
void emulated_blocking_stream_sync() {
  std::vector<std::shared_ptr<void>> fences;
  {
    LegacyWaits &w = legacy_waits();
    std::lock_guard<std::mutex> lock(w.mutex);
    fences.swap(w.fences);
  }
  for (const std::shared_ptr<void> &f : fences) {
    const FenceState &s = *static_cast<const FenceState *>(f.get());
    s.stream->run_until(s.seq);
  }
}

void emulated_fail_nth(EmulatedFault kind, int n) { g_fail_in[int(kind)].store(n, std::memory_order_relaxed); }

void emulated_set_device_id(const std::string &id) {
  std::lock_guard<std::mutex> lock(g_identity_mutex);
  g_identity = id;
}

}  // namespace tempi
