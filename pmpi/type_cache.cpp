#include "type_cache.hpp"

#include <algorithm>
#include <mutex>

#include "backend.hpp"
#include "describe.hpp"
#include "log.hpp"
#include "type_plan.hpp"
#include "validate.hpp"

namespace tempi {

namespace {

std::shared_ptr<const TypeInfo> build(MPI_Datatype type) {
  auto info = std::make_shared<TypeInfo>();
  info->committed = library_accepts(type);
  if (!info->committed) return info;  // an error for the caller to raise: nothing to plan
  const TypeDesc desc = describe(type);
  info->size = desc.size;
  info->plan = plan_type(desc);
  if (log_enabled(LogLevel::Debug))
    log(LogLevel::Debug, "type %s -> %s", to_string(desc).c_str(),
        info->plan ? to_string(*info->plan).c_str() : "not accelerated");
  return info;
}

// A plan lives exactly as long as its type: an attribute on the type, whose delete
// callback the MPI library runs when the type is freed by any path (TEMPI's wrapper, a
// Fortran binding that calls PMPI_Type_free, another tool), drops it. So a handle the
// library reuses never finds the plan of the type it named before. Predefined types
// are never freed and carry none; duplicates do not inherit it (MPI_TYPE_NULL_COPY_FN).
int drop_at_free(MPI_Datatype type, int, void *, void *) {
  type_cache().drop(type);
  return MPI_SUCCESS;
}

void watch_lifetime(MPI_Datatype type) {
  static const int keyval = [] {
    int k = MPI_KEYVAL_INVALID;
    PMPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, drop_at_free, &k, nullptr);
    return k;
  }();
  int ints = 0, addrs = 0, types = 0, combiner = MPI_COMBINER_NAMED;
  PMPI_Type_get_envelope(type, &ints, &addrs, &types, &combiner);
  // Set before the plan is cached: setting it again runs the delete callback first.
  if (combiner != MPI_COMBINER_NAMED && keyval != MPI_KEYVAL_INVALID) PMPI_Type_set_attr(type, keyval, nullptr);
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
  if (!info->committed) return info;
  watch_lifetime(type);
  std::unique_lock lock(mutex_);
  const auto kept = types_.emplace(type, info).first->second;  // another thread may have won
  peak_ = std::max(peak_, types_.size());
  return kept;
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

size_t TypeCache::peak() {
  std::shared_lock lock(mutex_);
  return peak_;
}

TypeCache &type_cache() {
  static TypeCache cache;
  return cache;
}

}  // namespace tempi
