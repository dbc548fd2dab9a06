// The transpose of a slab-decomposed 3-D FFT, as MPI_Alltoallw with subarray types
// (Dalcin, Mortensen and Keyes' "advanced MPI" redistribution), against what an
// application writes without datatypes, measured in one run on the same device buffers.
//
// A global N^3 array of double complex (16 B), C order (z, y, x). Before, rank p owns the
// z-slab [p N/P, (p+1) N/P) as an (N/P, N, N) array; after, the y-slab [p N/P, ...) as an
// (N, N/P, N) array. Rank p sends to q the box of its slab whose y lies in q's slab
// (a subarray type of the "before" array) and receives from q the box whose z lies in q's
// slab (a subarray type of the "after" array). Every element of "after" is verified.
//
// Variants:
//   tempi           MPI_Alltoallw(before, 1, 0, send_types, after, 1, 0, recv_types)
//   library-alone   the same call as PMPI_Alltoallw (TEMPI bypassed); only where the
//                   MPI library is CUDA-aware
//   hand-packed     one kernel packs the P boxes into a contiguous buffer, PMPI_Alltoallv
//                   moves it (device buffers on a CUDA-aware library, else through pinned
//                   host copies, as an application would), one kernel unpacks
//
//   mpiexec -n P bench_alltoallw [--n 128] [--iters 20] [--csv FILE] ... (--help)
#include <mpi.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "bench_header.hpp"
#include "gpu_select.hpp"
#include "base/runtime.hpp"

namespace bench_alltoallw {
struct Box {
  long long src_offset, dst_offset;
  long long src_z, src_y, dst_z, dst_y;
  int rows_z, rows_y;
  int row_bytes;
};
int copy_boxes(const void *src, void *dst, const Box *boxes, int count, void *stream);
}  // namespace bench_alltoallw

namespace {

using bench_alltoallw::Box;
constexpr int kElem = 16;  // MPI_C_DOUBLE_COMPLEX

struct Options {
  int n = 128, iters = 20, warmup = 3, baseline_iters = 3;
  std::string csv;
  bool help = false, check = false, require_gpu = false;
};

void usage(std::FILE *f) {
  std::fprintf(f,
               "usage: mpiexec -n P bench_alltoallw [options]\n"
               "  Slab transpose of a 3-D FFT (N^3 double complex) as MPI_Alltoallw of subarray types,\n"
               "  beside the library alone and hand-written pack kernels + MPI_Alltoallv.\n"
               "  --n N               global size per dimension, a multiple of P (default 128)\n"
               "  --iters K           timed transposes per variant (default 20)\n"
               "  --warmup W          untimed transposes before them (default 3)\n"
               "  --baseline-iters K  cap on warm-up and timed transposes of library-alone (default 3)\n"
               "  --csv FILE          append one row per variant (header when the file is new)\n"
               "  --check             quick mode for tests: --warmup 1 --iters 2 --baseline-iters 1\n"
               "  --require-gpu       print SKIP and exit 77 when no usable GPU is present\n"
               "  --help              this text\n"
               "Exit status: 0 when every variant placed every element, 1 otherwise, 2 for bad options,\n"
               "77 with --require-gpu and no GPU.\n");
}

std::string parse(int argc, char **argv, Options &o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto number = [&](int lo, int &out) -> bool {
      if (i + 1 >= argc) return false;
      char *end = nullptr;
      const long v = std::strtol(argv[++i], &end, 10);
      if (*end || v < lo || v > 1 << 20) return false;
      out = int(v);
      return true;
    };
    if (a == "--help" || a == "-h") o.help = true;
    else if (a == "--n") { if (!number(1, o.n)) return "--n needs an integer >= 1"; }
    else if (a == "--iters") { if (!number(1, o.iters)) return "--iters needs an integer >= 1"; }
    else if (a == "--warmup") { if (!number(0, o.warmup)) return "--warmup needs an integer >= 0"; }
    else if (a == "--baseline-iters") { if (!number(1, o.baseline_iters)) return "--baseline-iters needs an integer >= 1"; }
    else if (a == "--csv") {
      if (i + 1 >= argc) return "--csv needs a file name";
      o.csv = argv[++i];
    } else if (a == "--check") {
      o.check = true;
      o.warmup = 1;
      o.iters = 2;
      o.baseline_iters = 1;
    } else if (a == "--require-gpu") o.require_gpu = true;
    else return "unknown option '" + a + "'";
  }
  return "";
}

