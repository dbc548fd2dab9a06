// Plans by datatype handle, built on the first lookup of a handle (the first call
// with a GPU buffer) and dropped at MPI_Type_commit and when the library frees the
// type (an attribute's delete callback, whichever call freed it), so a handle the MPI
// library reuses never finds a stale plan. Safe under MPI_THREAD_MULTIPLE.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <unordered_map>

#include "plan.hpp"

namespace tempi {

struct TypeInfo {
  std::optional<Plan> plan;  // empty: TEMPI does not accelerate this type
  int64_t size = 0;          // MPI_Type_size
  bool committed = true;     // the MPI library accepts it for communication (validate.hpp)
  // Device-side plan data goes with the last user (a call in flight may outlive MPI_Type_free).
  ~TypeInfo();
};

class TypeCache {
 public:
  // Plans on a miss. A type that is not committed is described but not kept, so that
  // its commit (even one that bypasses TEMPI) is seen at the next lookup.
  std::shared_ptr<const TypeInfo> find(MPI_Datatype type);
  void drop(MPI_Datatype type);
  void clear();
  size_t size();  // cached types (for tests and diagnostics)
  size_t peak();  // the most types cached at once (the log at MPI_Finalize, the soak test)
  // Changes whenever a cached type is dropped: while it has not, every handle found before
  // still finds the same TypeInfo (what a repeated call keeps may rely on its plans).
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }

 private:
  std::atomic<uint64_t> generation_{0};
  std::shared_mutex mutex_;
  std::unordered_map<MPI_Datatype, std::shared_ptr<const TypeInfo>> types_;
  size_t peak_ = 0;
};

TypeCache &type_cache();

}  // namespace tempi
