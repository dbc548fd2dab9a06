// Typed-to-typed moves on the GPU (pairs.cpp): what Backend::move_async, prepare_moves and
// move_prepared do in cuda/ (core/backend_hooks.hpp, MoveHooks, says what they promise).
#pragma once

#include <vector>

#include "backend.hpp"

namespace tempi {

Status move_pairs(Backend &b, const std::vector<PairJob> &jobs, Fence &done);
Status prepare_pairs(const std::vector<PairJob> &jobs, Prepared &out);
Status move_prepared_pairs(const Prepared &p, Fence &done);

}  // namespace tempi
