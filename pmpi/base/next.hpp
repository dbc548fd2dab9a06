// The next layer's entry point of every wrapped call (wrapped.def), for the code of pmpi/
// that is compiled once and linked into all three artifacts: tempi::next::MPI_X(...) goes
// where the artifact's own wrappers forward MPI_X (PMPI_X, __real_MPI_X, or the next
// MPI_X by dlsym; forward.hpp). Each artifact defines the table in base/next.cpp, compiled
// with its mode. So that code keeps MPI's layering without knowing the artifact: the
// messages TEMPI itself sends and completes go to the next layer, where a profiler below
// TEMPI sees them.
#pragma once

#include <mpi.h>

namespace tempi::next {

// Hidden: each artifact's code reaches its own table, even in a process that holds a
// second TEMPI (a program linked with the archive, run with the preload library).
#define TEMPI_WRAPPED(fn) extern decltype(&::fn) const fn __attribute__((visibility("hidden")));
#include "base/wrapped.def"
#if MPI_VERSION >= 4
#include "base/wrapped_mpi4.def"
#endif
#undef TEMPI_WRAPPED

}  // namespace tempi::next
