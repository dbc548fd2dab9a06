#include "phases.hpp"

#include <array>
#include <atomic>

#include "config.hpp"

namespace tempi {

const char *const kPhaseNames[int(Phase::kCount)] = {
    "isend",        "irecv",   "decide",         "pointer_query",  "staging",     "request",
    "completion",   "pack_launch", "pack_wait",  "post",           "library_wait", "unpack",
    "finish_sends", "start",   "zero_copy_begin", "default_stream", "library_start", "zero_copy_gate",
    "describe",     "launch",  "fence",          "gpu_wait",
};

namespace {

struct PhaseTotals {
  std::array<std::atomic<uint64_t>, int(Phase::kCount)> ns{};
  std::array<std::atomic<uint64_t>, int(Phase::kCount)> calls{};
};
PhaseTotals g_totals;

}  // namespace

bool phase_times_on() {
  static const bool on = config().phase_times;
  return on;
}

void add_phase(Phase p, uint64_t ns) {
  g_totals.ns[size_t(p)].fetch_add(ns, std::memory_order_relaxed);
  g_totals.calls[size_t(p)].fetch_add(1, std::memory_order_relaxed);
}

uint64_t phase_ns(Phase p) { return g_totals.ns[size_t(p)].load(std::memory_order_relaxed); }
uint64_t phase_calls(Phase p) { return g_totals.calls[size_t(p)].load(std::memory_order_relaxed); }

}  // namespace tempi
