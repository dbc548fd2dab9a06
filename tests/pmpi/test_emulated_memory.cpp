// The emulated GPU of tests/support/emulated_backend.cpp is faithful where CI needs it
// to be (docs/design.md, "Emulated GPU memory (CI)"):
//   - its device memory faults on any host access, with one line that says where, and
//     so does the MPI library when a device buffer reaches it (death tests: each runs
//     in a fresh process, this program with `--die CASE`, and must die by SIGSEGV);
//   - pointer classification, offsets, odd, empty and huge allocations, copies and the
//     pack entry points behave as with CUDA;
//   - asynchronous work runs only when waited for, as on a GPU stream.
#define CATCH_CONFIG_RUNNER
#include <fcntl.h>
#include <mpi.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "backend.hpp"
#include "host_packer.hpp"
#include "p2p_support.hpp"
#include "base/type_cache.hpp"

extern char **environ;

namespace {

using tempi::Backend;
using tempi::Fence;
using tempi::MemorySpace;
using tempi::Method;
using tempi::MoveJob;
using tempi::Plan;
using tempi::Scratch;
using tempi::ScratchKind;
using tempi::Status;
using p2p::kPoison;
using p2p::pattern;

Backend &gpu() { return tempi::gpu_backend(); }

// ---- Death cases (in the child: `test_emulated_memory --die CASE`) -------------------

void *device_alloc(size_t bytes) {
  void *p = nullptr;
  if (gpu().allocate_device(bytes, &p) != Status::Ok) std::exit(3);
  // The parent checks that the fault message names this allocation.
  std::fprintf(stderr, "child: device allocation at %p\n", p);
  std::fflush(stderr);
  return p;
}

// Returns only when the case did not die (the parent then fails it).
int run_case(const std::string &what) {
  const rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);  // dying is the point; a core file is not
  if (what == "host-read") {
    volatile char *p = static_cast<volatile char *>(device_alloc(1000));
    const char c = p[100];
    std::printf("read %d\n", c);
  } else if (what == "host-write") {
    volatile char *p = static_cast<volatile char *>(device_alloc(1000));
    p[999] = 1;
  } else if (what == "host-read-past-end") {
    volatile char *p = static_cast<volatile char *>(device_alloc(1000));
    const char c = p[1000 + 17];
    std::printf("read %d\n", c);
  } else if (what == "device-scratch-read") {
    Scratch s;
    if (gpu().acquire(ScratchKind::Device, 256, s) != Status::Ok) return 3;
    std::fprintf(stderr, "child: device allocation at %p\n", s.ptr);
    const char c = static_cast<volatile char *>(s.ptr)[8];
    std::printf("read %d\n", c);
  } else if (what == "mpi-pack" || what == "mpi-send") {
    // TEMPI is bypassed (PMPI_): this is what a GPU buffer reaching a library that is
    // not CUDA-aware does.
    MPI_Init(nullptr, nullptr);
    const int n = 4096;
    void *dev = device_alloc(n);
    const std::vector<char> data = pattern(n, 5);
    if (gpu().copy(dev, data.data(), n) != Status::Ok) return 3;
    std::vector<char> host(n);
    if (what == "mpi-pack") {
      int position = 0;
      PMPI_Pack(dev, n, MPI_BYTE, host.data(), n, &position, MPI_COMM_SELF);
    } else {
      MPI_Request req;
      PMPI_Irecv(host.data(), n, MPI_BYTE, 0, 7, MPI_COMM_SELF, &req);
      PMPI_Send(dev, n, MPI_BYTE, 0, 7, MPI_COMM_SELF);
      PMPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    MPI_Finalize();
  } else if (what == "cuda-aware") {
    // Declared CUDA-aware (TEMPI_CUDA_AWARE=yes), the library reads device memory.
    MPI_Init(nullptr, nullptr);
    const int n = 4096;
    void *dev = device_alloc(n);
    const std::vector<char> data = pattern(n, 6);
    if (gpu().copy(dev, data.data(), n) != Status::Ok) return 3;
    std::vector<char> host(n);
    PMPI_Sendrecv(dev, n, MPI_BYTE, 0, 7, host.data(), n, MPI_BYTE, 0, 7, MPI_COMM_SELF, MPI_STATUS_IGNORE);
    MPI_Finalize();
    return host == data ? 0 : 4;
  } else {
    std::fprintf(stderr, "unknown case %s\n", what.c_str());
    return 2;
  }
  return 0;
}

struct Outcome {
  bool signaled = false;
  int signal = 0;
  int exit_code = -1;
  std::string err;  // the child's stderr
};

// Runs this program with `--die what` in a fresh environment for MPI (no launcher's
// variables, so MPI_Init starts a singleton), and collects how it ended.
Outcome run_child(const std::string &what, const std::vector<std::string> &extra_env = {}) {
  std::vector<std::string> env;
  for (char **e = environ; *e; ++e) {
    const std::string v = *e;
    bool drop = false;
    for (const char *prefix : {"PMI_", "PMIX_", "HYDI_", "HYDRA_", "MPI_LOCAL", "OMPI_", "TEMPI_CUDA_AWARE="})
      drop = drop || v.rfind(prefix, 0) == 0;
    if (!drop) env.push_back(v);
  }
  for (const std::string &v : extra_env) env.push_back(v);
  std::vector<char *> envp;
  for (std::string &v : env) envp.push_back(v.data());
  envp.push_back(nullptr);
  std::string exe = "/proc/self/exe", die = "--die", arg = what;
  char *argv[] = {exe.data(), die.data(), arg.data(), nullptr};

  int fds[2];
  REQUIRE(pipe2(fds, O_CLOEXEC) == 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv, envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  REQUIRE(rc == 0);

  Outcome out;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  char buf[4096];
  for (;;) {
    pollfd p{fds[0], POLLIN, 0};
    const int ms = int(std::chrono::duration_cast<std::chrono::milliseconds>(give_up - std::chrono::steady_clock::now())
                           .count());
    if (ms <= 0) {
      kill(pid, SIGKILL);
      out.err += "\n(killed after 60 s)";
      break;
    }
    if (poll(&p, 1, ms) <= 0) continue;
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n <= 0) break;
    out.err.append(buf, size_t(n));
  }
  close(fds[0]);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  out.signaled = WIFSIGNALED(status);
  out.signal = out.signaled ? WTERMSIG(status) : 0;
  out.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

size_t count_of(const std::string &text, const std::string &what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The child died by SIGSEGV, saying once that it touched the allocation it announced.
void check_died_on_gpu_memory(const Outcome &o, const std::string &detail = "") {
  INFO("child's stderr:\n" << o.err);
  CHECK(o.signaled);
  CHECK(o.signal == SIGSEGV);
  const std::string announce = "child: device allocation at ";
  const size_t at = o.err.find(announce);
  REQUIRE(at != std::string::npos);
  const std::string base = o.err.substr(at + announce.size(), o.err.find('\n', at) - at - announce.size());
  CHECK(count_of(o.err, "[tempi emulated GPU]") == 1);
  CHECK(count_of(o.err, "[tempi emulated GPU] host access to GPU memory at 0x") == 1);
  CHECK(count_of(o.err, "-byte device allocation at " + base) == 1);
  if (!detail.empty()) CHECK(count_of(o.err, detail) == 1);
}

// ---- Helpers for the tests in this process --------------------------------------------

// A device buffer, reached only through the backend's copy (as GPU code uses cudaMemcpy).
class DeviceBuf {
 public:
  explicit DeviceBuf(size_t bytes) : bytes_(bytes) { REQUIRE(gpu().allocate_device(bytes, &ptr_) == Status::Ok); }
  ~DeviceBuf() { gpu().free_device(ptr_); }
  DeviceBuf(const DeviceBuf &) = delete;
  DeviceBuf &operator=(const DeviceBuf &) = delete;
  char *get() const { return static_cast<char *>(ptr_); }
  void upload(const std::vector<char> &v, size_t at = 0) {
    REQUIRE(gpu().copy(get() + at, v.data(), v.size()) == Status::Ok);
  }
  std::vector<char> download(size_t at = 0, size_t n = SIZE_MAX) const {
    std::vector<char> v(n == SIZE_MAX ? bytes_ - at : n);
    REQUIRE(gpu().copy(v.data(), get() + at, v.size()) == Status::Ok);
    return v;
  }

 private:
  size_t bytes_;
  void *ptr_ = nullptr;
};

struct Typed {
  MPI_Datatype type;
  int count;
  Plan plan;
  size_t span;
};

Typed make_typed(MPI_Datatype type, int count) {
  MPI_Type_commit(&type);
  const auto info = tempi::type_cache().find(type);
  REQUIRE(info->plan);
  MPI_Aint lb, extent, tlb, textent;
  MPI_Type_get_extent(type, &lb, &extent);
  MPI_Type_get_true_extent(type, &tlb, &textent);
  return {type, count, info->plan->for_count(count), size_t(tlb + textent + (count - 1) * extent)};
}

Typed vector_type() {  // 50 rows of 3 floats, pitch 7 floats
  MPI_Datatype t;
  MPI_Type_vector(50, 3, 7, MPI_FLOAT, &t);
  return make_typed(t, 3);
}

Typed indexed_type() {  // irregular blocks of doubles
  const int bl[] = {2, 1, 3, 1}, disp[] = {5, 0, 9, 14};
  MPI_Datatype t;
  MPI_Type_indexed(4, bl, disp, MPI_DOUBLE, &t);
  return make_typed(t, 5);
}

void release(Typed &t) { MPI_Type_free(&t.type); }

std::vector<char> host_packed(const Typed &t, const std::vector<char> &typed) {
  std::vector<char> out(size_t(t.plan.packed_size()));
  tempi::host_pack(t.plan, typed.data(), out.data(), 0, t.plan.packed_size());
  return out;
}

size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * size_t(sysconf(_SC_PAGESIZE));
}

}  // namespace

// ---- Death tests ---------------------------------------------------------------------

TEST_CASE("a host read of emulated device memory faults and says where", "[death]") {
  check_died_on_gpu_memory(run_child("host-read"), ": offset 100 of a 1000-byte device allocation at ");
}

TEST_CASE("a host write of emulated device memory faults and says where", "[death]") {
  check_died_on_gpu_memory(run_child("host-write"), ": offset 999 of a 1000-byte device allocation at ");
}

TEST_CASE("a host read just past an allocation's end faults too", "[death]") {
  const Outcome o = run_child("host-read-past-end");
  check_died_on_gpu_memory(o, ": offset 1017 of a 1000-byte device allocation at ");
  CHECK(count_of(o.err, "(past its end)") == 1);
}

TEST_CASE("device scratch memory faults on host access", "[death]") {
  check_died_on_gpu_memory(run_child("device-scratch-read"), ": offset 8 of a 256-byte device allocation at ");
}

TEST_CASE("the MPI library faults when PMPI_Pack is handed device memory", "[death][mpi]") {
  check_died_on_gpu_memory(run_child("mpi-pack"));
}

TEST_CASE("the MPI library faults when PMPI_Send is handed device memory", "[death][mpi]") {
  check_died_on_gpu_memory(run_child("mpi-send"));
}

TEST_CASE("with TEMPI_CUDA_AWARE=yes the MPI library reads device memory", "[mpi]") {
  const Outcome o = run_child("cuda-aware", {"TEMPI_CUDA_AWARE=yes"});
  INFO("child's stderr:\n" << o.err);
  CHECK(!o.signaled);
  CHECK(o.exit_code == 0);
}

// ---- Memory, as with CUDA ---------------------------------------------------------------

TEST_CASE("classification of base, interior and one-past-the-end pointers", "[memory]") {
  DeviceBuf d(1001);
  CHECK(gpu().classify(d.get()) == MemorySpace::Device);
  CHECK(gpu().classify(d.get() + 500) == MemorySpace::Device);
  CHECK(gpu().classify(d.get() + 1000) == MemorySpace::Device);
  CHECK(gpu().classify(d.get() + 1001) == MemorySpace::Host);
  CHECK(gpu().device_of(d.get()) == 0);
  CHECK(gpu().device_of(d.get() + 1000) == 0);
  CHECK(gpu().device_of(d.get() + 1001) == -1);
  CHECK(gpu().classify(d.get() - 1) == MemorySpace::Host);
  int on_stack = 0;
  std::vector<char> heap(100);
  CHECK(gpu().classify(&on_stack) == MemorySpace::Host);
  CHECK(gpu().classify(heap.data()) == MemorySpace::Host);
  CHECK(gpu().device_of(heap.data()) == -1);
  CHECK(gpu().classify(nullptr) == MemorySpace::Host);
}

TEST_CASE("an allocation of zero bytes is a unique device pointer", "[memory]") {
  void *a = nullptr, *b = nullptr;
  REQUIRE(gpu().allocate_device(0, &a) == Status::Ok);
  REQUIRE(gpu().allocate_device(0, &b) == Status::Ok);
  CHECK(a != nullptr);
  CHECK(b != nullptr);
  CHECK(a != b);
  CHECK(gpu().classify(a) == MemorySpace::Device);
  CHECK(gpu().device_of(b) == 0);
  CHECK(gpu().classify(static_cast<char *>(a) + 1) == MemorySpace::Host);
  char c = 0;
  CHECK(gpu().copy(&c, a, 0) == Status::Ok);
  CHECK(gpu().copy(&c, a, 1) != Status::Ok);  // nothing to copy from
  gpu().free_device(a);
  gpu().free_device(b);
  CHECK(gpu().classify(a) == MemorySpace::Host);
}

TEST_CASE("allocations of odd sizes round-trip at every offset", "[memory]") {
  for (size_t bytes : {size_t(1), size_t(3), size_t(4095), size_t(4097), size_t(12345)}) {
    INFO(bytes << " bytes");
    DeviceBuf d(bytes);
    const std::vector<char> all = pattern(bytes, unsigned(bytes));
    d.upload(all);
    CHECK(d.download() == all);
    for (size_t at : {size_t(0), bytes / 3, bytes - 1}) {
      const size_t n = bytes - at;
      const std::vector<char> part = pattern(n, unsigned(at + 7));
      d.upload(part, at);
      CHECK(d.download(at, n) == part);
      CHECK(d.download(0, at) == std::vector<char>(all.begin(), all.begin() + std::ptrdiff_t(at)));
      d.upload(std::vector<char>(all.begin() + std::ptrdiff_t(at), all.end()), at);
    }
    // A copy that leaves the allocation is an error, as with cudaMemcpy.
    std::vector<char> out(bytes + 1);
    CHECK(gpu().copy(out.data(), d.get(), bytes + 1) != Status::Ok);
    CHECK(gpu().copy(d.get() + bytes - 1, out.data(), 2) != Status::Ok);
  }
}

TEST_CASE("device-to-device copies at offsets", "[memory]") {
  DeviceBuf a(5000), b(7000);
  const std::vector<char> src = pattern(5000, 9);
  a.upload(src);
  b.upload(std::vector<char>(7000, kPoison));
  REQUIRE(gpu().copy(b.get() + 1234, a.get() + 17, 4000) == Status::Ok);
  std::vector<char> want(7000, kPoison);
  std::copy(src.begin() + 17, src.begin() + 4017, want.begin() + 1234);
  CHECK(b.download() == want);
  // overlapping, within one allocation
  REQUIRE(gpu().copy(a.get() + 1, a.get(), 4999) == Status::Ok);
  std::vector<char> moved = src;
  std::memmove(moved.data() + 1, moved.data(), 4999);
  CHECK(a.download() == moved);
}

TEST_CASE("8 GiB of device memory costs only the pages written", "[memory]") {
  const size_t bytes = size_t(8) << 30;
  const size_t before = resident_bytes();
  void *p = nullptr;
  REQUIRE(gpu().allocate_device(bytes, &p) == Status::Ok);
  char *d = static_cast<char *>(p);
  CHECK(gpu().classify(d + bytes - 1) == MemorySpace::Device);
  CHECK(gpu().classify(d + bytes) == MemorySpace::Host);
  const std::vector<char> head = pattern(4096, 1), tail = pattern(4096, 2), middle = pattern(100, 3);
  REQUIRE(gpu().copy(d, head.data(), head.size()) == Status::Ok);
  REQUIRE(gpu().copy(d + bytes - tail.size(), tail.data(), tail.size()) == Status::Ok);
  REQUIRE(gpu().copy(d + (size_t(5) << 30) + 3, middle.data(), middle.size()) == Status::Ok);
  std::vector<char> got(4096);
  REQUIRE(gpu().copy(got.data(), d, got.size()) == Status::Ok);
  CHECK(got == head);
  REQUIRE(gpu().copy(got.data(), d + bytes - got.size(), got.size()) == Status::Ok);
  CHECK(got == tail);
  got.resize(100);
  REQUIRE(gpu().copy(got.data(), d + (size_t(5) << 30) + 3, got.size()) == Status::Ok);
  CHECK(got == middle);
  CHECK(resident_bytes() < before + (size_t(64) << 20));
  gpu().free_device(p);
  CHECK(gpu().classify(d) == MemorySpace::Host);
}

TEST_CASE("pinned scratch is host memory; device scratch is device memory", "[memory]") {
  Scratch pinned, device;
  REQUIRE(gpu().acquire(ScratchKind::Pinned, 1000, pinned) == Status::Ok);
  REQUIRE(gpu().acquire(ScratchKind::Device, 1000, device) == Status::Ok);
  CHECK(gpu().classify(pinned.ptr) == MemorySpace::PinnedHost);
  CHECK(gpu().classify(device.ptr) == MemorySpace::Device);
  CHECK(gpu().device_of(device.ptr) == 0);
  char *host = static_cast<char *>(pinned.ptr);  // the host reads and writes pinned memory itself
  std::memset(host, 7, 1000);
  CHECK(host[999] == 7);
  REQUIRE(gpu().copy(device.ptr, host, 1000) == Status::Ok);
  std::vector<char> back(1000);
  REQUIRE(gpu().copy(back.data(), device.ptr, 1000) == Status::Ok);
  CHECK(back == std::vector<char>(1000, 7));
  void *gone = device.ptr;
  device = Scratch{};
  CHECK(gpu().classify(gone) == MemorySpace::Host);
}

TEST_CASE("allocations, copies and queries from several threads at once", "[memory][threads]") {
  constexpr int kThreads = 4, kRounds = 200;
  std::vector<std::string> failures(kThreads);  // Catch's macros stay on this thread
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([t, &failures] {
      for (int r = 0; r < kRounds && failures[t].empty(); ++r) {
        const size_t bytes = size_t(1 + (t * 7919 + r * 104729) % 20000);
        void *p = nullptr;
        if (gpu().allocate_device(bytes, &p) != Status::Ok) {
          failures[t] = "allocation failed";
          break;
        }
        char *d = static_cast<char *>(p);
        const std::vector<char> v = pattern(bytes, unsigned(t * 1000 + r));
        std::vector<char> back(bytes);
        if (gpu().copy(d, v.data(), bytes) != Status::Ok || gpu().copy(back.data(), d, bytes) != Status::Ok)
          failures[t] = "copy failed";
        else if (back != v)
          failures[t] = "bytes differ";
        else if (gpu().classify(d + bytes / 2) != MemorySpace::Device || gpu().classify(d + bytes) != MemorySpace::Host)
          failures[t] = "classification";
        gpu().free_device(p);
      }
    });
  for (std::thread &th : threads) th.join();
  for (const std::string &f : failures) CHECK(f == "");
}

// ---- Packing on device memory gives the host packer's bytes -------------------------

TEST_CASE("pack and unpack on device memory match the host packer", "[pack]") {
  for (Typed t : {vector_type(), indexed_type()}) {
    const int64_t n = t.plan.packed_size();
    const std::vector<char> typed = pattern(t.span, 11);
    const std::vector<char> want = host_packed(t, typed);
    DeviceBuf dtyped(t.span), dpacked{size_t(n)};
    dtyped.upload(typed);
    Scratch pinned;
    REQUIRE(gpu().acquire(ScratchKind::Pinned, size_t(n), pinned) == Status::Ok);
    char *p = static_cast<char *>(pinned.ptr);

    std::vector<char> out(size_t(n), kPoison);  // pageable host memory
    REQUIRE(gpu().pack(t.plan, dtyped.get(), out.data(), 0, n) == Status::Ok);
    CHECK(out == want);
    REQUIRE(gpu().pack_accessible(t.plan, dtyped.get(), dpacked.get(), 0, n) == Status::Ok);
    CHECK(dpacked.download() == want);
    std::memset(p, kPoison, size_t(n));
    REQUIRE(gpu().pack_to_host(t.plan, dtyped.get(), p, n) == Status::Ok);
    CHECK(std::vector<char>(p, p + n) == want);
    std::memset(p, kPoison, size_t(n));
    REQUIRE(gpu().pack_staged(t.plan, dtyped.get(), p, n, 40) == Status::Ok);
    CHECK(std::vector<char>(p, p + n) == want);
    // a byte range of the stream, from a device pointer into the packed buffer
    std::vector<char> part(size_t(n), kPoison);
    REQUIRE(gpu().pack(t.plan, dtyped.get(), part.data(), 24, n) == Status::Ok);
    CHECK(std::vector<char>(part.begin(), part.end() - 24) == std::vector<char>(want.begin() + 24, want.end()));
    // A kernel cannot reach pageable host memory.
    CHECK(gpu().pack_accessible(t.plan, dtyped.get(), out.data(), 0, n) != Status::Ok);
    CHECK(gpu().pack_to_host(t.plan, typed.data(), p, n) != Status::Ok);

    // unpack: each way, into poisoned device memory, gives the host packer's unpack
    std::vector<char> want_typed(t.span, kPoison);
    tempi::host_unpack(t.plan, want.data(), want_typed.data(), 0, n);
    std::memcpy(p, want.data(), size_t(n));
    dpacked.upload(want);
    for (int way = 0; way < 4; ++way) {
      INFO("unpack way " << way);
      dtyped.upload(std::vector<char>(t.span, kPoison));
      Status st = Status::Ok;
      if (way == 0) st = gpu().unpack(t.plan, want.data(), dtyped.get(), 0, n);
      if (way == 1) st = gpu().unpack_accessible(t.plan, dpacked.get(), dtyped.get(), 0, n);
      if (way == 2) st = gpu().unpack_from_host(t.plan, p, dtyped.get(), n);
      if (way == 3) st = gpu().unpack_staged(t.plan, p, dtyped.get(), n, 56);
      REQUIRE(st == Status::Ok);
      CHECK(dtyped.download() == want_typed);
    }
    release(t);
  }
}

TEST_CASE("device pointers inside an allocation are translated", "[pack]") {
  Typed t = vector_type();
  const int64_t n = t.plan.packed_size();
  const size_t at = 4096 + 12;  // the object starts inside a larger allocation
  DeviceBuf d(at + t.span + 100);
  const std::vector<char> typed = pattern(t.span, 21);
  d.upload(typed, at);
  std::vector<char> out{std::vector<char>(size_t(n))};
  REQUIRE(gpu().pack(t.plan, d.get() + at, out.data(), 0, n) == Status::Ok);
  CHECK(out == host_packed(t, typed));
  release(t);
}

// ---- Asynchronous work behaves like a GPU stream -------------------------------------

namespace {

struct AsyncSetup {
  Typed t = indexed_type();
  int64_t n = t.plan.packed_size();
  std::vector<char> typed = pattern(t.span, 31);
  std::vector<char> want = host_packed(t, typed);
  DeviceBuf dtyped{t.span};
  Scratch pinned;
  AsyncSetup() {
    dtyped.upload(typed);
    REQUIRE(gpu().acquire(ScratchKind::Pinned, size_t(n), pinned) == Status::Ok);
    poison();
  }
  ~AsyncSetup() { release(t); }
  char *packed() const { return static_cast<char *>(pinned.ptr); }
  std::vector<char> packed_bytes() const { return std::vector<char>(packed(), packed() + n); }
  void poison() { std::memset(pinned.ptr, kPoison, size_t(n)); }
  MoveJob job(Method m = Method::OneShot, int64_t chunk = 0) const {
    return {&t.plan, dtyped.get(), packed(), n, {m, chunk ? chunk : n}};
  }
};

}  // namespace

TEST_CASE("pack_async writes nothing before the fence is waited for or queried twice", "[async]") {
  AsyncSetup s;
  Fence f;
  REQUIRE(gpu().pack_async({s.job()}, f) == Status::Ok);
  REQUIRE(f);
  CHECK(s.packed_bytes() == std::vector<char>(size_t(s.n), kPoison));
  CHECK_FALSE(gpu().query(f));  // the GPU is still busy
  CHECK(s.packed_bytes() == std::vector<char>(size_t(s.n), kPoison));
  CHECK(gpu().query(f));
  CHECK(s.packed_bytes() == s.want);
  CHECK(gpu().query(f));
  CHECK(gpu().wait(f) == Status::Ok);
}

TEST_CASE("wait completes fences in issue order", "[async]") {
  AsyncSetup s;
  Scratch second;
  REQUIRE(gpu().acquire(ScratchKind::Pinned, size_t(s.n), second) == Status::Ok);
  char *p2 = static_cast<char *>(second.ptr);
  std::memset(p2, kPoison, size_t(s.n));
  // pack, then overwrite the typed buffer by an unpack of other bytes, then pack again:
  // the first pack must see the old data and the second the new.
  const std::vector<char> other = pattern(size_t(s.n), 32);
  std::vector<char> other_typed = s.typed;
  tempi::host_unpack(s.t.plan, other.data(), other_typed.data(), 0, s.n);
  Scratch source;
  REQUIRE(gpu().acquire(ScratchKind::Pinned, size_t(s.n), source) == Status::Ok);
  std::memcpy(source.ptr, other.data(), size_t(s.n));

  Fence first, middle, last;
  REQUIRE(gpu().pack_async({s.job()}, first) == Status::Ok);
  REQUIRE(gpu().unpack_async({{&s.t.plan, s.dtyped.get(), source.ptr, s.n, {Method::OneShot, s.n}}}, middle) ==
          Status::Ok);
  MoveJob again = s.job(Method::Staged, 50);
  again.packed = p2;
  REQUIRE(gpu().pack_async({again}, last) == Status::Ok);
  CHECK(s.packed_bytes() == std::vector<char>(size_t(s.n), kPoison));
  const uint64_t before = gpu().synchronizations();
  REQUIRE(gpu().wait(last) == Status::Ok);
  CHECK(gpu().synchronizations() == before + 1);
  CHECK(s.packed_bytes() == s.want);
  CHECK(std::vector<char>(p2, p2 + s.n) == other);
  CHECK(s.dtyped.download() == other_typed);
  // the earlier fences are complete: queries say so at once and waits do not block
  CHECK(gpu().query(first));
  CHECK(gpu().query(middle));
  const uint64_t after = gpu().synchronizations();
  CHECK(gpu().wait(first) == Status::Ok);
  CHECK(gpu().synchronizations() == after);
}

TEST_CASE("several jobs of one call complete together", "[async]") {
  AsyncSetup a, b;
  Fence f;
  REQUIRE(gpu().pack_async({a.job(), b.job(Method::Staged, 64)}, f) == Status::Ok);
  CHECK(a.packed_bytes() == std::vector<char>(size_t(a.n), kPoison));
  REQUIRE(gpu().wait(f) == Status::Ok);
  CHECK(a.packed_bytes() == a.want);
  CHECK(b.packed_bytes() == b.want);
}

TEST_CASE("synchronizations counts waits that block and synchronous calls", "[async]") {
  AsyncSetup s;
  const uint64_t s0 = gpu().synchronizations();
  Fence empty;
  CHECK(gpu().query(empty));
  CHECK(gpu().wait(empty) == Status::Ok);
  CHECK(gpu().synchronizations() == s0);
  Fence none;
  REQUIRE(gpu().pack_async({}, none) == Status::Ok);  // no work: a complete fence
  CHECK_FALSE(none);
  Fence f;
  REQUIRE(gpu().pack_async({s.job()}, f) == Status::Ok);
  CHECK_FALSE(gpu().query(f));
  CHECK(gpu().synchronizations() == s0);  // a query never blocks
  REQUIRE(gpu().wait(f) == Status::Ok);
  CHECK(gpu().synchronizations() == s0 + 1);
  REQUIRE(gpu().wait(f) == Status::Ok);  // done already: no wait
  CHECK(gpu().synchronizations() == s0 + 1);
  REQUIRE(gpu().pack_to_host(s.t.plan, s.dtyped.get(), s.packed(), s.n) == Status::Ok);
  CHECK(gpu().synchronizations() == s0 + 2);
  REQUIRE(gpu().unpack_staged(s.t.plan, s.packed(), s.dtyped.get(), s.n, 100) == Status::Ok);
  CHECK(gpu().synchronizations() == s0 + 3);
}

TEST_CASE("a synchronous call follows the work queued on its thread", "[async]") {
  AsyncSetup s;
  Fence f;
  REQUIRE(gpu().pack_async({s.job()}, f) == Status::Ok);
  std::vector<char> out(size_t(s.n));
  REQUIRE(gpu().pack(s.t.plan, s.dtyped.get(), out.data(), 0, s.n) == Status::Ok);
  CHECK(s.packed_bytes() == s.want);  // stream order: the queued pack ran first
  CHECK(gpu().query(f));
}

TEST_CASE("another thread finishes a fence's work; unwaited fences are harmless", "[async]") {
  AsyncSetup s;
  Fence f;
  Status st = Status::GpuError;
  std::thread([&] { st = gpu().pack_async({s.job()}, f); }).join();  // its thread is gone
  REQUIRE(st == Status::Ok);
  CHECK(s.packed_bytes() == std::vector<char>(size_t(s.n), kPoison));
  REQUIRE(gpu().wait(f) == Status::Ok);
  CHECK(s.packed_bytes() == s.want);

  s.poison();
  {
    Fence dropped;
    REQUIRE(gpu().pack_async({s.job()}, dropped) == Status::Ok);
  }  // released unwaited: the work stays queued on this thread's stream
  std::thread([&] {
    Fence never;
    gpu().pack_async({s.job()}, never);
  }).join();  // and on a stream whose thread ended
  CHECK(s.packed_bytes() == std::vector<char>(size_t(s.n), kPoison));
  std::vector<char> out(size_t(s.n));
  REQUIRE(gpu().pack(s.t.plan, s.dtyped.get(), out.data(), 0, s.n) == Status::Ok);
  CHECK(s.packed_bytes() == s.want);
}

TEST_CASE("asynchronous jobs are checked when issued", "[async]") {
  AsyncSetup s;
  Fence f;
  MoveJob bad = s.job();
  bad.plan = nullptr;
  CHECK(gpu().pack_async({bad}, f) != Status::Ok);
  std::vector<char> pageable(size_t(s.n));
  bad = s.job();
  bad.packed = pageable.data();  // a kernel cannot write pageable host memory...
  CHECK(gpu().pack_async({bad}, f) != Status::Ok);
  bad.transfer = {Method::Staged, 64};  // ...the copy engines can
  REQUIRE(gpu().pack_async({bad}, f) == Status::Ok);
  REQUIRE(gpu().wait(f) == Status::Ok);
  CHECK(pageable == s.want);
  bad = s.job();
  bad.typed = const_cast<char *>(s.typed.data());  // the typed side is GPU memory
  CHECK(gpu().unpack_async({bad}, f) != Status::Ok);
}

int main(int argc, char **argv) {
  if (argc == 3 && std::strcmp(argv[1], "--die") == 0) return run_case(argv[2]);
  MPI_Init(&argc, &argv);
  const int result = Catch::Session().run(argc, argv);
  MPI_Finalize();
  return result;
}
