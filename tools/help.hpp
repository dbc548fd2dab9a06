// Command lines of the programs in tools/: -h / --help prints the usage text, and an
// argument a program does not take is an error (a message and exit status 2, the same in
// every tool). Both are decided before MPI_Init, so that they work without mpiexec (and
// without a GPU).
#pragma once

#include <cstdio>
#include <cstring>
#include <initializer_list>

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

// For programs whose options are flags and options followed by one value: true (after a
// message and the usage on stderr) when an argument is neither, or an option lacks its
// value; the caller then returns 2.
inline bool reject_unknown(int argc, char **argv, std::initializer_list<const char *> flags,
                           std::initializer_list<const char *> with_value, const char *usage) {
  auto among = [](const char *a, std::initializer_list<const char *> names) {
    for (const char *n : names)
      if (!std::strcmp(a, n)) return true;
    return false;
  };
  for (int i = 1; i < argc; ++i) {
    if (among(argv[i], flags)) continue;
    if (among(argv[i], with_value) && i + 1 < argc) {
      ++i;
      continue;
    }
    std::fprintf(stderr, "%s: %s '%s'\n%s", argv[0], among(argv[i], with_value) ? "missing value for" : "unknown option",
                 argv[i], usage);
    return true;
  }
  return false;
}

}  // namespace tempi::tools