// The value of global element (z, y, x): 16 bytes from its coordinates.
void element(int64_t z, int64_t y, int64_t x, unsigned char *out) {
  uint64_t v[2];
  uint64_t k = ((uint64_t(z) * 1000003u + uint64_t(y)) * 1000033u + uint64_t(x)) ^ 0x9e3779b97f4a7c15ull;
  for (uint64_t &w : v) {
    k += 0x9e3779b97f4a7c15ull;
    uint64_t m = k;
    m = (m ^ (m >> 30)) * 0xbf58476d1ce4e5b9ull;
    m = (m ^ (m >> 27)) * 0x94d049bb133111ebull;
    w = m ^ (m >> 31);
  }
  std::memcpy(out, v, kElem);
}

struct Setup {
  int rank = 0, size = 1, n = 0, s = 0;  // s = N / P
  size_t bytes = 0;                      // of each local array
  std::vector<MPI_Datatype> send_types, recv_types;
  std::vector<int> ones, zeros, counts, displs;  // counts/displs in bytes for Alltoallv
  std::vector<Box> pack_boxes, unpack_boxes;
  void *before = nullptr, *after = nullptr, *send_packed = nullptr, *recv_packed = nullptr;
  void *host_send = nullptr, *host_recv = nullptr;  // pinned, for hand-packed on a library that is not CUDA-aware
  std::vector<unsigned char> initial, expected, poison;
  bool aware = false;
};

MPI_Datatype subarray(const int sizes[3], const int sub[3], const int start[3]) {
  MPI_Datatype t;
  MPI_Type_create_subarray(3, sizes, sub, start, MPI_ORDER_C, MPI_C_DOUBLE_COMPLEX, &t);
  MPI_Type_commit(&t);
  return t;
}

void build(Setup &u) {
  const int n = u.n, s = u.s;
  const long long row = (long long)n * kElem;
  for (int q = 0; q < u.size; ++q) {
    const int bsizes[3] = {s, n, n}, bsub[3] = {s, s, n}, bstart[3] = {0, q * s, 0};
    const int asizes[3] = {n, s, n}, asub[3] = {s, s, n}, astart[3] = {q * s, 0, 0};
    u.send_types.push_back(subarray(bsizes, bsub, bstart));
    u.recv_types.push_back(subarray(asizes, asub, astart));
    const long long block = (long long)s * s * row;  // bytes exchanged with each peer
    u.counts.push_back(int(block));
    u.displs.push_back(int(q * block));
    // Pack: rows (z, y in q's slab) of "before" to the contiguous block for q.
    u.pack_boxes.push_back({q * s * row, q * block, (long long)n * row, row, s * row, row, s, s, int(row)});
    // Unpack: the block from q to rows (z in q's slab, all local y) of "after".
    u.unpack_boxes.push_back({q * block, q * s * s * row, s * row, row, s * row, row, s, s, int(row)});
  }
  u.ones.assign(size_t(u.size), 1);
  u.zeros.assign(size_t(u.size), 0);
  u.bytes = size_t(s) * n * n * kElem;
  u.initial.resize(u.bytes);
  u.expected.resize(u.bytes);
  u.poison.assign(u.bytes, 0xEE);
  for (int z = 0; z < s; ++z)
    for (int y = 0; y < n; ++y)
      for (int x = 0; x < n; ++x) {
        element(int64_t(u.rank) * s + z, y, x, &u.initial[((size_t(z) * n + y) * n + x) * kElem]);
      }
  for (int z = 0; z < n; ++z)
    for (int y = 0; y < s; ++y)
      for (int x = 0; x < n; ++x)
        element(z, int64_t(u.rank) * s + y, x, &u.expected[((size_t(z) * s + y) * n + x) * kElem]);
}

bool ok_cuda(cudaError_t e, const char *what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "bench_alltoallw: %s: %s\n", what, cudaGetErrorString(e));
  return false;
}

// ---- variants: each makes every MPI call even when a local step failed, so peers never hang.

bool run_tempi(Setup &u) {
  return MPI_Alltoallw(u.before, u.ones.data(), u.zeros.data(), u.send_types.data(), u.after, u.ones.data(),
                       u.zeros.data(), u.recv_types.data(), MPI_COMM_WORLD) == MPI_SUCCESS;
}

bool run_library(Setup &u) {
  return PMPI_Alltoallw(u.before, u.ones.data(), u.zeros.data(), u.send_types.data(), u.after, u.ones.data(),
                        u.zeros.data(), u.recv_types.data(), MPI_COMM_WORLD) == MPI_SUCCESS;
}

