// Sequences of MPI_Pack / MPI_Unpack on GPU buffers (issue 17): a public third-party
// halo benchmark's pattern, as its users run it, against the hand-written fused kernel.
//
// A periodic 3-D Cartesian grid of ranks (MPI_Dims_create, MPI_Cart_create); each rank
// owns an n^3 interior of `vars` variables with ghost layers of width r, each variable
// its own cudaMalloc'd array of (n+2r)^3 doubles in Fortran order (x fastest). The
// regions are MPI_Type_create_subarray(..., MPI_ORDER_FORTRAN, MPI_DOUBLE) types, one
// per side (6 faces, 12 edges, 8 corners): the interior slab next to side d is sent,
// the ghost region on side d is received (as tools/halo.cpp, in Fortran order). Per
// neighbour there is one device send buffer and one device receive buffer holding
// every variable's region back to back.
//
// Variants, each timed and verified in the same run:
//   mpi-datatypes   what the benchmark's users do: per neighbour and variable
//                   MPI_Pack(var, 1, sendtype, sendbuf[nb], size, &pos, comm); then
//                   26 MPI_Irecv and 26 MPI_Isend of MPI_PACKED device buffers, one
//                   MPI_Waitall; per neighbour and variable MPI_Unpack; then
//                   cudaDeviceSynchronize (the application's next kernel follows)
//   fused-kernel    the hand-written baseline: ONE kernel packs every region of every
//                   variable for every neighbour into the same send buffers
//                   (tools/bench_pack_sequence_kernels.cu), one synchronization, the
//                   same MPI calls, ONE unpack kernel, one synchronization
// Both move the MPI_PACKED device buffers through the MPI library as linked (under
// TEMPI, staged through host memory when the library is not CUDA-aware): what differs
// is only the packing and unpacking. At start-up the fused kernel's packed bytes are
// compared with MPI_Pack's for every neighbour ("layout check: identical").
//
//   mpiexec -n P bench_pack_sequence [--n 128] [--vars 3] [--radius 1] [--gpus G] ...
//   (--help lists every option)
#include <cuda_runtime_api.h>
#include <mpi.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <string>
#include <vector>

#include "backend.hpp"
#include "bench_header.hpp"
#include "gpu_select.hpp"
#include "base/runtime.hpp"

// tools/bench_pack_sequence_kernels.cu (plain types and an opaque table).
namespace bench_pack_sequence {
void *fused_table_create(int count, double *const *arrays, double *const *packed, const int *start, const int *sub,
                         const int full[3]);
int fused_pack(void *table, cudaStream_t stream);
int fused_unpack(void *table, cudaStream_t stream);
void fused_table_destroy(void *table);
}  // namespace bench_pack_sequence

namespace {

namespace fused = bench_pack_sequence;

#define CUDA(x)                                                                                      \
  do {                                                                                               \
    const cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                         \
      std::fprintf(stderr, "bench_pack_sequence: %s failed: %s (%s:%d)\n", #x, cudaGetErrorString(e_), \
                   __FILE__, __LINE__);                                                              \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                                  \
    }                                                                                                \
  } while (0)

// ---------------------------------------------------------------- options

const char *const kVariantNames[] = {"mpi-datatypes", "fused-kernel"};

struct Options {
  int n = 128, vars = 3, radius = 1;
  int iters = 30, warmup = 5;
  int gpus = 0;  // 0: every visible GPU
  int dims[3] = {0, 0, 0};
  std::vector<std::string> variants = {"mpi-datatypes", "fused-kernel"};
  std::string csv;
  bool help = false, check = false, require_gpu = false;
};

