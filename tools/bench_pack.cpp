// MPI_Pack / MPI_Unpack of GPU objects through TEMPI, against the baselines measured
// in the same run: one device-to-device cudaMemcpyAsync of the packed size (the
// physical reference), cudaMemcpy2DAsync of the same 2-D object, and one
// cudaMemcpyAsync per block (what an MPI without GPU kernels does; measured up to
// 4096 blocks), and the roofline of the 2-D objects and halo faces (below). Transposes and a 3-D permutation are timed beside a hand-written
// tiled kernel for the same movement (bench_pack_reorder_kernels.cu). Every time is the
// median of repeated calls, each ended by a synchronization, after warm-up.
//
// Block lists and contiguous runs (issue 11, issue 19) have their own table: each
// object's packed bytes verified against PMPI_Pack on a host copy, a hand-written
// kernel beside the triangles, the 64-byte random blocks, the struct array and the
// gathers of picked structs and doubles (tools/bench_pack_blocklist_kernels.cu), and the
// roofline: the bytes DRAM must move (typed side at 32-byte sector granularity) at the
// copy rate measured in the same run.
//   bench_pack [--csv FILE] [--blocklist-csv FILE] [--rows all|strided|blocklist|reorder] [--only NAME]
//              [--quick] [--reorder]
#include <cuda_runtime_api.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>
#include "help.hpp"

namespace bench_pack_reorder {  // bench_pack_reorder_kernels.cu
int transpose(const void *in, void *out, int rows, int cols, int element, cudaStream_t stream);
int permute_zxy(const float *src, float *dst, int n, bool pack, cudaStream_t stream);
}  // namespace bench_pack_reorder
// tools/bench_pack_blocklist_kernels.cu (plain types).
namespace bench_pack_blocklist {
int triangle(double *matrix, double *packed, long long n, bool lower, bool pack, cudaStream_t stream);
int fill_bytes(void *p, long long n, unsigned long long seed, cudaStream_t stream);
int blocks(void *typed, void *packed, const long long *displs, long long n, int len, bool pack, cudaStream_t stream);
int structs(void *typed, void *packed, long long count, int extent, const int *offsets, int size,
            const long long *picked, bool pack, cudaStream_t stream);
int doubles(void *typed, void *packed, const long long *picked, long long n, bool pack, cudaStream_t stream);
}  // namespace bench_pack_blocklist

namespace {

#define CUDA(x)                                                                  \
  do {                                                                           \
    cudaError_t e = (x);                                                         \
    if (e != cudaSuccess) {                                                      \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e));               \
      MPI_Abort(MPI_COMM_WORLD, 1);                                              \
    }                                                                            \
  } while (0)

double median_us(const std::function<void()> &op, int reps) {
  for (int i = 0; i < 3; ++i) op();  // warm-up: module load, pools, caches
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto a = std::chrono::steady_clock::now();
    op();
    t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - a).count());
  }
  std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
  return t[t.size() / 2];
}

int reps_for(int64_t bytes) { return bytes >= (16 << 20) ? 20 : bytes >= (1 << 20) ? 50 : 200; }

// cudaMemcpyAsync on this GPU, measured once per run: the floor (1 byte, with its
// synchronization) and the rate (bytes read plus written per microsecond) of a 256 MiB copy.
struct CopyRate {
  double floor_us = 0, bytes_per_us = 0;
};

CopyRate measure_copy_rate(cudaStream_t s) {
  const int64_t big = int64_t(256) << 20;
  void *a, *b;
  CUDA(cudaMalloc(&a, big));
  CUDA(cudaMalloc(&b, big));
  CUDA(bench_pack_blocklist::fill_bytes(a, big, 1, s) == cudaSuccess ? cudaSuccess : cudaErrorUnknown);
  auto copy = [&](int64_t n) {
    return median_us([&] {
      CUDA(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, s));
      CUDA(cudaStreamSynchronize(s));
    }, 50);
  };
  CopyRate r;
  r.floor_us = copy(1);
  r.bytes_per_us = 2.0 * big / (copy(big) - r.floor_us);
  cudaFree(a);
  cudaFree(b);
  return r;
}

// The bytes DRAM must move for an object whose typed blocks are `blocks` ({offset,
// length}, any order, not overlapping) and whose packed size is `packed`. Pack reads
// every 32-byte sector that holds a typed byte and writes the packed bytes; unpack
// reads the packed bytes, writes those sectors, and reads each sector it writes only
// in part (the memory merges a partial sector with its old bytes).
struct Traffic {
  int64_t pack = 0, unpack = 0;
};

// Counts the units of `grain` bytes (32-byte sectors, 64-byte DRAM bursts) that blocks fed
// in address order touch, and those they touch only in part.
class UnitCount {
 public:
  explicit UnitCount(int64_t grain) : grain_(grain) {}
  void add(int64_t a, int64_t len) {
    const int64_t b = a + len, u0 = a / grain_, u1 = (b - 1) / grain_;
    if (u0 != cur_) {
      close();
      cur_ = u0;
      covered_ = 0;
    }
    if (u0 == u1) {
      covered_ += len;
      return;
    }
    covered_ += grain_ * (u0 + 1) - a;
    close();
    units_ += u1 - u0 - 1;  // whole units inside the block
    cur_ = u1;
    covered_ = b - grain_ * u1;
  }
  // Ends the last unit; call before reading the counts.
  void finish() {
    close();
    cur_ = -1;
  }
  int64_t units() const { return units_; }
  int64_t partial() const { return partial_; }
  // The units twice as large that hold a partial unit (the DRAM bursts a partial sector
  // makes the memory read).
  int64_t partial_pairs() const { return partial_pairs_; }

 private:
  void close() {
    if (cur_ < 0) return;
    ++units_;
    if (covered_ >= grain_) return;
    ++partial_;
    if (cur_ / 2 != last_pair_) ++partial_pairs_;
    last_pair_ = cur_ / 2;
  }
  int64_t grain_, units_ = 0, partial_ = 0, partial_pairs_ = 0, last_pair_ = -1, cur_ = -1, covered_ = 0;
};

