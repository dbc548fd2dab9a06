// Types are planned on their first use with a GPU buffer (TypeCache::find), not
// here: commit stays as cheap as the MPI library's own, and types only ever used on
// host buffers never pay for planning. Commit and free both drop any plan cached
// under the handle, so a handle the MPI library reuses never finds a stale plan.
#include "base/forward.hpp"
#include "base/runtime.hpp"
#include "base/type_cache.hpp"

extern "C" {

int TEMPI_WRAPPER(MPI_Type_commit)(MPI_Datatype *datatype) {
  const int err = TEMPI_NEXT(MPI_Type_commit)(datatype);
  if (err == MPI_SUCCESS && tempi::active()) tempi::type_cache().drop(*datatype);
  return err;
}

int TEMPI_WRAPPER(MPI_Type_free)(MPI_Datatype *datatype) {
  if (datatype && tempi::active()) tempi::type_cache().drop(*datatype);
  return TEMPI_NEXT(MPI_Type_free)(datatype);
}

}  // extern "C"
