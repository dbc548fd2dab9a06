#include "base/type_cache.hpp"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <vector>
#include <mutex>

#include "backend.hpp"
#include "base/describe.hpp"
#include "host_packer.hpp"
#include "log.hpp"
#include "type_plan.hpp"
#include "base/validate.hpp"

namespace tempi {

namespace {

// Types whose typed bytes span more than this are not probed (below).
constexpr int64_t kMaxProbeSpan = int64_t(1) << 20;

// Whether the MPI library packs `type` as the standard's typemap (TEMPI's plan) does.
// Some do not: Open MPI 4.1 lays an hvector of negative stride out elsewhere (hvector(2,
// 2, -1, 24-byte elements) spans [0, 96) for it, [-1, 48) by the standard). TEMPI then
// leaves the type to the library, so that a GPU buffer gets the bytes a host buffer would:
// the library's. The true bounds tell, except that a library may report them wrong for a
// type it packs right (MPICH 4.0.2 for some darray types); where they differ, the library
// packs a probe whose every byte tells its place, and TEMPI's host packer packs it too.
bool library_agrees(MPI_Datatype type, const Plan &plan) {
  MPI_Count true_lb = 0, true_extent = 0;
  PMPI_Type_get_true_extent_x(type, &true_lb, &true_extent);
  const auto [lo, hi] = plan.typed_bounds();
  if (lo == true_lb && hi - lo == true_extent) return true;
  const int64_t from = std::min<int64_t>(lo, true_lb), to = std::max<int64_t>(hi, true_lb + true_extent);
  const int64_t bytes = plan.packed_size();
  bool same = false;
  if (to - from <= kMaxProbeSpan && bytes < INT_MAX / 2) {
    std::vector<unsigned char> typed(static_cast<size_t>(to - from)), mine(static_cast<size_t>(bytes)),
        theirs(static_cast<size_t>(bytes) + 16);
    for (size_t i = 0; i < typed.size(); ++i) {
      uint64_t z = (i + 1) * 0x9e3779b97f4a7c15ull;
      z = (z ^ (z >> 31)) * 0xbf58476d1ce4e5b9ull;
      typed[i] = (unsigned char)(z >> 56);
    }
    host_pack(plan, typed.data() - from, mine.data(), 0, bytes);
    int position = 0;
    const int err = PMPI_Pack(typed.data() - from, 1, type, theirs.data(), int(theirs.size()), &position, MPI_COMM_SELF);
    same = err == MPI_SUCCESS && position == bytes && std::equal(mine.begin(), mine.end(), theirs.begin());
  }
  if (same) return true;
  static std::atomic<bool> said{false};
  if (!said.exchange(true))
    TEMPI_LOG(Info,
              "the MPI library lays out a datatype other than the MPI standard's typemap (true bounds [%lld, %lld) "
              "against [%lld, %lld)); TEMPI leaves such types to the library (said once)",
              (long long)true_lb, (long long)(true_lb + true_extent), (long long)lo, (long long)hi);
  return false;
}

std::shared_ptr<const TypeInfo> build(MPI_Datatype type) {
  auto info = std::make_shared<TypeInfo>();
  info->committed = library_accepts(type);
  if (!info->committed) return info;  // an error for the caller to raise: nothing to plan
  const TypeDesc desc = describe(type);
  info->size = desc.size;
  info->plan = plan_type(desc);
  if (info->plan && info->plan->packed_size() > 0 && !library_agrees(type, *info->plan)) info->plan.reset();
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
  generation_.fetch_add(1, std::memory_order_acq_rel);
  lock.unlock();
}

void TypeCache::clear() {
  std::unordered_map<MPI_Datatype, std::shared_ptr<const TypeInfo>> old;
  {
    std::unique_lock lock(mutex_);
    old.swap(types_);
    generation_.fetch_add(1, std::memory_order_acq_rel);
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