Traffic dram_traffic(std::vector<std::pair<int64_t, int64_t>> blocks, int64_t packed) {
  std::sort(blocks.begin(), blocks.end());
  UnitCount sectors(32);
  for (const auto &[a, len] : blocks) sectors.add(a, len);
  sectors.finish();
  return {32 * sectors.units() + packed, packed + 32 * (sectors.units() + sectors.partial())};
}

// What DRAM must move for `count` elements `extent` bytes apart, each `rows` blocks of
// `block` bytes `pitch` apart from `start` (2-D objects and halo faces), counted without
// listing the blocks and with reads at the granularity of a DRAM burst (64 bytes: a
// strided gather of 8-byte blocks reads 64 bytes a block in the profiler): pack reads
// every burst that holds a typed byte and writes the packed bytes; unpack reads the
// packed bytes, writes every 32-byte sector that holds a typed byte, and reads each burst
// that holds a sector it writes only in part.
Traffic strided_traffic(int64_t start, int64_t rows, int64_t block, int64_t pitch, int count, int64_t extent,
                        int64_t packed) {
  UnitCount bursts(64), sectors(32);
  for (int e = 0; e < count; ++e)
    for (int64_t i = 0; i < rows; ++i) {
      bursts.add(start + e * extent + i * pitch, block);
      sectors.add(start + e * extent + i * pitch, block);
    }
  bursts.finish();
  sectors.finish();
  return {64 * bursts.units() + packed, packed + 32 * sectors.units() + 64 * sectors.partial_pairs()};
}

struct Row {
  std::string object, desc;
  int64_t block, pitch, count, bytes;
  double pack, unpack, memcpy1d, memcpy2d, per_block;
  double hand_pack = 0, hand_unpack = 0;  // the hand-written kernel (transposes and permutations)
  Traffic dram = {};                       // strided rows: what DRAM must move, and the time it takes
  double roof_pack = 0, roof_unpack = 0;
};

// Where a strided object's blocks lie: `rows` blocks `pitch` apart in each element, the
// first at `start`.
struct Rows {
  int64_t start, rows, block, pitch;
};

MPI_Datatype make_2d(const std::string &how, int64_t rows, int64_t block, int64_t pitch) {
  MPI_Datatype t;
  if (how == "vector") {
    MPI_Type_vector(int(rows), int(block), int(pitch), MPI_BYTE, &t);
  } else if (how == "hvector") {
    MPI_Datatype row;
    MPI_Type_contiguous(int(block), MPI_BYTE, &row);
    MPI_Type_create_hvector(int(rows), 1, pitch, row, &t);
    MPI_Type_free(&row);
  } else {
    const int sizes[] = {int(rows), int(pitch)}, sub[] = {int(rows), int(block)}, start[] = {0, 0};
    MPI_Type_create_subarray(2, sizes, sub, start, MPI_ORDER_C, MPI_BYTE, &t);
  }
  MPI_Type_commit(&t);
  return t;
}

// `rows` > 0 also times cudaMemcpy2DAsync and per-block copies of the object (count 1);
// `geometry` gives the roofline at `rate`.
Row measure(const std::string &object, const std::string &how, MPI_Datatype t, int count, int64_t rows,
            int64_t block, int64_t pitch, int64_t span, const Rows &geometry, const CopyRate &rate, cudaStream_t s) {
  int size = 0;
  MPI_Pack_size(count, t, MPI_COMM_WORLD, &size);
  void *typed, *packed, *ref;
  CUDA(cudaMalloc(&typed, span));
  CUDA(cudaMalloc(&packed, size));
  CUDA(cudaMalloc(&ref, size));
  CUDA(cudaMemset(typed, 0x3c, span));
  Row r{object, how, block, pitch, count, 0, 0, 0, 0, 0, 0};
  int pos = 0;
  MPI_Pack(typed, count, t, packed, size, &pos, MPI_COMM_WORLD);
  r.bytes = pos;
  const int reps = reps_for(r.bytes);
  r.pack = median_us([&] { int p = 0; MPI_Pack(typed, count, t, packed, size, &p, MPI_COMM_WORLD); }, reps);
  r.unpack = median_us([&] { int p = 0; MPI_Unpack(packed, size, &p, typed, count, t, MPI_COMM_WORLD); }, reps);
  r.memcpy1d = median_us([&] {
    CUDA(cudaMemcpyAsync(ref, packed, r.bytes, cudaMemcpyDeviceToDevice, s));
    CUDA(cudaStreamSynchronize(s));
  }, reps);
  if (rows > 0 && count == 1) {
    r.memcpy2d = median_us([&] {
      CUDA(cudaMemcpy2DAsync(ref, block, typed, pitch, block, rows, cudaMemcpyDeviceToDevice, s));
      CUDA(cudaStreamSynchronize(s));
    }, reps);
    if (rows <= 4096)
      r.per_block = median_us([&] {
        for (int64_t i = 0; i < rows; ++i)
          cudaMemcpyAsync(static_cast<char *>(ref) + i * block, static_cast<char *>(typed) + i * pitch, block,
                          cudaMemcpyDeviceToDevice, s);
        CUDA(cudaStreamSynchronize(s));
      }, std::min(reps, 20));
  }
  MPI_Aint lb, extent;
  MPI_Type_get_extent(t, &lb, &extent);
  r.dram = strided_traffic(geometry.start, geometry.rows, geometry.block, geometry.pitch, count, extent, r.bytes);
  r.roof_pack = rate.floor_us + r.dram.pack / rate.bytes_per_us;
  r.roof_unpack = rate.floor_us + r.dram.unpack / rate.bytes_per_us;
  cudaFree(typed);
  cudaFree(packed);
  cudaFree(ref);
  return r;
}

void write_csv(const Row &r, FILE *csv) {
  std::fprintf(csv, "%s,%s,%lld,%lld,%lld,%lld,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%lld,%lld,%.3f,%.3f\n",
               r.object.c_str(), r.desc.c_str(), (long long)r.block, (long long)r.pitch, (long long)r.count,
               (long long)r.bytes, r.pack, r.unpack, r.memcpy1d, r.memcpy2d, r.per_block, r.hand_pack, r.hand_unpack,
               (long long)r.dram.pack, (long long)r.dram.unpack, r.roof_pack, r.roof_unpack);
}

