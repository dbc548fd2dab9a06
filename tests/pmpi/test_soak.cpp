// A long run stays correct and bounded (docs/using.md, "Errors and long runs"): two
// ranks create, use and free many random datatypes (the MPI library reuses their
// handles) and exchange many nonblocking GPU messages of them, with the methods and the
// completion calls rotating; every received byte is checked against the MPI library's
// own host engine (PMPI_Pack, PMPI_Unpack). The workload repeats with a period of a few
// rounds, so after the first period TEMPI's plan cache, buffer pools and the process's
// memory have seen everything they will see: from then on none may grow.
//
//   test_soak [--rounds N]     TEMPI_TEST_SOAK=long: the long form (tests/meson.build)
//
// Built against the emulated backend (mpi suite, the short form) and on real GPUs
// (gpu suite, P2P_REAL_GPU; exit 77 without a GPU). Rank 0 prints one summary line with
// the counts and the high-water marks.
#include <mpi.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend.hpp"
#include "mpi_types.hpp"
#include "random_type.hpp"
#include "p2p/requests.hpp"
#include "soak_support.hpp"
#include "tempi.h"
#include "base/type_cache.hpp"
#if defined(P2P_REAL_GPU)
#include "gpu_select.hpp"
#endif

using namespace tempi;
using namespace soak;

namespace {

struct Form {
  int rounds;
  int types_per_round;
  int messages_per_type;  // in each direction
};
constexpr Form kShort{24, 40, 8};
constexpr Form kLong{1500, 40, 8};
constexpr int kPeriod = 4;  // rounds after which the workload repeats
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif

struct Tally {
  long long types = 0, messages = 0, bytes = 0;
};

long long resident_bytes() {
  long pages = 0, resident = 0;
  if (FILE *f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return resident * sysconf(_SC_PAGESIZE);
}

// What may not grow after the first period.
struct Footprint {
  Backend::MemoryUse memory;
  size_t cached_types = 0;
  long long resident = 0;
};
Footprint footprint() { return {gpu_backend().memory_use(), type_cache().size(), resident_bytes()}; }

int rounds_arg(int argc, char **argv, int fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (!std::strcmp(argv[i], "--rounds")) return std::atoi(argv[i + 1]);
  return fallback;
}

}  // namespace

int main(int argc, char **argv) {
#if defined(P2P_REAL_GPU)
  tools::select_gpu_before_mpi_init();
#endif
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  g_program = "test_soak";
#if defined(P2P_REAL_GPU)
  if (!gpu_backend().has_gpu()) {
    if (g_rank == 0) std::printf("SKIP: no usable GPU on this machine; the GPU suite needs one\n");
    MPI_Finalize();
    return 77;
  }
#endif
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 2) {
    if (g_rank == 0) std::printf("test_soak needs 2 ranks, not %d\n", size);
    MPI_Finalize();
    return 1;
  }
  const char *knob = std::getenv("TEMPI_TEST_SOAK");
  Form form = knob && !std::strcmp(knob, "long") ? kLong : kShort;
  form.rounds = rounds_arg(argc, argv, form.rounds);
  const char *methods[] = {"auto", "oneshot", "staged"};
  test::RandomTypeOptions options;
  options.max_extent = 1 << 13;   // many small types: what the soak is about is how many
  options.empty_children = false;  // MPICH 4.0.2 (yaksa) dies packing structs with empty members
  const auto start = std::chrono::steady_clock::now();

