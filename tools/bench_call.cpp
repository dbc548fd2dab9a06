// The fixed cost of one MPI_Pack / MPI_Unpack on GPU buffers (issues 11 and 17): small
// objects, where the call's bookkeeping, its launch and its synchronization are most of
// the time, beside what an application would do instead, measured in the same run.
//
// Per object (device typed buffer, device packed buffer), medians over --iters calls,
// each timed on the host clock around the call (a synchronous call includes its wait):
//   hand        a hand-written strided copy kernel (tools/bench_call_kernels.cu) or, for
//               a contiguous object, cudaMemcpyAsync; launch and cudaStreamSynchronize
//   pack        MPI_Pack through TEMPI (its synchronization included)
//   unpack      MPI_Unpack through TEMPI
//   hand x64    64 launches of the hand kernel back to back and one synchronization,
//               per launch: what a phase of packs costs an application
//   pack x64    64 MPI_Pack calls back to back, an MPI_Barrier on MPI_COMM_SELF (the next
//               MPI call, which launches what TEMPI_DEFER_PACK=2 queued) and one
//               cudaDeviceSynchronize, per call:
//               equal to `pack` by default; with TEMPI_DEFER_PACK=1 or 2 the calls do not
//               wait, and this is their issue cost (docs/using.md)
// and once per run the floors: an empty kernel with its completion seen by
// cudaStreamSynchronize, by polling cudaStreamQuery, by an event, by polling a word of
// mapped host memory the kernel writes, and by polling one that cuStreamWriteValue32
// writes after it; an empty launch alone; one cudaPointerGetAttributes. Before timing, each object's TEMPI pack is checked
// byte for byte against the hand kernel's output (poisoned buffers) and its unpack
// against the original data.
//
//   mpiexec -n 1 bench_call [--iters 2000] [--csv FILE]
#include <cuda.h>          // types of cuStreamWriteValue32, reached through cudart
#include <cuda_runtime.h>  // the typed cudaMalloc and cudaHostAlloc templates
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

#include "backend.hpp"
#include "gpu_select.hpp"
#include "help.hpp"

namespace bench_call {
int launch_empty(cudaStream_t stream);
int launch_flag(unsigned *flag, unsigned value, cudaStream_t stream);
int launch_strided(const void *typed, void *packed, int64_t block, const int64_t counts[3], const int64_t strides[3],
                   bool to_packed, cudaStream_t stream);
}  // namespace bench_call

