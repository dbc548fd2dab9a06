// MPI errors decided by TEMPI: one log line saying what was wrong, then the
// communicator's error handler (as the MPI library itself would do), then the code.
#pragma once

#include <mpi.h>

namespace tempi {

int raise_error(MPI_Comm comm, int error_class, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

}  // namespace tempi
