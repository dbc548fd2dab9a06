// tempi-measure: measures this machine once for TEMPI's performance model (docs/model.md)
// and writes the system profile that TEMPI reads at start-up.
//   mpiexec -n 2 tempi-measure [--quick] [--repeat N] [--max-bytes N] [--output FILE] [--no-check]
// Two ranks: one GPU each where there are two (the usual placement), or both on one GPU.
// Both ranks time the MPI library between pinned host buffers and, where it is
// CUDA-aware, between GPU buffers; then rank 0 times the GPU steps alone (pack and unpack
// kernels by block size, word size and object size, between device buffers and into
// mapped host memory; the copy engines both ways; the launch and synchronization floor)
// while rank 1 waits. Every time is what one of TEMPI's backend calls costs, launch and
// synchronization included: a host clock around calls that complete their GPU work
// before returning, the median of repeated runs after warm-up. Then the profile is
// written, read back through TEMPI's own loader, installed, and checked: point-to-point
// messages through TEMPI with each method forced against the model's predictions, and
// the automatic choice against the best forced method.
// Without a GPU (a build with -Dcuda=disabled) only the MPI library's host numbers are
// measured and no profile is written: the model needs the GPU's.
#include <mpi.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backend.hpp"
#include "gpu_select.hpp"
#include "host_packer.hpp"
#include "method.hpp"
#include "base/peers.hpp"
#include "profile.hpp"
#include "base/runtime.hpp"
#include "tempi.h"

namespace {

using namespace tempi;
using Clock = std::chrono::steady_clock;

int g_rank = 0;

// ---------------------------------------------------------------- options

struct Options {
  bool quick = false;
  int64_t max_bytes = 0;  // 0: 4 MiB with --quick, else 64 MiB
  std::string output;     // empty: the per-user cache file for this machine
  bool check = true;      // the end-to-end comparison with the model
  int repeat = 1;         // whole measurements, combined point by point by their median
};

void usage() {
  std::printf(
      "usage: mpiexec -n 2 tempi-measure [options]\n"
      "  --quick        fewer block sizes, object sizes and repetitions (about a minute)\n"
      "  --repeat N     measure N times (1-9) and keep each point's median over the runs (default 1)\n"
      "  --max-bytes N  largest object and message measured (default 64 MiB, 4 MiB with --quick)\n"
      "  --output FILE  where the profile goes (default: the per-user cache file TEMPI looks for)\n"
      "  --no-check     skip the end-to-end comparison of the model with messages through TEMPI\n"
      "  --help         this text\n"
      "Exit status: 0 done, 1 a measurement or the profile failed, 2 bad options or not 2 ranks.\n");
}

// An empty string, or what is wrong with the arguments.
std::string parse(int argc, char **argv, Options &o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") {
      o.quick = true;
    } else if (a == "--no-check") {
      o.check = false;
    } else if (a == "--max-bytes" && i + 1 < argc) {
      char *end = nullptr;
      o.max_bytes = std::strtoll(argv[++i], &end, 10);
      if (*end || o.max_bytes < 4096) return "--max-bytes needs a number of at least 4096";
    } else if (a == "--repeat" && i + 1 < argc) {
      char *end = nullptr;
      const long n = std::strtol(argv[++i], &end, 10);
      if (*end || n < 1 || n > 9) return "--repeat needs a number from 1 to 9";
      o.repeat = int(n);
    } else if (a == "--output" && i + 1 < argc) {
      o.output = argv[++i];
    } else if (a == "--help" || a == "-h") {
      return "help";
    } else {
      return "unknown or incomplete option " + a;
    }
  }
  if (o.max_bytes == 0) o.max_bytes = o.quick ? int64_t(4) << 20 : int64_t(64) << 20;
  return "";
}

// ---------------------------------------------------------------- reporting

[[noreturn]] void fail(const std::string &what) {
  std::fprintf(stderr, "\ntempi-measure (rank %d): %s\n", g_rank, what.c_str());
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::exit(1);  // MPI_Abort does not return; this keeps the compiler's promise
}

void check(Status st, const std::string &what) {
  if (st != Status::Ok) fail(what + " failed: " + to_string(st));
}

// A progress bar on stderr (rank 0): redrawn in place on a terminal, one line per stage otherwise.
class Progress {
 public:
  void plan(int steps) { total_ += steps; }
  void step(const std::string &stage) {
    ++done_;
    if (g_rank != 0) return;
    if (isatty(2)) {
      const int width = 30, filled = total_ ? done_ * width / total_ : width;
      std::fprintf(stderr, "\r[%s%s] %3d%% %-40.40s", std::string(size_t(filled), '#').c_str(),
                   std::string(size_t(width - filled), ' ').c_str(), total_ ? 100 * done_ / total_ : 100,
                   stage.c_str());
    } else if (stage != last_) {
      std::fprintf(stderr, "tempi-measure: %3d%% %s\n", total_ ? 100 * done_ / total_ : 100, stage.c_str());
    }
    last_ = stage;
  }
  void finish() {
    if (g_rank == 0 && isatty(2)) std::fprintf(stderr, "\n");
  }

 private:
  int total_ = 0, done_ = 0;
  std::string last_;
};

Progress g_progress;

// ---------------------------------------------------------------- timing