void print(const Row &r, FILE *csv) {
  auto gbs = [&](double us) { return us > 0 ? r.bytes / us / 1e3 : 0.0; };
  auto opt = [](double v, char *buf) {
    if (v > 0) std::snprintf(buf, 32, "%10.1f", v); else std::snprintf(buf, 32, "%10s", "-");
    return buf;
  };
  char a[32], b[32], c[32];
  std::printf("%-10s %-8s %6lld %6lld %3lld %10lld %9.1f %7.1f %9.1f %9.1f %s %s %5.2f %5.2f %s", r.object.c_str(),
              r.desc.c_str(), (long long)r.block, (long long)r.pitch, (long long)r.count, (long long)r.bytes,
              r.pack, gbs(r.pack), r.unpack, r.memcpy1d, opt(r.memcpy2d, a), opt(r.per_block, b),
              r.memcpy1d / r.pack, r.memcpy2d > 0 ? r.memcpy2d / r.pack : 0.0, opt(r.per_block > 0 ? r.per_block / r.pack : 0, c));
  if (r.roof_pack > 0)
    std::printf(" %9.1f %8.1f %5.2f %8.1f %5.2f", r.dram.unpack / 1e6, r.roof_pack, r.roof_pack / r.pack,
                r.roof_unpack, r.roof_unpack / r.unpack);
  std::printf("\n");
  if (csv) write_csv(r, csv);
  std::fflush(stdout);
}

// A movement that reorders elements: its MPI type (count 1), and the hand-written
// kernel for the same movement in each direction (typed -> packed, packed -> typed).
struct Reorder {
  std::string object;
  int element;
  int64_t n, bytes;  // elements per side; bytes of the object (packed and typed alike)
  MPI_Datatype type;
  std::function<int(const void *, void *, cudaStream_t)> hand_pack, hand_unpack;
};

// Device bytes that are not zeros (zeros hide unwritten outputs).
void fill_random(void *dev, int64_t bytes) {
  std::vector<uint64_t> host(size_t(bytes + 7) / 8);
  std::mt19937_64 rng{static_cast<uint64_t>(bytes)};
  for (uint64_t &v : host) v = rng();
  CUDA(cudaMemcpy(dev, host.data(), size_t(bytes), cudaMemcpyHostToDevice));
}

bool same_bytes(const void *a, const void *b, int64_t bytes) {
  std::vector<char> x(static_cast<size_t>(bytes)), y(static_cast<size_t>(bytes));
  CUDA(cudaMemcpy(x.data(), a, size_t(bytes), cudaMemcpyDeviceToHost));
  CUDA(cudaMemcpy(y.data(), b, size_t(bytes), cudaMemcpyDeviceToHost));
  return x == y;
}

// TEMPI's MPI_Pack and MPI_Unpack against the hand-written kernel and a memcpy of the
// packed bytes; `verified` says whether TEMPI's packed bytes equal the kernel's and its
// unpack restores the object.
Row measure_reorder(const Reorder &m, cudaStream_t s, bool &verified) {
  void *typed, *packed, *ref, *back;
  for (void **p : {&typed, &packed, &ref, &back}) CUDA(cudaMalloc(p, size_t(m.bytes)));
  fill_random(typed, m.bytes);
  Row r{m.object, "hvector", m.element, m.n, 1, m.bytes, 0, 0, 0, 0, 0};
  const int size = int(m.bytes);
  int pos = 0;
  MPI_Pack(typed, 1, m.type, packed, size, &pos, MPI_COMM_WORLD);
  CUDA(cudaMemset(back, 0xA5, size_t(m.bytes)));
  pos = 0;
  MPI_Unpack(packed, size, &pos, back, 1, m.type, MPI_COMM_WORLD);
  CUDA(cudaStreamSynchronize(s));
  CUDA(cudaError_t(m.hand_pack(typed, ref, s)));
  CUDA(cudaStreamSynchronize(s));
  verified = same_bytes(packed, ref, m.bytes) && same_bytes(back, typed, m.bytes);

  const int reps = reps_for(m.bytes);
  r.pack = median_us([&] { int p = 0; MPI_Pack(typed, 1, m.type, packed, size, &p, MPI_COMM_WORLD); }, reps);
  r.unpack = median_us([&] { int p = 0; MPI_Unpack(packed, size, &p, back, 1, m.type, MPI_COMM_WORLD); }, reps);
  r.hand_pack = median_us([&] {
    CUDA(cudaError_t(m.hand_pack(typed, ref, s)));
    CUDA(cudaStreamSynchronize(s));
  }, reps);
  r.hand_unpack = median_us([&] {
    CUDA(cudaError_t(m.hand_unpack(ref, back, s)));
    CUDA(cudaStreamSynchronize(s));
  }, reps);
  r.memcpy1d = median_us([&] {
    CUDA(cudaMemcpyAsync(ref, packed, size_t(m.bytes), cudaMemcpyDeviceToDevice, s));
    CUDA(cudaStreamSynchronize(s));
  }, reps);
  for (void *p : {typed, packed, ref, back}) cudaFree(p);
  return r;
}

void print_reorder(const Row &r, bool verified, FILE *csv) {
  std::printf("%-11s %4lld %5lld %10lld %9.1f %9.1f %9.1f %9.1f %9.1f %6.2f %6.2f %6.2f %6.2f %s\n", r.object.c_str(),
              (long long)r.block, (long long)r.pitch, (long long)r.bytes, r.pack, r.unpack, r.hand_pack,
              r.hand_unpack, r.memcpy1d, r.pack / r.hand_pack, r.unpack / r.hand_unpack, r.memcpy1d / r.pack,
              r.memcpy1d / r.unpack, verified ? "ok" : "WRONG");
  if (csv) write_csv(r, csv);
  std::fflush(stdout);
}

