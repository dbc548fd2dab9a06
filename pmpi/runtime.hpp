// TEMPI's process state: initialized lazily by the first intercepted call (a
// Fortran mpi_f08 program reaches PMPI_Init without TEMPI's MPI_Init wrapper).
#pragma once

#include <mpi.h>

namespace tempi {

// True when TEMPI handles calls (initialized and not disabled); false means forward.
bool active();

// Called after the MPI library is initialized and before it is finalized.
void on_mpi_initialized();
void on_mpi_finalizing();

// Whether the MPI library accepts GPU pointers (TEMPI_CUDA_AWARE, else detected).
bool mpi_is_cuda_aware();

}  // namespace tempi
