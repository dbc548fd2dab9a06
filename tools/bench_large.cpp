// Large typed messages between two ranks (issue 20): one big non-contiguous message each
// way, against the same bytes sent contiguous and against the copy engine reading them
// straight from the peer's GPU memory (the roofline of a transfer between GPUs of a node).
//
// Shapes, on an N x N matrix of doubles per rank (row-major):
//   triangle    rank 0 sends its lower triangle (MPI_Type_indexed, row i: columns 0..i) and
//               rank 1 receives it as its upper triangle (row i: columns i..N-1); then rank 1
//               sends its upper triangle back into rank 0's lower one
//   transpose   rank 0 sends its matrix contiguous (N*N MPI_DOUBLE) and rank 1 receives it
//               as its transpose (N columns, each a vector resized to one element); rank 1
//               sends its matrix back with that type, into rank 0's matrix contiguous
// Variants, each timed as a round trip (MPI_Isend + MPI_Wait one way, MPI_Irecv + MPI_Wait
// the other, after an MPI_Barrier; per iteration the slower rank):
//   contiguous        the same number of bytes as MPI_BYTE between device buffers, through
//                     TEMPI (handed to a CUDA-aware library, staged through the host otherwise)
//   typed             the shape's datatypes through TEMPI (its method choice)
//   typed-zero-copy   the same on a duplicate of MPI_COMM_WORLD on which
//                     TEMPIX_Comm_enable_zero_copy is on (n/a where it is off)
//   peer-copy         no MPI data: rank 1 copies rank 0's bytes with cudaMemcpy from a CUDA
//                     IPC mapping of rank 0's buffer, a zero-byte message, then rank 0 copies
//                     rank 1's alike, and a zero-byte message back
// Every variant has buffers of its own, kept until the end of the run, and zero-copy runs
// first in each case: CUDA maps an allocation once per process, and a CUDA-aware library
// keeps the mappings it made of the buffers it moved (and of freed ones whose addresses
// come back), so TEMPI could not map them and would push instead (docs/using.md, "Zero-copy
// point-to-point"). Every received element is verified.
//
//   mpiexec -n 2 bench_large [--n 1024,2048,4096] [--shapes triangle,transpose] ... (--help)
#include <mpi.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bench_header.hpp"
#include "gpu_select.hpp"
#include "help.hpp"
#include "base/runtime.hpp"
#include "tempi.h"

namespace {

const char kUsage[] =
    "usage: mpiexec -n 2 bench_large [options]\n"
    "  One large typed message each way between two ranks: a lower triangle received as an upper\n"
    "  triangle, and a matrix received as its transpose, against the same bytes sent contiguous,\n"
    "  with zero-copy point-to-point on, and the copy engine reading them from the peer (CUDA IPC).\n"
    "  --n LIST            matrix sizes N (N x N doubles, 2..8192), comma-separated (default 1024,2048,4096)\n"
    "  --shapes LIST       triangle, transpose or both (default triangle,transpose)\n"
    "  --iters K           timed round trips per variant (default 20)\n"
    "  --warmup W          untimed round trips before them (default 3)\n"
    "  --csv FILE          append one row per measured variant (header when the file is new)\n"
    "  --check             quick mode for tests: --warmup 1 --iters 2, and --n 64,96 unless given\n"
    "  --require-gpu       print SKIP and exit 77 when no usable GPU is present\n"
    "  --help              this text\n"
    "Exit status: 0 when every variant placed every element, 1 otherwise, 2 for bad options,\n"
    "77 with --require-gpu and no GPU.\n";

struct Options {
  std::vector<int> sizes{1024, 2048, 4096};
  std::vector<std::string> shapes{"triangle", "transpose"};
  int iters = 20, warmup = 3;
  std::string csv;
  bool check = false, require_gpu = false, sizes_given = false;
};

std::vector<std::string> split(const std::string &list) {
  std::vector<std::string> out;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

bool to_int(const std::string &s, int lo, int hi, int &out) {
  char *end = nullptr;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end || v < lo || v > hi) return false;
  out = int(v);
  return true;
}

std::string parse(int argc, char **argv, Options &o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--n" && has_value) {
      o.sizes.clear();
      for (const std::string &s : split(argv[++i])) {
        int n = 0;
        if (!to_int(s, 2, 8192, n)) return "--n needs sizes between 2 and 8192";
        o.sizes.push_back(n);
      }
      if (o.sizes.empty()) return "--n needs at least one size";
      o.sizes_given = true;
    } else if (a == "--shapes" && has_value) {
      o.shapes = split(argv[++i]);
      for (const std::string &s : o.shapes)
        if (s != "triangle" && s != "transpose") return "unknown shape '" + s + "' (triangle, transpose)";
      if (o.shapes.empty()) return "--shapes needs at least one shape";
    } else if (a == "--iters" && has_value) {
      if (!to_int(argv[++i], 1, 1 << 20, o.iters)) return "--iters needs an integer >= 1";
    } else if (a == "--warmup" && has_value) {
      if (!to_int(argv[++i], 0, 1 << 20, o.warmup)) return "--warmup needs an integer >= 0";
    } else if (a == "--csv" && has_value) {
      o.csv = argv[++i];
    } else if (a == "--check") {
      o.check = true;
    } else if (a == "--require-gpu") {
      o.require_gpu = true;
    } else {
      return "unknown option or missing value: '" + a + "'";
    }
  }
  if (o.check) {
    o.warmup = 1;
    o.iters = 2;
    if (!o.sizes_given) o.sizes = {64, 96};
  }
  return "";
}

