// Where TEMPI's own time goes in a call (docs/using.md, "Phase times"). With
// TEMPI_PHASE_TIMES=1 each phase below adds its wall time and a count to totals that the MPI
// layer shows as counters of its stats table (phase.<name>_ns, phase.<name>_calls;
// pmpi/base/phase_counters.cpp), which tools read through TEMPIX_Counter and divide by their
// exchanges; tools/tempi_halo prints them per exchange. Here, in core/, so that the backends
// time their own steps too.
// Off (the default) a phase costs one predictable branch. Phases nest: each counts its own
// wall time, inner phases included, so a parent's time minus its children's is what the
// parent did itself.
#pragma once

#include <chrono>
#include <cstdint>

namespace tempi {

enum class Phase : int {
  Isend,         // a nonblocking send of GPU data, its whole wrapper
  Irecv,         // a nonblocking receive of GPU data, its whole wrapper
  Decide,        // a point-to-point decision: pointer query, kept decision or a new one
  PointerQuery,  // the backend's pointer classification inside a decision
  Staging,       // the packed bytes' staging taken from the pool
  Request,       // the request's bookkeeping: generalized request, table entry, engine queue
  Completion,    // a completion call that finds TEMPI's requests, whole
  PackLaunch,    // the engine issuing its queued packs
  PackWait,      // the engine waiting for its packs
  Post,          // the engine handing packed messages to the MPI library
  LibraryWait,   // the MPI library's own completion call inside TEMPI's
  Unpack,        // received messages moved into the user's buffers, launches and waits
  FinishSends,   // completed deferred sends' generalized requests completed and freed
  Start,         // MPI_Start or MPI_Startall on TEMPI's persistent requests, whole
  ZeroCopyBegin, // a persistent zero-copy start published (the default stream waited for)
  DefaultStream, // waiting for the application's legacy default stream before peers read
  LibraryStart,  // a persistent collective's library call issued at its start
  ZeroCopyGate,  // a persistent zero-copy start's request made, its reads tried at once
  Describe,      // a GPU batch: the backend's descriptions of its jobs, before the launch
  Launch,        // a GPU batch: its fused kernel launched (its device table placed or found)
  Fence,         // a GPU batch: the event that ends it recorded
  GpuWait,       // the backend waiting for a batch's event
  kCount
};

// Each phase's name in the counters (phase.<name>_ns), in Phase's order.
extern const char *const kPhaseNames[int(Phase::kCount)];

// Whether TEMPI_PHASE_TIMES is on (read once).
bool phase_times_on();
void add_phase(Phase p, uint64_t ns);
// The totals so far: nanoseconds and timed scopes of phase `p`.
uint64_t phase_ns(Phase p);
uint64_t phase_calls(Phase p);

inline uint64_t phase_clock_ns() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
}

// Times its scope as phase `p` where phase times are on.
class PhaseTimer {
 public:
  explicit PhaseTimer(Phase p) : p_(p), start_(phase_times_on() ? phase_clock_ns() : 0) {}
  ~PhaseTimer() {
    if (start_) add_phase(p_, phase_clock_ns() - start_);
  }
  PhaseTimer(const PhaseTimer &) = delete;
  PhaseTimer &operator=(const PhaseTimer &) = delete;

 private:
  Phase p_;
  uint64_t start_;
};

}  // namespace tempi
