// -h / --help for the programs in tools/: the usage text, printed before MPI_Init so that
// `PROGRAM --help` works without mpiexec (and without a GPU).
#pragma once

#include <cstdio>
#include <cstring>

namespace tempi::tools {

// True when the command line asks for help; the caller then returns 0.
inline bool print_help_if_asked(int argc, char **argv, const char *usage) {
  for (int i = 1; i < argc; ++i)
    if (!std::strcmp(argv[i], "-h") || !std::strcmp(argv[i], "--help")) {
      std::fputs(usage, stdout);
      return true;
    }
  return false;
}

}  // namespace tempi::tools
