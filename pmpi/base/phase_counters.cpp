#include "base/phase_counters.hpp"

#include <array>
#include <mutex>
#include <string>
#include <utility>

#include "base/stats.hpp"
#include "phases.hpp"

namespace tempi {

namespace {

constexpr int kPhases = int(Phase::kCount);

template <int P>
uint64_t read_ns() {
  return phase_ns(Phase(P));
}
template <int P>
uint64_t read_calls() {
  return phase_calls(Phase(P));
}

// Every phase's two readers; the names (static storage) are phase.<name>_ns, then _calls.
template <int... P>
void register_each(std::integer_sequence<int, P...>) {
  static std::array<std::string, 2 * kPhases> names;
  for (int p = 0; p < kPhases; ++p) {
    names[size_t(p)] = std::string("phase.") + kPhaseNames[p] + "_ns";
    names[size_t(kPhases + p)] = std::string("phase.") + kPhaseNames[p] + "_calls";
  }
  static const CounterReader readers[] = {CounterReader{names[size_t(P)].c_str(), read_ns<P>}...,
                                          CounterReader{names[size_t(kPhases + P)].c_str(), read_calls<P>}...};
  register_counters(readers, 2 * kPhases);
}

}  // namespace

void register_phase_counters() {
  if (!phase_times_on()) return;
  static std::once_flag once;
  std::call_once(once, [] { register_each(std::make_integer_sequence<int, kPhases>{}); });
}

}  // namespace tempi
