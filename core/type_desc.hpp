// A plain description of an MPI datatype, mirroring its constructor (the MPI
// "combiner") and the arguments MPI_Type_get_contents returns. It is the input of
// translation and knows nothing of MPI itself, so core/ builds and tests without
// mpi.h. pmpi/base/describe.cpp fills it from a real MPI datatype; the builders below
// fill it in tests, computing lower bound and extent by the MPI standard's rules.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tempi {

enum class Combiner {
  Named,
  Dup,
  Contiguous,
  Vector,
  Hvector,
  Indexed,
  Hindexed,
  IndexedBlock,
  HindexedBlock,
  Struct,
  Subarray,
  Darray,
  Resized,
  Unsupported,  // anything else (Fortran parameterized reals, ...): never planned
};

// Orders and distributions, independent of mpi.h's constant values.
enum class ArrayOrder : int64_t { C = 0, Fortran = 1 };
enum class Distribution : int64_t { None = 0, Block = 1, Cyclic = 2 };
constexpr int64_t kDefaultDistArg = -1;  // MPI_DISTRIBUTE_DFLT_DARG

// `ints`, `addrs` and `children` follow MPI_Type_get_contents' layout for the
// combiner (MPI 4.0 section 5.1.13), with integers widened to 64 bits and with
// order / distribution constants mapped to the enums above.
struct TypeDesc {
  Combiner combiner = Combiner::Unsupported;
  int64_t size = 0;    // bytes of data (MPI_Type_size)
  int64_t lb = 0;      // MPI_Type_get_extent's lower bound
  int64_t extent = 0;  // MPI_Type_get_extent's extent
  std::vector<int64_t> ints;
  std::vector<int64_t> addrs;
  std::vector<TypeDesc> children;
};

// One line that rebuilds the type with the builders below (used in test failure messages).
std::string to_string(const TypeDesc &t);

// Builders with MPI's semantics; extents follow the standard's typemap rules (no
// alignment padding of struct upper bounds, which is implementation-defined).
namespace desc {
TypeDesc named(int64_t size);
TypeDesc dup(const TypeDesc &old);
TypeDesc contiguous(int64_t count, const TypeDesc &old);
TypeDesc vector(int64_t count, int64_t blocklength, int64_t stride, const TypeDesc &old);
TypeDesc hvector(int64_t count, int64_t blocklength, int64_t stride_bytes, const TypeDesc &old);
TypeDesc indexed(const std::vector<int64_t> &blocklengths, const std::vector<int64_t> &displacements,
                 const TypeDesc &old);
TypeDesc hindexed(const std::vector<int64_t> &blocklengths, const std::vector<int64_t> &byte_displacements,
                  const TypeDesc &old);
TypeDesc indexed_block(int64_t blocklength, const std::vector<int64_t> &displacements, const TypeDesc &old);
TypeDesc hindexed_block(int64_t blocklength, const std::vector<int64_t> &byte_displacements, const TypeDesc &old);
TypeDesc structure(const std::vector<int64_t> &blocklengths, const std::vector<int64_t> &byte_displacements,
                   const std::vector<TypeDesc> &types);
TypeDesc subarray(const std::vector<int64_t> &sizes, const std::vector<int64_t> &subsizes,
                  const std::vector<int64_t> &starts, ArrayOrder order, const TypeDesc &old);
TypeDesc darray(int64_t size, int64_t rank, const std::vector<int64_t> &gsizes,
                const std::vector<Distribution> &distribs, const std::vector<int64_t> &dargs,
                const std::vector<int64_t> &psizes, ArrayOrder order, const TypeDesc &old);
TypeDesc resized(int64_t lb, int64_t extent, const TypeDesc &old);
}  // namespace desc

}  // namespace tempi
