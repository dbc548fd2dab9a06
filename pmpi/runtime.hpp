// TEMPI's process state: initialized lazily by the first intercepted call (a
// Fortran mpi_f08 program reaches PMPI_Init without TEMPI's MPI_Init wrapper).
#pragma once

#include <mpi.h>

#include <string>

#include "profile.hpp"

namespace tempi {

// True when TEMPI handles calls (initialized and not disabled); false means forward.
bool active();

// Called after the MPI library is initialized and before it is finalized.
void on_mpi_initialized();
void on_mpi_finalizing();

// Whether the MPI library accepts GPU pointers (TEMPI_CUDA_AWARE, else detected).
bool mpi_is_cuda_aware();

// The MPI library as a profile names it: the first line of MPI_Get_library_version.
std::string mpi_library_name();
// This process's GPU model and MPI library (the key of its profile).
MachineIdentity this_machine();

}  // namespace tempi