// Transposes of 4-, 8- and 16-byte elements (the column-by-column stream of an N × N
// matrix, as an FFT's reshape describes it) and (x, y, z) -> (z, x, y) of a 256^3 float
// grid; last a 16 × 16 transpose, whose times are the fixed cost of a call, beside the
// cost of one CUDA pointer query (TEMPI makes several per call). Returns whether every
// movement was verified.
bool reorder_rows(FILE *csv, cudaStream_t s) {
  std::printf("\ntransposes and permutations: TEMPI against a hand-written tiled kernel (same run), "
              "times in microseconds\n");
  std::printf("%-11s %4s %5s %10s %9s %9s %9s %9s %9s %6s %6s %6s %6s %s\n", "object", "elem", "N", "bytes", "pack",
              "unpack", "hand-pack", "hand-unp", "memcpy", "p/hand", "u/hand", "m/p", "m/u", "check");
  bool all = true;
  std::vector<Reorder> rows;
  const auto add_transpose = [&rows](int e, int n) {
    MPI_Datatype elem, column, t;
    MPI_Type_contiguous(e / 4, MPI_FLOAT, &elem);
    MPI_Type_vector(n, 1, n, elem, &column);
    MPI_Type_create_hvector(n, 1, e, column, &t);
    MPI_Type_commit(&t);
    MPI_Type_free(&column);
    MPI_Type_free(&elem);
    auto kernel = [n, e](const void *in, void *out, cudaStream_t st) {
      return bench_pack_reorder::transpose(in, out, n, n, e, st);
    };
    rows.push_back({"transpose", e, n, int64_t(n) * n * e, t, kernel, kernel});
  };
  for (int e : {4, 8, 16})
    for (int n : {1000, 2000, 4000}) add_transpose(e, n);
  const int g = 256;
  MPI_Datatype zline, zx, zxy;
  MPI_Type_vector(g, 1, g * g, MPI_FLOAT, &zline);
  MPI_Type_create_hvector(g, 1, 4, zline, &zx);
  MPI_Type_create_hvector(g, 1, 4 * g, zx, &zxy);
  MPI_Type_commit(&zxy);
  MPI_Type_free(&zline);
  MPI_Type_free(&zx);
  rows.push_back({"permute-zxy", 4, g, int64_t(g) * g * g * 4, zxy,
                  [](const void *in, void *out, cudaStream_t st) {
                    return bench_pack_reorder::permute_zxy(static_cast<const float *>(in), static_cast<float *>(out), g,
                                                           true, st);
                  },
                  [](const void *in, void *out, cudaStream_t st) {
                    return bench_pack_reorder::permute_zxy(static_cast<const float *>(in), static_cast<float *>(out), g,
                                                           false, st);
                  }});
  add_transpose(4, 16);
  for (Reorder &m : rows) {
    bool verified = false;
    const Row r = measure_reorder(m, s, verified);
    print_reorder(r, verified, csv);
    all &= verified;
    MPI_Type_free(&m.type);
  }
  void *dev;
  CUDA(cudaMalloc(&dev, 256));
  cudaPointerAttributes attr;
  const int queries = 100;
  const double query = median_us([&] {
    for (int i = 0; i < queries; ++i) CUDA(cudaPointerGetAttributes(&attr, dev));
  }, 20) / queries;
  cudaFree(dev);
  std::printf("one cudaPointerGetAttributes of device memory: %.2f us\n", query);
  return all;
}

// ---- Block lists and contiguous runs ----

struct ListRow {
  std::string object;
  int64_t bytes = 0;
  double pack = 0, unpack = 0, memcpy1d = 0, hand_pack = 0, hand_unpack = 0;
  Traffic dram;
  double roof_pack = 0, roof_unpack = 0;
  bool verified = false;
};

// A hand-written kernel for the same movement: pack (true) or unpack between typed and packed.
using Hand = std::function<void(void *typed, void *packed, bool pack, cudaStream_t s)>;

ListRow measure_list(const std::string &object, MPI_Datatype t, int count, const std::vector<std::pair<int64_t, int64_t>> &blocks,
                     int64_t span, const CopyRate &rate, const Hand &hand, cudaStream_t s) {
  int size = 0;
  MPI_Pack_size(count, t, MPI_COMM_WORLD, &size);
  void *typed, *packed, *ref;
  CUDA(cudaMalloc(&typed, span));
  CUDA(cudaMalloc(&packed, size));
  CUDA(cudaMalloc(&ref, size));
  CUDA(bench_pack_blocklist::fill_bytes(typed, span, 12345, s) == cudaSuccess ? cudaSuccess : cudaErrorUnknown);
  CUDA(cudaStreamSynchronize(s));
  ListRow r;
  r.object = object;
  int pos = 0;
  MPI_Pack(typed, count, t, packed, size, &pos, MPI_COMM_WORLD);
  r.bytes = pos;
  {  // the packed bytes against the MPI library's own MPI_Pack of a host copy
    std::vector<unsigned char> host(static_cast<size_t>(span)), expect(static_cast<size_t>(size)),
        got(static_cast<size_t>(r.bytes));
    CUDA(cudaMemcpy(host.data(), typed, span, cudaMemcpyDeviceToHost));
    int p = 0;
    PMPI_Pack(host.data(), count, t, expect.data(), size, &p, MPI_COMM_WORLD);
    CUDA(cudaMemcpy(got.data(), packed, r.bytes, cudaMemcpyDeviceToHost));
    r.verified = p == r.bytes && std::memcmp(got.data(), expect.data(), size_t(r.bytes)) == 0;
    if (hand) {  // and the hand-written kernel's
      CUDA(cudaMemset(ref, 0, size));
      hand(typed, ref, true, s);
      CUDA(cudaStreamSynchronize(s));
      CUDA(cudaMemcpy(got.data(), ref, r.bytes, cudaMemcpyDeviceToHost));
      r.verified = r.verified && std::memcmp(got.data(), expect.data(), size_t(r.bytes)) == 0;
    }
  }
  const int reps = reps_for(r.bytes);
  r.pack = median_us([&] { int p = 0; MPI_Pack(typed, count, t, packed, size, &p, MPI_COMM_WORLD); }, reps);
  r.unpack = median_us([&] { int p = 0; MPI_Unpack(packed, size, &p, typed, count, t, MPI_COMM_WORLD); }, reps);
  r.memcpy1d = median_us([&] {
    CUDA(cudaMemcpyAsync(ref, packed, r.bytes, cudaMemcpyDeviceToDevice, s));
    CUDA(cudaStreamSynchronize(s));
  }, reps);
  if (hand) {
    r.hand_pack = median_us([&] { hand(typed, ref, true, s); CUDA(cudaStreamSynchronize(s)); }, reps);
    r.hand_unpack = median_us([&] { hand(typed, ref, false, s); CUDA(cudaStreamSynchronize(s)); }, reps);
  }
  r.dram = dram_traffic(blocks, r.bytes);
  r.roof_pack = rate.floor_us + r.dram.pack / rate.bytes_per_us;
  r.roof_unpack = rate.floor_us + r.dram.unpack / rate.bytes_per_us;
  cudaFree(typed);
  cudaFree(packed);
  cudaFree(ref);
  return r;
}

