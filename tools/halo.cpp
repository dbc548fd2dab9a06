// TEMPI's main job: a 3-D halo exchange written the way a stencil code writes it.
//
// A periodic 3-D Cartesian grid of ranks; each owns an n^3 interior with ghost layers
// of width r (local array (n+2r)^3, C order: z slowest, x fastest). Every exchange
// sends to and receives from all 26 neighbours: 26 MPI_Irecv and 26 MPI_Isend of the
// grid pointer with count 1 and a committed MPI_Type_create_subarray type per side,
// then one MPI_Waitall on the 52 requests. With a GPU the grid lives in device memory
// (touched only through gpu_backend().copy); without one it lives in host memory.
//
// Variants, each timed and verified in the same run (one function each, see kVariants):
//   tempi           the exchange above; TEMPI intercepts it
//   library-alone   the same calls as PMPI_Isend/PMPI_Irecv/PMPI_Waitall (TEMPI bypassed)
//                   on the same grid; only where the MPI library is CUDA-aware or there
//                   is no GPU
//   host-copy       what an application does on a library that is not CUDA-aware: copy
//                   the whole grid to the host, exchange there with PMPI_, copy it back
//   neighbor        the same exchange as one MPI_Neighbor_alltoallw on a distributed
//                   graph of the 26 sides (counts 1, displacements 0, the subarray types)
//   neighbor-library  that call as PMPI_Neighbor_alltoallw (TEMPI bypassed); only where
//                   the MPI library is CUDA-aware or there is no GPU
//   persistent      the 52 calls made once as MPI_Recv_init/MPI_Send_init; each exchange
//                   is MPI_Startall + MPI_Waitall
//   neighbor-persistent  the neighbor variant's call made once as MPI_Neighbor_alltoallw_init
//                   (MPI 4); each exchange is MPI_Start + MPI_Wait
//   zero-copy-p2p   the tempi variant's calls on a duplicate of the Cartesian communicator
//                   on which the application opted into zero-copy point-to-point
//                   (TEMPIX_Comm_enable_zero_copy, made once before any variant runs): the
//                   receiving GPU reads each same-node send through CUDA IPC; n/a where it
//                   is off (TEMPI_IPC=off, a rank without a GPU, TEMPI disabled)
//   hand-fused      (CUDA builds) what a GPU code writes without datatypes: one kernel packs
//                   the 26 slabs into one buffer, grouped by peer, one PMPI_Isend and one
//                   PMPI_Irecv of contiguous bytes per peer (device buffers on a CUDA-aware
//                   library, else pinned host memory the kernels write and read directly),
//                   one kernel unpacks
//   hand-fused-faces (CUDA builds) the same kernels and buffers, but one PMPI_Isend and one
//                   PMPI_Irecv per face (26 each way, the tempi variant's tags): what the
//                   library costs when it carries MPI's 52 messages rather than one per peer
//   stream          (opt-in: not in the default list, since it needs MPI_THREAD_MULTIPLE,
//                   which the program then asks for) the tempi variant's 52 operations
//                   enqueued on the grid's own CUDA stream (TEMPIX_Irecv_enqueue,
//                   TEMPIX_Isend_enqueue, TEMPIX_Waitall_enqueue on a communicator bound to
//                   it, made once before any variant runs), then one synchronization of that
//                   stream: the host never waits inside the exchange
//   fused-nccl      (CUDA builds) the same pack kernel, one ncclSend and one ncclRecv per
//                   peer inside one ncclGroupStart/ncclGroupEnd, the same unpack kernel, all
//                   on one stream with one synchronization (tools/halo_nccl.cpp; needs NCCL
//                   at build time and one rank per GPU, else it says why it did not run)
//
// With --methods, the tempi variant is measured once per forced method (TEMPIX_Set_method)
// and round, the methods taking turns, and auto is compared with the best of them.
//
//   mpiexec -n P tempi_halo [--n 32] [--radius 2] [--type float] [--iters 30] ...
//   (--help lists every option)
#include <mpi.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "backend.hpp"
#include "phases.hpp"
#include "bench_header.hpp"
#include "gpu_select.hpp"
#include "p2p/messages.hpp"  // requested_method (restored after --methods)
#include "base/runtime.hpp"
#include "tempi.h"          // TEMPIX_Comm_enable_zero_copy (the zero-copy-p2p variant), TEMPIX_Counter

#ifdef TEMPI_HALO_FUSED
// tools/halo_fused_kernels.cu (0 = success, else a CUDA error code).
namespace halo_fused {
struct Box {
  int start[3], sub[3];
  long long first;
};
int create(const Box *boxes, int count, long long full, int elem, void **out);
int pack(void *table, const void *grid, void *packed, void *stream);
int unpack(void *table, void *grid, const void *packed, void *stream);
int pack_async(void *table, const void *grid, void *packed, void *stream);
int unpack_async(void *table, void *grid, const void *packed, void *stream);
const char *error_string(int code);
void destroy(void *table);
int buffer(size_t bytes, bool pinned_host, void **out);
void release(void *p, bool pinned_host);
// The stream variant's own stream (a blocking CUDA stream, as applications make them).
void *stream_create();
void stream_synchronize(void *s);
void stream_destroy(void *s);
}  // namespace halo_fused
#elif defined(TEMPI_HALO_EMULATED_STREAMS)
#include "emulated_streams.hpp"  // the stream variant over the emulated GPU (tests)
#endif
#ifdef TEMPI_HALO_NCCL
#include "halo_nccl.hpp"  // NCCL found at build time (tools/meson.build)
#endif

namespace {

// ---------------------------------------------------------------- options

enum class Elem { Float, Double, Int, Char, Complex };

struct ElemInfo {
  Elem elem;
  const char *name;
  MPI_Datatype type;
  size_t bytes;
};

ElemInfo elem_info(Elem e) {
  switch (e) {
    case Elem::Float: return {e, "float", MPI_FLOAT, 4};
    case Elem::Double: return {e, "double", MPI_DOUBLE, 8};
    case Elem::Int: return {e, "int", MPI_INT, 4};
    case Elem::Char: return {e, "char", MPI_CHAR, 1};
    case Elem::Complex: return {e, "complex", MPI_C_DOUBLE_COMPLEX, 16};
  }
  return {Elem::Float, "float", MPI_FLOAT, 4};
}

const char *const kVariantNames[] = {"tempi",      "library-alone", "host-copy", "neighbor", "neighbor-library",
                                     "persistent", "neighbor-persistent", "zero-copy-p2p", "stream",
#ifdef TEMPI_HALO_FUSED
                                     "hand-fused", "hand-fused-faces", "fused-nccl"
#endif
};

// Every variant but the opt-in stream variant (which needs MPI_THREAD_MULTIPLE).
std::vector<std::string> default_variants() {
  std::vector<std::string> v;
  for (const char *name : kVariantNames)
    if (std::string(name) != "stream") v.push_back(name);
  return v;
}

// Whether the command line asks for the stream variant: MPI then starts with
// MPI_THREAD_MULTIPLE (TEMPI's stream thread calls the library), and only then.
bool wants_stream(int argc, char **argv) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--variants" && ("," + std::string(argv[i + 1]) + ",").find(",stream,") != std::string::npos)
      return true;
  return false;
}

// "tempi,library-alone,...": the variants this build has.
std::string variant_list(const char *sep) {
  std::string list;
  for (const char *name : kVariantNames) list += (list.empty() ? "" : sep) + std::string(name);
  return list;
}

struct Options {
  int n = 32;
  int radius = 2;
  Elem elem = Elem::Float;
  int iters = 30, warmup = 5, baseline_iters = 5;
  int dims[3] = {0, 0, 0};
  std::vector<std::string> variants = default_variants();
  std::vector<std::string> methods;  // --methods: the tempi variant once per method and round
  int rounds = 3;
  std::string csv;
  bool help = false, check = false, require_gpu = false;
};

