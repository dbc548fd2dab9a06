// The steps of main() that the test programs built the p2p ways (p2p_support.hpp) share:
// the GPU chosen before MPI_Init, MPI initialized, the real-GPU build skipped where no GPU
// is usable, and Catch run on every rank. Each program keeps its own main() for what lies
// between (communicators of its own, a check of the number of ranks).
#pragma once

#include <mpi.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>

#include "p2p_support.hpp"
#if defined(P2P_REAL_GPU)
#include "gpu_select.hpp"
#endif

namespace p2p {

// What a real-GPU build's main() returns where no GPU is usable: meson counts it as skipped.
constexpr int kSkipped = 77;

// Before MPI_Init, in the real-GPU build: one GPU per rank where there are enough, and
// TEMPI_TEST_DEVICES=1 makes the ranks share one (their GPU has to be current before a
// CUDA-aware MPI sets up, see gpu_select.hpp). Nothing in the other builds.
inline void select_test_gpu() {
#if defined(P2P_REAL_GPU)
  const char *limit = std::getenv("TEMPI_TEST_DEVICES");
  tempi::tools::select_gpu_before_mpi_init(limit ? std::atoi(limit) : 0);
#endif
}

// MPI_Init, or MPI_Init_thread asking for MPI_THREAD_MULTIPLE where TEMPI_TEST_THREADS is
// a nonzero number (for the test cases that send from several threads).
inline void init_mpi_threads_on_request(int &argc, char **&argv) {
  const char *threads = std::getenv("TEMPI_TEST_THREADS");
  if (threads && std::atoi(threads) != 0) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  } else {
    MPI_Init(&argc, &argv);
  }
}

// After MPI_Init: true in the real-GPU build where no GPU is usable, once rank 0 has said
// so and MPI is finalized; main() then returns kSkipped.
inline bool skipped_without_gpu() {
#if defined(P2P_REAL_GPU)
  if (!tempi::gpu_backend().has_gpu()) {
    if (rank() == 0) std::printf("SKIP: no usable GPU on this machine; the GPU suite needs one\n");
    MPI_Finalize();
    return true;
  }
#endif
  return false;
}

// Catch's session on this rank; returns the worst result of all ranks, so that every
// rank exits failed where one test case failed on any of them.
inline int run_catch_on_every_rank(int argc, char **argv) {
  const int result = Catch::Session().run(argc, argv);
  int worst = 0;
  MPI_Allreduce(&result, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return worst;
}

}  // namespace p2p
