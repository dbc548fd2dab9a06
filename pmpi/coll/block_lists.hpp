// The blocks of a collective's buffer argument from the application's arguments: one block
// of a single count, n equal blocks, or n blocks of per-peer counts and displacements (in
// extents of one type for the v-forms, in bytes with per-peer types for the w-forms). Null
// arrays that the call needs are MPI_ERR_ARG, raised on the communicator.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <vector>

#include "base/block.hpp"

namespace tempi {
namespace coll {

// One block of `count` elements at the buffer's address.
std::vector<Block> single(int count, MPI_Datatype type, bool load, bool store);

// n blocks of `count` elements, block i at i * count * extent.
std::vector<Block> uniform(int n, int count, MPI_Datatype type, bool load, bool store);

// MPI_ERR_ARG for a null array (`what`) of `call`, raised on `comm`.
int null_array(MPI_Comm comm, const char *call, const char *what);

// n blocks of counts[i] elements at displs[i] extents.
int varying(int n, const int counts[], const int displs[], MPI_Datatype type, bool load, bool store, MPI_Comm comm,
            const char *call, std::vector<Block> &v);

// n blocks of counts[i] elements of types[i] at displs[i] bytes.
template <class Disp>
int typed(int n, const int counts[], const Disp displs[], const MPI_Datatype types[], bool load, bool store,
          MPI_Comm comm, const char *call, std::vector<Block> &v) {
  if (n > 0 && !counts) return null_array(comm, call, "the counts array");
  if (n > 0 && !displs) return null_array(comm, call, "the displacements array");
  if (n > 0 && !types) return null_array(comm, call, "the datatypes array");
  v.resize(size_t(n));
  for (int i = 0; i < n; ++i) v[size_t(i)] = Block{int64_t(displs[i]), counts[i], types[i], load, store};
  return MPI_SUCCESS;
}

// Blocks from or to MPI_PROC_NULL (a Cartesian border) are neither sent nor written.
void skip_null_peers(std::vector<Block> &blocks, const std::vector<int> &peers);

}  // namespace coll
}  // namespace tempi