void print_list(const ListRow &r, FILE *csv) {
  auto opt = [](double v, char *buf) {
    if (v > 0) std::snprintf(buf, 32, "%8.1f", v); else std::snprintf(buf, 32, "%8s", "-");
    return buf;
  };
  char a[32], b[32];
  std::printf("%-22s %10lld %8.1f %8.1f %8.1f %5.2f %5.2f %s %s %9.1f %8.1f %5.2f %9.1f %8.1f %5.2f %s\n", r.object.c_str(),
              (long long)r.bytes, r.memcpy1d, r.pack, r.unpack, r.pack / r.memcpy1d, r.unpack / r.memcpy1d,
              opt(r.hand_pack, a), opt(r.hand_unpack, b), r.dram.pack / 1e6, r.roof_pack, r.roof_pack / r.pack,
              r.dram.unpack / 1e6, r.roof_unpack, r.roof_unpack / r.unpack, r.verified ? "yes" : "NO");
  if (csv)
    std::fprintf(csv, "%s,%lld,%.3f,%.3f,%.3f,%.3f,%.3f,%lld,%lld,%.3f,%.3f,%d\n", r.object.c_str(), (long long)r.bytes,
                 r.memcpy1d, r.pack, r.unpack, r.hand_pack, r.hand_unpack, (long long)r.dram.pack,
                 (long long)r.dram.unpack, r.roof_pack, r.roof_unpack, r.verified ? 1 : 0);
  std::fflush(stdout);
}

