// TEMPI's process state. TEMPI wraps neither MPI_Init nor MPI_Finalize, so that other
// tools that must wrap them (Darshan, for instance) stack with it and Fortran bindings
// that reach PMPI_Init directly need nothing more: it starts at its first intercepted
// call after MPI_Init, and stops when MPI_Finalize deletes the attributes of
// MPI_COMM_SELF (the first thing MPI_Finalize does; MPI 4.0, section 11.2.4).
#pragma once

#include <mpi.h>

#include <string>

#include "profile.hpp"

namespace tempi {

// True when TEMPI handles calls (initialized and not disabled); false means forward.
bool active();


// Whether the MPI library accepts GPU pointers (TEMPI_CUDA_AWARE, else detected).
bool mpi_is_cuda_aware();
// How that was decided, in words (tempi-info).
const char *cuda_aware_source();

// The MPI library as a profile names it: the first line of MPI_Get_library_version.
std::string mpi_library_name();
// This process's GPU model and MPI library (the key of its profile).
MachineIdentity this_machine();

#if defined(TEMPI_FORTRAN_OMPI)
// The first of the entry points Open MPI's Fortran bindings reach that symbol lookup
// does not resolve to TEMPI's definition (wrap_fortran_ompi.cpp); null when all are TEMPI's.
const char *ompi_fortran_entry_point_missed();
#endif

}  // namespace tempi
