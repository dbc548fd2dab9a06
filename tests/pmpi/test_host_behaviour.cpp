// Host-buffer behaviour an application relies on. Built twice, linked with and
// without TEMPI: both builds must pass, so TEMPI changes nothing on host buffers.
#include <mpi.h>

#include <catch2/catch.hpp>
#include <numeric>
#include <vector>

namespace {
int rank() {
  int r;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
}  // namespace

TEST_CASE("a strided host object crosses between ranks", "[host]") {
  const int rows = 50, cols = 8, pitch = 13;
  MPI_Datatype col_block;
  MPI_Type_vector(rows, cols, pitch, MPI_INT, &col_block);
  MPI_Type_commit(&col_block);
  std::vector<int> grid(rows * pitch, -1);
  if (rank() == 0) {
    std::iota(grid.begin(), grid.end(), 0);
    MPI_Send(grid.data(), 1, col_block, 1, 7, MPI_COMM_WORLD);
  } else if (rank() == 1) {
    std::vector<int> got(rows * cols, -1);
    MPI_Status st;
    MPI_Recv(got.data(), rows * cols, MPI_INT, 0, 7, MPI_COMM_WORLD, &st);
    int n = 0;
    MPI_Get_count(&st, MPI_INT, &n);
    CHECK(n == rows * cols);
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) REQUIRE(got[r * cols + c] == r * pitch + c);
  }
  MPI_Type_free(&col_block);
}

TEST_CASE("pack and unpack of host buffers", "[host]") {
  MPI_Datatype t;
  const int bl[] = {2, 1, 3};
  const int disp[] = {5, 0, 9};
  MPI_Type_indexed(3, bl, disp, MPI_DOUBLE, &t);
  MPI_Type_commit(&t);
  std::vector<double> src(2 * 12);
  std::iota(src.begin(), src.end(), 1.0);
  int size = 0;
  MPI_Pack_size(2, t, MPI_COMM_WORLD, &size);
  CHECK(size >= 12 * int(sizeof(double)));
  std::vector<char> packed(size);
  int pos = 0;
  REQUIRE(MPI_Pack(src.data(), 2, t, packed.data(), size, &pos, MPI_COMM_WORLD) == MPI_SUCCESS);
  CHECK(pos == 12 * int(sizeof(double)));
  const double *p = reinterpret_cast<const double *>(packed.data());
  const double expect[] = {6, 7, 1, 10, 11, 12, 18, 19, 13, 22, 23, 24};
  for (int i = 0; i < 12; ++i) CHECK(p[i] == expect[i]);

  std::vector<double> back(24, -1.0);
  pos = 0;
  REQUIRE(MPI_Unpack(packed.data(), size, &pos, back.data(), 2, t, MPI_COMM_WORLD) == MPI_SUCCESS);
  for (int i = 0; i < 24; ++i) {
    const int k = i % 12;
    const bool covered = k == 0 || k == 5 || k == 6 || k == 9 || k == 10 || k == 11;
    CHECK(back[i] == (covered ? src[i] : -1.0));
  }
  MPI_Type_free(&t);
}

TEST_CASE("nonblocking host exchange with statuses", "[host]") {
  const int me = rank(), peer = 1 - me;
  if (me > 1) return;
  std::vector<float> out(1000, float(me)), in(1000, -1.f);
  MPI_Request reqs[2];
  MPI_Irecv(in.data(), 1000, MPI_FLOAT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &reqs[0]);
  MPI_Isend(out.data(), 1000, MPI_FLOAT, peer, 3 + me, MPI_COMM_WORLD, &reqs[1]);
  MPI_Status st[2];
  MPI_Waitall(2, reqs, st);
  CHECK(st[0].MPI_SOURCE == peer);
  CHECK(st[0].MPI_TAG == 3 + peer);
  CHECK(in[999] == float(peer));
}
