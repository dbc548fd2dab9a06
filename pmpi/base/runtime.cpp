#include "base/runtime.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>

#include "backend.hpp"
#include "config.hpp"
#include "base/gpu_sharing.hpp"
#include "base/progress.hpp"
#include "base/phase_counters.hpp"
#include "base/stats.hpp"
#include "log.hpp"
#include "profile.hpp"
#include "base/type_cache.hpp"
#include "base/validate.hpp"

#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // Open MPI's MPIX_Query_cuda_support
#endif

namespace tempi {

void check_link(int rank);  // api/link_check.hpp, declared here as runtime.hpp declares the Fortran check

namespace {

std::atomic<bool> g_active{false};
std::atomic<bool> g_finalized{false};
std::once_flag g_init_once;
bool g_cuda_aware = false;

const char *g_cuda_aware_source = "not decided: TEMPI has not started";

bool detect_cuda_aware() {
  if (config().cuda_aware) {
    g_cuda_aware_source = "TEMPI_CUDA_AWARE";
    return *config().cuda_aware;
  }
#if defined(MPIX_GPU_SUPPORT_CUDA)
  int supported = 0;
  g_cuda_aware_source = "MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA)";
  if (PMPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, &supported) == MPI_SUCCESS) return supported != 0;
  g_cuda_aware_source = "MPIX_GPU_query_support failed: assumed not";
#elif defined(MPIX_CUDA_AWARE_SUPPORT)
  g_cuda_aware_source = "MPIX_Query_cuda_support()";
  return MPIX_Query_cuda_support() != 0;
#else
  g_cuda_aware_source = "the MPI library has no query: assumed not (set TEMPI_CUDA_AWARE=yes if it is)";
#endif
  return false;
}

void stop();

// The delete callback of TEMPI's attribute on MPI_COMM_SELF: MPI_Finalize runs it before
// anything else, while every MPI call still works.
int stop_at_finalize(MPI_Comm, int, void *, void *) {
  stop();
  return MPI_SUCCESS;
}

void stop_at_finalize_of_mpi() {
  int keyval = MPI_KEYVAL_INVALID;
  if (PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, stop_at_finalize, &keyval, nullptr) != MPI_SUCCESS ||
      PMPI_Comm_set_attr(MPI_COMM_SELF, keyval, nullptr) != MPI_SUCCESS)
    TEMPI_LOG(Warn, "cannot attach to MPI_COMM_SELF: requests freed while in flight are not finished at MPI_Finalize");
}

// What a long run must keep bounded (the soak test checks it): the plan cache and the
// staging memory held by the backend's pools, at their highest.
void log_high_water_marks() {
  if (!log_enabled(LogLevel::Info)) return;
  const Backend::MemoryUse m = gpu_backend().memory_use();
  log(LogLevel::Info, "plan cache: at most %zu types; device memory held: at most %llu bytes, %llu now; pinned host "
      "memory held: at most %llu bytes, %llu now", type_cache().peak(), (unsigned long long)m.device_peak,
      (unsigned long long)m.device_bytes, (unsigned long long)m.pinned_peak, (unsigned long long)m.pinned_bytes);
}

// Open MPI's Fortran bindings call PMPI_X directly: TEMPI's own definitions of the
// entry points they reach must come first in symbol lookup (wrap_fortran_ompi.cpp;
// docs/using.md, "Fortran"). Where they do not (a TEMPI built without them, or a TEMPI in
// a shared library loaded after Open MPI's), Fortran calls reach the library without
// TEMPI, which cannot answer them with an error: said once, on rank 0, as an error.
void check_fortran_bindings(int rank) {
  if (rank != 0 || mpi_library_name().rfind("Open MPI", 0) != 0 || !dlsym(RTLD_DEFAULT, "ompi_send_f")) return;
#if defined(TEMPI_FORTRAN_OMPI)
  const char *missed = ompi_fortran_entry_point_missed();
#else
  const char *missed = "all of them (this TEMPI was built without Open MPI 4's Fortran entry points)";
#endif
  if (missed)
    TEMPI_LOG(Error, "Open MPI's Fortran calls bypass TEMPI (entry point not TEMPI's: %s): GPU buffers in them reach "
              "the library unhandled; docs/using.md, \"Fortran\"", missed);
}

void initialize() {
  if (config().disabled) return;  // every call forwards
  int initialized = 0;
  PMPI_Initialized(&initialized);
  if (!initialized) return;  // nothing TEMPI does can happen before MPI_Init
  int rank = 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  set_log_rank(rank);
  g_cuda_aware = detect_cuda_aware();
  Backend &b = gpu_backend();
  TEMPI_LOG(Info, "active: GPU %s, MPI library %s CUDA-aware", b.has_gpu() ? b.device_name().c_str() : "none",
            g_cuda_aware ? "is" : "is not");
  if (b.has_gpu()) {
    gpu_sharing().join(b.device_id(), b.mps_enabled());
    // A profile the program installed itself (tempi-measure's) stands: TEMPI may start after it.
    install_startup_profile(
        find_profile(config().profile, this_machine(), [](const char *name) { return std::getenv(name); }));
    TEMPI_LOG(Info, "profile: %s", profile_summary().c_str());
  }
  static constexpr CounterReader gpu_counters[] = {
      {"gpu.synchronizations", [] { return gpu_backend().synchronizations(); }},
      {"gpu.tables_placed", [] { return gpu_backend().tables_placed(); }},
      {"gpu.tables_reused", [] { return gpu_backend().tables_reused(); }},
  };
  register_counters(gpu_counters, 3);
  register_phase_counters();
  check_fortran_bindings(rank);
  check_link(rank);
  stop_at_finalize_of_mpi();
  g_active = true;
}

void stop() {
  if (!g_active.load()) return;
  // Sends still queued go to the library; what is in flight finishes; requests the
  // application freed finish; deferred MPI_Pack work is waited for (base/progress.hpp).
  drain_all();
  gpu_sharing().leave();
  TEMPI_LOG(Info, "%llu GPU synchronizations in this process",
            static_cast<unsigned long long>(gpu_backend().synchronizations()));
  log_high_water_marks();
  if (log_enabled(LogLevel::Info))
    if (const std::string counters = nonzero_counters(); !counters.empty())
      log(LogLevel::Info, "counters: %s", counters.c_str());
  shutdown_all();
  g_active = false;
  g_finalized = true;
  type_cache().clear();
  release_quiet_comm();
}

}  // namespace

bool active() {
  if (g_active.load(std::memory_order_acquire)) return true;
  if (g_finalized.load()) return false;
  int initialized = 0;
  PMPI_Initialized(&initialized);
  if (!initialized) return false;
  std::call_once(g_init_once, initialize);
  return g_active.load(std::memory_order_acquire);
}

bool mpi_is_cuda_aware() { return g_cuda_aware; }

const char *cuda_aware_source() { return g_cuda_aware_source; }

std::string mpi_library_name() {
  char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  PMPI_Get_library_version(version, &length);
  std::string s(version, size_t(std::max(0, std::min(length, MPI_MAX_LIBRARY_VERSION_STRING))));
  s = s.substr(0, s.find_first_of("\n,"));  // MPICH: "MPICH Version: 4.0.2"; Open MPI: "Open MPI v4.1.5"
  for (char &c : s)
    if (c == '\t') c = ' ';
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

MachineIdentity this_machine() { return {gpu_backend().device_name(), mpi_library_name()}; }

}  // namespace tempi
