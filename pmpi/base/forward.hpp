// The one forwarding mechanism of every wrapper. A wrapper is defined as
// TEMPI_WRAPPER(MPI_X) and reaches the next layer as TEMPI_NEXT(MPI_X); the same
// sources build three artifacts:
//   static archive (default)   MPI_X        -> PMPI_X
//   --wrap archive             __wrap_MPI_X -> __real_MPI_X             (TEMPI_FORWARD_WRAP)
//   preload library            MPI_X        -> dlsym(RTLD_NEXT, "MPI_X") (TEMPI_FORWARD_DLSYM)
// so that TEMPI can sit above another PMPI tool. Every call that moves data goes to
// the next layer (a profiler below TEMPI sees the packed messages); only local queries
// (datatype envelopes, extents, TEMPI's own wire types) use PMPI_ directly.
// pmpi/base/wrapped.def lists every wrapped call.
#pragma once

#include <mpi.h>

#if defined(TEMPI_FORWARD_WRAP)

#define TEMPI_WRAPPER(fn) __wrap_##fn
#define TEMPI_NEXT(fn) __real_##fn
// Both declared: TEMPI's own code may enter a wrapper (wrap_fortran_mpich.cpp, linked.cpp).
#define TEMPI_WRAPPED(fn) extern "C" decltype(fn) __real_##fn, __wrap_##fn;
#include "base/wrapped.def"
#if MPI_VERSION >= 4
#include "base/wrapped_mpi4.def"
#endif
#undef TEMPI_WRAPPED

#elif defined(TEMPI_FORWARD_DLSYM)

namespace tempi {
// The next definition of `name` after this library (dlsym(RTLD_NEXT)); logs and
// returns null where there is none.
void *next_symbol(const char *name);
}  // namespace tempi

#define TEMPI_WRAPPER(fn) fn
// Looked up once per call site.
#define TEMPI_NEXT(fn)                                                                     \
  ([] {                                                                                    \
    static const auto next = reinterpret_cast<decltype(&fn)>(::tempi::next_symbol(#fn)); \
    return next;                                                                           \
  }())

#else

#define TEMPI_WRAPPER(fn) fn
#define TEMPI_NEXT(fn) P##fn

#endif
