// The symbol that link recipes name with -Wl,--require-defined= (or --undefined=;
// docs/using.md, "Linking"). It refers to every wrapper, so naming it pulls all of
// TEMPI's archive into a program wherever the archive stands on the link line: a C or
// Fortran driver that puts the MPI libraries after it, or a second PMPI tool listed
// first, can no longer leave TEMPI out silently (the second case becomes a
// "multiple definition" error). tempi-info --check looks for these symbols.
#include "base/forward.hpp"
#include "tempi.h"

#if defined(TEMPI_FORWARD_WRAP)
#define TEMPI_LINKED tempi_wrap_archive_linked
#define TEMPI_ARTIFACT "--wrap archive"
#elif defined(TEMPI_FORWARD_DLSYM)
#define TEMPI_LINKED tempi_preload_linked
#define TEMPI_ARTIFACT "preload library"
#else
#define TEMPI_LINKED tempi_archive_linked
#define TEMPI_ARTIFACT "static archive"
#endif

// Which TEMPI a binary holds, readable with `strings` as well.
extern "C" const char tempi_build[] = "TEMPI " TEMPI_VERSION " " TEMPI_ARTIFACT;

#if defined(TEMPI_FORTRAN_MPICH)
extern "C" const char tempi_fortran_mpich_linked[];  // wrap_fortran_mpich.cpp
#endif
#if defined(TEMPI_FORTRAN_OMPI)
extern "C" const char tempi_fortran_ompi_linked[];  // wrap_fortran_ompi.cpp
#endif

#define TEMPI_WRAPPED(fn) reinterpret_cast<const void *>(&TEMPI_WRAPPER(fn)),
extern "C" const void *const TEMPI_LINKED[] = {
#include "base/wrapped.def"
#if MPI_VERSION >= 4
#include "base/wrapped_mpi4.def"
#endif
#if defined(TEMPI_FORTRAN_MPICH)
    tempi_fortran_mpich_linked,
#endif
#if defined(TEMPI_FORTRAN_OMPI)
    tempi_fortran_ompi_linked,
#endif
    tempi_build,
};
#undef TEMPI_WRAPPED
