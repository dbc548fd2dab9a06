// MPI_Init, MPI_Init_thread, MPI_Finalize: TEMPI starts after the library and
// stops before it. Nothing depends on these having run (see runtime.hpp).
#include "forward.hpp"
#include "runtime.hpp"

extern "C" {

int TEMPI_WRAPPER(MPI_Init)(int *argc, char ***argv) {
  const int err = TEMPI_NEXT(MPI_Init)(argc, argv);
  if (err == MPI_SUCCESS) tempi::on_mpi_initialized();
  return err;
}

int TEMPI_WRAPPER(MPI_Init_thread)(int *argc, char ***argv, int required, int *provided) {
  const int err = TEMPI_NEXT(MPI_Init_thread)(argc, argv, required, provided);
  if (err == MPI_SUCCESS) tempi::on_mpi_initialized();
  return err;
}

int TEMPI_WRAPPER(MPI_Finalize)() {
  tempi::on_mpi_finalizing();
  return TEMPI_NEXT(MPI_Finalize)();
}

}  // extern "C"