void usage(std::FILE *f) {
  std::fprintf(f,
               "usage: mpiexec -n P tempi_halo [options]\n"
               "  3-D halo exchange with all 26 neighbours on a periodic Cartesian grid of ranks.\n"
               "  --n N               interior cells per dimension per rank (default 32)\n"
               "  --radius R          ghost layer width, 1 <= R <= N (default 2)\n"
               "  --type T            float|double|int|char|complex (complex: two doubles; default float)\n"
               "  --dims A,B,C        process grid (z,y,x); 0 entries are chosen by MPI_Dims_create\n"
               "  --iters K           timed exchanges per variant (default 30)\n"
               "  --warmup W          untimed exchanges before them (default 5)\n"
               "  --baseline-iters K  cap on warm-up and timed exchanges of the library-alone\n"
               "                      variants (default 5)\n"
               "  --variants LIST     comma-separated subset of the variants (default all):\n"
               "                      %s\n"
               "                      (zero-copy-p2p: the tempi variant on a communicator with\n"
               "                      TEMPIX_Comm_enable_zero_copy; n/a where zero-copy is off)\n"
#ifdef TEMPI_HALO_FUSED
               "                      (fused-nccl needs NCCL at build time and one rank per GPU;\n"
               "                      it sets NCCL_NVLS_ENABLE=0 unless the environment sets it)\n"
#endif
               "  --methods LIST      measure the tempi variant once per method (auto, oneshot, staged,\n"
               "                      device; TEMPIX_Set_method), the methods taking turns in --rounds\n"
               "                      rounds; rows tempi(METHOD), each the median of its round medians,\n"
               "                      and a line of auto against the best forced method\n"
               "  --rounds R          rounds of --methods (default 3)\n"
               "  --csv FILE          append one row per measured variant (header when the file is new)\n"
               "  --check             quick mode for tests: --warmup 1 --iters 2 --baseline-iters 1\n"
               "  --require-gpu       print SKIP and exit 77 when no usable GPU is present\n"
               "  --help              this text\n"
               "Exit status: 0 when every variant placed every cell correctly, 1 when a cell was\n"
               "wrong or a step failed, 2 for bad options, 77 with --require-gpu and no GPU.\n",
               variant_list(",").c_str());
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
  bool iters_set = false, warmup_set = false, baseline_set = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char * { return i + 1 < argc ? argv[++i] : nullptr; };
    if (a == "--help" || a == "-h") {
      o.help = true;
    } else if (a == "--check") {
      o.check = true;
    } else if (a == "--require-gpu") {
      o.require_gpu = true;
    } else if (a == "--n" || a == "--radius" || a == "--iters" || a == "--warmup" || a == "--baseline-iters" ||
               a == "--rounds") {
      const char *v = value();
      int *dst = a == "--n" ? &o.n : a == "--radius" ? &o.radius : a == "--iters" ? &o.iters
                                   : a == "--warmup" ? &o.warmup : a == "--rounds" ? &o.rounds : &o.baseline_iters;
      const int lo = a == "--warmup" ? 0 : 1;
      if (!v || !parse_int(v, lo, dst)) return a + " needs an integer >= " + std::to_string(lo);
      iters_set |= a == "--iters";
      warmup_set |= a == "--warmup";
      baseline_set |= a == "--baseline-iters";
    } else if (a == "--type") {
      const char *v = value();
      const std::string t = v ? v : "";
      if (t == "float") o.elem = Elem::Float;
      else if (t == "double") o.elem = Elem::Double;
      else if (t == "int") o.elem = Elem::Int;
      else if (t == "char") o.elem = Elem::Char;
      else if (t == "complex") o.elem = Elem::Complex;
      else return "--type needs float, double, int, char or complex";
    } else if (a == "--dims") {
      const char *v = value();
      const auto parts = split(v ? v : "");
      if (parts.size() != 3) return "--dims needs A,B,C";
      for (int k = 0; k < 3; ++k)
        if (!parse_int(parts[k].c_str(), 0, &o.dims[k])) return "--dims needs three integers >= 0";
    } else if (a == "--variants") {
      const char *v = value();
      o.variants = split(v ? v : "");
      for (const auto &name : o.variants)
        if (std::find(std::begin(kVariantNames), std::end(kVariantNames), name) == std::end(kVariantNames))
          return "unknown variant '" + name + "' (this build has " + variant_list(", ") + ")";
    } else if (a == "--methods") {
      const char *v = value();
      o.methods = split(v ? v : "");
      for (const auto &m : o.methods)
        if (m != "auto" && m != "oneshot" && m != "staged" && m != "device")
          return "unknown method '" + m + "' (auto, oneshot, staged or device)";
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
    if (!baseline_set) o.baseline_iters = 1;
  }
  if (o.radius > o.n) return "--radius must not exceed --n (a send region is r cells of the interior)";
  return "";
}

// ---------------------------------------------------------------- the stencil code's halo

// Direction d in {-1,0,1}^3 \ {0}, indexed (dz+1)*9 + (dy+1)*3 + (dx+1) (13 is d = 0).
int direction_index(const int d[3]) { return (d[0] + 1) * 9 + (d[1] + 1) * 3 + (d[2] + 1); }

struct Neighbour {
  int rank;
  int d[3];                           // the direction (z, y, x), each -1, 0 or 1
  MPI_Datatype send_type, recv_type;  // interior slab next to side d, ghost region on side d
  int send_tag, recv_tag;             // index(d), index(-d)
};

struct Halo {
  MPI_Comm cart = MPI_COMM_NULL;
  // The same 26 sides as a distributed graph, for MPI_Neighbor_alltoallw: destinations in
  // direction order, sources ordered by the direction their sender sends in (recv_tag), so
  // that where one rank is several neighbours (few ranks, periodic) the k-th block it sends
  // to this rank lands in the k-th block this rank receives from it, as with the tags.
  MPI_Comm graph = MPI_COMM_NULL;
  std::vector<MPI_Datatype> graph_send_types, graph_recv_types;
  std::vector<int> graph_counts;      // all 1
  std::vector<MPI_Aint> graph_displs;  // all 0
  int rank = 0, size = 1;
  int dims[3] = {0, 0, 0}, coords[3] = {0, 0, 0};
  int n = 0, r = 0, full = 0;  // full = n + 2r
  ElemInfo elem{};
  size_t cells = 0, bytes = 0;  // of the local array
  int64_t bytes_sent = 0;       // per exchange, summed over the 26 sends
  std::vector<Neighbour> neighbours;
};

// The box of side d: the ghost region, or the interior's slab next to it.
void box_of(const Halo &h, const int d[3], bool ghost, int start[3], int sub[3]) {
  for (int k = 0; k < 3; ++k) {
    sub[k] = d[k] == 0 ? h.n : h.r;
    if (d[k] == 0) start[k] = h.r;
    else if (ghost) start[k] = d[k] < 0 ? 0 : h.n + h.r;
    else start[k] = d[k] < 0 ? h.r : h.n;  // the interior's low or high r layers
  }
}

MPI_Datatype region(const Halo &h, const int d[3], bool ghost) {
  int sizes[3] = {h.full, h.full, h.full}, sub[3], start[3];
  box_of(h, d, ghost, start, sub);
  MPI_Datatype t;
  MPI_Type_create_subarray(3, sizes, sub, start, MPI_ORDER_C, h.elem.type, &t);
  MPI_Type_commit(&t);
  return t;
}

void setup_halo(Halo &h) {
  for (int dz = -1; dz <= 1; ++dz)
    for (int dy = -1; dy <= 1; ++dy)
      for (int dx = -1; dx <= 1; ++dx) {
        const int d[3] = {dz, dy, dx};
        if (!dz && !dy && !dx) continue;
        const int minus_d[3] = {-dz, -dy, -dx};
        int c[3];
        for (int k = 0; k < 3; ++k) c[k] = h.coords[k] + d[k];  // MPI_Cart_rank wraps periodic dims
        Neighbour nb;
        MPI_Cart_rank(h.cart, c, &nb.rank);
        for (int k = 0; k < 3; ++k) nb.d[k] = d[k];
        nb.send_type = region(h, d, false);
        nb.recv_type = region(h, d, true);
        nb.send_tag = direction_index(d);
        nb.recv_tag = direction_index(minus_d);
        int bytes = 0;
        MPI_Type_size(nb.send_type, &bytes);
        h.bytes_sent += bytes;
        h.neighbours.push_back(nb);
      }
  std::vector<Neighbour> by_sender_direction = h.neighbours;
  std::stable_sort(by_sender_direction.begin(), by_sender_direction.end(),
                   [](const Neighbour &a, const Neighbour &b) { return a.recv_tag < b.recv_tag; });
  std::vector<int> sources, destinations;
  for (const auto &nb : h.neighbours) {
    destinations.push_back(nb.rank);
    h.graph_send_types.push_back(nb.send_type);
  }
  for (const auto &nb : by_sender_direction) {
    sources.push_back(nb.rank);
    h.graph_recv_types.push_back(nb.recv_type);
  }
  h.graph_counts.assign(h.neighbours.size(), 1);
  h.graph_displs.assign(h.neighbours.size(), 0);
  MPI_Dist_graph_create_adjacent(h.cart, int(sources.size()), sources.data(), MPI_UNWEIGHTED,
                                 int(destinations.size()), destinations.data(), MPI_UNWEIGHTED, MPI_INFO_NULL, 0,
                                 &h.graph);
}

