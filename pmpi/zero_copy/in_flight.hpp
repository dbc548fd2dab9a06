// Where the starts of persistent zero-copy collectives go between MPI_Start and their
// completion (zero_copy/progress.cpp): the list that zero_copy_progress completes, and
// TEMPI's zero-copy thread that issues and checks their reads.
#pragma once

#include <mpi.h>

#include <memory>

namespace tempi {

class ZeroCopyPersistent;

// The start of `op`, whose generalized request is `gated`: completed by zero_copy_progress
// once op->finished_now().
void track_start(std::shared_ptr<ZeroCopyPersistent> op, MPI_Request gated);
// Hands `op`'s reads to the zero-copy thread, which calls op->try_advance() until they are done.
// The thread holds `op` weakly: track_start's list keeps it until it finished.
void advance_on_thread(const std::shared_ptr<ZeroCopyPersistent> &op);

}  // namespace tempi
