/* The program of the link-route tests (tests/link/meson.build): one rank sends itself a
 * strided vector with MPI_Isend and MPI_Irecv and checks what arrived, so that a run goes
 * through the calls TEMPI wraps. Built with -DSTART_TEMPI it first asks for zero-copy
 * point-to-point (TEMPIX_Comm_enable_zero_copy, tempi.h), which starts TEMPI even where no
 * wrapper of TEMPI's is linked and pulls its archive in by that one name: the program
 * linked with the archive after the MPI library holds TEMPI in part. */
#include <mpi.h>
#include <stdio.h>
#if defined(START_TEMPI)
#include "tempi.h"
#endif

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
#if defined(START_TEMPI)
  int enabled = 0;
  TEMPIX_Comm_enable_zero_copy(MPI_COMM_WORLD, 1, &enabled);
#endif
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  double sent[16], got[16] = {0};
  for (int i = 0; i < 16; ++i) sent[i] = i;
  MPI_Datatype column;
  MPI_Type_vector(4, 1, 4, MPI_DOUBLE, &column);
  MPI_Type_commit(&column);
  MPI_Request r[2];
  MPI_Status st[2];
  MPI_Irecv(got, 1, column, rank, 0, MPI_COMM_WORLD, &r[0]);
  MPI_Isend(sent, 1, column, rank, 0, MPI_COMM_WORLD, &r[1]);
  MPI_Waitall(2, r, st);
  int wrong = 0;
  for (int i = 0; i < 4; ++i) wrong += got[4 * i] != 4.0 * i;
  MPI_Type_free(&column);
  MPI_Finalize();
  if (wrong) printf("route: %d elements wrong\n", wrong);
  return wrong != 0;
}