struct Budget {
  int min_reps, max_reps;
  double seconds;  // per measured point, after warm-up
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The median time of `run`, which completes its work before returning; two untimed runs first.
double time_call(const Budget &b, const std::function<void()> &run) {
  run();
  run();
  std::vector<double> t;
  const auto start = Clock::now();
  while (int(t.size()) < b.max_reps &&
         (int(t.size()) < b.min_reps || std::chrono::duration<double>(Clock::now() - start).count() < b.seconds)) {
    const auto t0 = Clock::now();
    run();
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return median(t);
}

std::vector<int64_t> sizes_from(int64_t first, int64_t last, int factor) {
  std::vector<int64_t> out;
  for (int64_t b = first; b <= last; b *= factor) out.push_back(b);
  return out;
}

// ---------------------------------------------------------------- GPU objects

// A 2-D object: `bytes / block` rows of `block` bytes at a pitch of two rows (what the
// MPI type vector(rows, block, 2 * block, MPI_BYTE) plans to).
Plan rows_plan(int64_t bytes, int64_t block) {
  Plan p;
  p.pattern = {{0, block, 0, 1}};
  p.pattern_size = block;
  p.dims = {{bytes / block, 2 * block}};
  p.extent = 2 * block * (bytes / block);
  return p;
}

// Device and pinned buffers for objects up to `max_bytes` packed bytes, filled with
// random bytes (never zeros: they would hide unwritten output).
struct GpuBuffers {
  Backend &b = gpu_backend();
  int64_t max_bytes = 0;
  void *typed = nullptr;   // 2 * max_bytes + 16 (word-offset objects start up to 15 bytes in)
  void *packed = nullptr;  // device, max_bytes
  Scratch pinned;          // mapped pinned host, max_bytes

  explicit GpuBuffers(int64_t max) : max_bytes(max) {
    check(b.allocate_device(size_t(2 * max + 16), &typed), "allocating device memory for objects");
    check(b.allocate_device(size_t(max), &packed), "allocating device memory for packed bytes");
    check(b.acquire(ScratchKind::Pinned, size_t(max), pinned), "allocating pinned host memory");
    std::vector<unsigned char> noise(size_t(2 * max + 16));
    std::mt19937 rng(12345);
    for (unsigned char &c : noise) c = static_cast<unsigned char>(rng() | 1);
    check(b.copy(typed, noise.data(), noise.size()), "filling device memory");
    check(b.copy(packed, noise.data(), size_t(max)), "filling device memory");
    std::memcpy(pinned.ptr, noise.data(), size_t(max));
  }
  ~GpuBuffers() {
    b.free_device(typed);
    b.free_device(packed);
  }
  GpuBuffers(const GpuBuffers &) = delete;
  GpuBuffers &operator=(const GpuBuffers &) = delete;
};

// The packed bytes from the GPU equal the host packer's for the same object.
void verify_pack(GpuBuffers &g, const Plan &plan, const char *typed, const void *packed_gpu, const char *what) {
  const int64_t bytes = plan.packed_size();
  const size_t n = static_cast<size_t>(bytes);
  std::vector<char> host_typed(2 * n + 16), expected(n), got(n);
  check(g.b.copy(host_typed.data(), typed, host_typed.size()), "reading back an object");
  check(g.b.copy(got.data(), packed_gpu, size_t(bytes)), "reading back packed bytes");
  host_pack(plan, host_typed.data(), expected.data(), 0, bytes);
  if (expected != got)
    fail(std::string("the ") + what + " kernel packed wrong bytes (" + std::to_string(bytes) + " bytes in rows of " +
         std::to_string(plan.pattern_size) + "): measuring it would be meaningless");
}

enum class Direction { PackDevice, UnpackDevice, PackHost, UnpackHost };
const char *name_of(Direction d) {
  switch (d) {
    case Direction::PackDevice:
      return "pack_device";
    case Direction::UnpackDevice:
      return "unpack_device";
    case Direction::PackHost:
      return "pack_host";
    case Direction::UnpackHost:
      return "unpack_host";
  }
  return "?";
}

// One synchronous step of a method, as TEMPI's calls run it.
Status move(GpuBuffers &g, Direction d, const Plan &plan, char *typed) {
  const int64_t bytes = plan.packed_size();
  switch (d) {
    case Direction::PackDevice:
      return g.b.pack_accessible(plan, typed, g.packed, 0, bytes);
    case Direction::UnpackDevice:
      return g.b.unpack_accessible(plan, g.packed, typed, 0, bytes);
    case Direction::PackHost:
      return g.b.pack_to_host(plan, typed, g.pinned.ptr, bytes);
    case Direction::UnpackHost:
      return g.b.unpack_from_host(plan, g.pinned.ptr, typed, bytes);
  }
  return Status::Unsupported;
}

struct Grid {
  std::vector<int64_t> blocks, kernel_sizes, copy_sizes, mpi_sizes;
  std::vector<int64_t> batch_sizes;  // of the batched curves: kBatchMessages each way fit in 2 * max_bytes
  int word_block;      // rows of this size measure the word factors,
  int64_t word_bytes;  // at this object size
  Budget budget;
};

Grid grid_for(const Options &o) {
  Grid g;
  if (o.quick) {
    g.blocks = {8, 64, 512};
    g.kernel_sizes = sizes_from(4096, o.max_bytes, 16);
    g.copy_sizes = sizes_from(64, o.max_bytes, 16);
    g.budget = {3, 30, 0.02};
  } else {
    g.blocks = {4, 8, 16, 32, 64, 256, 1024};
    g.kernel_sizes = sizes_from(1024, o.max_bytes, 4);
    g.copy_sizes = sizes_from(64, o.max_bytes, 4);
    g.budget = {5, 200, 0.1};
  }
  g.mpi_sizes = g.copy_sizes;
  for (int64_t b : g.mpi_sizes)
    if (b * kBatchMessages <= o.max_bytes) g.batch_sizes.push_back(b);
  g.word_block = 256;
  g.word_bytes = std::min<int64_t>(o.max_bytes, o.quick ? 256 << 10 : 1 << 20);
  return g;
}

// Sizes of an object of `block`-byte rows: at least two rows, whole rows.
std::vector<int64_t> sizes_for_block(const Grid &grid, int64_t block) {
  std::vector<int64_t> out;
  for (int64_t s : grid.kernel_sizes)
    if (s >= 2 * block) out.push_back(s - s % block);
  return out;
}

// Rows where timing a size again took more than a quarter less than the first timing, for
// the summary: "unpack_device, rows of 64 B: 3 of 9 sizes" ("run 2: ..." under --repeat).
std::vector<std::string> g_disturbed;
std::string g_run_label;

// The sizes of `c` measured more than a quarter slower than a larger size are timed again
// (`time_size`) and keep the lower time: a passing disturbance goes, while a faster path
// for larger sizes (the copy engines at 64 KiB against 16 KiB) stays as measured.
void retime_disturbed(Curve &c, const std::string &what, const std::function<double(int64_t)> &time_size) {
  int lowered = 0;
  for (size_t i : slower_than_larger(c, 0.25)) {
    const double again = time_size(int64_t(c.bytes[i]));
    lowered += again * 1.25 < c.seconds[i];
    c.seconds[i] = std::min(c.seconds[i], again);
  }
  if (lowered > 0)
    g_disturbed.push_back(g_run_label + what + ": " + std::to_string(lowered) + " of " + std::to_string(c.bytes.size()) + " sizes");
}

KernelTable measure_kernels(GpuBuffers &g, const Grid &grid, Direction d) {
  KernelTable t;
  char *typed = static_cast<char *>(g.typed);
  for (int64_t block : grid.blocks) {
    KernelRow row;
    row.block = block;
    row.word = 16;
    while (row.word > 1 && block % row.word) row.word /= 2;
    const std::string stage = std::string(name_of(d)) + ", rows of " + std::to_string(block) + " B";
    auto time_size = [&](int64_t bytes) {
      const Plan plan = rows_plan(bytes, block);
      return time_call(grid.budget, [&] {
        check(move(g, d, plan, typed), std::string(name_of(d)) + " of " + std::to_string(bytes) + " bytes");
      });
    };
    const std::vector<int64_t> sizes = sizes_for_block(grid, block);
    for (int64_t bytes : sizes) {
      row.time.bytes.push_back(double(bytes));
      row.time.seconds.push_back(time_size(bytes));
      if (bytes == sizes.front()) {  // what was timed packed the right bytes
        const Plan plan = rows_plan(bytes, block);
        if (d == Direction::PackDevice) verify_pack(g, plan, typed, g.packed, "device");
        if (d == Direction::PackHost) verify_pack(g, plan, typed, g.pinned.ptr, "mapped-host");
      }
      g_progress.step(stage);
    }
    retime_disturbed(row.time, stage, time_size);
    if (!row.time.empty()) t.rows.push_back(std::move(row));
  }
  // Narrower words at one block and size: the object starts `word` bytes into an aligned buffer.
  const Plan plan = rows_plan(grid.word_bytes - grid.word_bytes % grid.word_block, grid.word_block);
  double widest = 0;
  for (int word : {16, 8, 4, 2, 1}) {
    char *at = typed + (word == 16 ? 0 : word);
    const double s = time_call(grid.budget, [&] { check(move(g, d, plan, at), std::string(name_of(d)) + " (words)"); });
    if (word == 16) widest = s;
    t.word_factor.emplace_back(word, widest > 0 ? std::max(1.0, s / widest) : 1.0);
    g_progress.step(std::string(name_of(d)) + ", access words");
  }
  std::reverse(t.word_factor.begin(), t.word_factor.end());
  return t;
}

Curve measure_copies(GpuBuffers &g, const Grid &grid, bool to_host) {
  const std::string stage = to_host ? "copy engines, to host" : "copy engines, to device";
  auto time_size = [&](int64_t bytes) {
    return time_call(grid.budget, [&] {
      check(to_host ? g.b.copy(g.pinned.ptr, g.packed, size_t(bytes)) : g.b.copy(g.packed, g.pinned.ptr, size_t(bytes)),
            "a copy of " + std::to_string(bytes) + " bytes");
    });
  };
  Curve c;
  for (int64_t bytes : grid.copy_sizes) {
    c.bytes.push_back(double(bytes));
    c.seconds.push_back(time_size(bytes));
    g_progress.step(stage);
  }
  retime_disturbed(c, stage, time_size);
  return c;
}

// The staged method's cost per chunk beyond what the rest of the profile predicts
// (Profile::staged_chunk): staged moves of rows of 64 bytes, in one chunk (64 KiB) and in
// four (1 MiB, or the largest object), each way, timed as TEMPI's calls run them and
// compared with staged_side() without that cost; the median of the four excesses per
// chunk, never below 0. Needs the kernel and copy curves of `p`.
double measure_staged_chunk(GpuBuffers &g, const Grid &grid, const Profile &p) {
  Profile bare = p;
  bare.staged_chunk = 0;
  std::vector<double> excess;
  const int64_t large = std::min<int64_t>(1 << 20, g.max_bytes);
  for (const auto &[bytes, chunks] : {std::pair<int64_t, int64_t>{std::min<int64_t>(64 << 10, large), 1}, {large, 4}}) {
    const Plan plan = rows_plan(bytes, 64);
    const int64_t packed = plan.packed_size(), chunk = (packed + chunks - 1) / chunks;
    const TransferQuery q = describe_message(plan, false);
    for (bool pack : {true, false}) {
      const double s = time_call(grid.budget, [&] {
        check(pack ? g.b.pack_staged(plan, g.typed, g.pinned.ptr, packed, chunk)
                   : g.b.unpack_staged(plan, g.pinned.ptr, g.typed, packed, chunk),
              std::string("a staged ") + (pack ? "pack" : "unpack") + " of " + std::to_string(packed) + " bytes");
      });
      excess.push_back((s - staged_side(bare, pack, q, chunk)) / double((packed + chunk - 1) / chunk));
      g_progress.step("staged method, chunks");
    }
  }
  return std::max(0.0, median(excess));
}

// Launch alone (the host's cost of issuing a kernel), and launch plus wait of a tiny kernel.
void measure_floor(GpuBuffers &g, const Grid &grid, Profile &p) {
  const Plan tiny = rows_plan(16, 8);
  MoveJob job;
  job.plan = &tiny;
  job.typed = g.typed;
  job.packed = g.packed;
  job.bytes = 16;
  job.transfer = {Method::Device, 16};
  const double floor =
      time_call(grid.budget, [&] { check(g.b.pack_accessible(tiny, g.typed, g.packed, 0, 16), "a tiny pack"); });
  std::vector<double> issue;
  for (int i = 0; i < grid.budget.max_reps; ++i) {
    Fence f;
    const auto t0 = Clock::now();
    check(g.b.pack_async({job}, f), "issuing a tiny pack");
    const auto t1 = Clock::now();
    check(g.b.wait(f), "waiting for a tiny pack");
    if (i >= 2) issue.push_back(std::chrono::duration<double>(t1 - t0).count());  // two warm-ups
  }
  p.launch = median(issue);
  p.sync = std::max(0.0, floor - p.launch);
  g_progress.step("launch and synchronization");
}

// ---------------------------------------------------------------- MPI

// Each size is measured in kMpiRounds rounds that take turns over the sizes, so that a
// disturbance of a second or two reaches a few runs of every size instead of every run of
// a few sizes (a shift that lasts the whole measurement stays: then measure again). Per
// size, `most` timed runs (fewer for large messages: about 64 MiB a size, but at least
// kMinMpiRuns), shared out between the rounds, each round's after kUntimedMpiRuns untimed
// ones, each run after a barrier; the median of them all. A run moves `messages` messages
// of that size and returns the seconds one of them took.
// Large messages need the floor and the untimed runs: on one H200 host (2026-11-28) MPICH's
// 16 MiB ping-pong, taken as the median of 5 runs each round's after one untimed run, came
// out at 2.8-3.7 ms in six measurements of seven, where 40 runs after 5 untimed ones took
// 1.8-2.0 ms, close to what TEMPI's own 16 MiB messages found (the model then predicted
// those 1.25-1.46x too slow). The cost is small: 21 round trips of the largest size a curve.
constexpr int kMpiRounds = 3;
constexpr int kMinMpiRuns = 15;
constexpr int kUntimedMpiRuns = 2;

Curve mpi_curve(const std::vector<int64_t> &sizes, const char *stage, int messages, int most,
                const std::function<double(int64_t)> &run) {
  std::vector<std::vector<double>> samples(sizes.size());
  for (int round = 0; round < kMpiRounds; ++round)
    for (size_t k = 0; k < sizes.size(); ++k) {
      const int64_t bytes = sizes[k];
      // the same count on both ranks
      const int reps = int(std::clamp<int64_t>((int64_t(64) << 20) / (messages * bytes), kMinMpiRuns, most));
      const int per_round = reps / kMpiRounds + (round < reps % kMpiRounds);
      for (int i = 0; i < per_round + kUntimedMpiRuns; ++i) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double seconds = run(bytes);
        if (i >= kUntimedMpiRuns) samples[k].push_back(seconds);
      }
      g_progress.step(stage);
    }
  Curve c;
  for (size_t k = 0; k < sizes.size(); ++k) {
    c.bytes.push_back(double(sizes[k]));
    c.seconds.push_back(median(samples[k]));
  }
  return c;
}

// Half the round trip of each size between ranks 0 and 1, the library alone (PMPI), from
// and into one buffer per rank. That is what TEMPI's staging does in a ping-pong: the pool
// hands the receive the buffer the send just gave back. It matters: on an H100 host
// (2026-11-25) MPICH took 1.4-2x as long with one buffer as between a send and a receive
// buffer (190 against 90-120 us one-way at 1 MiB), and TEMPI's one-shot ping-pong took the
// former's time. Messages in flight together, each in its own staging, are the batched
// curves' part.
Curve ping_pong(void *buf, const std::vector<int64_t> &sizes, const char *stage) {
  return mpi_curve(sizes, stage, 1, 100, [buf](int64_t bytes) {
    const double t0 = MPI_Wtime();
    if (g_rank == 0) {
      PMPI_Send(buf, int(bytes), MPI_BYTE, 1, 7, MPI_COMM_WORLD);
      PMPI_Recv(buf, int(bytes), MPI_BYTE, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      PMPI_Recv(buf, int(bytes), MPI_BYTE, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      PMPI_Send(buf, int(bytes), MPI_BYTE, 0, 7, MPI_COMM_WORLD);
    }
    return (MPI_Wtime() - t0) / 2;
  });
}

// Per message, the time of kBatchMessages messages each way between this rank and `peer`
// (the other rank, or itself) at once: PMPI_Irecv and PMPI_Isend of distinct slices of
// `buf`, one PMPI_Waitall, the library alone. What one message of a halo exchange's batch
// costs: a library may overlap messages in flight (on two H200s a 64-byte message of a
// batch cost CUDA-aware Open MPI 5.1 us on GPU buffers, alone 9.4 us). `buf` holds
// 2 * kBatchMessages of the largest size.
Curve batch_exchange(char *buf, const std::vector<int64_t> &sizes, const char *stage, int peer) {
  constexpr int k = kBatchMessages;
  std::vector<MPI_Request> requests(2 * k);
  return mpi_curve(sizes, stage, k, 50, [&](int64_t bytes) {
    const double t0 = MPI_Wtime();
    for (int m = 0; m < k; ++m)
      PMPI_Irecv(buf + (k + m) * bytes, int(bytes), MPI_BYTE, peer, 20 + m, MPI_COMM_WORLD, &requests[m]);
    for (int m = 0; m < k; ++m)
      PMPI_Isend(buf + m * bytes, int(bytes), MPI_BYTE, peer, 20 + m, MPI_COMM_WORLD, &requests[k + m]);
    PMPI_Waitall(2 * k, requests.data(), MPI_STATUSES_IGNORE);
    return (MPI_Wtime() - t0) / k;
  });
}

// The time of one message of each size from this rank to itself (PMPI_Irecv, PMPI_Send,
// PMPI_Wait; the library's loopback path), from the first half of `buf` into the second.
// Both ranks measure at once, each to itself.
Curve self_message(char *buf, const std::vector<int64_t> &sizes, int64_t half, const char *stage) {
  return mpi_curve(sizes, stage, 1, 100, [buf, half](int64_t bytes) {
    const double t0 = MPI_Wtime();
    MPI_Request r;
    PMPI_Irecv(buf + half, int(bytes), MPI_BYTE, g_rank, 9, MPI_COMM_WORLD, &r);
    PMPI_Send(buf, int(bytes), MPI_BYTE, g_rank, 9, MPI_COMM_WORLD);
    PMPI_Wait(&r, MPI_STATUS_IGNORE);
    return MPI_Wtime() - t0;
  });
}

// The placement the profile is measured in, named as TEMPI names the peer of a message
// (pmpi/base/peers.hpp), so that a profile's curve is looked up by the rule that recorded it.
// TEMPI learns the world's placement at its first collective with buffers on
// MPI_COMM_WORLD: this one.
PeerClass measured_peer() {
  const int one = 1;
  int ranks = 0;
  MPI_Allreduce(&one, &ranks, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  return peer_class(MPI_COMM_WORLD, 1 - g_rank);
}

// ---------------------------------------------------------------- the profile's identity

std::string driver_version() {
  std::ifstream f("/proc/driver/nvidia/version");
  std::string line;
  if (!std::getline(f, line)) return "unknown";
  // "NVRM version: NVIDIA UNIX [Open Kernel] Module for x86_64  570.86.15  Release Build ...":
  // the first word after "Module" that starts with a digit.
  const size_t at = line.find("Module");
  if (at == std::string::npos) return "unknown";
  std::istringstream words(line.substr(at + 6));
  std::string w;
  while (words >> w)
    if (std::isdigit(static_cast<unsigned char>(w[0]))) return w;
  return "unknown";
}

std::string utc_now() {
  char buf[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return buf;
}

void make_parent_directories(const std::string &path) {
  for (size_t at = path.find('/', 1); at != std::string::npos; at = path.find('/', at + 1))
    mkdir(path.substr(0, at).c_str(), 0755);  // existing ones are fine; a failure shows when writing
}

// ---------------------------------------------------------------- the model against TEMPI

struct CheckRow {
  int64_t bytes, block;
  Method method;
  double predicted, measured;
};

// One-way time of a typed GPU object through TEMPI (MPI_Send/MPI_Recv) with `method`.
double through_tempi(void *typed, MPI_Datatype type, const char *method, const Budget &b) {
  if (TEMPIX_Set_method(method) != MPI_SUCCESS) fail(std::string("TEMPIX_Set_method(") + method + ") failed");
  std::vector<double> t;
  for (int i = 0; i < b.max_reps / 2 + 2; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    if (g_rank == 0) {
      MPI_Send(typed, 1, type, 1, 11, MPI_COMM_WORLD);
      MPI_Recv(typed, 1, type, 1, 11, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(typed, 1, type, 0, 11, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(typed, 1, type, 0, 11, MPI_COMM_WORLD);
    }
    if (i >= 2) t.push_back((MPI_Wtime() - t0) / 2);
  }
  return median(t);
}

std::vector<CheckRow> check_model(const Profile &p, bool aware, const Options &o) {
  std::vector<CheckRow> rows;
  const std::vector<int64_t> blocks = o.quick ? std::vector<int64_t>{8, 512} : std::vector<int64_t>{8, 64, 512};
  std::vector<int64_t> sizes;
  for (int64_t s : {int64_t(16) << 10, int64_t(1) << 20, int64_t(16) << 20})
    if (s <= o.max_bytes && (!o.quick || s <= (int64_t(1) << 20))) sizes.push_back(s);
  Backend &b = gpu_backend();
  void *typed = nullptr;
  check(b.allocate_device(size_t(2 * o.max_bytes), &typed), "allocating device memory for the check");
  std::vector<Method> methods = {Method::OneShot, Method::Staged};
  if (aware) methods.insert(methods.begin(), Method::Device);
  const Budget budget{3, o.quick ? 10 : 30, 0};
  for (int64_t block : blocks)
    for (int64_t size : sizes) {
      const int64_t bytes = size - size % block;
      MPI_Datatype type;
      MPI_Type_vector(int(bytes / block), int(block), int(2 * block), MPI_BYTE, &type);
      MPI_Type_commit(&type);
      const TransferQuery q = describe_message(rows_plan(bytes, block), false);
      for (Method m : methods) {
        const double measured = through_tempi(typed, type, to_string(m), budget);
        const std::optional<Prediction> predicted = predict(p, m, q, config());
        rows.push_back({bytes, block, m, predicted ? predicted->seconds : -1, measured});
        g_progress.step("the model against TEMPI");
      }
      const double measured = through_tempi(typed, type, "auto", budget);
      const Transfer chosen = choose_transfer(Method::Auto, aware, q, config());
      const std::optional<Prediction> predicted = predict(p, chosen.method, q, config());
      rows.push_back({bytes, block, Method::Auto, predicted ? predicted->seconds : -1, measured});
      g_progress.step("the model against TEMPI");
      MPI_Type_free(&type);
    }
  if (TEMPIX_Set_method("auto") != MPI_SUCCESS) fail("TEMPIX_Set_method(auto) failed");
  b.free_device(typed);
  return rows;
}

int check_steps(const Options &o, bool aware) {
  const int blocks = o.quick ? 2 : 3;
  int sizes = 0;
  for (int64_t s : {int64_t(16) << 10, int64_t(1) << 20, int64_t(16) << 20})
    sizes += s <= o.max_bytes && (!o.quick || s <= (int64_t(1) << 20));
  return blocks * sizes * (aware ? 4 : 3);
}

// Nanoseconds per decision: cached (a repeated message), cached after looking up the
// peer's class as a send does, the lookup alone, and computed from the profile.
struct DecisionCost {
  double hit_ns = 0, with_peer_ns = 0, peer_ns = 0, miss_ns = 0;
};

DecisionCost time_decisions(const Profile &p, bool aware) {
  std::vector<TransferQuery> qs;
  for (int64_t block : {8, 64, 512})
    for (int64_t bytes : {int64_t(4096), int64_t(1) << 20, int64_t(16) << 20})
      qs.push_back(describe_message(rows_plan(bytes - bytes % block, block), false));
  const Config &cfg = config();
  constexpr int kRounds = 20000;
  const double per_round = double(qs.size());
  const int other = 1 - g_rank;
  int64_t sink = 0;
  DecisionCost cost;
  auto ns_per = [](Clock::time_point t0, double n) {
    return std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / n;
  };
  auto t0 = Clock::now();
  for (int r = 0; r < kRounds; ++r)
    for (const TransferQuery &q : qs) sink += choose_transfer(Method::Auto, aware, q, cfg).chunk;
  cost.hit_ns = ns_per(t0, kRounds * per_round);
  t0 = Clock::now();
  for (int r = 0; r < kRounds; ++r)
    for (TransferQuery q : qs) {
      q.peer = peer_class(MPI_COMM_WORLD, other);
      sink += choose_transfer(Method::Auto, aware, q, cfg).chunk;
    }
  cost.with_peer_ns = ns_per(t0, kRounds * per_round);
  t0 = Clock::now();
  for (int r = 0; r < kRounds * int(qs.size()); ++r) sink += int(peer_class(MPI_COMM_WORLD, other));
  cost.peer_ns = ns_per(t0, kRounds * per_round);
  t0 = Clock::now();
  for (int r = 0; r < kRounds / 10; ++r)
    for (const TransferQuery &q : qs) sink += choose_transfer(Method::Auto, aware, q, cfg, &p).chunk;
  cost.miss_ns = ns_per(t0, kRounds / 10 * per_round);
  if (sink == 42) std::printf(" ");  // keeps the loops
  return cost;
}

// ---------------------------------------------------------------- the summary

double rate_gbs(const Curve &c) { return c.empty() ? 0 : c.bytes.back() / c.seconds.back() / 1e9; }

void print_kernels(const char *name, const KernelTable &t) {
  std::printf("  %-14s", name);
  for (const KernelRow &r : t.rows) std::printf(" %5lld B: %6.1f", (long long)r.block, rate_gbs(r.time));
  std::printf("   GB/s at %.0f KiB\n", t.rows.empty() ? 0.0 : t.rows.front().time.bytes.back() / 1024);
}

void print_curve(const char *name, const Curve &c) {
  if (c.empty()) return;
  std::printf("  %-32s %8.2f us at %lld B, %7.2f GB/s at %.0f KiB\n", name, c.seconds.front() * 1e6,
              (long long)c.bytes.front(), rate_gbs(c), c.bytes.back() / 1024);
}

void print_checks(const std::vector<CheckRow> &rows) {
  std::printf("\nThe model against messages through TEMPI (MPI_Send/MPI_Recv of 2-D objects, one-way us):\n");
  std::printf("  %10s %6s %-8s %10s %10s %7s\n", "bytes", "block", "method", "predicted", "measured", "pred/meas");
  int within = 0, predicted = 0, auto_close = 0, autos = 0;
  double worst_auto = 1;
  for (size_t i = 0; i < rows.size(); ++i) {
    const CheckRow &r = rows[i];
    std::printf("  %10lld %6lld %-8s %10.1f %10.1f %7.2f\n", (long long)r.bytes, (long long)r.block,
                to_string(r.method), r.predicted * 1e6, r.measured * 1e6, r.predicted > 0 ? r.predicted / r.measured : 0);
    if (r.method != Method::Auto) {
      predicted += r.predicted > 0;
      within += r.predicted > 0 && std::fabs(r.predicted / r.measured - 1) <= 0.25;
      continue;
    }
    double best = 1e30;  // the best forced method of this object: the rows before it
    for (size_t k = i; k-- > 0 && rows[k].method != Method::Auto;) best = std::min(best, rows[k].measured);
    ++autos;
    auto_close += r.measured <= 1.05 * best;
    worst_auto = std::max(worst_auto, r.measured / best);
  }
  std::printf("  predicted within 25%%: %d of %d forced points; auto within 5%% of the best forced method: %d of %d "
              "objects, at worst %.2fx the best\n",
              within, predicted, auto_close, autos, worst_auto);
}

// ---------------------------------------------------------------- main

// One whole measurement: the library's curves with both ranks, then the GPU's own parts on
// rank 0 (rank 1's profile holds its MPI curves only).
Profile measure(const Options &o, const Grid &grid, bool gpu, bool aware) {
  Backend &b = gpu_backend();
  Profile p;
  p.machine = this_machine();
  p.driver = driver_version();
  p.date = utc_now();
  p.cuda_aware = aware;
  p.measured_peer = measured_peer();

  {  // the MPI library between pinned host buffers (plain host memory without a GPU)
    Scratch pinned;
    std::vector<char> plain;
    void *buf = nullptr;
    if (gpu) {
      check(b.acquire(ScratchKind::Pinned, size_t(2 * o.max_bytes), pinned), "allocating pinned host memory");
      buf = pinned.ptr;
    } else {
      plain.assign(size_t(2 * o.max_bytes), 1);
      buf = plain.data();
    }
    p.mpi_host = ping_pong(buf, grid.mpi_sizes, "MPI, host buffers");
    p.mpi_host_batched = batch_exchange(static_cast<char *>(buf), grid.batch_sizes, "MPI, host buffers, batched",
                                        1 - g_rank);
  }
  if (gpu && aware) {  // between GPU buffers, the library alone
    void *dev = nullptr;
    check(b.allocate_device(size_t(2 * o.max_bytes), &dev), "allocating device memory for MPI");
    DeviceWire w;
    w.peer = p.measured_peer;
    w.time = ping_pong(dev, grid.mpi_sizes, "MPI, GPU buffers");
    w.batched = batch_exchange(static_cast<char *>(dev), grid.batch_sizes, "MPI, GPU buffers, batched", 1 - g_rank);
    p.mpi_device.push_back(std::move(w));
    // Messages to the rank itself take the library's loopback path, which may be another
    // matter on GPU buffers (a periodic halo on few ranks sends many to itself).
    DeviceWire self;
    self.peer = PeerClass::Self;
    self.time = self_message(static_cast<char *>(dev), grid.mpi_sizes, o.max_bytes, "MPI, GPU buffers, to itself");
    self.batched = batch_exchange(static_cast<char *>(dev), grid.batch_sizes, "MPI, GPU buffers, to itself, batched",
                                  g_rank);
    p.mpi_device.push_back(std::move(self));
    b.free_device(dev);
  }

  // The GPU's own parts come after the library's: on an H100 host (2026-11-25) MPICH's
  // curves measured right after them were, in two runs of five, 1.6-2x slower at 1-16 MiB
  // than TEMPI's own messages a few seconds later (the release of the measurements' pinned
  // buffers, perhaps); measured first, one run of seven was, 1.3-1.5x.
  if (gpu && g_rank == 0) {
    GpuBuffers g(o.max_bytes);
    measure_floor(g, grid, p);
    p.pack_device = measure_kernels(g, grid, Direction::PackDevice);
    p.unpack_device = measure_kernels(g, grid, Direction::UnpackDevice);
    p.pack_host = measure_kernels(g, grid, Direction::PackHost);
    p.unpack_host = measure_kernels(g, grid, Direction::UnpackHost);
    p.copy_to_host = measure_copies(g, grid, true);
    p.copy_to_device = measure_copies(g, grid, false);
    p.staged_chunk = measure_staged_chunk(g, grid, p);
  }
  MPI_Barrier(MPI_COMM_WORLD);  // rank 1 waited: the GPU was rank 0's alone
  return p;
}

int run(const Options &o) {
  Backend &b = gpu_backend();
  const bool gpu = b.has_gpu();
  const bool aware = mpi_is_cuda_aware();
  const Grid grid = grid_for(o);

  const int gpu_steps = [&] {
    int n = 1 + 2 * int(grid.copy_sizes.size());
    for (int64_t block : grid.blocks) n += 4 * int(sizes_for_block(grid, block).size());
    return n + 4 * 5 + 4;
  }();
  const int mpi_steps = kMpiRounds * int(grid.mpi_sizes.size() + grid.batch_sizes.size()) * (gpu && aware ? 3 : 1);
  g_progress.plan(o.repeat * (mpi_steps + (gpu ? gpu_steps : 0)) + (gpu && o.check ? check_steps(o, aware) : 0));

  // A shift that lasts a whole measurement (a slow minute of a shared GPU or host) is not
  // cured by rounds within it; the median of whole runs drops such a run.
  std::vector<Profile> runs;
  for (int r = 0; r < o.repeat; ++r) {
    if (o.repeat > 1) g_run_label = "run " + std::to_string(r + 1) + ": ";
    runs.push_back(measure(o, grid, gpu, aware));
  }
  Profile p = runs.front();
  if (o.repeat > 1 && g_rank == 0) {
    std::string error;
    std::optional<Profile> combined = median_profile(runs, error);
    if (!combined) fail("the repeated measurements do not combine: " + error);
    p = std::move(*combined);
  }

  std::vector<CheckRow> checks;
  DecisionCost decisions;
  std::string path;
  if (gpu) {
    // Rank 0 writes the profile and reads it back through TEMPI's loader; both ranks install it.
    std::string text = write_profile(p);
    int length = int(text.size());
    MPI_Bcast(&length, 1, MPI_INT, 0, MPI_COMM_WORLD);
    text.resize(size_t(length));
    MPI_Bcast(text.data(), length, MPI_CHAR, 0, MPI_COMM_WORLD);
    ProfileChoice loaded;
    if (g_rank == 0) {
      path = o.output.empty() ? profile_cache_path(p.machine, [](const char *n) { return std::getenv(n); }) : o.output;
      if (path.empty()) fail("no --output and no HOME for the per-user cache: say where the profile goes");
      make_parent_directories(path);
      std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
      loaded = find_profile(path, this_machine(), [](const char *n) { return std::getenv(n); });
      if (!loaded.profile) fail("the profile written does not load: " + loaded.reason);
    } else {
      std::string error;
      loaded.profile = parse_profile(text, error);
      if (!loaded.profile) fail("the profile received does not parse: " + error);
      loaded.path = "(rank 0's)";
    }
    // The messages of the check go through TEMPI's model, which reads active_profile():
    // it must be the profile just written, not the start-up one (TEMPI_PROFILE=none).
    const Profile *installed = install_profile(std::move(loaded));
    if (!installed || active_profile() != installed) fail("TEMPI does not use the profile just installed");
    if (o.check) checks = check_model(*installed, aware, o);
    decisions = time_decisions(*installed, aware);
  }
  g_progress.finish();
  if (g_rank != 0) return 0;

  std::printf("tempi-measure: %s, driver %s, %s (%s CUDA-aware), peer %s, %s\n", p.machine.gpu.c_str(),
              p.driver.c_str(), p.machine.mpi_library.c_str(), aware ? "is" : "not", to_string(p.measured_peer),
              p.date.c_str());
  if (o.repeat > 1) std::printf("  each point the median of %d whole measurements\n", o.repeat);
  if (gpu) {
    std::printf("  launch %.2f us, synchronization %.2f us, staged method %.2f us a chunk\n", p.launch * 1e6,
                p.sync * 1e6, p.staged_chunk * 1e6);
    std::printf("Kernels (rows of each block size, largest object):\n");
    print_kernels("pack_device", p.pack_device);
    print_kernels("unpack_device", p.unpack_device);
    print_kernels("pack_host", p.pack_host);
    print_kernels("unpack_host", p.unpack_host);
    std::printf("Copies and messages (smallest and largest size):\n");
    print_curve("copy engines, device to host", p.copy_to_host);
    print_curve("copy engines, host to device", p.copy_to_device);
    if (!g_disturbed.empty()) {
      std::printf("Disturbed (measured more than 25%% slower than a larger object, and more than 25%% faster when "
                  "timed again; many of these: measure again on a quieter GPU):\n");
      for (const std::string &d : g_disturbed) std::printf("  %s\n", d.c_str());
    }
  }
  print_curve("MPI, pinned host buffers", p.mpi_host);
  print_curve("MPI, pinned host, batched", p.mpi_host_batched);
  std::printf("  (batched: per message, with %d messages each way in flight at once)\n", kBatchMessages);
  for (const DeviceWire &w : p.mpi_device) {
    const bool self = w.peer == PeerClass::Self;
    print_curve(self ? "MPI, GPU buffers, to itself" : "MPI, GPU buffers", w.time);
    print_curve(self ? "MPI, GPU buffers, itself, batched" : "MPI, GPU buffers, batched", w.batched);
  }
  if (!gpu) {
    std::printf("no GPU: no profile written (the model needs the GPU's numbers)\n");
    return 0;
  }
  if (!checks.empty()) print_checks(checks);
  std::printf("\nDecision: %.0f ns from the cache (%.0f ns with the peer's class looked up, the lookup alone %.1f "
              "ns), %.0f ns computed from the profile\n",
              decisions.hit_ns, decisions.with_peer_ns, decisions.peer_ns, decisions.miss_ns);
  std::printf("Profile written to %s (loads: yes)\n", path.c_str());
  return 0;
}

}  // namespace

int main(int argc, char **argv) {
  // Measurements go around TEMPI's model: an old profile must not steer the messages
  // timed here (the check installs the new one itself).
  setenv("TEMPI_PROFILE", "none", 1);
  tempi::tools::select_gpu_before_mpi_init();
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  Options o;
  const std::string problem = parse(argc, argv, o);
  if (!problem.empty() || size != 2) {
    if (g_rank == 0) {
      if (problem == "help") {
        usage();
      } else {
        std::fprintf(stderr, "tempi-measure: %s\n", problem.empty() ? "run it on exactly 2 ranks" : problem.c_str());
        usage();
      }
    }
    MPI_Finalize();
    return problem == "help" ? 0 : 2;
  }
  tempi::active();  // TEMPI starts: CUDA awareness detected
  const int status = run(o);
  MPI_Finalize();
  return status;
}
