// Zero-copy's place in the rooms below it: its hooks in the progress room
// (base/progress.hpp), its counters in the stats table (base/stats.hpp) and what a
// point-to-point receive asks of it (p2p/messages.hpp, ControlReceipt). Registered at the
// first use of zero-copy: a communicator's first zero-copy collective (negotiate.cpp) and
// TEMPIX_Comm_enable_zero_copy (p2p_enable.cpp), one of which comes before any zero-copy
// work.
#pragma once

namespace tempi {

void register_zero_copy();

}  // namespace tempi