void free_halo(Halo &h) {
  for (auto &nb : h.neighbours) {
    MPI_Type_free(&nb.send_type);
    MPI_Type_free(&nb.recv_type);
  }
  h.neighbours.clear();
  if (h.graph != MPI_COMM_NULL) MPI_Comm_free(&h.graph);
}

// One exchange: every receive posted, every send posted, one completion call. The
// function pointers choose MPI_ (through TEMPI) or PMPI_ (the library alone).
using IsendFn = int (*)(const void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);
using IrecvFn = int (*)(void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);
using WaitallFn = int (*)(int, MPI_Request[], MPI_Status[]);

// The parts of the last exchange on this rank: posting the 52 calls, and MPI_Waitall.
struct Parts {
  double post_us = 0, wait_us = 0;
};
Parts g_parts;

// `comm`: h.cart, or a duplicate of it (the same ranks).
void exchange(const Halo &h, MPI_Comm comm, void *grid, IsendFn isend, IrecvFn irecv, WaitallFn waitall) {
  MPI_Request reqs[52];
  int k = 0;
  const double t0 = MPI_Wtime();
  for (const auto &nb : h.neighbours) irecv(grid, 1, nb.recv_type, nb.rank, nb.recv_tag, comm, &reqs[k++]);
  for (const auto &nb : h.neighbours) isend(grid, 1, nb.send_type, nb.rank, nb.send_tag, comm, &reqs[k++]);
  const double t1 = MPI_Wtime();
  waitall(k, reqs, MPI_STATUSES_IGNORE);
  g_parts = {1e6 * (t1 - t0), 1e6 * (MPI_Wtime() - t1)};
}

// ---------------------------------------------------------------- cell values

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The value of global cell L (linear index in the global grid); distinct cells get
// distinct values (char: a hash mod 251, so 250 of 251 misplaced cells show).
void cell_value(Elem e, uint64_t L, unsigned char *out) {
  switch (e) {
    case Elem::Float: {  // distinct finite floats >= 1 for up to 2^30 cells, exactly
      const uint32_t bits = 0x3F800000u + uint32_t(L % 0x3F000000u);
      std::memcpy(out, &bits, 4);
      break;
    }
    case Elem::Double: {
      const double v = double(L) + 0.25;
      std::memcpy(out, &v, 8);
      break;
    }
    case Elem::Int: {
      const int32_t v = int32_t(L & 0x7fffffff);
      std::memcpy(out, &v, 4);
      break;
    }
    case Elem::Char: out[0] = static_cast<unsigned char>(splitmix64(L) % 251); break;
    case Elem::Complex: {
      const double v[2] = {double(L) + 0.25, -(double(L) + 0.5)};
      std::memcpy(out, v, 16);
      break;
    }
  }
}

// What the ghost cells hold before an exchange: no cell ever holds it.
void poison_value(Elem e, unsigned char *out) {
  switch (e) {
    case Elem::Float: {
      const float v = -1.f;
      std::memcpy(out, &v, 4);
      break;
    }
    case Elem::Double: {
      const double v = -1.;
      std::memcpy(out, &v, 8);
      break;
    }
    case Elem::Int: {
      const int32_t v = -1;
      std::memcpy(out, &v, 4);
      break;
    }
    case Elem::Char: out[0] = 255; break;
    case Elem::Complex: {
      const double v[2] = {-1., -1.};
      std::memcpy(out, v, 16);
      break;
    }
  }
}

// `expected`: every local cell (ghosts included) holds the value of the global cell it
// stands for, with periodic wrap. `initial`: the same with every ghost cell poisoned.
void fill_host_grids(const Halo &h, std::vector<unsigned char> &expected, std::vector<unsigned char> &initial) {
  const size_t es = h.elem.bytes;
  expected.assign(h.bytes, 0);
  initial.assign(h.bytes, 0);
  int64_t G[3];
  for (int k = 0; k < 3; ++k) G[k] = int64_t(h.dims[k]) * h.n;
  unsigned char poison[16];
  poison_value(h.elem.elem, poison);
  size_t i = 0;
  for (int z = 0; z < h.full; ++z)
    for (int y = 0; y < h.full; ++y)
      for (int x = 0; x < h.full; ++x, ++i) {
        const int local[3] = {z, y, x};
        int64_t g[3];
        bool ghost = false;
        for (int k = 0; k < 3; ++k) {
          g[k] = ((int64_t(h.coords[k]) * h.n + local[k] - h.r) % G[k] + G[k]) % G[k];
          ghost |= local[k] < h.r || local[k] >= h.n + h.r;
        }
        const uint64_t L = uint64_t((g[0] * G[1] + g[1]) * G[2] + g[2]);
        cell_value(h.elem.elem, L, &expected[i * es]);
        std::memcpy(&initial[i * es], ghost ? poison : &expected[i * es], es);
      }
}

size_t count_wrong(const Halo &h, const std::vector<unsigned char> &got, const std::vector<unsigned char> &expected) {
  const size_t es = h.elem.bytes;
  size_t wrong = 0;
  for (size_t i = 0; i < h.cells; ++i) wrong += std::memcmp(&got[i * es], &expected[i * es], es) != 0;
  return wrong;
}

// ---------------------------------------------------------------- variants

// Whether `ok` holds on every rank (collective).
bool all_ranks(MPI_Comm comm, bool ok) {
  int mine = ok ? 1 : 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, comm);
  return all == 1;
}
bool all_ranks(const Halo &h, bool ok) { return all_ranks(h.cart, ok); }

// One transfer of a fused exchange: `bytes` bytes at `offset` of a packed buffer, to or
// from rank `peer` of the Cartesian communicator.
struct PeerBytes {
  int peer, tag;
  int64_t offset, bytes;
};

// The tag of a fused baseline's transfer per peer: each pair of ranks exchanges one
// message a way.
constexpr int kFusedTag = 1000;

// A fused baseline's box tables (the 26 interior slabs, the 26 ghost regions) and packed
// buffers, made once (hand-fused and hand-fused-faces: at first use; fused-nccl: before its
// variant runs). The slabs are grouped by peer, so that each peer gets one transfer, as
// hand-written codes do; the same bytes are also listed face by face.
struct Fused {
  bool tried = false, ok = false;
  void *send_table = nullptr, *recv_table = nullptr;
  void *send = nullptr, *recv = nullptr;  // the packed slabs, back to back
  bool host = false;                      // buffers in pinned host memory, else device memory
  std::vector<PeerBytes> sends, recvs;    // one per peer, in rank order (tag kFusedTag)
  std::vector<PeerBytes> send_faces, recv_faces;  // the same bytes, one per face (its tempi tag)
};

// Where the grid lives, and how the host reaches it: device memory only through
// gpu_backend().copy, never directly.
struct Grid {
  bool on_gpu = false;
  void *data = nullptr;                  // device memory, or host_storage.data()
  std::vector<unsigned char> host_storage;  // the grid itself without a GPU
  std::vector<unsigned char> staging;       // the host-copy variant's host grid
  std::vector<MPI_Request> persistent;      // the persistent variant's 52 requests, made at first use
  MPI_Request neighbor_persistent = MPI_REQUEST_NULL;  // the neighbor-persistent variant's, made at first use
  // zero-copy-p2p: a duplicate of the Cartesian communicator with zero-copy point-to-point
  // enabled, and why the variant does not run here ("" when it does), both set by
  // zero_copy_prepare (collective) before any variant runs.
  MPI_Comm zero_copy = MPI_COMM_NULL;
  std::string zero_copy_na = "n/a (not prepared)";
  // stream: the grid's own stream, a stream object and a communicator bound to it, and why
  // the variant does not run here ("" when it does), set by stream_prepare (collective).
  void *stream = nullptr;
  TEMPIX_Stream stream_object = TEMPIX_STREAM_NULL;
  MPI_Comm stream_comm = MPI_COMM_NULL;
  std::string stream_na = "n/a (not prepared)";
  Fused fused;       // hand-fused(-faces) (pinned host buffers where the library is not CUDA-aware)
  Fused nccl_fused;  // fused-nccl (always device buffers: NCCL's kernels read and write them)
  // fused-nccl: why it does not run here ("" when it does), set by nccl_prepare (collective)
  // before any variant runs; its NCCL communicator and stream; NCCL_NVLS_ENABLE as found.
  std::string nccl_na = "n/a (not prepared)";
  void *nccl = nullptr;
  std::string nvls_env;  // the user's NCCL_NVLS_ENABLE, "" when unset
#ifdef TEMPI_HALO_NCCL
  // One send and one receive per peer (Fused::sends/recvs); NCCL has no tags, and there
  // is one message a way between two ranks.
  std::vector<halo_nccl::Message> nccl_sends, nccl_recvs;
#endif

