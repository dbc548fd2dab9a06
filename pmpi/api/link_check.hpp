// The start-up check that every call TEMPI wraps reaches TEMPI (docs/using.md, "Is TEMPI
// linked?"): a program can build and run with TEMPI only partly in its call path (the
// static archive linked after the MPI library, a PMPI tool preloaded in front of TEMPI's
// preload library, MPICH's Fortran bindings under the --wrap archive) or with TEMPI
// silently skipping a profiler (its static archive forwards to PMPI_X past a preloaded
// tool). The check compares, for each wrapped call, the definition the dynamic linker
// resolves MPI_X to (dlsym(RTLD_DEFAULT)) and the one the program's own calls are bound to
// with where TEMPI's code is; it warns once, on rank 0, at the default log level, naming
// the calls and the remedy. It never aborts: the program runs as linked.
#pragma once

#include <string>

namespace tempi {

// Runs the check (once per process) and, on rank 0, logs what it found as a warning.
void check_link(int rank);

// One line: which TEMPI this is, over which MPI library, and whether every call it wraps
// reaches it (or which do not). For tempi-info and for a Python user's one-line check
// through tempi_link_report() (docs/using.md, "Python").
std::string link_report();

}  // namespace tempi

// link_report() for code that can only call C (ctypes): a string that lives until exit,
// valid after MPI_Init.
extern "C" const char *tempi_link_report();
