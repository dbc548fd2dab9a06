// The engine's batches of moves on the GPU (batches.cpp): what Backend::pack_async and
// unpack_async do in cuda/, and what the typed-to-typed moves (pairs.cpp) issue for pairs
// that go through a packed form.
#pragma once

#include <cuda_runtime_api.h>

#include <vector>

#include "backend.hpp"

namespace tempi {

// Issues the jobs (all on the current device) on this thread's stream without waiting,
// and records `done` after them.
Status issue_moves(Backend &b, const std::vector<MoveJob> &jobs, bool to_packed, Fence &done);
// The same on the application's `stream` (the enqueue calls), with no fence: every job's
// packed side is mapped pinned memory (no staged method), so nothing outlives the call.
Status issue_moves_on(Backend &b, const std::vector<MoveJob> &jobs, bool to_packed, cudaStream_t stream);

}  // namespace tempi
