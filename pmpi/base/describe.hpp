// Reads an MPI datatype into core's TypeDesc through PMPI_Type_get_envelope and
// PMPI_Type_get_contents, freeing every derived handle that get_contents returns.
#pragma once

#include <mpi.h>

#include "type_desc.hpp"

namespace tempi {

TypeDesc describe(MPI_Datatype type);

}  // namespace tempi