bool run_hand_packed(Setup &u) {
  bool ok = bench_alltoallw::copy_boxes(u.before, u.send_packed, u.pack_boxes.data(), u.size, nullptr) == 0;
  const size_t total = u.bytes;
  if (u.aware) {
    ok &= PMPI_Alltoallv(u.send_packed, u.counts.data(), u.displs.data(), MPI_BYTE, u.recv_packed, u.counts.data(),
                         u.displs.data(), MPI_BYTE, MPI_COMM_WORLD) == MPI_SUCCESS;
  } else {
    ok &= ok_cuda(cudaMemcpy(u.host_send, u.send_packed, total, cudaMemcpyDeviceToHost), "copy to host");
    ok &= PMPI_Alltoallv(u.host_send, u.counts.data(), u.displs.data(), MPI_BYTE, u.host_recv, u.counts.data(),
                         u.displs.data(), MPI_BYTE, MPI_COMM_WORLD) == MPI_SUCCESS;
    ok &= ok_cuda(cudaMemcpy(u.recv_packed, u.host_recv, total, cudaMemcpyHostToDevice), "copy to device");
  }
  ok &= bench_alltoallw::copy_boxes(u.recv_packed, u.after, u.unpack_boxes.data(), u.size, nullptr) == 0;
  return ok;
}

struct Variant {
  const char *name;
  bool capped;
  bool (*run)(Setup &);
};
const Variant kVariants[] = {{"tempi", false, run_tempi},
                             {"library-alone", true, run_library},
                             {"hand-packed", false, run_hand_packed}};

