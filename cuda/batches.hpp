// The engine's batches of moves on the GPU (batches.cpp): what Backend::pack_async and
// unpack_async do in cuda/, and what the typed-to-typed moves (pairs.cpp) issue for pairs
// that go through a packed form.
#pragma once

#include <vector>

#include "backend.hpp"

namespace tempi {

// Issues the jobs (all on the current device) on this thread's stream without waiting,
// and records `done` after them.
Status issue_moves(Backend &b, const std::vector<MoveJob> &jobs, bool to_packed, Fence &done);

}  // namespace tempi
