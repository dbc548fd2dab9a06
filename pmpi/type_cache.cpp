#include "type_cache.hpp"

#include <mutex>

#include "backend.hpp"
#include "describe.hpp"
#include "log.hpp"
#include "type_plan.hpp"

namespace tempi {

namespace {

std::shared_ptr<const TypeInfo> build(MPI_Datatype type) {
  auto info = std::make_shared<TypeInfo>();
  const TypeDesc desc = describe(type);
  info->size = desc.size;
  info->plan = plan_type(desc);
  if (log_enabled(LogLevel::Debug))
    log(LogLevel::Debug, "type %s -> %s", to_string(desc).c_str(),
        info->plan ? to_string(*info->plan).c_str() : "not accelerated");
  return info;
}

}  // namespace

TypeInfo::~TypeInfo() {
  if (plan) gpu_backend().release_plan(plan->id);
}

std::shared_ptr<const TypeInfo> TypeCache::find(MPI_Datatype type) {
  {
    std::shared_lock lock(mutex_);
    auto it = types_.find(type);
    if (it != types_.end()) return it->second;
  }
  std::shared_ptr<const TypeInfo> info = build(type);
  std::unique_lock lock(mutex_);
  return types_.emplace(type, info).first->second;  // another thread may have won
}

void TypeCache::drop(MPI_Datatype type) {
  std::shared_ptr<const TypeInfo> old;  // released after the lock
  std::unique_lock lock(mutex_);
  auto it = types_.find(type);
  if (it == types_.end()) return;
  old = std::move(it->second);
  types_.erase(it);
  lock.unlock();
}

void TypeCache::clear() {
  std::unordered_map<MPI_Datatype, std::shared_ptr<const TypeInfo>> old;
  {
    std::unique_lock lock(mutex_);
    old.swap(types_);
  }
}

size_t TypeCache::size() {
  std::shared_lock lock(mutex_);
  return types_.size();
}

TypeCache &type_cache() {
  static TypeCache cache;
  return cache;
}

}  // namespace tempi
