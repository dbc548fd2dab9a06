// Plans by datatype handle, built on the first lookup of a handle (the first call
// with a GPU buffer) and dropped at MPI_Type_commit and when the library frees the
// type (an attribute's delete callback, whichever call freed it), so a handle the MPI
// library reuses never finds a stale plan. Safe under MPI_THREAD_MULTIPLE.
#pragma once

#include <mpi.h>

#include <memory>
#include <optional>
#include <shared_mutex>
#include <unordered_map>

#include "plan.hpp"

namespace tempi {

struct TypeInfo {
  std::optional<Plan> plan;  // empty: TEMPI does not accelerate this type
  int64_t size = 0;          // MPI_Type_size
  // Device-side plan data goes with the last user (a call in flight may outlive MPI_Type_free).
  ~TypeInfo();
};

class TypeCache {
 public:
  std::shared_ptr<const TypeInfo> find(MPI_Datatype type);  // plans on a miss
  void drop(MPI_Datatype type);
  void clear();
  size_t size();  // cached types (for tests and diagnostics)

 private:
  std::shared_mutex mutex_;
  std::unordered_map<MPI_Datatype, std::shared_ptr<const TypeInfo>> types_;
};

TypeCache &type_cache();

}  // namespace tempi
