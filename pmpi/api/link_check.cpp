// Whether every call TEMPI wraps reaches TEMPI in this process, and whether TEMPI skips a
// PMPI tool (link_check.hpp). Objects are told apart by the base address dladdr gives:
// TEMPI's own (the program for the static archive, the preload library), the MPI
// library's (where PMPI_X is), and any other that defines MPI_X (a PMPI tool).
#include "api/link_check.hpp"

#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "base/forward.hpp"
#include "base/runtime.hpp"
#include "config.hpp"
#include "log.hpp"

extern "C" const char tempi_build[];  // linked.cpp: "TEMPI <version> <artifact>"

namespace tempi {

namespace {

// Internal linkage, so no other object can interpose it: its address is in TEMPI's object.
void marker() {}

const void *base_of(const void *p, std::string *file = nullptr) {
  Dl_info info{};
  if (!p || !dladdr(p, &info)) return nullptr;
  if (file) *file = info.dli_fname && *info.dli_fname ? info.dli_fname : "the program";
  return info.dli_fbase;
}

// MPICH's Fortran bindings (use mpi, mpif.h, most of mpi_f08) call MPI_X, resolved in the
// global scope; Open MPI's call PMPI_X and have their own check (runtime.cpp). Returns the
// Fortran library's file where MPICH's bindings are loaded.
std::string mpich_fortran_library(const void *tempi) {
  std::string file;
  const void *at = base_of(dlsym(RTLD_DEFAULT, "mpi_isend_"), &file);
  if (!at || at == tempi || dlsym(RTLD_DEFAULT, "ompi_isend_f")) return "";
  return file;
}

#if defined(TEMPI_FORWARD_WRAP)

// The --wrap archive: only the calls the program's own objects make reach TEMPI.
std::string check() {
  const std::string fortran = mpich_fortran_library(base_of(reinterpret_cast<const void *>(&marker)));
  if (fortran.empty()) return "";
  return "MPICH's Fortran bindings (" + fortran + ") call the library's MPI_X, which TEMPI's --wrap archive does "
         "not replace: Fortran calls bypass TEMPI and GPU buffers in them reach the library unhandled. Link "
         "Fortran programs with TEMPI's static archive (-Wl,--require-defined=tempi_archive_linked) or preload "
         "TEMPI (docs/using.md, \"Is TEMPI linked?\")";
}

#else

struct Wrapped {
  const char *name;
  const void *ours;  // what TEMPI's own code is bound to for this call
};

#define TEMPI_WRAPPED(fn) {#fn, reinterpret_cast<const void *>(&TEMPI_WRAPPER(fn))},
const Wrapped kWrapped[] = {
#include "base/wrapped.def"
#if MPI_VERSION >= 4
#include "base/wrapped_mpi4.def"
#endif
};
#undef TEMPI_WRAPPED

std::string list(const std::vector<std::string> &calls) {
  std::string s;
  for (size_t i = 0; i < calls.size() && i < 6; ++i) s += (i ? ", " : "") + calls[i];
  if (calls.size() > 6) s += ", and " + std::to_string(calls.size() - 6) + " more";
  return s;
}

#if !defined(TEMPI_FORWARD_DLSYM)
// Shared objects loaded now that define MPI_Isend or MPI_Send themselves (not as the MPI
// library's alias of PMPI_X): PMPI tools, preloaded or linked as shared libraries.
std::string first_tool_loaded() {
  std::vector<std::string> objects;
  dl_iterate_phdr(
      [](dl_phdr_info *info, size_t, void *data) {
        if (info->dlpi_name && info->dlpi_name[0] == '/') static_cast<std::vector<std::string> *>(data)->push_back(info->dlpi_name);
        return 0;
      },
      &objects);
  for (const std::string &path : objects) {
    void *h = dlopen(path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
    if (!h) continue;
    bool tool = false;
    for (const char *name : {"MPI_Isend", "MPI_Send"}) {
      // dlsym on a handle searches its dependencies too: a definition counts only where it
      // lies in this object.
      std::string file;
      const void *at = base_of(dlsym(h, name), &file);
      tool |= at && file == path && at != base_of(dlsym(h, ("P" + std::string(name)).c_str()));
    }
    dlclose(h);
    if (tool) return path;
  }
  return "";
}
#endif

// The static archive and the preload library: for each call, where the program's calls
// are bound (static: at link time) and where the dynamic linker resolves MPI_X.
std::string check() {
  const void *tempi = base_of(reinterpret_cast<const void *>(&marker));
  const std::string fortran = mpich_fortran_library(tempi);
  std::vector<std::string> unlinked, bypassed;
  std::string first_other;
  for (const Wrapped &w : kWrapped) {
    std::string file;
#if !defined(TEMPI_FORWARD_DLSYM)
    // Not TEMPI's where the MPI library came before TEMPI's archive on the link line.
    if (base_of(w.ours, &file) != tempi) {
      unlinked.push_back(w.name);
      continue;
    }
#endif
    const void *seen = base_of(dlsym(RTLD_DEFAULT, w.name), &file);
    if (!seen || seen == tempi) continue;
    const bool library = seen == base_of(dlsym(RTLD_DEFAULT, ("P" + std::string(w.name)).c_str()));
#if !defined(TEMPI_FORWARD_DLSYM)
    // A program that does not export MPI_X: only calls from shared objects resolve here, and
    // of the MPI library's, only MPICH's Fortran bindings make them.
    if (library && fortran.empty()) continue;
#endif
    bypassed.push_back(w.name);
    if (first_other.empty()) first_other = library && !fortran.empty() ? fortran : file;
  }
  if (!unlinked.empty())
    return "TEMPI is linked only in part: " + std::to_string(unlinked.size()) + " of the calls it wraps go straight "
           "to the MPI library (" + list(unlinked) + "), GPU buffers unhandled. The MPI library came before TEMPI's "
           "archive on the link line: link with -Wl,--require-defined=tempi_archive_linked (pkg-config --libs tempi "
           "gives it) or put -ltempi_pmpi first (docs/using.md, \"Is TEMPI linked?\")";
  if (!bypassed.empty())
    return std::to_string(bypassed.size()) + " of the calls TEMPI wraps reach " + first_other + " instead of TEMPI (" +
           list(bypassed) + "): TEMPI sees them only if that code forwards to the next MPI_X; GPU buffers in the "
           "others reach the library unhandled. Preload TEMPI first (LD_PRELOAD=libtempi_preload.so:<tool>) or "
           "stack it with its --wrap archive (docs/using.md, \"Is TEMPI linked?\")";
#if !defined(TEMPI_FORWARD_DLSYM)
  // The static archive forwards to PMPI_X: a tool's MPI_X is never reached from the program.
  const std::string tool = first_tool_loaded();
  if (!tool.empty())
    return "the PMPI tool " + tool + " defines MPI calls, but TEMPI's static archive forwards to PMPI_X: the tool "
           "sees none of the calls TEMPI wraps. Stack TEMPI above it: its --wrap archive over the tool, or "
           "LD_PRELOAD=libtempi_preload.so:<tool> with the program linked without TEMPI (docs/using.md, \"Is "
           "TEMPI linked?\")";
#endif
  return "";
}

#endif

// In a function, not at namespace scope: the load-time check (below) may run before this
// file's static initializers.
struct State {
  std::once_flag once;
  std::string problem;
  std::atomic<bool> warned{false};
};

State &state() {
  static State s;
  return s;
}

State &checked() {
  State &s = state();
  std::call_once(s.once, [&s] { s.problem = check(); });
  return s;
}

}  // namespace

void check_link(int rank) {
  State &s = checked();
  if (rank == 0 && !s.problem.empty() && !s.warned.exchange(true)) TEMPI_LOG(Warn, "%s", s.problem.c_str());
}

#if defined(TEMPI_FORWARD_WRAP)
namespace {
// A program whose every call comes from MPICH's Fortran bindings never enters the --wrap
// archive, so TEMPI would never start to say so: the check also runs when the program is
// loaded (shared libraries are loaded by then), on the rank the launcher calls 0.
__attribute__((constructor)) void check_at_load() {
  if (config().disabled) return;
  for (const char *name : {"PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK"})
    if (const char *rank = std::getenv(name)) {
      check_link(std::atoi(rank));
      return;
    }
  check_link(0);
}
}  // namespace
#endif

std::string link_report() {
  const std::string &problem = checked().problem;
  return std::string(tempi_build) + " over " + mpi_library_name() + ": " +
         (problem.empty() ? "every call it wraps reaches it" : problem);
}

}  // namespace tempi

extern "C" const char *tempi_link_report() {
  static const std::string report = tempi::link_report();
  return report.c_str();
}
