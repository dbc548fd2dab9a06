// The phase totals of core/phases.hpp as counters of the stats table (phase.<name>_ns,
// phase.<name>_calls), registered where TEMPI_PHASE_TIMES is on.
#pragma once

namespace tempi {

// Registers the phase counters once, where phase times are on (at TEMPI's start).
void register_phase_counters();

}  // namespace tempi
