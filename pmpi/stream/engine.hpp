// TEMPI's stream thread (engine.cpp): hands enqueued operations to the MPI library once
// their stream reached them, and tells the stream when the library finished them.
#pragma once

#include <mpi.h>

#include <memory>

#include "stream/op.hpp"

namespace tempi {
namespace streams {

// Takes `op` (its words in place, its start not yet on the stream, or just put there).
// Operations of one communicator are handed to the library in the order they were added.
void engine_add(std::shared_ptr<Op> op);
// Whether an operation of `comm` waits for its stream still (not handed to the library).
bool engine_unposted(MPI_Comm comm);
// At MPI_Finalize: waits until every operation whose start the stream reached is finished
// (a warning every 30 s), then stops the thread.
void engine_drain();
void engine_shutdown();

}  // namespace streams
}  // namespace tempi
