/* A program built against the installed TEMPI (tests/install/run.sh): two ranks move a
 * strided type; it must link with nothing but what the package says and find tempi.h. */
#include <mpi.h>
#include <stdio.h>
#include <tempi.h>

#if !defined(TEMPI_VERSION_NUMBER) || TEMPI_VERSION_NUMBER != TEMPI_VERSION_MAJOR * 10000 + TEMPI_VERSION_MINOR * 100 + TEMPI_VERSION_PATCH
#error "tempi.h: no consistent version macros"
#endif

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, wrong = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Datatype every_other;
  MPI_Type_vector(4, 1, 2, MPI_INT, &every_other);
  MPI_Type_commit(&every_other);
  int buf[8] = {0};
  if (rank == 0) {
    for (int i = 0; i < 8; ++i) buf[i] = i;
    MPI_Send(buf, 1, every_other, 1, 0, MPI_COMM_WORLD);
  } else if (rank == 1) {
    MPI_Recv(buf, 4, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    for (int i = 0; i < 4; ++i) wrong += buf[i] != 2 * i;
  }
  wrong += TEMPIX_Set_method("auto") != MPI_SUCCESS;
  MPI_Type_free(&every_other);
  MPI_Finalize();
  if (rank == 1) printf("consumer (C): %s, TEMPI %s\n", wrong ? "WRONG" : "ok", TEMPI_VERSION);
  return wrong != 0;
}
