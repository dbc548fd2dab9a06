// The preload library's forwarding (forward.hpp, TEMPI_FORWARD_DLSYM), which its entries
// of the next layer's table call at their first use (next.cpp): the next definition of an
// MPI call after this library, which is another tool's or the MPI library's own.
#include <dlfcn.h>

#include <string>

#include "base/forward.hpp"
#include "log.hpp"

namespace tempi {

void *next_symbol(const char *name) {
  if (void *f = dlsym(RTLD_NEXT, name)) return f;
  // A library that defines only the profiling entry points still has those.
  if (void *f = dlsym(RTLD_DEFAULT, ("P" + std::string(name)).c_str())) return f;
  log(LogLevel::Error, "no definition of %s after TEMPI's preload library: is an MPI library linked?", name);
  return nullptr;
}

}  // namespace tempi