namespace {

const char kUsage[] =
    "usage: mpiexec -n 1 bench_call [--iters N] [--csv FILE]\n"
    "The fixed cost of one MPI_Pack/MPI_Unpack on small GPU objects beside a hand-written\n"
    "kernel's launch and synchronization, measured in the same run (median microseconds).\n"
    "  --iters N   timed calls per measurement (default 2000, after N/10 warm-up calls)\n"
    "  --csv FILE  also write the table as CSV\n"
    "With TEMPI_DEFER_PACK=1 or 2 the 'pack x64' column is the cost of issuing a call;\n"
    "TEMPI_WAIT=sync or poll chooses how TEMPI's synchronous calls wait.\n";

#define CUDA(x)                                                                                                  \
  do {                                                                                                           \
    const cudaError_t e_ = (x);                                                                                  \
    if (e_ != cudaSuccess) {                                                                                     \
      std::fprintf(stderr, "bench_call: %s failed: %s (%s:%d)\n", #x, cudaGetErrorString(e_), __FILE__, __LINE__); \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                                              \
    }                                                                                                            \
  } while (0)

#define MPI(x)                                                                          \
  do {                                                                                  \
    if ((x) != MPI_SUCCESS) {                                                           \
      std::fprintf(stderr, "bench_call: %s failed (%s:%d)\n", #x, __FILE__, __LINE__); \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                     \
    }                                                                                   \
  } while (0)

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median microseconds of `body` over `iters` timed runs after iters/10 untimed ones.
double time_us(int iters, const std::function<void()> &body) {
  for (int i = 0; i < std::max(1, iters / 10); ++i) body();
  std::vector<double> t;
  t.reserve(size_t(iters));
  for (int i = 0; i < iters; ++i) {
    const auto t0 = Clock::now();
    body();
    t.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  return median(t);
}

// An object: an MPI datatype and the same bytes as the hand kernel walks them.
struct Object {
  std::string name;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  int64_t typed_bytes = 0;  // the typed buffer's size
  int64_t offset = 0;       // first byte of the object in the typed buffer
  int64_t block = 0;        // hand kernel: bytes per block
  int64_t counts[3] = {1, 1, 1}, strides[3] = {0, 0, 0};
  bool contiguous = false;  // hand: one cudaMemcpyAsync
  int64_t packed_bytes() const { return block * counts[0] * counts[1] * counts[2]; }
};

Object vector_object(const char *name, int rows, int width, int pitch) {
  Object o;
  o.name = name;
  MPI(MPI_Type_vector(rows, width, pitch, MPI_BYTE, &o.type));
  o.typed_bytes = int64_t(rows) * pitch;
  o.block = width;
  o.counts[0] = rows;
  o.strides[0] = pitch;
  return o;
}

// The face of an n^3 interior with one ghost layer, Fortran order, doubles, normal to `axis`.
Object face_object(const char *name, int n, int axis) {
  Object o;
  o.name = name;
  const int full = n + 2;
  int sizes[3] = {full, full, full}, sub[3] = {n, n, n}, start[3] = {1, 1, 1};
  sub[axis] = 1;
  MPI(MPI_Type_create_subarray(3, sizes, sub, start, MPI_ORDER_FORTRAN, MPI_DOUBLE, &o.type));
  o.typed_bytes = int64_t(full) * full * full * 8;
  o.offset = (1 + full + int64_t(full) * full) * 8;
  const int64_t row = int64_t(full) * 8, plane = row * full;
  if (axis == 0) {  // one double per row
    o.block = 8;
    o.counts[0] = n;
    o.strides[0] = row;
    o.counts[1] = n;
    o.strides[1] = plane;
  } else if (axis == 1) {  // rows of n doubles, one per plane
    o.block = 8 * n;
    o.counts[0] = n;
    o.strides[0] = plane;
  } else {  // n rows of n doubles in one plane
    o.block = 8 * n;
    o.counts[0] = n;
    o.strides[0] = row;
  }
  return o;
}

Object contiguous_object(const char *name, int bytes) {
  Object o;
  o.name = name;
  MPI(MPI_Type_contiguous(bytes, MPI_BYTE, &o.type));
  o.typed_bytes = bytes;
  o.block = bytes;
  o.contiguous = true;
  return o;
}

struct Row {
  std::string name;
  int64_t bytes;
  double hand, pack, unpack, hand64, pack64, syncs_per_pack;
};

constexpr int kBurst = 64;

}  // namespace

int main(int argc, char **argv) {
  if (tempi::tools::print_help_if_asked(argc, argv, kUsage)) return 0;
  int iters = 2000;
  const char *csv_path = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--iters") && i + 1 < argc)
      iters = std::max(10, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--csv") && i + 1 < argc)
      csv_path = argv[++i];
    else {
      std::fprintf(stderr, "bench_call: unknown argument %s\n%s", argv[i], kUsage);
      return 2;
    }
  }
  tempi::tools::select_gpu_before_mpi_init();
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (!tempi::gpu_backend().has_gpu()) {
    if (rank == 0) std::printf("bench_call: no GPU here; nothing to measure\n");
    MPI_Finalize();
    return 0;
  }
  if (rank != 0) {  // one process measures; others only keep the launcher happy
    MPI_Finalize();
    return 0;
  }

  cudaStream_t stream;
  CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const double floor_sync = time_us(iters, [&] {
    CUDA(cudaError_t(bench_call::launch_empty(stream)));
    CUDA(cudaStreamSynchronize(stream));
  });
  const double launch_only = time_us(iters / kBurst + 1, [&] {
                               for (int k = 0; k < kBurst; ++k) bench_call::launch_empty(stream);
                             }) / kBurst;
  CUDA(cudaStreamSynchronize(stream));
  // The same empty launch, its completion seen by polling a word of mapped host memory
  // that the kernel writes last, instead of cudaStreamSynchronize.
  unsigned *flag = nullptr, *flag_dev = nullptr;
  CUDA(cudaHostAlloc(&flag, sizeof(unsigned), cudaHostAllocMapped));
  CUDA(cudaHostGetDevicePointer(reinterpret_cast<void **>(&flag_dev), flag, 0));
  *flag = 0;
  unsigned flag_value = 0;
  const double floor_flag = time_us(iters, [&] {
    ++flag_value;
    CUDA(cudaError_t(bench_call::launch_flag(flag_dev, flag_value, stream)));
    while (*static_cast<volatile unsigned *>(flag) != flag_value) {
    }
  });
  CUDA(cudaStreamSynchronize(stream));
  // The same, polling cudaStreamQuery until the stream is idle.
  const double floor_query = time_us(iters, [&] {
    CUDA(cudaError_t(bench_call::launch_empty(stream)));
    cudaError_t e;
    while ((e = cudaStreamQuery(stream)) == cudaErrorNotReady) {
    }
    CUDA(e);
  });
  // An event recorded after the kernel and waited for.
  cudaEvent_t event;
  CUDA(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  const double floor_event = time_us(iters, [&] {
    CUDA(cudaError_t(bench_call::launch_empty(stream)));
    CUDA(cudaEventRecord(event, stream));
    CUDA(cudaEventSynchronize(event));
  });
  CUDA(cudaEventDestroy(event));
  // A stream memory operation (cuStreamWriteValue32) after the kernel writes the word the
  // host polls: completion seen through host memory with unchanged kernels.
  using WriteValue = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
  void *write_fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  double floor_write = -1;
  if (cudaGetDriverEntryPointByVersion("cuStreamWriteValue32", &write_fn, 12000, cudaEnableDefault, &found) ==
          cudaSuccess &&
      found == cudaDriverEntryPointSuccess) {
    const auto write_value = reinterpret_cast<WriteValue>(write_fn);
    bool ok = true;
    floor_write = time_us(iters, [&] {
      ++flag_value;
      CUDA(cudaError_t(bench_call::launch_empty(stream)));
      if (write_value(stream, reinterpret_cast<CUdeviceptr>(flag_dev), flag_value, 0) != CUDA_SUCCESS) {
        ok = false;
        return;
      }
      while (*static_cast<volatile unsigned *>(flag) != flag_value) {
      }
    });
    if (!ok) floor_write = -1;
  }
  cudaGetLastError();
  CUDA(cudaStreamSynchronize(stream));
  CUDA(cudaFreeHost(flag));
  void *probe = nullptr;
  CUDA(cudaMalloc(&probe, 256));
  const double query = time_us(iters / kBurst + 1, [&] {
                         for (int k = 0; k < kBurst; ++k) {
                           cudaPointerAttributes a;
                           cudaPointerGetAttributes(&a, probe);
                         }
                       }) / kBurst;
  CUDA(cudaFree(probe));

  std::vector<Object> objects;
  objects.push_back(vector_object("2-D 1 KiB (16 x 64 B, pitch 128 B)", 16, 64, 128));
  objects.push_back(vector_object("2-D 64 KiB (512 x 128 B, pitch 256 B)", 512, 128, 256));
  objects.push_back(face_object("x-face of 64^3 doubles (4096 x 8 B)", 64, 0));
  objects.push_back(face_object("z-face of 64^3 doubles (64 x 512 B)", 64, 2));
  objects.push_back(face_object("x-face of 256^3 doubles (65536 x 8 B)", 256, 0));
  objects.push_back(contiguous_object("contiguous 4 KiB", 4096));

  std::vector<Row> rows;
  for (Object &o : objects) {
    MPI(MPI_Type_commit(&o.type));
    const int64_t packed = o.packed_bytes();
    int size = 0;
    MPI(MPI_Type_size(o.type, &size));
    if (size != packed) {
      std::fprintf(stderr, "bench_call: %s: MPI_Type_size %d, hand kernel %lld bytes\n", o.name.c_str(), size,
                   (long long)packed);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    // Typed data: a byte pattern that differs everywhere; packed buffers for one burst.
    std::vector<unsigned char> host(size_t(o.typed_bytes));
    for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<unsigned char>((i * 131 + 7) % 251);
    char *typed = nullptr, *out = nullptr, *hand_out = nullptr;
    CUDA(cudaMalloc(&typed, size_t(o.typed_bytes)));
    CUDA(cudaMalloc(&out, size_t(packed) * kBurst));
    CUDA(cudaMalloc(&hand_out, size_t(packed) * kBurst));
    CUDA(cudaMemcpy(typed, host.data(), host.size(), cudaMemcpyHostToDevice));
    char *object = typed + o.offset;
    auto hand = [&](char *dst, bool to_packed) {
      if (o.contiguous)
        CUDA(to_packed ? cudaMemcpyAsync(dst, object, size_t(packed), cudaMemcpyDeviceToDevice, stream)
                       : cudaMemcpyAsync(object, dst, size_t(packed), cudaMemcpyDeviceToDevice, stream));
      else
        CUDA(cudaError_t(bench_call::launch_strided(object, dst, o.block, o.counts, o.strides, to_packed, stream)));
    };
    auto pack = [&](char *dst) {
      int position = 0;
      MPI(MPI_Pack(typed, 1, o.type, dst, int(packed), &position, MPI_COMM_WORLD));
    };
    auto unpack = [&](const char *src) {
      int position = 0;
      MPI(MPI_Unpack(src, int(packed), &position, typed, 1, o.type, MPI_COMM_WORLD));
    };

    // Correctness: TEMPI's packed bytes are the hand kernel's, and unpacking them back
    // over a poisoned object restores the original.
    CUDA(cudaMemset(out, 0xA5, size_t(packed)));
    CUDA(cudaMemset(hand_out, 0x5A, size_t(packed)));
    pack(out);
    hand(hand_out, true);
    CUDA(cudaStreamSynchronize(stream));
    std::vector<char> a(static_cast<size_t>(packed)), b(static_cast<size_t>(packed));
    CUDA(cudaMemcpy(a.data(), out, a.size(), cudaMemcpyDeviceToHost));
    CUDA(cudaMemcpy(b.data(), hand_out, b.size(), cudaMemcpyDeviceToHost));
    if (a != b) {
      std::fprintf(stderr, "bench_call: %s: MPI_Pack's bytes differ from the hand kernel's\n", o.name.c_str());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    CUDA(cudaMemset(hand_out, 0xEE, size_t(packed)));
    hand(hand_out, false);  // poisons the object's bytes
    CUDA(cudaStreamSynchronize(stream));
    unpack(out);
    CUDA(cudaDeviceSynchronize());
    std::vector<unsigned char> back(host.size());
    CUDA(cudaMemcpy(back.data(), typed, back.size(), cudaMemcpyDeviceToHost));
    if (back != host) {
      std::fprintf(stderr, "bench_call: %s: MPI_Unpack did not restore the object\n", o.name.c_str());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }

    Row r;
    r.name = o.name;
    r.bytes = packed;
    r.hand = time_us(iters, [&] {
      hand(hand_out, true);
      CUDA(cudaStreamSynchronize(stream));
    });
    const uint64_t syncs_before = tempi::gpu_backend().synchronizations();
    r.pack = time_us(iters, [&] { pack(out); });
    r.syncs_per_pack =
        double(tempi::gpu_backend().synchronizations() - syncs_before) / double(iters + std::max(1, iters / 10));
    r.unpack = time_us(iters, [&] { unpack(out); });
    r.hand64 = time_us(iters / kBurst + 1, [&] {
                 for (int k = 0; k < kBurst; ++k) hand(hand_out + k * packed, true);
                 CUDA(cudaStreamSynchronize(stream));
               }) / kBurst;
    r.pack64 = time_us(iters / kBurst + 1, [&] {
                 for (int k = 0; k < kBurst; ++k) pack(out + k * packed);
                 MPI(MPI_Barrier(MPI_COMM_SELF));  // TEMPI_DEFER_PACK=2 launches queued packs here
                 CUDA(cudaDeviceSynchronize());
               }) / kBurst;
    rows.push_back(r);
    CUDA(cudaFree(typed));
    CUDA(cudaFree(out));
    CUDA(cudaFree(hand_out));
    MPI(MPI_Type_free(&o.type));
  }

  char when[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(when, sizeof when, "%Y-%m-%d", std::gmtime(&now));
  const char *defer = std::getenv("TEMPI_DEFER_PACK");
  const char *wait = std::getenv("TEMPI_WAIT");
  std::printf("bench_call on %s, %s, TEMPI_DEFER_PACK=%s, TEMPI_WAIT=%s, median of %d calls (us)\n",
              tempi::gpu_backend().device_name().c_str(), when, defer ? defer : "unset", wait ? wait : "unset", iters);
  std::printf("floors: an empty kernel and its completion seen by cudaStreamSynchronize %.2f us, by polling "
              "cudaStreamQuery %.2f us, by cudaEventRecord + cudaEventSynchronize %.2f us, by polling host memory "
              "the kernel writes %.2f us, by polling host memory cuStreamWriteValue32 writes %.2f us (-1: not "
              "available)\nempty launch alone %.2f us; cudaPointerGetAttributes %.3f us\n",
              floor_sync, floor_query, floor_event, floor_flag, floor_write, launch_only, query);
  std::printf("%-40s %9s %7s %7s %7s %8s %8s %6s %6s\n", "object", "bytes", "hand", "pack", "unpack", "hand x64",
              "pack x64", "pack/h", "syncs");
  for (const Row &r : rows)
    std::printf("%-40s %9lld %7.2f %7.2f %7.2f %8.2f %8.2f %6.2f %6.2f\n", r.name.c_str(), (long long)r.bytes, r.hand,
                r.pack, r.unpack, r.hand64, r.pack64, r.pack / r.hand, r.syncs_per_pack);
  if (csv_path) {
    FILE *csv = std::fopen(csv_path, "w");
    if (!csv) {
      std::fprintf(stderr, "bench_call: cannot write %s\n", csv_path);
    } else {
      std::fprintf(csv, "# bench_call %s %s TEMPI_DEFER_PACK=%s TEMPI_WAIT=%s floor_sync_us=%.3f floor_query_us=%.3f "
                   "floor_event_us=%.3f floor_flag_us=%.3f floor_write_value_us=%.3f launch_us=%.3f query_us=%.4f\n",
                   tempi::gpu_backend().device_name().c_str(), when, defer ? defer : "unset", wait ? wait : "unset",
                   floor_sync, floor_query,
                   floor_event, floor_flag, floor_write, launch_only, query);
      std::fprintf(csv, "object,bytes,hand_us,pack_us,unpack_us,hand_x64_us,pack_x64_us,syncs_per_pack\n");
      for (const Row &r : rows)
        std::fprintf(csv, "\"%s\",%lld,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f\n", r.name.c_str(), (long long)r.bytes, r.hand,
                     r.pack, r.unpack, r.hand64, r.pack64, r.syncs_per_pack);
      std::fclose(csv);
    }
  }
  CUDA(cudaStreamDestroy(stream));
  MPI_Finalize();
  return 0;
}
