// The main() of the single-process GPU tests (test_gpu_pack, test_gpu_transpose,
// test_gpu_blocklist, test_gpu_paired_runs): runs their Catch2 cases under MPI (TEMPI is
// linked in), or prints why it skips and exits 77 (meson's "skipped") where no GPU is usable.
#define CATCH_CONFIG_RUNNER
#include <mpi.h>

#include <catch2/catch.hpp>
#include <cstdio>

#include "backend.hpp"

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int result = 77;
  if (!tempi::gpu_backend().has_gpu()) {
    std::printf("SKIP: no usable GPU on this machine; the GPU suite needs one (CUDA device count is 0)\n");
  } else {
    std::printf("GPU: %s\n", tempi::gpu_backend().device_name().c_str());
    result = Catch::Session().run(argc, argv);
  }
  MPI_Finalize();
  return result;
}