struct Result {
  std::string name, na;
  int iters = 0;
  double median_us = 0, min_us = 0, max_us = 0;
  long long wrong = 0, checked = 0;
  bool failed = false;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

bool all_ranks(bool ok) {
  int mine = ok ? 1 : 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

Result measure(Setup &u, const Variant &v, const Options &o) {
  Result r;
  r.name = v.name;
  if (v.run == run_library && !u.aware) {
    r.na = "n/a (MPI library not CUDA-aware)";
    return r;
  }
  const int warmup = v.capped ? std::min(o.warmup, o.baseline_iters) : o.warmup;
  r.iters = v.capped ? std::min(o.iters, o.baseline_iters) : o.iters;
  bool ok = ok_cuda(cudaMemcpy(u.before, u.initial.data(), u.bytes, cudaMemcpyHostToDevice), "upload");
  for (int i = 0; i < warmup; ++i) ok &= v.run(u);
  std::vector<double> local(size_t(r.iters)), worst(size_t(r.iters));
  for (int i = 0; i < r.iters; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    ok &= v.run(u);
    local[size_t(i)] = 1e6 * (MPI_Wtime() - t0);
  }
  MPI_Allreduce(local.data(), worst.data(), r.iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  r.median_us = median(worst);
  r.min_us = *std::min_element(worst.begin(), worst.end());
  r.max_us = *std::max_element(worst.begin(), worst.end());
  // Verification: "after" poisoned, one transpose, every element compared.
  ok &= ok_cuda(cudaMemcpy(u.after, u.poison.data(), u.bytes, cudaMemcpyHostToDevice), "poison");
  ok &= v.run(u);
  std::vector<unsigned char> got(u.bytes);
  ok &= ok_cuda(cudaMemcpy(got.data(), u.after, u.bytes, cudaMemcpyDeviceToHost), "download");
  long long wrong = 0;
  for (size_t e = 0; e < u.bytes; e += kElem) wrong += std::memcmp(&got[e], &u.expected[e], kElem) != 0;
  long long mine[2] = {ok ? wrong : (long long)(u.bytes / kElem), (long long)(u.bytes / kElem)}, sum[2] = {0, 0};
  MPI_Allreduce(mine, sum, 2, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  r.wrong = sum[0];
  r.checked = sum[1];
  r.failed = !all_ranks(ok);
  return r;
}

int run(int argc, char **argv) {
  Setup u;
  MPI_Comm_rank(MPI_COMM_WORLD, &u.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &u.size);
  const bool root = u.rank == 0;
  Options o;
  const std::string error = parse(argc, argv, o);
  if (o.help) {
    if (root) usage(stdout);
    return 0;
  }
  if (!error.empty() || o.n % u.size != 0 || u.size > 64) {
    if (root) {
      std::fprintf(stderr, "bench_alltoallw: %s\n",
                   !error.empty() ? error.c_str() : "--n must be a multiple of the rank count (at most 64 ranks)");
      usage(stderr);
    }
    return 2;
  }
  tempi::Backend &gpu = tempi::gpu_backend();
  if (!all_ranks(gpu.has_gpu())) {
    if (root) std::printf("SKIP: no usable GPU on every rank (this benchmark moves device buffers)\n");
    return o.require_gpu ? 77 : 0;
  }
  u.n = o.n;
  u.s = o.n / u.size;
  tempi::active();  // TEMPI starts at its first intercepted call: awareness is known from then on
  u.aware = tempi::mpi_is_cuda_aware();
  build(u);
  bool ok = ok_cuda(cudaMalloc(&u.before, u.bytes), "cudaMalloc") && ok_cuda(cudaMalloc(&u.after, u.bytes), "cudaMalloc") &&
            ok_cuda(cudaMalloc(&u.send_packed, u.bytes), "cudaMalloc") &&
            ok_cuda(cudaMalloc(&u.recv_packed, u.bytes), "cudaMalloc") &&
            ok_cuda(cudaMallocHost(&u.host_send, u.bytes), "cudaMallocHost") &&
            ok_cuda(cudaMallocHost(&u.host_recv, u.bytes), "cudaMallocHost");
  int rc = 1;
  if (all_ranks(ok)) {
    if (root) {
      std::printf("bench_alltoallw: slab transpose of a %d^3 double-complex FFT grid over %d ranks\n", u.n, u.size);
      std::printf("  per rank         %zu B before and after; %lld B to each peer\n", u.bytes,
                  (long long)u.counts[0]);
      std::printf("  GPU              %s\n", gpu.device_name().c_str());
      std::printf("  MPI library      %s\n", tempi::tools::library_version().c_str());
      std::printf("  CUDA-aware       %s\n", u.aware ? "yes" : "no");
      std::printf("  iterations       %d warm-up + %d timed (library-alone at most %d + %d)\n", o.warmup, o.iters,
                  std::min(o.warmup, o.baseline_iters), std::min(o.iters, o.baseline_iters));
      std::printf("  date             %s\n", tempi::tools::utc_now().c_str());
      std::printf("Time of one transpose: MPI_Barrier, then the call(s) to their return; per iteration the slowest "
                  "rank.\n\n");
    }
    std::vector<Result> results;
    for (const Variant &v : kVariants) results.push_back(measure(u, v, o));
    double base = 0;
    for (const Result &r : results)
      if (r.name == "tempi") base = r.median_us;
    bool good = true;
    if (root) std::printf("%-14s %12s %12s %12s %15s %10s %12s\n", "variant", "median us", "min us", "max us",
                          "ratio to tempi", "GB/s", "wrong elems");
    for (const Result &r : results) {
      if (!r.na.empty()) {
        if (root) std::printf("%-14s %s\n", r.name.c_str(), r.na.c_str());
        continue;
      }
      good &= r.wrong == 0 && !r.failed;
      const double moved = double(u.bytes) * (u.size - 1) / u.size;  // bytes leaving each rank
      if (root)
        std::printf("%-14s %12.1f %12.1f %12.1f %14.2fx %10.1f %12lld%s\n", r.name.c_str(), r.median_us, r.min_us,
                    r.max_us, base > 0 ? r.median_us / base : 0.0, moved / (r.median_us * 1e3), r.wrong,
                    r.failed ? "  (a step failed)" : "");
    }
    if (root && !o.csv.empty()) {
      std::FILE *f = std::fopen(o.csv.c_str(), "a");
      if (f) {
        std::fseek(f, 0, SEEK_END);
        if (std::ftell(f) == 0) std::fprintf(f, "variant,ranks,n,bytes_per_rank,cuda_aware,median_us,min_us,max_us,wrong\n");
        for (const Result &r : results)
          if (r.na.empty())
            std::fprintf(f, "%s,%d,%d,%zu,%d,%.3f,%.3f,%.3f,%lld\n", r.name.c_str(), u.size, u.n, u.bytes, int(u.aware),
                         r.median_us, r.min_us, r.max_us, r.wrong);
        std::fclose(f);
      }
    }
    if (root) std::printf("%s\n", good ? "PASS: every element in place" : "FAIL: wrong elements or a failed step");
    rc = good ? 0 : 1;
  } else if (root) {
    std::fprintf(stderr, "bench_alltoallw: could not allocate %zu-byte buffers on some rank\n", u.bytes);
  }
  for (void *p : {u.before, u.after, u.send_packed, u.recv_packed})
    if (p) cudaFree(p);
  for (void *p : {u.host_send, u.host_recv})
    if (p) cudaFreeHost(p);
  for (MPI_Datatype &t : u.send_types) MPI_Type_free(&t);
  for (MPI_Datatype &t : u.recv_types) MPI_Type_free(&t);
  return rc;
}

}  // namespace

int main(int argc, char **argv) { return tempi::tools::run_with_mpi(argc, argv, run); }
