// The one forwarding mechanism of every wrapper. A wrapper is defined as
// TEMPI_WRAPPER(MPI_X) and reaches the next layer as TEMPI_NEXT(MPI_X):
//   static archive (default)     MPI_X        -> PMPI_X
//   --wrap archive               __wrap_MPI_X -> __real_MPI_X  (TEMPI_FORWARD_WRAP)
// so that TEMPI can sit above another PMPI tool without a second copy of the wrappers.
#pragma once

#include <mpi.h>

#if defined(TEMPI_FORWARD_WRAP)
#define TEMPI_WRAPPER(fn) __wrap_##fn
#define TEMPI_NEXT(fn) __real_##fn
#else
#define TEMPI_WRAPPER(fn) fn
#define TEMPI_NEXT(fn) P##fn
#endif