bool all_ranks(bool ok) {
  int mine = ok ? 1 : 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

bool ok_cuda(cudaError_t e, const char *what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "bench_large: %s: %s\n", what, cudaGetErrorString(e));
  return false;
}

// ---- one shape at one size ----------------------------------------------------------------

// The element indices a rank's send type reads and its receive type writes, in type order.
// Both ranks' types hold the same number of doubles, so the k-th sent lands k-th received.
struct Layout {
  std::vector<int64_t> sent, received;
};

std::vector<int64_t> triangle_indices(int n, bool lower) {
  std::vector<int64_t> v;
  v.reserve(size_t(n) * (n + 1) / 2);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = lower ? 0 : i; j < (lower ? i + 1 : n); ++j) v.push_back(i * n + j);
  return v;
}

Layout layout(const std::string &shape, int n, int rank) {
  Layout l;
  if (shape == "triangle") {  // rank 0's lower triangle into rank 1's upper one, and back
    l.sent = triangle_indices(n, rank == 0);
    l.received = l.sent;
    return l;
  }
  // Rank 0's side is contiguous both ways; rank 1's is the transpose type both ways, whose
  // k-th element is at row k mod n, column k / n.
  l.sent.resize(size_t(n) * n);
  for (int64_t k = 0; k < int64_t(n) * n; ++k) l.sent[size_t(k)] = rank == 0 ? k : (k % n) * n + k / n;
  l.received = l.sent;
  return l;
}

MPI_Datatype triangle_type(int n, bool lower) {
  std::vector<int> lengths(static_cast<size_t>(n)), displs(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    lengths[size_t(i)] = lower ? i + 1 : n - i;
    displs[size_t(i)] = lower ? i * n : i * n + i;
  }
  MPI_Datatype t;
  MPI_Type_indexed(n, lengths.data(), displs.data(), MPI_DOUBLE, &t);
  MPI_Type_commit(&t);
  return t;
}

MPI_Datatype transpose_type(int n) {
  MPI_Datatype column, one, t;
  MPI_Type_vector(n, 1, n, MPI_DOUBLE, &column);
  MPI_Type_create_resized(column, 0, sizeof(double), &one);
  MPI_Type_contiguous(n, one, &t);
  MPI_Type_commit(&t);
  MPI_Type_free(&column);
  MPI_Type_free(&one);
  return t;
}

// A rank's matrix: each element a distinct double (exact below 2^53).
double value(int rank, int64_t k) { return double((uint64_t(rank + 1) << 32) + uint64_t(k)); }