  bool upload(const std::vector<unsigned char> &src) {
    if (!on_gpu) {
      std::memcpy(data, src.data(), src.size());
      return true;
    }
    return tempi::gpu_backend().copy(data, src.data(), src.size()) == tempi::Status::Ok;
  }
  bool download(std::vector<unsigned char> &dst) {
    if (!on_gpu) {
      std::memcpy(dst.data(), data, dst.size());
      return true;
    }
    return tempi::gpu_backend().copy(dst.data(), data, dst.size()) == tempi::Status::Ok;
  }
};

// A variant is one exchange function plus when it can run. It returns false when a
// local (non-MPI) step failed; it must still make every MPI call so peers never hang.
struct Variant {
  const char *name;
  bool capped;  // iterations capped by --baseline-iters
  // Empty when the variant can run, else the reason it cannot ("n/a (...)").
  std::string (*unavailable)(const Grid &);
  bool (*run)(const Halo &, Grid &);
};

std::string always(const Grid &) { return ""; }

bool exchange_tempi(const Halo &h, Grid &g) {
  exchange(h, h.cart, g.data, MPI_Isend, MPI_Irecv, MPI_Waitall);
  return true;
}

std::string library_unavailable(const Grid &g) {
  return !g.on_gpu || tempi::mpi_is_cuda_aware() ? "" : "n/a (MPI library not CUDA-aware)";
}
bool exchange_library_alone(const Halo &h, Grid &g) {
  exchange(h, h.cart, g.data, PMPI_Isend, PMPI_Irecv, PMPI_Waitall);
  return true;
}

std::string host_copy_unavailable(const Grid &g) {
  return g.on_gpu ? "" : "n/a (no GPU: the grid is already in host memory)";
}
bool exchange_host_copy(const Halo &h, Grid &g) {
  bool ok = g.download(g.staging);
  exchange(h, h.cart, g.staging.data(), PMPI_Isend, PMPI_Irecv, PMPI_Waitall);
  ok &= g.upload(g.staging);
  return ok;
}

using NeighborFn = int (*)(const void *, const int[], const MPI_Aint[], const MPI_Datatype[], void *, const int[],
                           const MPI_Aint[], const MPI_Datatype[], MPI_Comm);
void neighbor_exchange(const Halo &h, void *grid, NeighborFn alltoallw) {
  const double t0 = MPI_Wtime();
  alltoallw(grid, h.graph_counts.data(), h.graph_displs.data(), h.graph_send_types.data(), grid,
            h.graph_counts.data(), h.graph_displs.data(), h.graph_recv_types.data(), h.graph);
  g_parts = {1e6 * (MPI_Wtime() - t0), 0};
}
bool exchange_neighbor(const Halo &h, Grid &g) {
  neighbor_exchange(h, g.data, MPI_Neighbor_alltoallw);
  return true;
}
bool exchange_neighbor_library(const Halo &h, Grid &g) {
  neighbor_exchange(h, g.data, PMPI_Neighbor_alltoallw);
  return true;
}

bool exchange_persistent(const Halo &h, Grid &g) {
  if (g.persistent.empty()) {
    for (const auto &nb : h.neighbours) {
      g.persistent.push_back(MPI_REQUEST_NULL);
      MPI_Recv_init(g.data, 1, nb.recv_type, nb.rank, nb.recv_tag, h.cart, &g.persistent.back());
    }
    for (const auto &nb : h.neighbours) {
      g.persistent.push_back(MPI_REQUEST_NULL);
      MPI_Send_init(g.data, 1, nb.send_type, nb.rank, nb.send_tag, h.cart, &g.persistent.back());
    }
  }
  const double t0 = MPI_Wtime();
  MPI_Startall(int(g.persistent.size()), g.persistent.data());
  const double t1 = MPI_Wtime();
  MPI_Waitall(int(g.persistent.size()), g.persistent.data(), MPI_STATUSES_IGNORE);
  g_parts = {1e6 * (t1 - t0), 1e6 * (MPI_Wtime() - t1)};
  return true;
}

// The grid's own stream (the stream variant): a CUDA stream where the program has CUDA, an
// emulated stream over the emulated GPU (tests), else none.
void *grid_stream_create() {
#if defined(TEMPI_HALO_FUSED)
  return halo_fused::stream_create();
#elif defined(TEMPI_HALO_EMULATED_STREAMS)
  return tempi::emulated_stream_create();
#else
  return nullptr;
#endif
}
void grid_stream_synchronize(void *s) {
#if defined(TEMPI_HALO_FUSED)
  halo_fused::stream_synchronize(s);
#elif defined(TEMPI_HALO_EMULATED_STREAMS)
  tempi::emulated_stream_synchronize(s);
#else
  (void)s;
#endif
}
void grid_stream_destroy(void *s) {
#if defined(TEMPI_HALO_FUSED)
  halo_fused::stream_destroy(s);
#elif defined(TEMPI_HALO_EMULATED_STREAMS)
  tempi::emulated_stream_destroy(s);
#else
  (void)s;
#endif
}

// stream: collective on h.cart, before any variant runs (every rank makes the same calls).
void stream_prepare(const Halo &h, Grid &g) {
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  if (provided != MPI_THREAD_MULTIPLE) {
    g.stream_na = "n/a (the MPI library does not provide MPI_THREAD_MULTIPLE)";
    return;
  }
  if (!g.on_gpu) {
    g.stream_na = "n/a (no GPU)";
    return;
  }
  g.stream = grid_stream_create();
  if (!all_ranks(h, g.stream != nullptr)) {
    g.stream_na = "n/a (no GPU stream in this build)";
    return;
  }
  MPI_Info info;
  MPI_Info_create(&info);
  MPI_Info_set(info, "type", "cudaStream_t");
  int rc = TEMPIX_Info_set_hex(info, "value", &g.stream, sizeof g.stream);
  if (rc == MPI_SUCCESS) rc = TEMPIX_Stream_create(info, &g.stream_object);
  MPI_Info_free(&info);
  if (!all_ranks(h, rc == MPI_SUCCESS)) {
    g.stream_na = "failed: TEMPIX_Stream_create returned an error on some rank";
    return;
  }
  rc = TEMPIX_Stream_comm_create(h.cart, g.stream_object, &g.stream_comm);
  g.stream_na = all_ranks(h, rc == MPI_SUCCESS) ? "" : "failed: TEMPIX_Stream_comm_create returned an error on some rank";
}
void stream_release(Grid &g) {
  if (g.stream) grid_stream_synchronize(g.stream);
  if (g.stream_comm != MPI_COMM_NULL) MPI_Comm_free(&g.stream_comm);
  if (g.stream_object != TEMPIX_STREAM_NULL) TEMPIX_Stream_free(&g.stream_object);
  if (g.stream) grid_stream_destroy(g.stream);
  g.stream = nullptr;
}

