// A typed block of a collective's buffer argument and its plan placed at its data: the unit
// in which collectives (coll/side.hpp) and zero-copy (zero_copy/zero_copy.hpp) see a buffer.
// One block per peer; counts and displacements here are in elements and bytes, whatever
// form (v, w, neighbourhood w) the application's call gave them in.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "plan.hpp"
#include "base/type_cache.hpp"

namespace tempi {

// One typed block of a buffer argument: `count` elements of `type` at `disp` bytes from
// the buffer's address.
struct Block {
  int64_t disp = 0;
  int count = 0;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  bool load = false;   // the library reads it: packed (or copied) before the call
  bool store = false;  // the library writes it: unpacked (or copied back) after the call
};

// MPI's checks of a buffer argument's blocks that the library no longer sees once TEMPI
// rewires them: counts not negative, the datatypes of non-empty blocks not null and
// committed (an empty block's type is never looked at). An MPI error code.
int check_types(const std::vector<Block> &blocks, MPI_Comm comm, const char *call);

// A block's plan placed at its data: GPU work starts at `typed` (the block's address, or
// its first byte where the block's address lies outside the bytes it touches).
struct PlacedBlock {
  std::shared_ptr<const TypeInfo> info;  // keeps device-side plan data alive
  Plan plan;
  char *typed = nullptr;
  int64_t bytes = 0;  // packed
  int64_t low = 0, high = 0;  // the bytes it touches: [typed + low, typed + high)
};
// False when TEMPI cannot plan the block's type. `same`: the info of a block of the same
// type (neighbouring blocks of most calls share one lookup), or null.
bool place_block(void *buf, const Block &b, const std::shared_ptr<const TypeInfo> *same, PlacedBlock &out);

// Whether a buffer argument holds GPU data (device or managed memory; never MPI_IN_PLACE).
bool gpu_data(const void *buf);

}  // namespace tempi
