// Choosing this rank's GPU before MPI_Init, from the local rank the launcher exports:
// a CUDA-aware MPI sets up its CUDA state on the device current at MPI_Init, so a rank
// that switches device afterwards hands it pointers of another device (seen with
// CUDA-aware Open MPI 4.1: cuMemcpyAsync failed with CUDA_ERROR_INVALID_VALUE).
#pragma once

#include <mpi.h>

#include <cstdio>
#include <cstdlib>

#include "backend.hpp"

namespace tempi::tools {

// The launcher's node-local rank, or -1 when none is exported.
inline int launcher_local_rank() {
  for (const char *var : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID", "PMI_LOCAL_RANK"})
    if (const char *v = std::getenv(var)) return std::atoi(v);
  return -1;
}

// Selects GPU local_rank % min(devices, limit); limit <= 0 means all devices.
inline void select_gpu_before_mpi_init(int limit = 0) {
  Backend &gpu = gpu_backend();
  const int local = launcher_local_rank();
  int devices = gpu.has_gpu() ? gpu.device_count() : 0;
  if (limit > 0 && limit < devices) devices = limit;
  if (local >= 0 && devices > 0) gpu.select_device(local % devices);
}

// main() of a tool that moves GPU buffers: this rank's GPU chosen before MPI_Init (as
// select_gpu_before_mpi_init), then run(argc, argv) between MPI_Init and MPI_Finalize.
// `thread_level` >= 0: MPI starts with MPI_Init_thread at that level.
inline int run_with_mpi(int argc, char **argv, int (*run)(int, char **), int gpu_limit = 0, int thread_level = -1) {
  select_gpu_before_mpi_init(gpu_limit);
  int provided = 0;
  if (thread_level >= 0) MPI_Init_thread(&argc, &argv, thread_level, &provided);
  else MPI_Init(&argc, &argv);
  const int rc = run(argc, argv);
  std::fflush(stdout);
  MPI_Finalize();
  return rc;
}

}  // namespace tempi::tools