// Every block-list object of the table whose name holds `only`; returns false if one
// was packed wrong.
bool run_blocklists(FILE *csv, const std::string &only, cudaStream_t s) {
  const CopyRate rate = measure_copy_rate(s);
  std::printf("\nBlock lists and contiguous runs; copy floor %.1f us, copy rate %.0f GB/s (read + write)\n",
              rate.floor_us, rate.bytes_per_us / 1e3);
  std::printf("roofline: floor + DRAM bytes / rate (typed side read or written in 32-byte sectors, partial "
              "sectors read too on unpack); frac = roofline / time\n");
  std::printf("%-22s %10s %8s %8s %8s %5s %5s %8s %8s %9s %8s %5s %9s %8s %5s %s\n", "object", "bytes", "memcpy",
              "pack", "unpack", "p/m", "u/m", "hand-p", "hand-u", "DRAM-p MB", "roof-p", "frac", "DRAM-u MB", "roof-u",
              "frac", "verified");
  if (csv)
    std::fprintf(csv, "# copy_floor_us=%.3f copy_rate_GBs=%.1f\nobject,bytes,memcpy_us,pack_us,unpack_us,hand_pack_us,"
                 "hand_unpack_us,dram_pack_bytes,dram_unpack_bytes,roofline_pack_us,roofline_unpack_us,verified\n",
                 rate.floor_us, rate.bytes_per_us / 1e3);
  std::mt19937_64 rng(20261123);
  bool ok = true;
  auto row = [&](const std::string &name, MPI_Datatype t, int count, const std::vector<std::pair<int64_t, int64_t>> &blocks,
                 int64_t span, const Hand &hand = nullptr) {
    if (name.find(only) == std::string::npos) {
      MPI_Type_free(&t);
      return;
    }
    MPI_Type_commit(&t);
    const ListRow r = measure_list(name, t, count, blocks, span, rate, hand, s);
    ok = ok && r.verified;
    print_list(r, csv);
    MPI_Type_free(&t);
  };
  std::vector<std::pair<int64_t, int64_t>> blocks;
  MPI_Datatype t;

  {  // 262,144 blocks of 64 B at random sorted byte offsets in 1 GiB (16 MiB packed)
    const int n = 262144;
    std::vector<int> displs(n);
    blocks.clear();
    for (int i = 0; i < n; ++i) {
      displs[i] = i * 4096 + int(rng() % 4033);
      blocks.push_back({displs[i], 64});
    }
    MPI_Type_create_indexed_block(n, 64, displs.data(), MPI_BYTE, &t);
    const std::vector<long long> at(displs.begin(), displs.end());
    long long *dev = nullptr;
    CUDA(cudaMalloc(reinterpret_cast<void **>(&dev), at.size() * sizeof(long long)));
    CUDA(cudaMemcpy(dev, at.data(), at.size() * sizeof(long long), cudaMemcpyHostToDevice));
    const Hand hand = [dev, n](void *typed, void *packed, bool pack, cudaStream_t st) {
      CUDA(bench_pack_blocklist::blocks(typed, packed, dev, n, 64, pack, st) == cudaSuccess ? cudaSuccess
                                                                                          : cudaErrorUnknown);
    };
    row("irregular-64B-random", t, 1, blocks, int64_t(n) * 4096, hand);
    cudaFree(dev);
  }
  {  // lengths uniform in 4 B - 4 KiB, gaps of 0-255 B, any alignment (64 MiB packed)
    std::vector<int> lens;
    std::vector<MPI_Aint> displs;
    blocks.clear();
    int64_t at = 0, total = 0;
    while (total < (int64_t(64) << 20)) {
      lens.push_back(4 + int(rng() % 4093));
      displs.push_back(at);
      blocks.push_back({at, lens.back()});
      total += lens.back();
      at += lens.back() + int64_t(rng() % 256);
    }
    MPI_Type_create_hindexed(int(lens.size()), lens.data(), displs.data(), MPI_BYTE, &t);
    row("varying-4B-4KiB", t, 1, blocks, at);
  }
  {  // struct {int; double[3]; char; short[2]}, extent 40, 500,000 of them
    const int lens[] = {1, 3, 1, 2};
    const MPI_Aint displs[] = {0, 8, 32, 34};
    const MPI_Datatype types[] = {MPI_INT, MPI_DOUBLE, MPI_CHAR, MPI_SHORT};
    MPI_Datatype st;
    MPI_Type_create_struct(4, lens, displs, types, &st);
    MPI_Type_create_resized(st, 0, 40, &t);
    MPI_Type_free(&st);
    const int count = 500000;
    blocks.clear();
    for (int64_t i = 0; i < count; ++i)
      for (auto [o, l] : {std::pair<int64_t, int64_t>{0, 4}, {8, 24}, {32, 1}, {34, 4}}) blocks.push_back({40 * i + o, l});
    std::vector<int> offsets;  // the 33 packed bytes of a struct
    for (auto [o, l] : {std::pair<int, int>{0, 4}, {8, 24}, {32, 1}, {34, 4}})
      for (int b = 0; b < l; ++b) offsets.push_back(o + b);
    int *dev = nullptr;
    CUDA(cudaMalloc(reinterpret_cast<void **>(&dev), offsets.size() * sizeof(int)));
    CUDA(cudaMemcpy(dev, offsets.data(), offsets.size() * sizeof(int), cudaMemcpyHostToDevice));
    const int size = int(offsets.size());
    const Hand hand = [dev, count, size](void *typed, void *packed, bool pack, cudaStream_t st) {
      CUDA(bench_pack_blocklist::structs(typed, packed, count, 40, dev, size, nullptr, pack, st) == cudaSuccess
               ? cudaSuccess
               : cudaErrorUnknown);
    };
    row("struct-mixed", t, count, blocks, int64_t(count) * 40, hand);
    cudaFree(dev);
  }
  {  // the same struct in a 1000 x 1000 grid, the left half of every row (a subarray of structs)
    const int lens[] = {1, 3, 1, 2};
    const MPI_Aint displs[] = {0, 8, 32, 34};
    const MPI_Datatype types[] = {MPI_INT, MPI_DOUBLE, MPI_CHAR, MPI_SHORT};
    MPI_Datatype st, el;
    MPI_Type_create_struct(4, lens, displs, types, &st);
    MPI_Type_create_resized(st, 0, 40, &el);
    MPI_Type_free(&st);
    MPI_Type_vector(1000, 500, 1000, el, &t);
    MPI_Type_free(&el);
    blocks.clear();
    for (int64_t r = 0; r < 1000; ++r)
      for (int64_t c = 0; c < 500; ++c)
        for (auto [o, l] : {std::pair<int64_t, int64_t>{0, 4}, {8, 24}, {32, 1}, {34, 4}})
          blocks.push_back({40 * (r * 1000 + c) + o, l});
    row("struct-subarray", t, 1, blocks, int64_t(1000) * 1000 * 40);
  }
  {  // 500,000 of the same structs picked in order from 5 million (a particle code's send list)
    const int lens[] = {1, 3, 1, 2};
    const MPI_Aint displs[] = {0, 8, 32, 34};
    const MPI_Datatype types[] = {MPI_INT, MPI_DOUBLE, MPI_CHAR, MPI_SHORT};
    MPI_Datatype st, el;
    MPI_Type_create_struct(4, lens, displs, types, &st);
    MPI_Type_create_resized(st, 0, 40, &el);
    MPI_Type_free(&st);
    const int n = 500000;
    std::vector<int> picked(n);
    std::vector<long long> at(n);
    blocks.clear();
    for (int i = 0; i < n; ++i) {
      picked[size_t(i)] = 10 * i + int(rng() % 10);
      at[size_t(i)] = picked[size_t(i)];
      for (auto [o, l] : {std::pair<int64_t, int64_t>{0, 4}, {8, 24}, {32, 1}, {34, 4}})
        blocks.push_back({40 * int64_t(picked[size_t(i)]) + o, l});
    }
    MPI_Type_create_indexed_block(n, 1, picked.data(), el, &t);
    MPI_Type_free(&el);
    std::vector<int> offsets;
    for (auto [o, l] : {std::pair<int, int>{0, 4}, {8, 24}, {32, 1}, {34, 4}})
      for (int b = 0; b < l; ++b) offsets.push_back(o + b);
    int *dev = nullptr;
    long long *dev_at = nullptr;
    CUDA(cudaMalloc(reinterpret_cast<void **>(&dev), offsets.size() * sizeof(int)));
    CUDA(cudaMemcpy(dev, offsets.data(), offsets.size() * sizeof(int), cudaMemcpyHostToDevice));
    CUDA(cudaMalloc(reinterpret_cast<void **>(&dev_at), at.size() * sizeof(long long)));
    CUDA(cudaMemcpy(dev_at, at.data(), at.size() * sizeof(long long), cudaMemcpyHostToDevice));
    const int size = int(offsets.size());
    const Hand hand = [dev, dev_at, n, size](void *typed, void *packed, bool pack, cudaStream_t st) {
      CUDA(bench_pack_blocklist::structs(typed, packed, n, 40, dev, size, dev_at, pack, st) == cudaSuccess
               ? cudaSuccess
               : cudaErrorUnknown);
    };
    row("gather-structs", t, 1, blocks, int64_t(10) * n * 40, hand);
    cudaFree(dev);
    cudaFree(dev_at);
  }
  {  // 2 Mi doubles picked in order from 16 Mi (selected mesh nodes; adjacent picks make longer blocks)
    const int n = 1 << 21;
    std::vector<int> picked(n);
    std::vector<long long> at(n);
    blocks.clear();
    for (int i = 0; i < n; ++i) {
      picked[size_t(i)] = 8 * i + int(rng() % 8);
      at[size_t(i)] = picked[size_t(i)];
      blocks.push_back({8 * int64_t(picked[size_t(i)]), 8});
    }
    MPI_Type_create_indexed_block(n, 1, picked.data(), MPI_DOUBLE, &t);
    long long *dev_at = nullptr;
    CUDA(cudaMalloc(reinterpret_cast<void **>(&dev_at), at.size() * sizeof(long long)));
    CUDA(cudaMemcpy(dev_at, at.data(), at.size() * sizeof(long long), cudaMemcpyHostToDevice));
    const Hand hand = [dev_at, n](void *typed, void *packed, bool pack, cudaStream_t st) {
      CUDA(bench_pack_blocklist::doubles(typed, packed, dev_at, n, pack, st) == cudaSuccess ? cudaSuccess
                                                                                             : cudaErrorUnknown);
    };
    row("gather-doubles", t, 1, blocks, int64_t(8) * n * 8, hand);
    cudaFree(dev_at);
  }
  {  // indexed (8192 entries of 1-3 vectors) of vector(64, 4, 8, MPI_FLOAT)
    MPI_Datatype v;
    MPI_Type_vector(64, 4, 8, MPI_FLOAT, &v);
    const int n = 8192;
    const int64_t vext = (63 * 8 + 4) * 4;
    std::vector<int> lens(n), displs(n);
    blocks.clear();
    int at = 0;
    for (int i = 0; i < n; ++i) {
      lens[i] = 1 + int(rng() % 3);
      displs[i] = at;
      for (int k = 0; k < lens[i]; ++k)
        for (int64_t e = 0; e < 64; ++e) blocks.push_back({(at + k) * vext + e * 32, 16});
      at += lens[i] + int(rng() % 2);
    }
    MPI_Type_indexed(n, lens.data(), displs.data(), v, &t);
    MPI_Type_free(&v);
    row("indexed-of-vectors", t, 1, blocks, int64_t(at) * vext);
  }
  {  // indexed (512 entries of 1-3) of vector(16, 256, 320, MPI_FLOAT): 1 KiB blocks (long-block kernel)
    MPI_Datatype v;
    MPI_Type_vector(16, 256, 320, MPI_FLOAT, &v);
    const int n = 512;
    const int64_t vext = (15 * 320 + 256) * 4;
    std::vector<int> lens(n), displs(n);
    blocks.clear();
    int at = 0;
    for (int i = 0; i < n; ++i) {
      lens[i] = 1 + int(rng() % 3);
      displs[i] = at;
      for (int k = 0; k < lens[i]; ++k)
        for (int64_t e = 0; e < 16; ++e) blocks.push_back({(at + k) * vext + e * 1280, 1024});
      at += lens[i] + int(rng() % 2);
    }
    MPI_Type_indexed(n, lens.data(), displs.data(), v, &t);
    MPI_Type_free(&v);
    row("indexed-of-long-vectors", t, 1, blocks, int64_t(at) * vext);
  }
  for (int64_t rows : {int64_t(2), int64_t(2048), int64_t(131072)}) {  // one contiguous run: 1 KiB, 1 MiB, 64 MiB
    MPI_Type_vector(int(rows), 512, 512, MPI_BYTE, &t);
    blocks = {{0, rows * 512}};
    row("contiguous-" + std::to_string(rows * 512 >> 10) + "KiB", t, 1, blocks, rows * 512);
  }
  for (int64_t n : {int64_t(2000), int64_t(4000)})  // column-major triangles of doubles, one column per block
    for (bool lower : {true, false}) {
      std::vector<int> lens(static_cast<size_t>(n)), displs(static_cast<size_t>(n));
      blocks.clear();
      for (int64_t j = 0; j < n; ++j) {
        lens[size_t(j)] = int(lower ? n - j : j + 1);
        displs[size_t(j)] = int(lower ? j * n + j : j * n);
        blocks.push_back({8 * int64_t(displs[size_t(j)]), 8 * int64_t(lens[size_t(j)])});
      }
      MPI_Type_indexed(int(n), lens.data(), displs.data(), MPI_DOUBLE, &t);
      const Hand hand = [n, lower](void *typed, void *packed, bool pack, cudaStream_t st) {
        CUDA(bench_pack_blocklist::triangle(static_cast<double *>(typed), static_cast<double *>(packed), n, lower, pack,
                                            st) == cudaSuccess ? cudaSuccess : cudaErrorUnknown);
      };
      row(std::string(lower ? "lower" : "upper") + "-triangle-" + std::to_string(n), t, 1, blocks, n * n * 8, hand);
    }
  return ok;
}

}  // namespace

