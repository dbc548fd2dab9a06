// Zero-copy's place in the progress room and the stats table (base/progress.hpp,
// base/stats.hpp): registered when a communicator's node share is first made, which every
// zero-copy collective and zero-copy message needs first.
#pragma once

namespace tempi {

void register_zero_copy();

}  // namespace tempi
