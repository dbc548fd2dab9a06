// MPI_Type_commit plans the type; MPI_Type_free drops the plan before the handle
// can be reused.
#include "forward.hpp"
#include "runtime.hpp"
#include "type_cache.hpp"

extern "C" {

int TEMPI_WRAPPER(MPI_Type_commit)(MPI_Datatype *datatype) {
  const int err = TEMPI_NEXT(MPI_Type_commit)(datatype);
  if (err == MPI_SUCCESS && tempi::active()) tempi::type_cache().commit(*datatype);
  return err;
}

int TEMPI_WRAPPER(MPI_Type_free)(MPI_Datatype *datatype) {
  if (datatype && tempi::active()) tempi::type_cache().drop(*datatype);
  return TEMPI_NEXT(MPI_Type_free)(datatype);
}

}  // extern "C"
