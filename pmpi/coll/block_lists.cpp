// Blocks from the application's arguments (block_lists.hpp).
#include "coll/block_lists.hpp"

#include <algorithm>

#include "base/errors.hpp"

namespace tempi {
namespace coll {

namespace {

int64_t extent_of(MPI_Datatype type) {
  MPI_Count lb = 0, extent = 0;
  PMPI_Type_get_extent_x(type, &lb, &extent);
  return extent;
}

int64_t step_of(int count, MPI_Datatype type) {
  return type == MPI_DATATYPE_NULL || count <= 0 ? 0 : int64_t(count) * extent_of(type);
}

}  // namespace

std::vector<Block> single(int count, MPI_Datatype type, bool load, bool store) {
  return {Block{0, count, type, load, store}};
}

// n blocks of `count` elements, block i at i * count * extent.
std::vector<Block> uniform(int n, int count, MPI_Datatype type, bool load, bool store) {
  const int64_t step = step_of(count, type);
  std::vector<Block> v(size_t(std::max(n, 0)));
  for (int i = 0; i < n; ++i) v[size_t(i)] = Block{i * step, count, type, load, store};
  return v;
}

int null_array(MPI_Comm comm, const char *call, const char *what) {
  return raise_error(comm, MPI_ERR_ARG, "%s: %s is NULL", call, what);
}

int varying(int n, const int counts[], const int displs[], MPI_Datatype type, bool load, bool store, MPI_Comm comm,
            const char *call, std::vector<Block> &v) {
  if (n > 0 && !counts) return null_array(comm, call, "the counts array");
  if (n > 0 && !displs) return null_array(comm, call, "the displacements array");
  const int64_t extent = type == MPI_DATATYPE_NULL ? 0 : extent_of(type);
  v.resize(size_t(n));
  for (int i = 0; i < n; ++i) v[size_t(i)] = Block{int64_t(displs[i]) * extent, counts[i], type, load, store};
  return MPI_SUCCESS;
}

void skip_null_peers(std::vector<Block> &blocks, const std::vector<int> &peers) {
  for (size_t i = 0; i < blocks.size() && i < peers.size(); ++i)
    if (peers[i] == MPI_PROC_NULL) blocks[i].load = blocks[i].store = false;
}

}  // namespace coll
}  // namespace tempi
