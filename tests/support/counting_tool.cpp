// A small PMPI tool for the stacking tests (tests/meson.build, "Stacks"): it counts the
// calls that reach it and prints the counts at MPI_Finalize, so a test sees both that
// TEMPI started and that the tool below it saw the traffic. Built as a preload library
// (every call its own MPI_X, forwarding to PMPI_X) and as a static archive for a --wrap
// stack; there, with COUNT_INIT_BY_WRAP, it wraps MPI_Init and MPI_Finalize the way
// Darshan does (__wrap_MPI_Init, linked with --wrap=MPI_Init), which works only because
// TEMPI wraps neither.
#include <mpi.h>

#include <atomic>
#include <cstdio>

namespace {

enum Call { Init, Send, Isend, Recv, Irecv, Wait, Waitall, Finalize, kCalls };
const char *const kNames[kCalls] = {"MPI_Init", "MPI_Send", "MPI_Isend", "MPI_Recv", "MPI_Irecv",
                                    "MPI_Wait", "MPI_Waitall", "MPI_Finalize"};
std::atomic<long> g_counts[kCalls];

void report() {
  int rank = 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  // One write for the whole line: mpiexec interleaves the ranks' output, and a line written
  // piecewise (stdout may be unbuffered) can be split by another rank's lines.
  char line[512];
  int n = std::snprintf(line, sizeof line, "[counting tool] rank %d:", rank);
  for (int c = 0; c < kCalls && n < int(sizeof line); ++c)
    n += std::snprintf(line + n, sizeof line - size_t(n), " %s %ld", kNames[c], g_counts[c].load());
  std::fprintf(stdout, "%s\n", line);
  std::fflush(stdout);
}

}  // namespace

#if defined(COUNT_INIT_BY_WRAP)
#define INIT_ENTRY(fn) __wrap_##fn
#define INIT_NEXT(fn) __real_##fn
extern "C" decltype(MPI_Init) __real_MPI_Init;
extern "C" decltype(MPI_Init_thread) __real_MPI_Init_thread;
extern "C" decltype(MPI_Finalize) __real_MPI_Finalize;
#else
#define INIT_ENTRY(fn) fn
#define INIT_NEXT(fn) P##fn
#endif

extern "C" {

int INIT_ENTRY(MPI_Init)(int *argc, char ***argv) {
  ++g_counts[Init];
  return INIT_NEXT(MPI_Init)(argc, argv);
}

int INIT_ENTRY(MPI_Init_thread)(int *argc, char ***argv, int required, int *provided) {
  ++g_counts[Init];
  return INIT_NEXT(MPI_Init_thread)(argc, argv, required, provided);
}

int INIT_ENTRY(MPI_Finalize)() {
  ++g_counts[Finalize];
  report();
  return INIT_NEXT(MPI_Finalize)();
}

int MPI_Send(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  ++g_counts[Send];
  return PMPI_Send(buf, count, type, dest, tag, comm);
}

int MPI_Isend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *r) {
  ++g_counts[Isend];
  return PMPI_Isend(buf, count, type, dest, tag, comm, r);
}

int MPI_Recv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Status *status) {
  ++g_counts[Recv];
  return PMPI_Recv(buf, count, type, source, tag, comm, status);
}

int MPI_Irecv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Request *r) {
  ++g_counts[Irecv];
  return PMPI_Irecv(buf, count, type, source, tag, comm, r);
}

int MPI_Wait(MPI_Request *r, MPI_Status *status) {
  ++g_counts[Wait];
  return PMPI_Wait(r, status);
}

int MPI_Waitall(int n, MPI_Request r[], MPI_Status statuses[]) {
  ++g_counts[Waitall];
  return PMPI_Waitall(n, r, statuses);
}

}  // extern "C"
