// Thread safety under load (docs/using.md, "Threads"): under MPI_THREAD_MULTIPLE, 8
// threads per rank each create, use and free their own random datatypes while the
// others do the same, and exchange many nonblocking GPU messages with the same thread
// of the peer rank (tags tell the threads apart), with the methods and the completion
// calls rotating; every received byte is checked against the MPI library's own host
// engine. Also run under ThreadSanitizer where the toolchain allows (docs/design.md,
// "Sanitizers").
//
//   test_threads [--types N]     types per thread (TEMPI_TEST_SOAK=long: 10 times more)
//
// Built against the emulated backend (mpi suite) and on real GPUs (gpu suite,
// P2P_REAL_GPU; exit 77 without a GPU).
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "backend.hpp"
#include "mpi_types.hpp"
#include "random_type.hpp"
#include "p2p/requests.hpp"
#include "soak_support.hpp"
#include "tempi.h"
#if defined(P2P_REAL_GPU)
#include "gpu_select.hpp"
#endif

using namespace soak;

namespace {

constexpr int kThreads = 8;
constexpr int kMessagesPerType = 8;  // in each direction
constexpr int kTagsPerThread = 1 << 16;

struct Tally {
  long long types = 0, messages = 0, bytes = 0;
};

// One thread's work: `types` random datatypes, one after the other, each created,
// committed, used for kMessagesPerType messages each way, and freed.
void run_thread(int thread, int types, Tally &tally) {
  tempi::test::RandomTypeOptions options;
  options.max_extent = 1 << 12;
  options.empty_children = false;  // MPICH 4.0.2 (yaksa) dies packing structs with empty members
  tempi::test::RandomTypes gen(uint64_t(thread) + 101, options);
  const char *methods[] = {"auto", "oneshot", "staged"};
  for (int i = 0; i < types; ++i) {
    // The method is the process's: one thread changes it while the others send.
    if (thread == 0 && i % 8 == 0) SOAK_MPI_OK(TEMPIX_Set_method(methods[(i / 8) % 3]));
    const tempi::TypeDesc d = gen.next();
    MPI_Datatype t = tempi::test::build_mpi_type(d);
    ++tally.types;
    int bytes = 0;
    PMPI_Type_size(t, &bytes);
    if (bytes > 0) {
      const int64_t sent = exchange(t, 1 + i % 2, kMessagesPerType, uint64_t(thread) * 100000 + uint64_t(i),
                                    Completion((i + thread) % kCompletions), 1 - g_rank, thread * kTagsPerThread,
                                    MPI_COMM_WORLD);
      if (sent < 0) fail("thread " + std::to_string(thread) + ", type " + std::to_string(i) + ": " + to_string(d));
      tally.messages += kMessagesPerType;
      tally.bytes += std::max<int64_t>(sent, 0);
    }
    MPI_Type_free(&t);
  }
}

int types_arg(int argc, char **argv, int fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (!std::strcmp(argv[i], "--types")) return std::atoi(argv[i + 1]);
  return fallback;
}

}  // namespace

int main(int argc, char **argv) {
#if defined(P2P_REAL_GPU)
  tempi::tools::select_gpu_before_mpi_init();
#endif
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  g_program = "test_threads";
#if defined(P2P_REAL_GPU)
  if (!tempi::gpu_backend().has_gpu()) {
    if (g_rank == 0) std::printf("SKIP: no usable GPU on this machine; the GPU suite needs one\n");
    MPI_Finalize();
    return 77;
  }
#endif
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 2 || provided != MPI_THREAD_MULTIPLE) {
    if (g_rank == 0) std::printf("test_threads needs 2 ranks and MPI_THREAD_MULTIPLE\n");
    MPI_Finalize();
    return 1;
  }
  const char *knob = std::getenv("TEMPI_TEST_SOAK");
  const int types = types_arg(argc, argv, knob && !std::strcmp(knob, "long") ? 1500 : 150);
  const auto start = std::chrono::steady_clock::now();
  std::vector<Tally> tallies(kThreads);
  std::vector<std::thread> threads;
  for (int k = 0; k < kThreads; ++k) threads.emplace_back(run_thread, k, types, std::ref(tallies[size_t(k)]));
  for (std::thread &t : threads) t.join();
  MPI_Barrier(MPI_COMM_WORLD);
  if (!tempi::requests().empty()) fail("TEMPI's request table is not empty at the end");
  Tally all;
  for (const Tally &t : tallies) {
    all.types += t.types;
    all.messages += t.messages;
    all.bytes += t.bytes;
  }
  int failures = g_failures.load(), worst = 0;
  MPI_Allreduce(&failures, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (g_rank == 0)
    std::printf("test_threads: %d threads, %lld types created and freed, %lld messages (%.1f MiB) sent per rank, "
                "%s; %.1f s\n",
                kThreads, all.types, all.messages, all.bytes / 1048576.0,
                worst ? "FAILED" : "every message byte-exact",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  MPI_Finalize();
  return worst ? 1 : 0;
}