int main(int argc, char **argv) {
  const char *usage =
    "usage: bench_pack [--csv FILE] [--blocklist-csv FILE] [--rows all|strided|blocklist|reorder]\n"
    "                  [--only NAME] [--quick] [--reorder]   (one rank, a GPU)\n"
    "\n"
    "MPI_Pack / MPI_Unpack of GPU objects through TEMPI against cudaMemcpyAsync of the packed\n"
    "size, cudaMemcpy2DAsync of the same object and one copy per block; transposes and a 3-D\n"
    "permutation against a hand-written tiled kernel; medians after warm-up.\n"
    "Block lists and contiguous runs: against memcpy, a hand-written kernel (triangles) and\n"
    "the roofline (DRAM bytes at the copy rate measured in the same run).\n"
    "  --csv FILE            also write the strided and reorder tables as CSV (docs/results/,\n"
    "                        tools/plot_bench.py)\n"
    "  --blocklist-csv FILE  also write the block-list table as CSV\n"
    "  --rows WHICH          strided (2-D objects, halo faces), blocklist, reorder (transposes\n"
    "                        and the permutation), or all (default)\n"
    "  --reorder             the same as --rows reorder\n"
    "  --only NAME           only the block-list objects whose names hold NAME (for profilers)\n"
    "  --quick               fewer strided objects\n";
  if (tempi::tools::print_help_if_asked(argc, argv, usage)) return 0;
  if (tempi::tools::reject_unknown(argc, argv, {"--quick", "--reorder"}, {"--csv", "--blocklist-csv", "--rows", "--only"}, usage)) return 2;
  MPI_Init(&argc, &argv);
  FILE *csv = nullptr, *blocklist_csv = nullptr;
  bool quick = false, reorder_only = false;
  std::string rows = "all", only;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--csv") && i + 1 < argc) csv = std::fopen(argv[++i], "w");
    if (!std::strcmp(argv[i], "--blocklist-csv") && i + 1 < argc) blocklist_csv = std::fopen(argv[++i], "w");
    if (!std::strcmp(argv[i], "--rows") && i + 1 < argc) rows = argv[++i];
    if (!std::strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
    if (!std::strcmp(argv[i], "--quick")) quick = true;
    if (!std::strcmp(argv[i], "--reorder")) reorder_only = true;
  }
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    std::printf("bench_pack: no GPU on this machine; nothing to measure\n");
    MPI_Finalize();
    return 0;
  }
  cudaDeviceProp prop;
  CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("bench_pack on %s; times in microseconds (median, each call synchronized)\n", prop.name);
  std::printf("ratios: memcpy/pack (1 = pack as fast as a contiguous device copy of the packed bytes), "
              "2D/pack, per-block/pack\n");
  cudaStream_t s;
  CUDA(cudaStreamCreate(&s));
  if (reorder_only) rows = "reorder";
  const bool strided = rows == "all" || rows == "strided";  // the 2-D objects and halo faces
  const CopyRate rate = strided ? measure_copy_rate(s) : CopyRate{};
  if (strided)
    std::printf("strided rows' roofline: floor %.1f us + DRAM bytes / %.0f GB/s (read + write; typed side read in "
                "64-byte bursts, written in 32-byte sectors); DRAM-u: unpack's bytes; frac = roofline / time\n",
                rate.floor_us, rate.bytes_per_us / 1e3);
  std::printf("%-10s %-8s %6s %6s %3s %10s %9s %7s %9s %9s %10s %10s %5s %5s %10s %9s %8s %5s %8s %5s\n", "object",
              "desc", "block", "pitch", "cnt", "bytes", "pack", "GB/s", "unpack", "memcpy", "memcpy2D", "per-block",
              "m/p", "2D/p", "blk/p", "DRAM-u MB", "roof-p", "frac", "roof-u", "frac");
  if (csv)
    std::fprintf(csv, "object,desc,block,pitch,count,bytes,pack_us,unpack_us,memcpy_us,memcpy2d_us,per_block_us,"
                      "hand_pack_us,hand_unpack_us,dram_pack_bytes,dram_unpack_bytes,roofline_pack_us,"
                      "roofline_unpack_us\n");

  const std::vector<int64_t> totals = !strided ? std::vector<int64_t>{}
                                      : quick  ? std::vector<int64_t>{1 << 10, 64 << 20}
                                               : std::vector<int64_t>{1 << 10, 1 << 20, 4 << 20, 64 << 20};
  const std::vector<int64_t> blocks = quick ? std::vector<int64_t>{8, 64, 512}
                                            : std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64, 128, 256, 512};
  for (int64_t total : totals)
    for (int64_t block : blocks)
      for (int64_t pitch : {int64_t(512), 2 * block}) {
        if (pitch < block || (pitch == 512 && block == 512 && pitch == 2 * block)) continue;
        for (int count : {1, 2}) {
          const int64_t rows = total / block / count;
          if (rows < 1) continue;
          const int64_t span = rows * pitch * count;
          if (span > (int64_t(4) << 30)) continue;  // beyond 4 GiB of typed memory: not measured
          for (const char *how : {"vector", "hvector", "subarray"}) {
            MPI_Datatype t = make_2d(how, rows, block, pitch);
            print(measure("2d", how, t, count, count == 1 ? rows : 0, block, pitch, span, {0, rows, block, pitch}, rate,
                          s),
                  csv);
            MPI_Type_free(&t);
          }
        }
      }

  // Halo faces (radius 2) of a 512^3 grid of floats.
  const int n = 512, r = 2;
  const char *names[] = {"-x", "+x", "-y", "+y", "-z", "+z"};
  for (int f = 0; strided && f < 6; ++f) {
    const int axis = f / 2;  // 0: x (fastest), 1: y, 2: z
    int sizes[3] = {n, n, n}, sub[3] = {n, n, n}, start[3] = {0, 0, 0};
    const int d = 2 - axis;  // C order: index 2 is x
    sub[d] = r;
    start[d] = f % 2 ? n - r : 0;
    MPI_Datatype t;
    MPI_Type_create_subarray(3, sizes, sub, start, MPI_ORDER_C, MPI_FLOAT, &t);
    MPI_Type_commit(&t);
    const int64_t block = axis == 0 ? r * 4 : axis == 1 ? int64_t(r) * n * 4 : int64_t(r) * n * n * 4;
    // x: a block per row of the grid; y: a block per plane; z: one block
    const int64_t row_pitch = axis == 0 ? int64_t(n) * 4 : int64_t(n) * n * 4;
    const int64_t nrows = axis == 0 ? int64_t(n) * n : axis == 1 ? n : 1;
    const int64_t first = f % 2 ? int64_t(n - r) * (axis == 0 ? 4 : axis == 1 ? int64_t(n) * 4 : int64_t(n) * n * 4) : 0;
    print(measure(std::string("halo") + names[f], "subarray", t, 1, 0, block, 0, int64_t(n) * n * n * 4,
                  {first, nrows, block, row_pitch}, rate, s),
          csv);
    MPI_Type_free(&t);
  }
  const bool verified = !(rows == "all" || rows == "reorder") || reorder_rows(csv, s);
  if (csv) std::fclose(csv);
  const bool packed_right = !(rows == "all" || rows == "blocklist") || run_blocklists(blocklist_csv, only, s);
  if (blocklist_csv) std::fclose(blocklist_csv);
  cudaStreamDestroy(s);
  MPI_Finalize();
  return verified && packed_right ? 0 : 1;
}
