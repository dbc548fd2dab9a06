// How an artifact's own code reaches the next layer. TEMPI builds three artifacts, which
// differ only in the names of the entry points and in how the next layer is found:
//   static archive   (TEMPI_FORWARD_PMPI)   MPI_X        -> PMPI_X
//   --wrap archive   (TEMPI_FORWARD_WRAP)   __wrap_MPI_X -> __real_MPI_X
//   preload library  (TEMPI_FORWARD_DLSYM)  MPI_X        -> dlsym(RTLD_NEXT, "MPI_X")
// so that TEMPI can sit above another PMPI tool. Only the files that depend on that are
// compiled once per artifact, with its TEMPI_FORWARD_* (pmpi/meson.build): the wrappers
// of api/ (TEMPI_WRAPPER(MPI_X), falling through to TEMPI_NEXT(MPI_X)) and base/next.cpp,
// which gives everything else of pmpi/ the same next layer as a table (base/next.hpp,
// tempi::next::MPI_X). That code is compiled once for all three artifacts, so it must not
// include this header: the #error below says so where it does.
// Every call that moves data goes to the next layer (a profiler below TEMPI sees the packed
// messages); only local queries (datatype envelopes, extents, TEMPI's own wire types) use
// PMPI_ directly. pmpi/base/wrapped.def lists every wrapped call.
#pragma once

#include <mpi.h>

#if defined(TEMPI_FORWARD_PMPI)

#define TEMPI_WRAPPER(fn) fn
#define TEMPI_NEXT(fn) P##fn

#elif defined(TEMPI_FORWARD_WRAP)

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

#include "base/next.hpp"

namespace tempi {
// The next definition of `name` after this library (dlsym(RTLD_NEXT)); logs and
// returns null where there is none.
void *next_symbol(const char *name);
}  // namespace tempi

#define TEMPI_WRAPPER(fn) fn
// The table's entry, which looks the call up once, at its first use (next.cpp).
#define TEMPI_NEXT(fn) ::tempi::next::fn

#else
#error "base/forward.hpp is for the files compiled once per artifact (pmpi/meson.build): use base/next.hpp"
#endif
