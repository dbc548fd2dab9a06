#include "base/errors.hpp"

#include <cstdarg>
#include <cstdio>

#include "log.hpp"

namespace tempi {

int raise_error(MPI_Comm comm, int error_class, const char *fmt, ...) {
  char what[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  log(LogLevel::Error, "%s", what);
  PMPI_Comm_call_errhandler(comm, error_class);
  return error_class;
}

int error_class_of(Status st) { return st == Status::NoMemory ? MPI_ERR_NO_MEM : MPI_ERR_INTERN; }

}  // namespace tempi