void usage(std::FILE *f) {
  std::fprintf(f,
               "usage: mpiexec -n P bench_pack_sequence [options]\n"
               "  Halo exchange of several variables through sequences of MPI_Pack/MPI_Unpack of\n"
               "  Fortran-order subarrays into per-neighbour device buffers (26 neighbours, periodic),\n"
               "  against one fused pack kernel and one fused unpack kernel moving the same bytes.\n"
               "  --n N               interior cells per dimension per rank (default 128)\n"
               "  --vars V            variables, each its own GPU array (default 3)\n"
               "  --radius R          ghost layer width, 1 <= R <= N (default 1)\n"
               "  --dims A,B,C        process grid (z,y,x), as tempi_halo; 0 entries are chosen by MPI_Dims_create\n"
               "  --iters K           timed cycles per variant (default 30)\n"
               "  --warmup W          untimed cycles before them (default 5)\n"
               "  --variants LIST     comma-separated subset of mpi-datatypes,fused-kernel (default both)\n"
               "  --gpus G            use the first G visible GPUs: rank uses GPU (local rank mod G);\n"
               "                      --gpus 1 makes every rank of a node share GPU 0 (default: all GPUs;\n"
               "                      TEMPI_TEST_DEVICES=G does the same when --gpus is not given)\n"
               "  --csv FILE          append one row per measured variant (header when the file is new)\n"
               "  --check             quick mode for tests: --warmup 1 --iters 2\n"
               "  --require-gpu       print SKIP and exit 77 when no usable GPU is present\n"
               "  --help              this text\n"
               "Exit status: 0 when the layouts match and every variant placed every cell correctly,\n"
               "1 when a cell was wrong, the layouts differ or a step failed, 2 for bad options,\n"
               "77 with --require-gpu and no GPU.\n");
}

bool parse_int(const char *s, int lo, int *out) {
  char *end = nullptr;
  errno = 0;
  const long v = std::strtol(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > 1 << 30) return false;
  *out = int(v);
  return true;
}

std::vector<std::string> split(const std::string &s) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t comma = s.find(',', start);
    parts.push_back(s.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return parts;
}

// Returns an error message, empty when the options are good.
std::string parse(int argc, char **argv, Options &o) {
  bool iters_set = false, warmup_set = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char * { return i + 1 < argc ? argv[++i] : nullptr; };
    if (a == "--help" || a == "-h") {
      o.help = true;
    } else if (a == "--check") {
      o.check = true;
    } else if (a == "--require-gpu") {
      o.require_gpu = true;
    } else if (a == "--n" || a == "--vars" || a == "--radius" || a == "--iters" || a == "--warmup" ||
               a == "--gpus") {
      const char *v = value();
      int *dst = a == "--n" ? &o.n : a == "--vars" ? &o.vars : a == "--radius" ? &o.radius
               : a == "--iters" ? &o.iters : a == "--warmup" ? &o.warmup : &o.gpus;
      const int lo = a == "--warmup" ? 0 : 1;
      if (!v || !parse_int(v, lo, dst)) return a + " needs an integer >= " + std::to_string(lo);
      iters_set |= a == "--iters";
      warmup_set |= a == "--warmup";
    } else if (a == "--dims") {
      const char *v = value();
      const auto parts = split(v ? v : "");
      if (parts.size() != 3) return "--dims needs A,B,C";
      // Given as (z,y,x), as tempi_halo takes it; kept as (x,y,z), the order of this
      // program's Fortran-order arrays.
      for (int k = 0; k < 3; ++k)
        if (!parse_int(parts[k].c_str(), 0, &o.dims[2 - k])) return "--dims needs three integers >= 0";
    } else if (a == "--variants") {
      const char *v = value();
      o.variants = split(v ? v : "");
      for (const auto &name : o.variants)
        if (std::find(std::begin(kVariantNames), std::end(kVariantNames), name) == std::end(kVariantNames))
          return "unknown variant '" + name + "' (mpi-datatypes, fused-kernel)";
    } else if (a == "--csv") {
      const char *v = value();
      if (!v) return "--csv needs a file name";
      o.csv = v;
    } else {
      return "unknown option '" + a + "'";
    }
  }
  if (o.check) {
    if (!warmup_set) o.warmup = 1;
    if (!iters_set) o.iters = 2;
  }
  if (o.radius > o.n) return "--radius must not exceed --n (a send region is r cells of the interior)";
  return "";
}

// The GPU limit, read before MPI_Init (the GPU must be chosen before it): --gpus G, else
// TEMPI_TEST_DEVICES, else 0 (all). A bad value is reported later by parse().
int gpu_limit(int argc, char **argv) {
  for (int i = 1; i + 1 < argc; ++i) {
    int g = 0;
    if (std::strcmp(argv[i], "--gpus") == 0) return parse_int(argv[i + 1], 1, &g) ? g : 0;
  }
  const char *env = std::getenv("TEMPI_TEST_DEVICES");
  return env ? std::max(0, std::atoi(env)) : 0;
}

// ---------------------------------------------------------------- the halo

// Axes k = 0, 1, 2 are x, y, z (x fastest in memory); process-grid dimension k is axis k.
// Direction d in {-1,0,1}^3 \ {0}, indexed (dz+1)*9 + (dy+1)*3 + (dx+1) (13 is d = 0).
int direction_index(const int d[3]) { return (d[2] + 1) * 9 + (d[1] + 1) * 3 + (d[0] + 1); }

