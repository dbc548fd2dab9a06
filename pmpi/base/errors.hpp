// MPI errors decided by TEMPI: one log line saying what was wrong, then the
// communicator's error handler (as the MPI library itself would do), then the code.
#pragma once

#include <mpi.h>

#include "backend.hpp"

namespace tempi {

int raise_error(MPI_Comm comm, int error_class, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

// The MPI error class of a failed backend call: MPI_ERR_NO_MEM when memory ran out,
// MPI_ERR_INTERN when the GPU failed (its error was logged and cleared where it happened).
int error_class_of(Status st);

}  // namespace tempi