// One round trip's arguments on this rank.
struct Trip {
  MPI_Comm comm = MPI_COMM_WORLD;
  void *send = nullptr, *recv = nullptr;
  int send_count = 0, recv_count = 0;
  MPI_Datatype send_type = MPI_BYTE, recv_type = MPI_BYTE;
};

constexpr int kTag = 7;

bool round_trip(const Trip &t, int rank) {
  MPI_Request r;
  bool ok = true;
  auto send = [&] {
    ok &= MPI_Isend(t.send, t.send_count, t.send_type, 1 - rank, kTag, t.comm, &r) == MPI_SUCCESS;
    ok &= MPI_Wait(&r, MPI_STATUS_IGNORE) == MPI_SUCCESS;
  };
  auto receive = [&] {
    ok &= MPI_Irecv(t.recv, t.recv_count, t.recv_type, 1 - rank, kTag, t.comm, &r) == MPI_SUCCESS;
    ok &= MPI_Wait(&r, MPI_STATUS_IGNORE) == MPI_SUCCESS;
  };
  if (rank == 0) {
    send();
    receive();
  } else {
    receive();
    send();
  }
  return ok;
}

// peer-copy: the copy engine reads the peer's bytes through its IPC mapping. (A
// device-to-device cudaMemcpy may return before the copy is done: the stream is waited for.)
bool peer_round_trip(void *dst, const void *peer_src, size_t bytes, int rank, cudaStream_t stream) {
  bool ok = true;
  auto pull = [&] {
    ok &= ok_cuda(cudaMemcpyAsync(dst, peer_src, bytes, cudaMemcpyDeviceToDevice, stream), "peer copy");
    ok &= ok_cuda(cudaStreamSynchronize(stream), "peer copy");
  };
  if (rank == 1) {
    pull();
    MPI_Send(nullptr, 0, MPI_BYTE, 0, kTag, MPI_COMM_WORLD);
    MPI_Recv(nullptr, 0, MPI_BYTE, 0, kTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  } else {
    MPI_Recv(nullptr, 0, MPI_BYTE, 1, kTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    pull();
    MPI_Send(nullptr, 0, MPI_BYTE, 1, kTag, MPI_COMM_WORLD);
  }
  return ok;
}

struct Result {
  std::string name, na;  // na: why the variant was not measured
  double median_us = 0, min_us = 0, max_us = 0;
  long long wrong = 0, checked = 0;
  bool failed = false;
  std::string note;  // typed-zero-copy: messages that took the pack path instead
};

// A variant that was not measured, and why.
Result not_measured(const std::string &name, const std::string &why) {
  Result r;
  r.name = name;
  r.na = why;
  return r;
}

// A variant's own pair of device buffers: `send` filled with this rank's matrix (or its
// first bytes), `recv` poisoned before the verified trip.
struct Buffers {
  void *send = nullptr, *recv = nullptr;
  size_t send_bytes = 0, recv_bytes = 0;
  ~Buffers() {
    for (void *p : {send, recv})
      if (p) cudaFree(p);
  }
  bool make(const std::vector<double> &matrix, size_t send_bytes_, size_t recv_bytes_) {
    send_bytes = send_bytes_;
    recv_bytes = recv_bytes_;
    return ok_cuda(cudaMalloc(&send, send_bytes), "cudaMalloc") && ok_cuda(cudaMalloc(&recv, recv_bytes), "cudaMalloc") &&
           ok_cuda(cudaMemcpy(send, matrix.data(), send_bytes, cudaMemcpyHostToDevice), "upload");
  }
};

constexpr unsigned char kPoison = 0xA5;

// Times `trip` (warm-up, then per iteration the slower rank), then verifies one trip into
// a poisoned receive buffer against `expected` (compared in doubles).
template <class TripFn>
Result measure(const std::string &name, const Options &o, Buffers &b, const std::vector<unsigned char> &expected,
               TripFn trip) {
  Result r;
  r.name = name;
  bool ok = true;
  for (int i = 0; i < o.warmup; ++i) ok &= trip();
  std::vector<double> local(size_t(o.iters)), worst(size_t(o.iters));
  for (int i = 0; i < o.iters; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    ok &= trip();
    local[size_t(i)] = 1e6 * (MPI_Wtime() - t0);
  }
  MPI_Allreduce(local.data(), worst.data(), o.iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  std::vector<double> sorted = worst;
  std::sort(sorted.begin(), sorted.end());
  r.median_us = sorted[sorted.size() / 2];
  r.min_us = sorted.front();
  r.max_us = sorted.back();
  ok &= ok_cuda(cudaMemset(b.recv, kPoison, b.recv_bytes), "poison");
  ok &= ok_cuda(cudaDeviceSynchronize(), "poison");
  MPI_Barrier(MPI_COMM_WORLD);
  ok &= trip();
  std::vector<unsigned char> got(b.recv_bytes);
  ok &= ok_cuda(cudaMemcpy(got.data(), b.recv, b.recv_bytes, cudaMemcpyDeviceToHost), "download");
  long long wrong = 0;
  for (size_t e = 0; e + sizeof(double) <= b.recv_bytes; e += sizeof(double))
    wrong += std::memcmp(&got[e], &expected[e], sizeof(double)) != 0;
  const long long elements = (long long)(b.recv_bytes / sizeof(double));
  long long mine[2] = {ok ? wrong : elements, elements}, sum[2] = {0, 0};
  MPI_Allreduce(mine, sum, 2, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  r.wrong = sum[0];
  r.checked = sum[1];
  r.failed = !all_ranks(ok);
  return r;
}

struct Case {
  std::string shape;
  int n = 0;
  size_t bytes = 0;  // one way
  std::vector<Result> results;
};

// The bytes this rank must hold after a trip: the peer's elements where the receive type
// puts them, the poison elsewhere (typed), or the peer's first `bytes` bytes (contiguous).
std::vector<unsigned char> expected_typed(const Layout &mine, const Layout &peer, int peer_rank, size_t matrix_bytes) {
  std::vector<unsigned char> e(matrix_bytes, kPoison);
  for (size_t k = 0; k < mine.received.size(); ++k) {
    const double v = value(peer_rank, peer.sent[k]);
    std::memcpy(&e[size_t(mine.received[k]) * sizeof(double)], &v, sizeof v);
  }
  return e;
}

std::vector<unsigned char> expected_contiguous(int peer_rank, size_t bytes) {
  std::vector<unsigned char> e(bytes);
  for (size_t k = 0; k < bytes / sizeof(double); ++k) {
    const double v = value(peer_rank, int64_t(k));
    std::memcpy(&e[k * sizeof(double)], &v, sizeof v);
  }
  return e;
}

Case run_case(const std::string &shape, int n, int rank, MPI_Comm zero_copy, const std::string &zero_copy_na,
              const Options &o, std::vector<std::unique_ptr<Buffers>> &kept) {
  Case c;
  c.shape = shape;
  c.n = n;
  const Layout mine = layout(shape, n, rank), peer = layout(shape, n, 1 - rank);
  c.bytes = mine.sent.size() * sizeof(double);
  const size_t matrix_bytes = size_t(n) * n * sizeof(double);
  std::vector<double> matrix(size_t(n) * n);
  for (size_t k = 0; k < matrix.size(); ++k) matrix[k] = value(rank, int64_t(k));
  const std::vector<unsigned char> typed_expected = expected_typed(mine, peer, 1 - rank, matrix_bytes);
  const std::vector<unsigned char> bytes_expected = expected_contiguous(1 - rank, c.bytes);

  MPI_Datatype send_type, recv_type;
  int send_count = 1, recv_count = 1;
  if (shape == "triangle") {
    send_type = triangle_type(n, rank == 0);
    recv_type = triangle_type(n, rank == 0);
  } else if (rank == 0) {
    send_type = recv_type = MPI_DOUBLE;
    send_count = recv_count = n * n;
  } else {
    send_type = recv_type = transpose_type(n);
  }

  // A variant's buffers, null where some rank could not allocate them.
  auto buffers = [&](size_t bytes) -> Buffers * {
    kept.push_back(std::make_unique<Buffers>());
    return all_ranks(kept.back()->make(matrix, bytes, bytes)) ? kept.back().get() : nullptr;
  };
  const char *const kNoMemory = "n/a (could not allocate its buffers)";
  for (const bool zc : {true, false}) {  // typed-zero-copy first (see the head of this file), typed
    const char *name = zc ? "typed-zero-copy" : "typed";
    Buffers *b = zc && !zero_copy_na.empty() ? nullptr : buffers(matrix_bytes);
    if (!b) {
      c.results.push_back(not_measured(name, zc && !zero_copy_na.empty() ? zero_copy_na : kNoMemory));
      continue;
    }
    Trip t{zc ? zero_copy : MPI_COMM_WORLD, b->send, b->recv, send_count, recv_count, send_type, recv_type};
    unsigned long long reads_before = 0, reads_after = 0;
    TEMPIX_Counter("p2p.zero_copy_reads", &reads_before);
    c.results.push_back(measure(name, o, *b, typed_expected, [&] { return round_trip(t, rank); }));
    if (zc) {  // a zero-copy variant whose messages took the pack path must not pass for one
      TEMPIX_Counter("p2p.zero_copy_reads", &reads_after);
      long long read[2] = {(long long)(reads_after - reads_before), 0}, all[2] = {0, 0};
      read[1] = o.warmup + o.iters + 1;  // trips, each one message to this rank
      MPI_Allreduce(read, all, 2, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
      if (all[0] != all[1])
        c.results.back().note = "only " + std::to_string(all[0]) + " of " + std::to_string(all[1]) +
                                " messages went by zero-copy (TEMPI_LOG_LEVEL=info says why)";
    }
  }
  if (Buffers *b = buffers(c.bytes)) {
    Trip t{MPI_COMM_WORLD, b->send, b->recv, int(c.bytes), int(c.bytes), MPI_BYTE, MPI_BYTE};
    c.results.push_back(measure("contiguous", o, *b, bytes_expected, [&] { return round_trip(t, rank); }));
  } else {
    c.results.push_back(not_measured("contiguous", kNoMemory));
  }
  {  // peer-copy
    kept.push_back(std::make_unique<Buffers>());
    Buffers &b = *kept.back();
    bool ok = b.make(matrix, c.bytes, c.bytes);
    cudaIpcMemHandle_t mine_handle{}, peer_handle{};
    ok = ok && ok_cuda(cudaIpcGetMemHandle(&mine_handle, b.send), "cudaIpcGetMemHandle");
    MPI_Sendrecv(&mine_handle, sizeof mine_handle, MPI_BYTE, 1 - rank, kTag, &peer_handle, sizeof peer_handle, MPI_BYTE,
                 1 - rank, kTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    void *peer_src = nullptr;
    if (ok && cudaIpcOpenMemHandle(&peer_src, peer_handle, cudaIpcMemLazyEnablePeerAccess) != cudaSuccess) {
      cudaGetLastError();
      peer_src = nullptr;
      ok = false;
    }
    if (!all_ranks(ok)) {
      c.results.push_back(not_measured("peer-copy", "n/a (CUDA IPC could not map the peer's buffer: no peer access?)"));
    } else {
      cudaStream_t stream = nullptr;
      const bool made = ok_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
      if (all_ranks(made))
        c.results.push_back(measure("peer-copy", o, b, bytes_expected,
                                    [&] { return peer_round_trip(b.recv, peer_src, c.bytes, rank, stream); }));
      else
        c.results.push_back(not_measured("peer-copy", "failed: cudaStreamCreate failed on some rank"));
      if (made) cudaStreamDestroy(stream);
    }
    if (peer_src) cudaIpcCloseMemHandle(peer_src);
    MPI_Barrier(MPI_COMM_WORLD);  // the peer has closed its mapping before this buffer is freed
  }
  const bool one_type = send_type == recv_type;  // the transpose's, on rank 1
  if (send_type != MPI_DOUBLE) MPI_Type_free(&send_type);
  if (!one_type && recv_type != MPI_DOUBLE) MPI_Type_free(&recv_type);
  // Printed in one order whatever order they ran in.
  const std::vector<std::string> order{"contiguous", "typed", "typed-zero-copy", "peer-copy"};
  std::stable_sort(c.results.begin(), c.results.end(), [&](const Result &a, const Result &b) {
    return std::find(order.begin(), order.end(), a.name) < std::find(order.begin(), order.end(), b.name);
  });
  return c;
}

// ---- output ---------------------------------------------------------------------------------

const Result *find(const Case &c, const std::string &name) {
  for (const Result &r : c.results)
    if (r.name == name && r.na.empty()) return &r;
  return nullptr;
}

double gbps(const Case &c, const Result &r) { return 2.0 * double(c.bytes) / (r.median_us * 1e3); }

void print_case(const Case &c) {
  std::printf("\n%s, N = %d: %zu B each way (%.1f MiB)\n", c.shape.c_str(), c.n, c.bytes, double(c.bytes) / (1 << 20));
  std::printf("%-16s %12s %12s %12s %10s %14s %12s\n", "variant", "round trip us", "min us", "max us", "GB/s",
              "/ contiguous", "wrong elems");
  const Result *contiguous = find(c, "contiguous");
  for (const Result &r : c.results) {
    if (!r.na.empty()) {
      std::printf("%-16s %s\n", r.name.c_str(), r.na.c_str());
      continue;
    }
    char ratio[32] = "-";
    if (contiguous) std::snprintf(ratio, sizeof ratio, "%.2fx", r.median_us / contiguous->median_us);
    std::printf("%-16s %12.1f %12.1f %12.1f %10.1f %14s %12lld%s\n", r.name.c_str(), r.median_us, r.min_us, r.max_us,
                gbps(c, r), ratio, r.wrong, r.failed ? "  (a step failed)" : "");
    if (!r.note.empty()) std::printf("%-16s   %s\n", "", r.note.c_str());
  }
}

// The targets, per case: typed against contiguous (<= 1.25 on a CUDA-aware
// library), zero-copy's rate against the copy engine's (>= 0.80 from 4 MiB).
void print_targets(const std::vector<Case> &cases, bool aware) {
  std::printf("\nAgainst the targets (issue 20): typed / contiguous, target <= 1.25x on a CUDA-aware library%s;\n",
              aware ? "" : " (this one is not)");
  std::printf("typed-zero-copy rate / peer-copy rate, target >= 0.80 for messages of 4 MiB or more.\n");
  std::printf("%-10s %6s %12s %18s %24s\n", "shape", "N", "MiB", "typed/contiguous", "zero-copy/peer-copy rate");
  for (const Case &c : cases) {
    const Result *typed = find(c, "typed"), *contiguous = find(c, "contiguous"), *zc = find(c, "typed-zero-copy"),
                 *peer = find(c, "peer-copy");
    char a[32] = "n/a", b[32] = "n/a";
    if (typed && contiguous) std::snprintf(a, sizeof a, "%.2fx", typed->median_us / contiguous->median_us);
    if (zc && peer)
      std::snprintf(b, sizeof b, "%.2f%s", gbps(c, *zc) / gbps(c, *peer), zc->note.empty() ? "" : " (not zero-copy)");
    std::printf("%-10s %6d %12.1f %18s %24s\n", c.shape.c_str(), c.n, double(c.bytes) / (1 << 20), a, b);
  }
}

void append_csv(const std::string &path, const std::vector<Case> &cases, bool aware) {
  std::FILE *f = std::fopen(path.c_str(), "a");
  if (!f) {
    std::fprintf(stderr, "bench_large: cannot open %s\n", path.c_str());
    return;
  }
  std::fseek(f, 0, SEEK_END);
  if (std::ftell(f) == 0) std::fprintf(f, "shape,n,bytes,variant,cuda_aware,median_us,min_us,max_us,gbps,wrong\n");
  for (const Case &c : cases)
    for (const Result &r : c.results)
      if (r.na.empty())
        std::fprintf(f, "%s,%d,%zu,%s,%d,%.3f,%.3f,%.3f,%.3f,%lld\n", c.shape.c_str(), c.n, c.bytes, r.name.c_str(),
                     int(aware), r.median_us, r.min_us, r.max_us, gbps(c, r), r.wrong);
  std::fclose(f);
}

int run(int argc, char **argv) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const bool root = rank == 0;
  Options o;
  const std::string error = parse(argc, argv, o);
  if (!error.empty() || size != 2) {
    if (root) {
      std::fprintf(stderr, "bench_large: %s\n", !error.empty() ? error.c_str() : "runs on exactly 2 ranks");
      std::fputs(kUsage, stderr);
    }
    return 2;
  }
  tempi::Backend &gpu = tempi::gpu_backend();
  if (!all_ranks(gpu.has_gpu())) {
    if (root) std::printf("SKIP: no usable GPU on every rank (this benchmark moves device buffers)\n");
    return o.require_gpu ? 77 : 0;
  }
  tempi::active();  // TEMPI starts at its first intercepted call: awareness is known from then on
  const bool aware = tempi::mpi_is_cuda_aware();
  MPI_Comm zero_copy;
  MPI_Comm_dup(MPI_COMM_WORLD, &zero_copy);
  int on = 0;
  const int zc_rc = TEMPIX_Comm_enable_zero_copy(zero_copy, 1, &on);
  const std::string zero_copy_na =
      !all_ranks(zc_rc == MPI_SUCCESS) ? "failed: TEMPIX_Comm_enable_zero_copy returned an error on some rank"
      : on ? ""
           : "n/a (zero-copy point-to-point is off: TEMPI_IPC=off, no GPU peer access, or TEMPI disabled)";
  if (root) {
    std::printf("bench_large: one large typed message each way between 2 ranks, against the same bytes contiguous\n");
    std::printf("  GPU              %s\n", gpu.device_name().c_str());
    std::printf("  MPI library      %s\n", tempi::tools::library_version().c_str());
    std::printf("  CUDA-aware       %s\n", aware ? "yes" : "no (TEMPI stages device buffers through host memory)");
    std::printf("  zero-copy p2p    %s\n", zero_copy_na.empty() ? "on (a duplicate of MPI_COMM_WORLD)" : zero_copy_na.c_str());
    std::printf("  iterations       %d warm-up + %d timed round trips per variant\n", o.warmup, o.iters);
    std::printf("  date             %s\n", tempi::tools::utc_now().c_str());
    std::printf("Round trip: MPI_Barrier, then one message each way; per iteration the slower rank. GB/s counts the\n"
                "bytes of both ways. Every received element is verified.\n");
  }
  std::vector<Case> cases;
  std::vector<std::unique_ptr<Buffers>> kept;  // freed at the end (see the head of this file)
  for (const std::string &shape : o.shapes)
    for (const int n : o.sizes) {
      cases.push_back(run_case(shape, n, rank, zero_copy, zero_copy_na, o, kept));
      if (root) print_case(cases.back());
    }
  bool good = true;
  for (const Case &c : cases)
    for (const Result &r : c.results) good &= r.na.empty() ? r.wrong == 0 && !r.failed : true;
  if (root) {
    print_targets(cases, aware);
    if (!o.csv.empty()) append_csv(o.csv, cases, aware);
    std::printf("%s\n", good ? "PASS: every element in place" : "FAIL: wrong elements or a failed step");
  }
  kept.clear();
  MPI_Comm_free(&zero_copy);
  return good ? 0 : 1;
}

}  // namespace

int main(int argc, char **argv) {
  if (tempi::tools::print_help_if_asked(argc, argv, kUsage)) return 0;
  return tempi::tools::run_with_mpi(argc, argv, run);
}
