// A C++ program built against the installed TEMPI (tests/install/run.sh).
#include <mpi.h>
#include <tempi.h>

#include <cstdio>
#include <vector>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, wrong = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Datatype every_third;
  MPI_Type_vector(5, 1, 3, MPI_DOUBLE, &every_third);
  MPI_Type_commit(&every_third);
  std::vector<double> buf(15, 0.0);
  if (rank == 0) {
    for (size_t i = 0; i < buf.size(); ++i) buf[i] = double(i);
    MPI_Request r;
    MPI_Isend(buf.data(), 1, every_third, 1, 0, MPI_COMM_WORLD, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
  } else if (rank == 1) {
    MPI_Recv(buf.data(), 5, MPI_DOUBLE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    for (int i = 0; i < 5; ++i) wrong += buf[size_t(i)] != 3.0 * i;
  }
  MPI_Type_free(&every_third);
  MPI_Finalize();
  if (rank == 1) std::printf("consumer (C++): %s, TEMPI %s\n", wrong ? "WRONG" : "ok", TEMPI_VERSION);
  return wrong != 0;
}
