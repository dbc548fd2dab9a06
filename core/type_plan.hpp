// The whole pipeline from description to plan, as run at MPI_Type_commit.
#pragma once

#include <optional>

#include "plan.hpp"
#include "type_desc.hpp"

namespace tempi {

// Translate, canonicalize and plan. Empty when TEMPI does not accelerate the type.
// Each plan gets a process-unique id (for backend caches keyed by plan).
std::optional<Plan> plan_type(const TypeDesc &desc);

// A new process-unique plan id (for plans made elsewhere, e.g. a peer's plan received for zero-copy).
uint64_t new_plan_id();

}  // namespace tempi