struct Neighbour {
  int d[3];
  int rank = 0;
  int send_tag = 0, recv_tag = 0;  // index(d), index(-d)
  MPI_Datatype send_type = MPI_DATATYPE_NULL, recv_type = MPI_DATATYPE_NULL;
  int send_start[3], recv_start[3], sub[3];
  int region_bytes = 0;  // one variable's region
  int bytes = 0;         // all variables': what one message carries
  int capacity = 0;      // of each buffer: the sum of MPI_Pack_size over the variables
  int packed = 0;        // position after the last MPI_Pack of the cycle
  char *sendbuf = nullptr, *recvbuf = nullptr;  // device memory
};

struct Halo {
  MPI_Comm cart = MPI_COMM_NULL;
  int rank = 0, size = 1;
  int dims[3] = {0, 0, 0}, coords[3] = {0, 0, 0};
  int n = 0, r = 0, full = 0, vars = 0;
  size_t cells = 0, bytes = 0;  // of one variable's array
  long long bytes_sent = 0;     // per cycle, summed over the 26 messages
  std::vector<double *> var;    // device arrays
  std::vector<Neighbour> neighbours;
  void *pack_table = nullptr, *unpack_table = nullptr;
};

MPI_Datatype region(const Halo &h, const int start[3], const int sub[3]) {
  const int sizes[3] = {h.full, h.full, h.full};
  MPI_Datatype t;
  MPI_Type_create_subarray(3, sizes, sub, start, MPI_ORDER_FORTRAN, MPI_DOUBLE, &t);
  MPI_Type_commit(&t);
  return t;
}

void setup_halo(Halo &h) {
  for (int dz = -1; dz <= 1; ++dz)
    for (int dy = -1; dy <= 1; ++dy)
      for (int dx = -1; dx <= 1; ++dx) {
        if (!dz && !dy && !dx) continue;
        Neighbour nb;
        nb.d[0] = dx, nb.d[1] = dy, nb.d[2] = dz;
        const int minus_d[3] = {-dx, -dy, -dz};
        int c[3];
        for (int k = 0; k < 3; ++k) {
          c[k] = h.coords[k] + nb.d[k];  // MPI_Cart_rank wraps periodic dims
          nb.sub[k] = nb.d[k] == 0 ? h.n : h.r;
          if (nb.d[k] == 0) {
            nb.send_start[k] = nb.recv_start[k] = h.r;
          } else {
            nb.send_start[k] = nb.d[k] < 0 ? h.r : h.n;        // the interior's low or high r layers
            nb.recv_start[k] = nb.d[k] < 0 ? 0 : h.n + h.r;    // the ghost layers on side d
          }
        }
        MPI_Cart_rank(h.cart, c, &nb.rank);
        nb.send_type = region(h, nb.send_start, nb.sub);
        nb.recv_type = region(h, nb.recv_start, nb.sub);
        nb.send_tag = direction_index(nb.d);
        nb.recv_tag = direction_index(minus_d);
        MPI_Type_size(nb.send_type, &nb.region_bytes);
        nb.bytes = nb.region_bytes * h.vars;
        int one = 0;
        MPI_Pack_size(1, nb.send_type, h.cart, &one);
        nb.capacity = one * h.vars;
        h.bytes_sent += nb.bytes;
        h.neighbours.push_back(nb);
      }
}

