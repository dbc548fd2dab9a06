#include "type_plan.hpp"

#include <atomic>

#include "canonicalize.hpp"
#include "log.hpp"
#include "translate.hpp"

namespace tempi {

uint64_t new_plan_id() {
  static std::atomic<uint64_t> next_id{1};
  return next_id++;
}

std::optional<Plan> plan_type(const TypeDesc &desc) {
  std::optional<Type> ir = translate(desc);
  if (!ir) return std::nullopt;
  std::optional<Plan> plan = make_plan(canonicalize(std::move(*ir)), desc.extent);
  if (!plan) return std::nullopt;
  if (plan->packed_size() != desc.size) {  // a modelling gap: never risk wrong bytes
    TEMPI_LOG(Warn, "type %s: plan holds %lld bytes, MPI says %lld; not accelerated", to_string(desc).c_str(),
              (long long)plan->packed_size(), (long long)desc.size);
    return std::nullopt;
  }
  plan->id = new_plan_id();
  return plan;
}

}  // namespace tempi
