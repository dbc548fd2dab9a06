#include "base/phases.hpp"

#include <array>
#include <atomic>

#include "base/stats.hpp"
#include "config.hpp"

namespace tempi {

namespace {

constexpr int kPhases = int(Phase::kCount);

struct PhaseTotals {
  std::array<std::atomic<uint64_t>, kPhases> ns{};
  std::array<std::atomic<uint64_t>, kPhases> calls{};
};
PhaseTotals g_totals;

template <int P>
uint64_t read_ns() {
  return g_totals.ns[P].load(std::memory_order_relaxed);
}
template <int P>
uint64_t read_calls() {
  return g_totals.calls[P].load(std::memory_order_relaxed);
}

// Names in Phase's order; each pair is in the stats table (base/stats.cpp).
#define TEMPI_PHASE_COUNTERS(P, NAME) {"phase." NAME "_ns", read_ns<P>}, {"phase." NAME "_calls", read_calls<P>}
constexpr CounterReader kCounters[] = {
    TEMPI_PHASE_COUNTERS(0, "isend"),         TEMPI_PHASE_COUNTERS(1, "irecv"),
    TEMPI_PHASE_COUNTERS(2, "decide"),        TEMPI_PHASE_COUNTERS(3, "pointer_query"),
    TEMPI_PHASE_COUNTERS(4, "staging"),       TEMPI_PHASE_COUNTERS(5, "request"),
    TEMPI_PHASE_COUNTERS(6, "completion"),    TEMPI_PHASE_COUNTERS(7, "pack_launch"),
    TEMPI_PHASE_COUNTERS(8, "pack_wait"),     TEMPI_PHASE_COUNTERS(9, "post"),
    TEMPI_PHASE_COUNTERS(10, "library_wait"), TEMPI_PHASE_COUNTERS(11, "unpack"),
    TEMPI_PHASE_COUNTERS(12, "finish_sends"),
};
#undef TEMPI_PHASE_COUNTERS
static_assert(sizeof(kCounters) / sizeof(kCounters[0]) == 2 * kPhases, "two counters a phase");

bool read_switch() {
  const bool on = config().phase_times;
  if (on) register_counters(kCounters, 2 * kPhases);
  return on;
}

}  // namespace

bool phase_times_on() {
  static const bool on = read_switch();
  return on;
}

void add_phase(Phase p, uint64_t ns) {
  g_totals.ns[size_t(p)].fetch_add(ns, std::memory_order_relaxed);
  g_totals.calls[size_t(p)].fetch_add(1, std::memory_order_relaxed);
}

}  // namespace tempi
