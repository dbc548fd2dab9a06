// MPI_Pack / MPI_Unpack of GPU objects through TEMPI, against the baselines measured
// in the same run: one device-to-device cudaMemcpyAsync of the packed size (the
// physical reference), cudaMemcpy2DAsync of the same 2-D object, and one
// cudaMemcpyAsync per block (what an MPI without GPU kernels does; measured up to
// 4096 blocks). Every time is the median of repeated calls, each ended by a
// synchronization, after warm-up.
//   bench_pack [--csv FILE] [--quick]
#include <cuda_runtime_api.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>
#include "help.hpp"

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

struct Row {
  std::string object, desc;
  int64_t block, pitch, count, bytes;
  double pack, unpack, memcpy1d, memcpy2d, per_block;
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

Row measure(const std::string &object, const std::string &how, MPI_Datatype t, int count, int64_t rows,
            int64_t block, int64_t pitch, int64_t span, cudaStream_t s) {
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
  cudaFree(typed);
  cudaFree(packed);
  cudaFree(ref);
  return r;
}

void print(const Row &r, FILE *csv) {
  auto gbs = [&](double us) { return us > 0 ? r.bytes / us / 1e3 : 0.0; };
  auto opt = [](double v, char *buf) {
    if (v > 0) std::snprintf(buf, 32, "%10.1f", v); else std::snprintf(buf, 32, "%10s", "-");
    return buf;
  };
  char a[32], b[32], c[32];
  std::printf("%-10s %-8s %6lld %6lld %3lld %10lld %9.1f %7.1f %9.1f %9.1f %s %s %5.2f %5.2f %s\n", r.object.c_str(),
              r.desc.c_str(), (long long)r.block, (long long)r.pitch, (long long)r.count, (long long)r.bytes,
              r.pack, gbs(r.pack), r.unpack, r.memcpy1d, opt(r.memcpy2d, a), opt(r.per_block, b),
              r.memcpy1d / r.pack, r.memcpy2d > 0 ? r.memcpy2d / r.pack : 0.0, opt(r.per_block > 0 ? r.per_block / r.pack : 0, c));
  if (csv)
    std::fprintf(csv, "%s,%s,%lld,%lld,%lld,%lld,%.3f,%.3f,%.3f,%.3f,%.3f\n", r.object.c_str(), r.desc.c_str(),
                 (long long)r.block, (long long)r.pitch, (long long)r.count, (long long)r.bytes, r.pack, r.unpack,
                 r.memcpy1d, r.memcpy2d, r.per_block);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char **argv) {
  if (tempi::tools::print_help_if_asked(argc, argv,
    "usage: bench_pack [--csv FILE] [--quick]   (one rank, a GPU)\n"
    "\n"
    "MPI_Pack / MPI_Unpack of GPU objects through TEMPI against cudaMemcpyAsync of the packed\n"
    "size, cudaMemcpy2DAsync of the same object and one copy per block; medians after warm-up.\n"
    "  --csv FILE   also write the table as CSV (docs/results/, tools/plot_bench.py)\n"
    "  --quick      fewer objects\n"))
    return 0;
  MPI_Init(&argc, &argv);
  FILE *csv = nullptr;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--csv") && i + 1 < argc) csv = std::fopen(argv[++i], "w");
    if (!std::strcmp(argv[i], "--quick")) quick = true;
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
  std::printf("%-10s %-8s %6s %6s %3s %10s %9s %7s %9s %9s %10s %10s %5s %5s %10s\n", "object", "desc", "block",
              "pitch", "cnt", "bytes", "pack", "GB/s", "unpack", "memcpy", "memcpy2D", "per-block", "m/p", "2D/p",
              "blk/p");
  if (csv) std::fprintf(csv, "object,desc,block,pitch,count,bytes,pack_us,unpack_us,memcpy_us,memcpy2d_us,per_block_us\n");
  cudaStream_t s;
  CUDA(cudaStreamCreate(&s));

  const std::vector<int64_t> totals = quick ? std::vector<int64_t>{1 << 10, 64 << 20}
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
            print(measure("2d", how, t, count, count == 1 ? rows : 0, block, pitch, span, s), csv);
            MPI_Type_free(&t);
          }
        }
      }

  // Halo faces (radius 2) of a 512^3 grid of floats.
  const int n = 512, r = 2;
  const char *names[] = {"-x", "+x", "-y", "+y", "-z", "+z"};
  for (int f = 0; f < 6; ++f) {
    const int axis = f / 2;  // 0: x (fastest), 1: y, 2: z
    int sizes[3] = {n, n, n}, sub[3] = {n, n, n}, start[3] = {0, 0, 0};
    const int d = 2 - axis;  // C order: index 2 is x
    sub[d] = r;
    start[d] = f % 2 ? n - r : 0;
    MPI_Datatype t;
    MPI_Type_create_subarray(3, sizes, sub, start, MPI_ORDER_C, MPI_FLOAT, &t);
    MPI_Type_commit(&t);
    const int64_t block = axis == 0 ? r * 4 : axis == 1 ? int64_t(r) * n * 4 : int64_t(r) * n * n * 4;
    print(measure(std::string("halo") + names[f], "subarray", t, 1, 0, block, 0, int64_t(n) * n * n * 4, s), csv);
    MPI_Type_free(&t);
  }
  if (csv) std::fclose(csv);
  cudaStreamDestroy(s);
  MPI_Finalize();
  return 0;
}
