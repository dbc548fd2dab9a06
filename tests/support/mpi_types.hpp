// Builds a real MPI datatype from a description (the inverse of pmpi/describe).
#pragma once

#include <mpi.h>

#include "type_desc.hpp"

namespace tempi::test {

// A committed datatype; the caller frees it.
MPI_Datatype build_mpi_type(const TypeDesc &d);

}  // namespace tempi::test