  Tally tally;
  Footprint settled;
  for (int round = 0; round < form.rounds; ++round) {
    const int phase = round % kPeriod;
    SOAK_MPI_OK(TEMPIX_Set_method(methods[phase % 3]));
    // A round's types live together (the plan cache holds them all), then all go: the
    // next round's reuse their handles.
    test::RandomTypes gen(uint64_t(phase) + 1, options);
    std::vector<TypeDesc> descs;
    std::vector<MPI_Datatype> types;
    for (int i = 0; i < form.types_per_round; ++i) {
      descs.push_back(gen.next());
      types.push_back(test::build_mpi_type(descs.back()));
    }
    tally.types += form.types_per_round;
    for (int i = 0; i < form.types_per_round; ++i) {
      int bytes = 0;
      PMPI_Type_size(types[size_t(i)], &bytes);
      if (bytes == 0) continue;
      const int64_t sent = exchange(types[size_t(i)], 1 + i % 3, form.messages_per_type,
                                    uint64_t(phase) * 1000 + uint64_t(i), Completion((i + round) % kCompletions),
                                    1 - g_rank, 0, MPI_COMM_WORLD);
      tally.messages += form.messages_per_type;
      tally.bytes += std::max<int64_t>(sent, 0);
      if (sent < 0 && g_failures <= 10)
        std::fprintf(stderr, "test_soak: the type of round %d, number %d: %s\n", round, i,
                     to_string(descs[size_t(i)]).c_str());
    }
    for (MPI_Datatype &t : types) MPI_Type_free(&t);
    if (round == kPeriod - 1) settled = footprint();
  }
  SOAK_MPI_OK(TEMPIX_Set_method("auto"));
  MPI_Barrier(MPI_COMM_WORLD);
  const Footprint end = footprint();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  if (!requests().empty()) fail("TEMPI's request table is not empty at the end");
  if (form.rounds >= 2 * kPeriod) {
    if (end.memory.device_bytes > settled.memory.device_bytes)
      fail("device memory grew after the first period: " + std::to_string(settled.memory.device_bytes) + " -> " +
           std::to_string(end.memory.device_bytes) + " bytes");
    if (end.memory.pinned_bytes > settled.memory.pinned_bytes)
      fail("pinned memory grew after the first period: " + std::to_string(settled.memory.pinned_bytes) + " -> " +
           std::to_string(end.memory.pinned_bytes) + " bytes");
    if (end.cached_types > settled.cached_types)
      fail("the plan cache grew after the first period: " + std::to_string(settled.cached_types) + " -> " +
           std::to_string(end.cached_types) + " types");
    // Host memory: the allocator may keep a little more; a leak per message or per type
    // (tens of thousands of them) goes far past this. AddressSanitizer's quarantine holds
    // freed memory on purpose (its leak checker covers that build).
    if (!kAddressSanitizer && end.resident > settled.resident + (8 << 20))
      fail("resident memory grew after the first period: " + std::to_string(settled.resident >> 10) + " -> " +
           std::to_string(end.resident >> 10) + " KiB");
  }
  // The cache holds the types in use and the named ones: at most one round's worth.
  if (type_cache().peak() > size_t(form.types_per_round) + 64)
    fail("the plan cache held " + std::to_string(type_cache().peak()) + " types at once");

  int failures = g_failures.load(), worst = 0;
  MPI_Allreduce(&failures, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (g_rank == 0)
    std::printf("test_soak: %d rounds, %lld types created and freed, %lld messages (%.1f MiB) sent per rank, %s; "
                "plan cache: peak %zu types, %zu at the end; device memory held: peak %llu bytes, %llu after the "
                "first period, %llu at the end; pinned: peak %llu, %llu, %llu; resident: %lld KiB, %lld KiB at the "
                "end; %.1f s\n",
                form.rounds, tally.types, tally.messages, tally.bytes / 1048576.0,
                worst ? "FAILED" : "every message byte-exact", type_cache().peak(), end.cached_types,
                (unsigned long long)end.memory.device_peak, (unsigned long long)settled.memory.device_bytes,
                (unsigned long long)end.memory.device_bytes, (unsigned long long)end.memory.pinned_peak,
                (unsigned long long)settled.memory.pinned_bytes, (unsigned long long)end.memory.pinned_bytes,
                settled.resident >> 10, end.resident >> 10, seconds);
  MPI_Finalize();
  return worst ? 1 : 0;
}
