// Where TEMPI's own time goes in a call (docs/using.md, "Phase times"). With
// TEMPI_PHASE_TIMES=1 each phase below adds its wall time and a count to counters of the
// stats table (phase.<name>_ns, phase.<name>_calls), which tools read through
// TEMPIX_Counter and divide by their exchanges; tools/tempi_halo prints them per exchange.
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
  kCount
};

// Whether TEMPI_PHASE_TIMES is on (read once).
bool phase_times_on();
void add_phase(Phase p, uint64_t ns);

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
