// What the MPI library gets for one side of a collective (Wire): the application's counts,
// displacements and types where TEMPI leaves the side to the library, else counts and
// displacements of packed bytes, in a unit of several bytes only where an int cannot hold
// them. A nonblocking or persistent collective keeps its Wires with its op: the library
// reads the arrays until the call completes.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <vector>

#include "coll/side.hpp"
#include "base/type_cache.hpp"

namespace tempi {

// The counts, displacements and types the library gets for one side: the user's for
// User and Region sides, bytes for Pack sides (in a unit of several bytes only where an
// int cannot hold them). Kept with the op: a nonblocking collective reads them until it completes.
struct Wire {
  int count = 0;                      // uniform blocks
  MPI_Datatype unit = MPI_BYTE;
  std::vector<int> counts, displs;    // per block
  std::vector<MPI_Aint> adispls;      // per block, MPI_Aint byte displacements
  std::vector<MPI_Datatype> types;    // per block
  OwnedType owned;                    // a unit TEMPI made
  std::vector<OwnedType> placed;      // per-block types that carry a displacement past 2 GiB
};

namespace coll {

// Uniform blocks: one count and type for all of them. Errors are raised on `comm`.
int wire_uniform(const Side &s, int user_count, MPI_Datatype user_type, MPI_Comm comm, const char *call, Wire &w);

// The library's arguments of a v-variant side.
struct VArgs {
  const int *counts, *displs;
  MPI_Datatype type;
};
// Per-block counts and displacements in units of one type (the v-variants).
int wire_varying(const Side &s, const int *user_counts, const int *user_displs, MPI_Datatype user_type,
                 MPI_Comm comm, const char *call, Wire &w, VArgs &out);

// The library's arguments of a w-variant side (int or MPI_Aint displacements).
template <class Disp>
struct WArgs {
  const int *counts;
  const Disp *displs;
  const MPI_Datatype *types;
};
// Per-block counts, byte displacements and types (the w-variants), in arrays of at least
// `room` entries; `displs` is the Wire's array of the call's displacement type.
template <class Disp>
int wire_typed(const Side &s, const int *user_counts, const Disp *user_displs, const MPI_Datatype *user_types,
               MPI_Comm comm, const char *call, Wire &w, std::vector<Disp> &displs, WArgs<Disp> &out,
               size_t room = 1);

}  // namespace coll

}  // namespace tempi