std::string stream_unavailable(const Grid &g) { return g.stream_na; }
bool exchange_stream(const Halo &h, Grid &g) {
  const double t0 = MPI_Wtime();
  std::vector<MPI_Request> reqs;
  reqs.reserve(2 * h.neighbours.size());
  bool ok = true;
  for (const auto &nb : h.neighbours) {
    reqs.push_back(MPI_REQUEST_NULL);
    ok &= TEMPIX_Irecv_enqueue(g.data, 1, nb.recv_type, nb.rank, nb.recv_tag, g.stream_comm, &reqs.back()) ==
          MPI_SUCCESS;
  }
  for (const auto &nb : h.neighbours) {
    reqs.push_back(MPI_REQUEST_NULL);
    ok &= TEMPIX_Isend_enqueue(g.data, 1, nb.send_type, nb.rank, nb.send_tag, g.stream_comm, &reqs.back()) ==
          MPI_SUCCESS;
  }
  ok &= TEMPIX_Waitall_enqueue(int(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE) == MPI_SUCCESS;
  const double t1 = MPI_Wtime();
  grid_stream_synchronize(g.stream);  // the exchange's one host wait
  g_parts = {1e6 * (t1 - t0), 1e6 * (MPI_Wtime() - t1)};
  return ok;
}

// zero-copy-p2p: collective on h.cart, before any variant runs. The duplicate is made (and
// later freed) even where zero-copy turns out off, so every rank does the same.
void zero_copy_prepare(const Halo &h, Grid &g) {
  MPI_Comm_dup(h.cart, &g.zero_copy);
  int on = 0;
  const int rc = TEMPIX_Comm_enable_zero_copy(g.zero_copy, 1, &on);  // *enabled: the same on every rank
  if (!all_ranks(h, rc == MPI_SUCCESS)) {
    g.zero_copy_na = "failed: TEMPIX_Comm_enable_zero_copy returned an error on some rank";
  } else {
    g.zero_copy_na = on ? "" : "n/a (zero-copy point-to-point is off: TEMPI_IPC=off, a rank without a GPU, "
                               "or TEMPI disabled)";
  }
}
std::string zero_copy_unavailable(const Grid &g) { return g.zero_copy_na; }
bool exchange_zero_copy(const Halo &h, Grid &g) {
  exchange(h, g.zero_copy, g.data, MPI_Isend, MPI_Irecv, MPI_Waitall);
  return true;
}

#ifdef TEMPI_HALO_FUSED
std::string fused_unavailable(const Grid &g) { return g.on_gpu ? "" : "n/a (no GPU)"; }

// One side's boxes grouped by peer, with one transfer per peer and one per face. Sends are
// ordered by (peer, direction sent), receives by (source, direction its sender sent:
// recv_tag), so that the k-th slab of a transfer lands in the k-th ghost region of the
// matching receive even where one rank is several neighbours (few ranks, periodic).
int64_t lay_out(const Halo &h, bool ghost, std::vector<halo_fused::Box> &boxes, std::vector<PeerBytes> &transfers,
                std::vector<PeerBytes> &faces) {
  std::vector<const Neighbour *> order;
  for (const auto &nb : h.neighbours) order.push_back(&nb);
  std::stable_sort(order.begin(), order.end(), [ghost](const Neighbour *a, const Neighbour *b) {
    const int ta = ghost ? a->recv_tag : a->send_tag, tb = ghost ? b->recv_tag : b->send_tag;
    return a->rank != b->rank ? a->rank < b->rank : ta < tb;
  });
  int64_t at = 0;
  for (const Neighbour *nb : order) {
    halo_fused::Box b{};
    box_of(h, nb->d, ghost, b.start, b.sub);  // a ghost region has the extents of the slab it receives
    const int64_t bytes = int64_t(b.sub[0]) * b.sub[1] * b.sub[2] * int64_t(h.elem.bytes);
    if (transfers.empty() || transfers.back().peer != nb->rank) transfers.push_back({nb->rank, kFusedTag, at, 0});
    transfers.back().bytes += bytes;
    faces.push_back({nb->rank, ghost ? nb->recv_tag : nb->send_tag, at, bytes});
    at += bytes;
    boxes.push_back(b);
  }
  return at;
}

// The box tables and buffers of `f`, once; false when a step failed (then every later call
// says so too).
bool fused_ready(const Halo &h, Fused &f, bool pinned_host) {
  if (f.tried) return f.ok;
  f.tried = true;
  std::vector<halo_fused::Box> send, recv;
  const int64_t at = lay_out(h, false, send, f.sends, f.send_faces);
  lay_out(h, true, recv, f.recvs, f.recv_faces);
  f.host = pinned_host;
  f.ok = halo_fused::create(send.data(), int(send.size()), h.full, int(h.elem.bytes), &f.send_table) == 0 &&
         halo_fused::create(recv.data(), int(recv.size()), h.full, int(h.elem.bytes), &f.recv_table) == 0 &&
         halo_fused::buffer(size_t(at), f.host, &f.send) == 0 && halo_fused::buffer(size_t(at), f.host, &f.recv) == 0;
  return f.ok;
}

// The fused kernels around the library's transfers of `recvs` and `sends` (members of
// Fused: per peer or per face).
using Transfers = std::vector<PeerBytes> Fused::*;

bool exchange_fused(const Halo &h, Grid &g, Transfers recvs, Transfers sends) {
  Fused &f = g.fused;
  bool ok = fused_ready(h, f, !tempi::mpi_is_cuda_aware());
  const double t0 = MPI_Wtime();
  if (ok) ok = halo_fused::pack(f.send_table, g.data, f.send, nullptr) == 0;
  MPI_Request reqs[52];
  int k = 0;
  char *in = static_cast<char *>(f.recv), *out = static_cast<char *>(f.send);
  for (const PeerBytes &t : f.*recvs)
    PMPI_Irecv(in + t.offset, int(t.bytes), MPI_BYTE, t.peer, t.tag, h.cart, &reqs[k++]);
  for (const PeerBytes &t : f.*sends)
    PMPI_Isend(out + t.offset, int(t.bytes), MPI_BYTE, t.peer, t.tag, h.cart, &reqs[k++]);
  const double t1 = MPI_Wtime();
  PMPI_Waitall(k, reqs, MPI_STATUSES_IGNORE);
  if (ok) ok = halo_fused::unpack(f.recv_table, g.data, f.recv, nullptr) == 0;
  g_parts = {1e6 * (t1 - t0), 1e6 * (MPI_Wtime() - t1)};
  return ok;
}

bool exchange_hand_fused(const Halo &h, Grid &g) { return exchange_fused(h, g, &Fused::recvs, &Fused::sends); }

// hand-fused-faces: hand-fused's kernels and buffers, the tempi variant's 52 messages.
bool exchange_hand_fused_faces(const Halo &h, Grid &g) {
  return exchange_fused(h, g, &Fused::recv_faces, &Fused::send_faces);
}

void fused_release(Fused &f) {
  halo_fused::destroy(f.send_table);
  halo_fused::destroy(f.recv_table);
  halo_fused::release(f.send, f.host);
  halo_fused::release(f.recv, f.host);
  f = Fused{};
}

// fused-nccl: nccl_prepare decided, on every rank alike, whether it runs.
std::string fused_nccl_unavailable(const Grid &g) { return g.nccl_na; }

#ifndef TEMPI_HALO_NCCL
void nccl_prepare(const Halo &, Grid &g) {
  g.nccl_na = "n/a (NCCL was not found at build time, or -Dnccl=disabled: docs/using.md, \"NCCL for tempi_halo\")";
}
bool exchange_fused_nccl(const Halo &, Grid &) { return false; }  // never runs: nccl_na is set
void nccl_release(Grid &) {}
std::string nccl_header(const Grid &) { return "not found at build time (fused-nccl cannot run)"; }
#else
// Collective, before any variant runs: whether fused-nccl can run, and if so its buffers,
// message lists and communicator. NCCL refuses two ranks on one GPU (ncclCommInitRank
// fails with "Duplicate GPU detected"), and with several ranks per GPU (MPS, 8 ranks on
// 2 GPUs) this baseline does not exist, so those runs print why and skip it.
void nccl_prepare(const Halo &h, Grid &g) {
  if (!g.on_gpu) {
    g.nccl_na = "n/a (no GPU)";
    return;
  }
  // This rank's GPU: host name and PCI bus id, gathered from every rank.
  char host[MPI_MAX_PROCESSOR_NAME + 1] = {0};
  int len = 0;
  MPI_Get_processor_name(host, &len);
  const std::string bus = tempi::gpu_backend().device_id();
  if (!all_ranks(h, !bus.empty())) {
    g.nccl_na = "n/a (could not read a GPU's PCI bus id on some rank)";
    return;
  }
  constexpr size_t kId = MPI_MAX_PROCESSOR_NAME + 64;
  std::vector<char> mine(kId, 0), every(kId * size_t(h.size), 0);
  std::snprintf(mine.data(), kId, "%s on %s", bus.c_str(), host);  // "0000:3B:00.0 on node7"
  MPI_Allgather(mine.data(), int(kId), MPI_CHAR, every.data(), int(kId), MPI_CHAR, h.cart);
  for (int i = 0; i < h.size; ++i)
    for (int j = i + 1; j < h.size; ++j)
      if (std::strcmp(&every[size_t(i) * kId], &every[size_t(j) * kId]) == 0) {
        g.nccl_na = "skipped: NCCL needs one rank per GPU (ranks " + std::to_string(i) + " and " +
                    std::to_string(j) + " share GPU " + std::string(&every[size_t(i) * kId]) + ")";
        return;
      }
  Fused &f = g.nccl_fused;
  if (!all_ranks(h, fused_ready(h, f, false))) {
    g.nccl_na = "failed: the fused kernels' tables or device buffers could not be made on some rank";
    return;
  }
  for (const PeerBytes &t : f.sends) g.nccl_sends.push_back({t.peer, t.offset, t.bytes});
  for (const PeerBytes &t : f.recvs) g.nccl_recvs.push_back({t.peer, t.offset, t.bytes});
  if (const char *v = std::getenv("NCCL_NVLS_ENABLE")) g.nvls_env = v;
  const std::string error = halo_nccl::init(h.cart, &g.nccl);  // sets NCCL_NVLS_ENABLE=0 unless set
  g.nccl_na = error.empty() ? "" : "failed: " + error;
}

// One exchange: pack kernel, the NCCL group, unpack kernel, one stream synchronization.
// Every step is issued even after an error, so that no peer waits forever in NCCL; the
// first error is printed once per rank and the exchange counts as failed.
bool exchange_fused_nccl(const Halo &h, Grid &g) {
  const Fused &f = g.nccl_fused;
  void *stream = halo_nccl::stream(g.nccl);
  std::string error;
  const double t0 = MPI_Wtime();
  int rc = halo_fused::pack_async(f.send_table, g.data, f.send, stream);
  if (rc) error = std::string("pack kernel: ") + halo_fused::error_string(rc);
  std::string step = halo_nccl::exchange(g.nccl, g.nccl_sends.data(), int(g.nccl_sends.size()), f.send,
                                         g.nccl_recvs.data(), int(g.nccl_recvs.size()), f.recv);
  if (error.empty()) error = step;
  const double t1 = MPI_Wtime();
  rc = halo_fused::unpack_async(f.recv_table, g.data, f.recv, stream);
  if (rc && error.empty()) error = std::string("unpack kernel: ") + halo_fused::error_string(rc);
  step = halo_nccl::synchronize(g.nccl);
  if (error.empty()) error = step;
  g_parts = {1e6 * (t1 - t0), 1e6 * (MPI_Wtime() - t1)};
  static bool reported = false;
  if (!error.empty() && !reported) {
    reported = true;
    std::fprintf(stderr, "tempi_halo: rank %d: fused-nccl: %s\n", h.rank, error.c_str());
  }
  return error.empty();
}

// Collective (every rank made the same nccl_prepare call): the communicator, then the buffers.
void nccl_release(Grid &g) {
  if (g.nccl) {
    const std::string error = halo_nccl::destroy(g.nccl);
    if (!error.empty()) std::fprintf(stderr, "tempi_halo: fused-nccl: tearing NCCL down: %s\n", error.c_str());
    g.nccl = nullptr;
  }
  fused_release(g.nccl_fused);
}

std::string nccl_header(const Grid &g) {
  std::string line = halo_nccl::version();
  if (g.nccl) line += g.nvls_env.empty() ? ", NCCL_NVLS_ENABLE=0 (tempi_halo's default: NVLink multicast off)"
                                         : ", NCCL_NVLS_ENABLE=" + g.nvls_env + " (from the environment)";
  return line;
}
#endif
#endif

std::string persistent_collectives_unavailable(const Grid &) {
  return MPI_VERSION >= 4 ? "" : "n/a (the MPI library has no MPI-4 persistent collectives)";
}
bool exchange_neighbor_persistent(const Halo &h, Grid &g) {
#if MPI_VERSION >= 4
  if (g.neighbor_persistent == MPI_REQUEST_NULL &&
      MPI_Neighbor_alltoallw_init(g.data, h.graph_counts.data(), h.graph_displs.data(), h.graph_send_types.data(),
                                  g.data, h.graph_counts.data(), h.graph_displs.data(), h.graph_recv_types.data(),
                                  h.graph, MPI_INFO_NULL, &g.neighbor_persistent) != MPI_SUCCESS)
    return false;
  const double t0 = MPI_Wtime();
  MPI_Start(&g.neighbor_persistent);
  const double t1 = MPI_Wtime();
  MPI_Wait(&g.neighbor_persistent, MPI_STATUS_IGNORE);
  g_parts = {1e6 * (t1 - t0), 1e6 * (MPI_Wtime() - t1)};
  return true;
#else
  (void)h;
  (void)g;
  return false;
#endif
}

const Variant kVariants[] = {
    {"tempi", false, always, exchange_tempi},
    {"library-alone", true, library_unavailable, exchange_library_alone},
    {"host-copy", false, host_copy_unavailable, exchange_host_copy},
    {"neighbor", false, always, exchange_neighbor},
    {"neighbor-library", true, library_unavailable, exchange_neighbor_library},
    {"persistent", false, always, exchange_persistent},
    {"neighbor-persistent", false, persistent_collectives_unavailable, exchange_neighbor_persistent},
    {"zero-copy-p2p", false, zero_copy_unavailable, exchange_zero_copy},
    {"stream", false, stream_unavailable, exchange_stream},
#ifdef TEMPI_HALO_FUSED
    {"hand-fused", false, fused_unavailable, exchange_hand_fused},
    {"hand-fused-faces", false, fused_unavailable, exchange_hand_fused_faces},
    {"fused-nccl", false, fused_nccl_unavailable, exchange_fused_nccl},
#endif
};

struct Result {
  std::string name;
  std::string na;  // reason when not measured ("failed: ..." when setting it up failed)
  bool failed = false;
  int iters = 0;
  double median_us = 0, min_us = 0, max_us = 0;
  // Rank 0's parts of an exchange (medians): the 52 posting calls, MPI_Waitall, and
  // the GPU synchronizations TEMPI made per exchange.
  double post_us = 0, wait_us = 0, syncs = 0;
  // Rank 0's fused launches per exchange whose device table was copied up, and reused.
  double tables_placed = 0, tables_reused = 0;
  long long checked = 0, wrong = 0;
  // Over every exchange of the variant (warm-up, timed, verification), summed over ranks:
  // its sends, and those that went by zero-copy point-to-point (counter p2p.zero_copy_sends).
  long long sends = 0, zero_copy_sends = 0;
  // Over the timed exchanges, summed over ranks: TEMPI's decisions on GPU buffers, and those
  // a repeated call took from its thread's kept ones (counters p2p.decisions_*).
  long long decisions = 0, recalled = 0;
  // Rank 0's TEMPI phases per timed exchange (means), where TEMPI_PHASE_TIMES=1 timed them.
  std::vector<double> phase_us, phase_calls;
};

// TEMPI's phases (docs/using.md, "Phase times"), in the order of its counters.
constexpr size_t kPhaseCount = size_t(tempi::Phase::kCount);

// TEMPI's counter `name` in this process (TEMPIX_Counter; 0 without TEMPI's counters).
long long counter(const char *name) {
  unsigned long long v = 0;
  TEMPIX_Counter(name, &v);
  return (long long)v;
}

// Every phase's time (ns) and calls, in tempi::Phase's order.
std::vector<long long> phase_counters() {
  std::vector<long long> v;
  for (const char *p : tempi::kPhaseNames) {
    v.push_back(counter(("phase." + std::string(p) + "_ns").c_str()));
    v.push_back(counter(("phase." + std::string(p) + "_calls").c_str()));
  }
  return v;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

Result measure(const Halo &h, Grid &g, const Variant &v, const Options &o, const std::vector<unsigned char> &expected,
               const std::vector<unsigned char> &initial) {
  Result res;
  res.name = v.name;
  res.na = v.unavailable(g);
  if (!res.na.empty()) {
    res.failed = res.na.compare(0, 7, "failed:") == 0;  // the same on every rank
    return res;
  }
  const int warmup = v.capped ? std::min(o.warmup, o.baseline_iters) : o.warmup;
  const int iters = v.capped ? std::min(o.iters, o.baseline_iters) : o.iters;
  res.iters = iters;

  const long long zero_copy_before = counter("p2p.zero_copy_sends");
  bool ok = g.upload(initial);
  for (int i = 0; i < warmup; ++i) ok &= v.run(h, g);
  std::vector<double> local(static_cast<size_t>(iters)), worst(static_cast<size_t>(iters));
  std::vector<double> posts(static_cast<size_t>(iters)), waits(static_cast<size_t>(iters));
  const long long syncs_before = counter("gpu.synchronizations");
  const long long placed_before = counter("gpu.tables_placed"), reused_before = counter("gpu.tables_reused");
  const long long made_before = counter("p2p.decisions_made"), recalled_before = counter("p2p.decisions_recalled");
  const std::vector<long long> phases_before = phase_counters();
  for (int i = 0; i < iters; ++i) {
    MPI_Barrier(h.cart);
    const double t0 = MPI_Wtime();
    ok &= v.run(h, g);
    local[size_t(i)] = 1e6 * (MPI_Wtime() - t0);
    posts[size_t(i)] = g_parts.post_us;
    waits[size_t(i)] = g_parts.wait_us;
  }
  res.syncs = iters ? double(counter("gpu.synchronizations") - syncs_before) / iters : 0;
  res.tables_placed = iters ? double(counter("gpu.tables_placed") - placed_before) / iters : 0;
  res.tables_reused = iters ? double(counter("gpu.tables_reused") - reused_before) / iters : 0;
  const long long made = counter("p2p.decisions_made") - made_before;
  const long long recalled = counter("p2p.decisions_recalled") - recalled_before;
  const std::vector<long long> phases_after = phase_counters();
  for (size_t k = 0; iters && k < kPhaseCount; ++k) {
    res.phase_us.push_back(1e-3 * double(phases_after[2 * k] - phases_before[2 * k]) / iters);
    res.phase_calls.push_back(double(phases_after[2 * k + 1] - phases_before[2 * k + 1]) / iters);
  }
  res.post_us = median(posts);
  res.wait_us = median(waits);
  // The time of an iteration is that of its slowest rank.
  MPI_Allreduce(local.data(), worst.data(), iters, MPI_DOUBLE, MPI_MAX, h.cart);
  res.median_us = median(worst);
  res.min_us = *std::min_element(worst.begin(), worst.end());
  res.max_us = *std::max_element(worst.begin(), worst.end());

  // Verification: poisoned ghosts, one exchange, every cell compared.
  std::vector<unsigned char> got(h.bytes);
  ok &= g.upload(initial);
  ok &= v.run(h, g);
  ok &= g.download(got);
  long long counts[6] = {(long long)h.cells, ok ? (long long)count_wrong(h, got, expected) : (long long)h.cells,
                         (long long)h.neighbours.size() * (warmup + iters + 1),
                         counter("p2p.zero_copy_sends") - zero_copy_before, made + recalled, recalled};
  long long totals[6] = {0, 0, 0, 0, 0, 0};
  MPI_Allreduce(counts, totals, 6, MPI_LONG_LONG, MPI_SUM, h.cart);
  res.checked = totals[0];
  res.wrong = totals[1];
  res.sends = totals[2];
  res.zero_copy_sends = totals[3];
  res.decisions = totals[4];
  res.recalled = totals[5];
  res.failed = !all_ranks(h, ok);
  return res;
}

// The tempi variant once per method and round, the methods taking turns
// (TEMPIX_Set_method), so that the machine's drift between runs falls on every method
// alike. Each method's row: the median of its round medians, the extremes of all its
// exchanges, its checks summed.
std::vector<Result> measure_methods(const Halo &h, Grid &g, const Variant &v, const Options &o,
                                    const std::vector<unsigned char> &expected, const std::vector<unsigned char> &initial) {
  const std::string before = tempi::to_string(tempi::requested_method());
  std::vector<std::vector<Result>> rounds(o.methods.size());
  for (int round = 0; round < o.rounds; ++round)
    for (size_t k = 0; k < o.methods.size(); ++k) {
      TEMPIX_Set_method(o.methods[k].c_str());
      rounds[k].push_back(measure(h, g, v, o, expected, initial));
    }
  TEMPIX_Set_method(before.c_str());
  std::vector<Result> out;
  for (size_t k = 0; k < o.methods.size(); ++k) {
    const std::vector<Result> &runs = rounds[k];
    Result r = runs.front();
    r.name = "tempi(" + o.methods[k] + ")";
    if (r.na.empty()) {
      std::vector<double> medians, posts, waits;
      double syncs = 0;
      r.iters = 0;
      r.checked = r.wrong = r.sends = r.zero_copy_sends = r.decisions = r.recalled = 0;
      for (const Result &x : runs) {
        medians.push_back(x.median_us);
        posts.push_back(x.post_us);
        waits.push_back(x.wait_us);
        syncs += x.syncs;
        r.min_us = std::min(r.min_us, x.min_us);
        r.max_us = std::max(r.max_us, x.max_us);
        r.iters += x.iters;
        r.checked += x.checked;
        r.wrong += x.wrong;
        r.sends += x.sends;
        r.zero_copy_sends += x.zero_copy_sends;
        r.decisions += x.decisions;
        r.recalled += x.recalled;
        r.failed |= x.failed;
      }
      r.median_us = median(medians);
      r.post_us = median(posts);
      r.wait_us = median(waits);
      r.syncs = syncs / double(runs.size());
    }
    out.push_back(r);
  }
  return out;
}

// ---------------------------------------------------------------- output

void print_header(const Halo &h, const Grid &g, const Options &o) {
  tempi::Backend &gpu = tempi::gpu_backend();
  std::printf("tempi_halo: 3-D halo exchange with 26 neighbours (26 MPI_Irecv + 26 MPI_Isend of subarray types, "
              "one MPI_Waitall)\n");
  std::printf("  ranks            %d, process grid %d x %d x %d (z, y, x), periodic\n", h.size, h.dims[0], h.dims[1],
              h.dims[2]);
  std::printf("  per rank         interior %d^3, radius %d, local array %d^3 of %s (%zu B each), %zu B\n", h.n, h.r,
              h.full, h.elem.name, h.elem.bytes, h.bytes);
  std::printf("  bytes sent       %lld per rank per exchange\n", (long long)h.bytes_sent);
  std::printf("  grid in          %s\n",
              g.on_gpu ? ("GPU memory: " + gpu.device_name()).c_str() : "host memory (no GPU)");
  std::printf("  MPI library      %s\n", tempi::tools::library_version().c_str());
  std::printf("  CUDA-aware       %s\n", tempi::mpi_is_cuda_aware() ? "yes" : "no");
  if (std::find(o.variants.begin(), o.variants.end(), "zero-copy-p2p") != o.variants.end())
    std::printf("  zero-copy p2p    %s\n",
                g.zero_copy_na.empty() ? "on (TEMPIX_Comm_enable_zero_copy on a duplicate of the Cartesian communicator)"
                                       : g.zero_copy_na.c_str());
#ifdef TEMPI_HALO_FUSED
  if (std::find(o.variants.begin(), o.variants.end(), "fused-nccl") != o.variants.end())
    std::printf("  NCCL             %s\n", nccl_header(g).c_str());
#endif
  std::printf("  iterations       %d warm-up + %d timed per variant (library-alone variants at most %d + %d)\n",
              o.warmup,
              o.iters, std::min(o.warmup, o.baseline_iters), std::min(o.iters, o.baseline_iters));
  if (!o.methods.empty()) {
    std::string list;
    for (const auto &m : o.methods) list += (list.empty() ? "" : ",") + m;
    std::printf("  methods          the tempi variant once per method and round, taking turns: %s, %d rounds\n",
                list.c_str(), o.rounds);
  }
  std::printf("  date             %s\n", tempi::tools::utc_now().c_str());
  std::printf("Time of one exchange: MPI_Barrier, then first post to MPI_Waitall's return; per iteration the "
              "slowest rank.\n\n");
}

// TEMPI's own phases per exchange on rank 0, where TEMPI_PHASE_TIMES=1 timed them: a row per
// phase that any variant went through, each variant's mean time (us) and calls per timed
// exchange. Phases nest (docs/using.md, "Phase times").
void print_phases(const std::vector<Result> &results) {
  std::vector<const Result *> timed;
  for (const Result &r : results) {
    bool any = false;
    for (double c : r.phase_calls) any = any || c > 0;
    if (r.na.empty() && !r.failed && any) timed.push_back(&r);
  }
  if (timed.empty()) return;
  std::printf("\nTEMPI's phases per exchange on rank 0 (TEMPI_PHASE_TIMES=1): mean us / calls per timed exchange;\n"
              "nested phases are included in their parents (docs/using.md, \"Phase times\")\n");
  std::printf("%-17s", "phase");
  for (const Result *r : timed) std::printf(" %20s", r->name.c_str());
  std::printf("\n");
  for (size_t k = 0; k < kPhaseCount; ++k) {
    bool any = false;
    for (const Result *r : timed) any = any || r->phase_calls[k] > 0;
    if (!any) continue;
    std::printf("%-17s", tempi::kPhaseNames[k]);
    for (const Result *r : timed) {
      char cell[48];
      std::snprintf(cell, sizeof cell, "%.1f / %.1f", r->phase_us[k], r->phase_calls[k]);
      std::printf(" %20s", cell);
    }
    std::printf("\n");
  }
}

// Where the time of an exchange goes, on rank 0.
void print_parts(const std::vector<Result> &results) {
  std::printf("\nParts of one exchange on rank 0 (medians): posting (the 52 calls, MPI_Startall, or the whole\n"
              "MPI_Neighbor_alltoallw; hand-fused: pack kernel and its posts; fused-nccl: pack launch and the\n"
              "NCCL group), MPI_Waitall (hand-fused: and unpack; fused-nccl: unpack launch and the stream\n"
              "synchronization), TEMPI's GPU synchronizations, and its fused launches whose descriptions\n"
              "were copied to a device table or found there from an earlier exchange\n");
  std::printf("%-17s %12s %12s %14s %14s %14s\n", "variant", "post us", "waitall us", "syncs/exch", "tables new",
              "tables reused");
  for (const Result &r : results)
    if (r.na.empty() && !r.failed)
      std::printf("%-17s %12.1f %12.1f %14.1f %14.1f %14.1f\n", r.name.c_str(), r.post_us, r.wait_us, r.syncs,
                  r.tables_placed, r.tables_reused);
  print_phases(results);
}

// Each variant's median over the base's ("-" without a base).
std::string ratio_to(const Result &r, const Result *base) {
  char ratio[32] = "-";
  if (base && base->median_us > 0) std::snprintf(ratio, sizeof ratio, "%.2fx", r.median_us / base->median_us);
  return ratio;
}

void print_table(const std::vector<Result> &results) {
  // Ratios to tempi, and to the NCCL baseline where it ran in this run.
  const Result *base = nullptr, *nccl = nullptr;
  for (const auto &r : results) {
    if ((r.name == "tempi" || r.name == "tempi(auto)") && r.na.empty()) base = &r;
    if (r.name == "fused-nccl" && r.na.empty() && !r.failed) nccl = &r;
  }
  std::printf("%-17s %12s %12s %12s %15s", "variant", "median us", "min us", "max us", "ratio to tempi");
  if (nccl) std::printf(" %20s", "ratio to fused-nccl");
  std::printf(" %12s %14s\n", "wrong cells", "cells checked");
  for (const auto &r : results) {
    if (!r.na.empty()) {
      std::printf("%-17s %s\n", r.name.c_str(), r.na.c_str());
      continue;
    }
    std::printf("%-17s %12.1f %12.1f %12.1f %15s", r.name.c_str(), r.median_us, r.min_us, r.max_us,
                ratio_to(r, base).c_str());
    if (nccl) std::printf(" %20s", ratio_to(r, nccl).c_str());
    std::printf(" %12lld %14lld%s\n", r.wrong, r.checked, r.failed ? "  (a step failed)" : "");
  }
  for (const auto &r : results)
    if (r.na.empty())
      std::printf("verify %s: %lld cells checked / %lld wrong (%d timed exchanges)\n", r.name.c_str(), r.checked,
                  r.wrong, r.iters);
  // --methods: auto against the best forced method, both measured in this run.
  const Result *best = nullptr;
  for (const auto &r : results)
    if (r.na.empty() && !r.failed && r.name.compare(0, 6, "tempi(") == 0 && r.name != "tempi(auto)" &&
        (!best || r.median_us < best->median_us))
      best = &r;
  if (best && base && base->name == "tempi(auto)")
    std::printf("auto against the best forced method: auto %.1f us, best %s %.1f us, auto/best %.2fx\n",
                base->median_us, best->name.c_str(), best->median_us, base->median_us / best->median_us);
  for (const auto &r : results)
    if (r.na.empty() && (r.name == "zero-copy-p2p" || r.zero_copy_sends))
      std::printf("zero-copy %s: %lld of %lld sends went by zero-copy point-to-point (all ranks, all exchanges)\n",
                  r.name.c_str(), r.zero_copy_sends, r.sends);
  for (const auto &r : results)
    if (r.na.empty() && r.decisions)
      std::printf("kept decisions %s: %lld of %lld decisions on GPU buffers recalled (all ranks, timed exchanges)\n",
                  r.name.c_str(), r.recalled, r.decisions);
}

bool append_csv(const std::string &path, const Halo &h, const std::vector<Result> &results) {
  std::FILE *f = std::fopen(path.c_str(), "a");
  if (!f) return false;
  std::fseek(f, 0, SEEK_END);
  if (std::ftell(f) == 0) std::fprintf(f, "variant,ranks,n,radius,type,bytes_per_rank,median_us,min_us,max_us,wrong\n");
  for (const auto &r : results)
    if (r.na.empty())
      std::fprintf(f, "%s,%d,%d,%d,%s,%lld,%.3f,%.3f,%.3f,%lld\n", r.name.c_str(), h.size, h.n, h.r, h.elem.name,
                   (long long)h.bytes_sent, r.median_us, r.min_us, r.max_us, r.wrong);
  return std::fclose(f) == 0;
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
      std::fprintf(stderr, "tempi_halo: %s\n", error.c_str());
      usage(stderr);
    }
    return 2;
  }
  tempi::Backend &gpu = tempi::gpu_backend();
  Grid grid;
  grid.on_gpu = all_ranks(MPI_COMM_WORLD, gpu.has_gpu());  // every rank takes the same path
  if (o.require_gpu && !grid.on_gpu) {
    if (root) std::printf("SKIP: no usable GPU\n");
    return 77;
  }

  Halo h;
  h.size = world_size;
  int fixed = 1;
  for (int k = 0; k < 3; ++k) {
    h.dims[k] = o.dims[k];
    if (o.dims[k] > 0) fixed *= o.dims[k];
  }
  if (world_size % fixed != 0 || (fixed != world_size && o.dims[0] && o.dims[1] && o.dims[2])) {
    if (root) std::fprintf(stderr, "tempi_halo: --dims %d,%d,%d does not fit %d ranks\n", o.dims[0], o.dims[1],
                           o.dims[2], world_size);
    return 2;
  }
  MPI_Dims_create(world_size, 3, h.dims);
  const int periods[3] = {1, 1, 1};
  MPI_Cart_create(MPI_COMM_WORLD, 3, h.dims, periods, 0, &h.cart);
  MPI_Comm_rank(h.cart, &h.rank);
  MPI_Cart_coords(h.cart, h.rank, 3, h.coords);
  h.n = o.n;
  h.r = o.radius;
  h.full = o.n + 2 * o.radius;
  h.elem = elem_info(o.elem);
  h.cells = size_t(h.full) * h.full * h.full;
  h.bytes = h.cells * h.elem.bytes;
  setup_halo(h);

  std::vector<unsigned char> expected, initial;
  fill_host_grids(h, expected, initial);
  bool ok = true;
  if (grid.on_gpu) {
    ok = gpu.allocate_device(h.bytes, &grid.data) == tempi::Status::Ok;
    if (ok) grid.staging.assign(h.bytes, 0);
  } else {
    grid.host_storage.assign(h.bytes, 0);
    grid.data = grid.host_storage.data();
  }
  int rc = 0;
  if (!all_ranks(h, ok)) {
    if (root) std::fprintf(stderr, "tempi_halo: could not allocate %zu bytes of GPU memory on some rank\n", h.bytes);
    rc = 1;
  } else {
    // Collective, before the header: whether zero-copy-p2p runs here, and its communicator.
    if (std::find(o.variants.begin(), o.variants.end(), "zero-copy-p2p") != o.variants.end()) zero_copy_prepare(h, grid);
    // Collective, before the header: whether stream runs here, its stream and communicator.
    if (std::find(o.variants.begin(), o.variants.end(), "stream") != o.variants.end()) stream_prepare(h, grid);
#ifdef TEMPI_HALO_FUSED
    // Collective, before the header: whether fused-nccl runs here, and its communicator.
    if (std::find(o.variants.begin(), o.variants.end(), "fused-nccl") != o.variants.end()) nccl_prepare(h, grid);
#endif
    if (root) print_header(h, grid, o);
    std::vector<Result> results;
    for (const Variant &v : kVariants) {
      if (std::find(o.variants.begin(), o.variants.end(), v.name) == o.variants.end()) continue;
      if (!o.methods.empty() && std::string(v.name) == "tempi") {
        for (Result &r : measure_methods(h, grid, v, o, expected, initial)) results.push_back(std::move(r));
        continue;
      }
      results.push_back(measure(h, grid, v, o, expected, initial));
    }
    if (root) {
      print_table(results);
      print_parts(results);
      if (!o.csv.empty() && !append_csv(o.csv, h, results))
        std::fprintf(stderr, "tempi_halo: could not write %s\n", o.csv.c_str());
    }
    bool good = true;
    for (const auto &r : results) good &= r.wrong == 0 && !r.failed;  // n/a and skipped variants pass
    if (root) std::printf("%s\n", good ? "PASS: every cell in place" : "FAIL: wrong cells or a failed step (see above)");
    rc = good ? 0 : 1;
  }
  for (MPI_Request &r : grid.persistent) MPI_Request_free(&r);
  if (grid.neighbor_persistent != MPI_REQUEST_NULL) MPI_Request_free(&grid.neighbor_persistent);
#ifdef TEMPI_HALO_FUSED
  nccl_release(grid);  // collective: every rank prepared alike
  fused_release(grid.fused);
#endif
  if (grid.on_gpu && grid.data) gpu.free_device(grid.data);
  free_halo(h);
  if (grid.zero_copy != MPI_COMM_NULL) MPI_Comm_free(&grid.zero_copy);
  stream_release(grid);  // collective: every rank prepared alike
  MPI_Comm_free(&h.cart);
  return rc;
}

}  // namespace

int main(int argc, char **argv) {
  // One GPU per rank where there are several.
  return tempi::tools::run_with_mpi(argc, argv, run, 0, wants_stream(argc, argv) ? MPI_THREAD_MULTIPLE : -1);
}