// The device memory: variables, per-neighbour buffers, the fused kernels' tables.
void allocate(Halo &h) {
  h.var.assign(size_t(h.vars), nullptr);
  for (auto &p : h.var) CUDA(cudaMalloc(reinterpret_cast<void **>(&p), h.bytes));
  for (auto &nb : h.neighbours) {
    CUDA(cudaMalloc(reinterpret_cast<void **>(&nb.sendbuf), size_t(nb.capacity)));
    CUDA(cudaMalloc(reinterpret_cast<void **>(&nb.recvbuf), size_t(nb.capacity)));
  }
  // One copy per (neighbour, variable), at the offset MPI_Pack would put it.
  std::vector<double *> arrays, send_at, recv_at;
  std::vector<int> send_start, recv_start, sub;
  for (auto &nb : h.neighbours)
    for (int v = 0; v < h.vars; ++v) {
      arrays.push_back(h.var[size_t(v)]);
      send_at.push_back(reinterpret_cast<double *>(nb.sendbuf + size_t(v) * nb.region_bytes));
      recv_at.push_back(reinterpret_cast<double *>(nb.recvbuf + size_t(v) * nb.region_bytes));
      for (int k = 0; k < 3; ++k) {
        send_start.push_back(nb.send_start[k]);
        recv_start.push_back(nb.recv_start[k]);
        sub.push_back(nb.sub[k]);
      }
    }
  const int full[3] = {h.full, h.full, h.full};
  const int count = int(arrays.size());
  h.pack_table = fused::fused_table_create(count, arrays.data(), send_at.data(), send_start.data(), sub.data(), full);
  h.unpack_table = fused::fused_table_create(count, arrays.data(), recv_at.data(), recv_start.data(), sub.data(), full);
  if (!h.pack_table || !h.unpack_table) {
    std::fprintf(stderr, "bench_pack_sequence: could not upload the fused kernels' tables: %s\n",
                 cudaGetErrorString(cudaGetLastError()));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

void free_halo(Halo &h) {
  fused::fused_table_destroy(h.pack_table);
  fused::fused_table_destroy(h.unpack_table);
  for (auto &nb : h.neighbours) {
    cudaFree(nb.sendbuf);
    cudaFree(nb.recvbuf);
    MPI_Type_free(&nb.send_type);
    MPI_Type_free(&nb.recv_type);
  }
  for (double *p : h.var) cudaFree(p);
  h.neighbours.clear();
  h.var.clear();
}

// ---------------------------------------------------------------- one cycle of each variant

// Where the time of the last cycle went on this rank: packing (up to the first post),
// the 52 posts and MPI_Waitall, unpacking with the final synchronization.
struct Parts {
  double pack_us = 0, exchange_us = 0, unpack_us = 0;
};
Parts g_parts;

void exchange(Halo &h, bool use_packed_positions) {
  MPI_Request reqs[52];
  int k = 0;
  for (auto &nb : h.neighbours)
    MPI_Irecv(nb.recvbuf, nb.capacity, MPI_PACKED, nb.rank, nb.recv_tag, h.cart, &reqs[k++]);
  for (auto &nb : h.neighbours)
    MPI_Isend(nb.sendbuf, use_packed_positions ? nb.packed : nb.bytes, MPI_PACKED, nb.rank, nb.send_tag, h.cart,
              &reqs[k++]);
  MPI_Waitall(k, reqs, MPI_STATUSES_IGNORE);
}

void pack_mpi(Halo &h) {
  for (auto &nb : h.neighbours) {
    int pos = 0;
    for (int v = 0; v < h.vars; ++v) MPI_Pack(h.var[size_t(v)], 1, nb.send_type, nb.sendbuf, nb.capacity, &pos, h.cart);
    nb.packed = pos;
  }
}

void cycle_mpi_datatypes(Halo &h) {
  const double t0 = MPI_Wtime();
  pack_mpi(h);
  const double t1 = MPI_Wtime();
  exchange(h, true);
  const double t2 = MPI_Wtime();
  for (auto &nb : h.neighbours) {
    int pos = 0;
    for (int v = 0; v < h.vars; ++v)
      MPI_Unpack(nb.recvbuf, nb.capacity, &pos, h.var[size_t(v)], 1, nb.recv_type, h.cart);
  }
  CUDA(cudaDeviceSynchronize());  // the application's next kernel would follow
  g_parts = {1e6 * (t1 - t0), 1e6 * (t2 - t1), 1e6 * (MPI_Wtime() - t2)};
}

void pack_fused(Halo &h) {
  CUDA(cudaError_t(fused::fused_pack(h.pack_table, 0)));
  CUDA(cudaDeviceSynchronize());
}

void cycle_fused_kernel(Halo &h) {
  const double t0 = MPI_Wtime();
  pack_fused(h);
  const double t1 = MPI_Wtime();
  exchange(h, false);
  const double t2 = MPI_Wtime();
  CUDA(cudaError_t(fused::fused_unpack(h.unpack_table, 0)));
  CUDA(cudaDeviceSynchronize());
  g_parts = {1e6 * (t1 - t0), 1e6 * (t2 - t1), 1e6 * (MPI_Wtime() - t2)};
}

// ---------------------------------------------------------------- cell values

// Every local cell of variable v (ghosts included) stands for a global cell (periodic
// wrap); its value is a function of the global coordinates and v, exact in a double and
// distinct for every (cell, variable). Ghost cells start poisoned: no cell holds -1.
double cell_value(const Halo &h, int v, int x, int y, int z) {
  const int local[3] = {x, y, z};
  int64_t g[3], G[3];
  for (int k = 0; k < 3; ++k) {
    G[k] = int64_t(h.dims[k]) * h.n;
    g[k] = ((int64_t(h.coords[k]) * h.n + local[k] - h.r) % G[k] + G[k]) % G[k];
  }
  const int64_t L = (g[2] * G[1] + g[1]) * G[0] + g[0];
  return double(L) * h.vars + double(v) + 0.5;  // exact while L * vars < 2^52
}

bool is_ghost(const Halo &h, int x, int y, int z) {
  auto out = [&](int c) { return c < h.r || c >= h.n + h.r; };
  return out(x) || out(y) || out(z);
}

void upload_initial(Halo &h) {
  std::vector<double> host(h.cells);
  for (int v = 0; v < h.vars; ++v) {
    size_t i = 0;
    for (int z = 0; z < h.full; ++z)
      for (int y = 0; y < h.full; ++y)
        for (int x = 0; x < h.full; ++x, ++i) host[i] = is_ghost(h, x, y, z) ? -1.0 : cell_value(h, v, x, y, z);
    CUDA(cudaMemcpy(h.var[size_t(v)], host.data(), h.bytes, cudaMemcpyHostToDevice));
  }
}

long long count_wrong(const Halo &h) {
  std::vector<double> got(h.cells);
  long long wrong = 0;
  for (int v = 0; v < h.vars; ++v) {
    CUDA(cudaMemcpy(got.data(), h.var[size_t(v)], h.bytes, cudaMemcpyDeviceToHost));
    size_t i = 0;
    for (int z = 0; z < h.full; ++z)
      for (int y = 0; y < h.full; ++y)
        for (int x = 0; x < h.full; ++x, ++i) wrong += got[i] != cell_value(h, v, x, y, z);
  }
  return wrong;
}

// ---------------------------------------------------------------- layout check

// MPI_Pack's bytes against the fused kernel's, for every neighbour: returns the number
// of neighbours (summed over ranks) whose packed bytes differ.
long long layout_check(Halo &h) {
  upload_initial(h);
  pack_mpi(h);
  // An MPI call before the packed buffers are read outside MPI: under TEMPI_DEFER_PACK=2
  // the packs are launched by the next MPI call (docs/using.md).
  MPI_Barrier(h.cart);
  CUDA(cudaDeviceSynchronize());
  std::vector<std::vector<unsigned char>> by_mpi(h.neighbours.size());
  for (size_t i = 0; i < h.neighbours.size(); ++i) {
    const Neighbour &nb = h.neighbours[i];
    by_mpi[i].resize(size_t(nb.packed));
    CUDA(cudaMemcpy(by_mpi[i].data(), nb.sendbuf, size_t(nb.packed), cudaMemcpyDeviceToHost));
    CUDA(cudaMemset(nb.sendbuf, 0xff, size_t(nb.capacity)));
  }
  pack_fused(h);
  long long differ = 0;
  std::vector<unsigned char> by_kernel;
  for (size_t i = 0; i < h.neighbours.size(); ++i) {
    const Neighbour &nb = h.neighbours[i];
    by_kernel.resize(size_t(nb.bytes));
    CUDA(cudaMemcpy(by_kernel.data(), nb.sendbuf, size_t(nb.bytes), cudaMemcpyDeviceToHost));
    differ += nb.packed != nb.bytes || std::memcmp(by_kernel.data(), by_mpi[i].data(), size_t(nb.bytes)) != 0;
  }
  long long total = 0;
  MPI_Allreduce(&differ, &total, 1, MPI_LONG_LONG, MPI_SUM, h.cart);
  return total;
}

// ---------------------------------------------------------------- measuring

struct Variant {
  const char *name;
  void (*cycle)(Halo &);
};
const Variant kVariants[] = {
    {"mpi-datatypes", cycle_mpi_datatypes},
    {"fused-kernel", cycle_fused_kernel},
};

struct Result {
  std::string name;
  int iters = 0;
  double median_us = 0, min_us = 0, max_us = 0;
  double syncs = 0;                                // TEMPI's GPU synchronizations per cycle (rank 0)
  double pack_us = 0, exchange_us = 0, unpack_us = 0;  // rank 0's medians
  long long checked = 0, wrong = 0;
};

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

Result measure(Halo &h, const Variant &v, const Options &o) {
  Result res;
  res.name = v.name;
  res.iters = o.iters;
  upload_initial(h);  // real values, not zeros
  for (int i = 0; i < o.warmup; ++i) v.cycle(h);
  const size_t iters = size_t(o.iters);
  std::vector<double> local(iters), worst(iters), packs(iters), exchanges(iters), unpacks(iters);
  const uint64_t syncs_before = tempi::gpu_backend().synchronizations();
  for (size_t i = 0; i < iters; ++i) {
    MPI_Barrier(h.cart);
    const double t0 = MPI_Wtime();
    v.cycle(h);
    local[i] = 1e6 * (MPI_Wtime() - t0);
    packs[i] = g_parts.pack_us;
    exchanges[i] = g_parts.exchange_us;
    unpacks[i] = g_parts.unpack_us;
  }
  res.syncs = iters ? double(tempi::gpu_backend().synchronizations() - syncs_before) / double(iters) : 0;
  res.pack_us = median(packs);
  res.exchange_us = median(exchanges);
  res.unpack_us = median(unpacks);
  // The time of a cycle is that of its slowest rank.
  MPI_Allreduce(local.data(), worst.data(), o.iters, MPI_DOUBLE, MPI_MAX, h.cart);
  res.median_us = median(worst);
  res.min_us = *std::min_element(worst.begin(), worst.end());
  res.max_us = *std::max_element(worst.begin(), worst.end());

  // Verification: poisoned ghosts, one cycle, every cell of every variable compared.
  upload_initial(h);
  v.cycle(h);
  long long counts[2] = {(long long)h.cells * h.vars, count_wrong(h)};
  long long totals[2] = {0, 0};
  MPI_Allreduce(counts, totals, 2, MPI_LONG_LONG, MPI_SUM, h.cart);
  res.checked = totals[0];
  res.wrong = totals[1];
  return res;
}

// ---------------------------------------------------------------- output

// How the ranks sit on the GPUs: the most ranks of one node on one GPU (PCI bus ids
// compared within each node), the GPUs in use, and whether MPS is on (on every rank,
// on none, or mixed).
struct Sharing {
  int max_ranks_per_gpu = 1, gpus = 1;
  std::string mps;
};

Sharing gpu_sharing() {
  int dev = 0, mps = 0;
  char bus[32] = "";
  CUDA(cudaGetDevice(&dev));
  CUDA(cudaDeviceGetPCIBusId(bus, sizeof bus, dev));
  if (cudaDeviceGetAttribute(&mps, cudaDevAttrMpsEnabled, dev) != cudaSuccess) {
    cudaGetLastError();
    mps = 0;
  }
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int node_rank = 0, node_size = 1;
  MPI_Comm_rank(node, &node_rank);
  MPI_Comm_size(node, &node_size);
  std::vector<char> all(size_t(node_size) * sizeof bus);
  MPI_Gather(bus, int(sizeof bus), MPI_CHAR, all.data(), int(sizeof bus), MPI_CHAR, 0, node);
  int local[2] = {0, 0};  // most ranks on one GPU, GPUs in use (node roots only)
  if (node_rank == 0) {
    std::map<std::string, int> per_gpu;
    for (int i = 0; i < node_size; ++i) ++per_gpu[std::string(&all[size_t(i) * sizeof bus])];
    for (const auto &kv : per_gpu) local[0] = std::max(local[0], kv.second);
    local[1] = int(per_gpu.size());
  }
  MPI_Comm_free(&node);
  int most = 0, gpus = 0, mps_min = 0, mps_max = 0;
  MPI_Allreduce(&local[0], &most, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(&local[1], &gpus, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(&mps, &mps_min, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&mps, &mps_max, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  Sharing s;
  s.max_ranks_per_gpu = most;
  s.gpus = gpus;
  s.mps = mps_min ? "on" : mps_max ? "on for some ranks only" : "off";
  return s;
}

void print_header(const Halo &h, const Options &o, const Sharing &s) {
  int dev = 0;
  cudaDeviceProp prop{};
  CUDA(cudaGetDevice(&dev));
  CUDA(cudaGetDeviceProperties(&prop, dev));
  const long long face = (long long)h.vars * h.n * h.n * h.r * 8, edge = (long long)h.vars * h.n * h.r * h.r * 8,
                  corner = (long long)h.vars * h.r * h.r * h.r * 8;
  std::printf("bench_pack_sequence: halo exchange of %d variables through sequences of MPI_Pack/MPI_Unpack, "
              "against one fused pack and one fused unpack kernel\n", h.vars);
  std::printf("  MPI library      %s\n", tempi::tools::library_version().c_str());
  std::printf("  ranks            %d, process grid %d x %d x %d (z, y, x), periodic, 26 neighbours\n", h.size,
              h.dims[2], h.dims[1], h.dims[0]);
  std::printf("  per rank         interior %d^3, radius %d, %d variables, each a cudaMalloc'd %d^3 array of double "
              "in Fortran order (%zu B)\n", h.n, h.r, h.vars, h.full, h.bytes);
  std::printf("  bytes per nbr    face %lld, edge %lld, corner %lld (all variables); %lld per rank per cycle\n", face,
              edge, corner, h.bytes_sent);
  std::printf("  calls per cycle  mpi-datatypes: %d MPI_Pack + 26 MPI_Irecv + 26 MPI_Isend + MPI_Waitall + %d "
              "MPI_Unpack + cudaDeviceSynchronize\n", 26 * h.vars, 26 * h.vars);
  std::printf("                   fused-kernel:  1 pack kernel + sync + 26 MPI_Irecv + 26 MPI_Isend + MPI_Waitall + "
              "1 unpack kernel + sync\n");
  std::printf("  device           %s (rank 0)\n", prop.name);
  std::printf("  GPUs             %d in use, at most %d rank%s per GPU%s; MPS %s\n", s.gpus, s.max_ranks_per_gpu,
              s.max_ranks_per_gpu == 1 ? "" : "s", s.max_ranks_per_gpu > 1 ? " (shared GPU)" : "", s.mps.c_str());
  std::printf("  CUDA-aware       %s\n", tempi::mpi_is_cuda_aware() ? "yes" : "no (TEMPI stages the device buffers "
                                                                           "through host memory)");
  const char *defer = std::getenv("TEMPI_DEFER_PACK");
  std::printf("  TEMPI_DEFER_PACK %s\n", defer ? defer : "(unset)");
  std::printf("  iterations       %d warm-up + %d timed per variant\n", o.warmup, o.iters);
  std::printf("  date             %s\n", tempi::tools::utc_now().c_str());
  std::printf("Time of one cycle (packs, 52 posts, MPI_Waitall, unpacks, final synchronization): after MPI_Barrier; "
              "per cycle the slowest rank.\n");
}

void print_table(const std::vector<Result> &results) {
  const Result *base = nullptr, *mpi = nullptr;
  for (const auto &r : results) {
    if (r.name == "fused-kernel") base = &r;
    if (r.name == "mpi-datatypes") mpi = &r;
  }
  std::printf("\n%-14s %12s %12s %12s %15s %12s %12s %14s\n", "variant", "median us", "min us", "max us",
              "ratio to fused", "syncs/cycle", "wrong cells", "cells checked");
  for (const auto &r : results) {
    char ratio[32] = "-";
    if (base && base->median_us > 0) std::snprintf(ratio, sizeof ratio, "%.2fx", r.median_us / base->median_us);
    std::printf("%-14s %12.1f %12.1f %12.1f %15s %12.1f %12lld %14lld\n", r.name.c_str(), r.median_us, r.min_us,
                r.max_us, ratio, r.syncs, r.wrong, r.checked);
  }
  if (base && mpi && base->median_us > 0)
    std::printf("ratio mpi-datatypes / fused-kernel: %.2fx (medians)\n", mpi->median_us / base->median_us);
  std::printf("syncs/cycle: GPU synchronizations TEMPI made per cycle on rank 0 (the tool's own "
              "cudaDeviceSynchronize calls not counted)\n");
  std::printf("\nParts of one cycle on rank 0 (medians): packing, 52 posts + MPI_Waitall, unpacking + final sync\n");
  std::printf("%-14s %12s %12s %12s\n", "variant", "pack us", "exchange us", "unpack us");
  for (const auto &r : results)
    std::printf("%-14s %12.1f %12.1f %12.1f\n", r.name.c_str(), r.pack_us, r.exchange_us, r.unpack_us);
  for (const auto &r : results)
    std::printf("verify %s: %lld cells checked / %lld wrong (%d timed cycles)\n", r.name.c_str(), r.checked, r.wrong,
                r.iters);
}

bool append_csv(const std::string &path, const Halo &h, const std::vector<Result> &results) {
  std::FILE *f = std::fopen(path.c_str(), "a");
  if (!f) return false;
  std::fseek(f, 0, SEEK_END);
  if (std::ftell(f) == 0) std::fprintf(f, "variant,ranks,n,vars,radius,median_us,min_us,max_us,syncs_per_cycle,wrong\n");
  for (const auto &r : results)
    std::fprintf(f, "%s,%d,%d,%d,%d,%.3f,%.3f,%.3f,%.2f,%lld\n", r.name.c_str(), h.size, h.n, h.vars, h.r,
                 r.median_us, r.min_us, r.max_us, r.syncs, r.wrong);
  return std::fclose(f) == 0;
}

bool all_ranks(MPI_Comm comm, bool ok) {
  int mine = ok ? 1 : 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, comm);
  return all == 1;
}

int run(int argc, char **argv) {
  int world_rank = 0, world_size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  const bool root = world_rank == 0;

  Options o;
  const std::string error = parse(argc, argv, o);  // every rank parses the same arguments
  if (o.help) {
    if (root) usage(stdout);
    return 0;
  }
  if (!error.empty()) {
    if (root) {
      std::fprintf(stderr, "bench_pack_sequence: %s\n", error.c_str());
      usage(stderr);
    }
    return 2;
  }
  if (!all_ranks(MPI_COMM_WORLD, tempi::gpu_backend().has_gpu())) {  // every rank takes the same path
    if (o.require_gpu) {
      if (root) std::printf("SKIP: no usable GPU\n");
      return 77;
    }
    if (root) std::fprintf(stderr, "bench_pack_sequence: needs a usable GPU on every rank\n");
    return 1;
  }

  Halo h;
  h.size = world_size;
  int fixed = 1;
  for (int k = 0; k < 3; ++k) {
    h.dims[k] = o.dims[k];
    if (o.dims[k] > 0) fixed *= o.dims[k];
  }
  if (world_size % fixed != 0 || (fixed != world_size && o.dims[0] && o.dims[1] && o.dims[2])) {
    if (root) std::fprintf(stderr, "bench_pack_sequence: --dims %d,%d,%d does not fit %d ranks\n", o.dims[2],
                           o.dims[1], o.dims[0], world_size);
    return 2;
  }
  MPI_Dims_create(world_size, 3, h.dims);
  const int periods[3] = {1, 1, 1};
  MPI_Cart_create(MPI_COMM_WORLD, 3, h.dims, periods, 0, &h.cart);
  MPI_Comm_rank(h.cart, &h.rank);
  MPI_Cart_coords(h.cart, h.rank, 3, h.coords);
  h.n = o.n;
  h.r = o.radius;
  h.vars = o.vars;
  h.full = o.n + 2 * o.radius;
  h.cells = size_t(h.full) * h.full * h.full;
  h.bytes = h.cells * sizeof(double);
  setup_halo(h);
  allocate(h);
  const Sharing sharing = gpu_sharing();
  if (root) print_header(h, o, sharing);

  int rc = 0;
  const long long differ = layout_check(h);
  if (root) {
    if (differ == 0) std::printf("layout check: identical (fused kernel's packed bytes = MPI_Pack's, every neighbour)\n");
    else std::printf("layout check: DIFFERENT for %lld neighbour buffer(s) over all ranks\n", differ);
  }
  if (differ != 0) {
    rc = 1;
  } else {
    std::vector<Result> results;
    for (const Variant &v : kVariants)
      if (std::find(o.variants.begin(), o.variants.end(), v.name) != o.variants.end())
        results.push_back(measure(h, v, o));
    if (root) {
      print_table(results);
      if (!o.csv.empty() && !append_csv(o.csv, h, results))
        std::fprintf(stderr, "bench_pack_sequence: could not write %s\n", o.csv.c_str());
    }
    bool good = true;
    for (const auto &r : results) good &= r.wrong == 0;
    if (root) std::printf("%s\n", good ? "PASS: every cell in place" : "FAIL: wrong cells (see above)");
    rc = good ? 0 : 1;
  }
  free_halo(h);
  MPI_Comm_free(&h.cart);
  return rc;
}

}  // namespace

int main(int argc, char **argv) {
  // One GPU per rank (local rank mod the GPUs), or mod --gpus G / TEMPI_TEST_DEVICES=G.
  return tempi::tools::run_with_mpi(argc, argv, run, gpu_limit(argc, argv));
}
