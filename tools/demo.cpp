// TEMPI demo: two ranks exchange a strided 3-D object (a halo face of a grid) that
// is described by an MPI subarray type, with plain MPI_Send and MPI_Recv. With a GPU
// the grid lives in device memory: TEMPI packs the face with a kernel and moves the
// packed bytes in a way the MPI library can handle (CUDA-aware or not). Without one
// the grid lives in host memory and the calls pass through to MPI untouched. Run with
// TEMPI_LOG_LEVEL=debug to see each plan.
#include <mpi.h>

#include <cstdio>
#include <vector>

#include "backend.hpp"
#include "gpu_select.hpp"
#include "base/type_cache.hpp"
#include "help.hpp"

int main(int argc, char **argv) {
  const char *usage =
    "usage: mpiexec -n 2 tempi_demo\n"
    "\n"
    "Two ranks exchange a strided 3-D face of a grid, described by an MPI subarray type, with\n"
    "plain MPI_Send and MPI_Recv. With a GPU the grid lives in device memory and TEMPI packs\n"
    "the face with a kernel; without one it lives in host memory and the calls pass through.\n"
    "Run with TEMPI_LOG_LEVEL=debug to see each plan.\n";
  if (tempi::tools::print_help_if_asked(argc, argv, usage)) return 0;
  if (tempi::tools::reject_unknown(argc, argv, {}, {}, usage)) return 2;
  tempi::tools::select_gpu_before_mpi_init();  // one GPU per rank where there are several
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 2) {
    if (rank == 0) std::printf("demo: run with 2 ranks (mpiexec -n 2)\n");
    MPI_Finalize();
    return 1;
  }
  tempi::Backend &gpu = tempi::gpu_backend();
  const bool on_gpu = gpu.has_gpu();

  // A 64 x 64 x 64 grid of floats; the object is its y-face of depth 2 (64 x 2 x 64).
  const int n = 64, depth = 2;
  const int sizes[] = {n, n, n}, sub[] = {n, depth, n}, start[] = {0, 0, 0};
  MPI_Datatype face;
  MPI_Type_create_subarray(3, sizes, sub, start, MPI_ORDER_C, MPI_FLOAT, &face);
  MPI_Type_commit(&face);
  const auto info = tempi::type_cache().find(face);
  if (rank == 0) {
    std::printf("demo: %s; TEMPI planned the face type as %s\n",
                on_gpu ? ("GPU " + gpu.device_name()).c_str() : "no GPU, so the grid is in host memory",
                info->plan ? tempi::to_string(*info->plan).c_str() : "(not accelerated)");
  }

  const size_t elems = size_t(n) * n * n;
  std::vector<float> host(elems);
  for (size_t i = 0; i < elems; ++i) host[i] = rank == 0 ? float(i) : -1.f;
  float *grid = host.data();
  if (on_gpu) {
    void *d = nullptr;
    if (gpu.allocate_device(elems * sizeof(float), &d) != tempi::Status::Ok ||
        gpu.copy(d, host.data(), elems * sizeof(float)) != tempi::Status::Ok)
      MPI_Abort(MPI_COMM_WORLD, 3);
    grid = static_cast<float *>(d);
  }

  // The application's code is plain MPI: the typed GPU buffer goes to MPI_Send and
  // MPI_Recv as it is.
  if (rank == 0) {
    MPI_Send(grid, 1, face, 1, 0, MPI_COMM_WORLD);
    int bytes = 0;
    MPI_Type_size(face, &bytes);
    std::printf("demo: rank 0 sent the face (%d bytes in %d rows) with MPI_Send(grid, 1, face, ...) from %s\n",
                bytes, n * depth, on_gpu ? "GPU memory; TEMPI packed it with a kernel" : "host memory");
  } else if (rank == 1) {
    MPI_Status st;
    MPI_Recv(grid, 1, face, 0, 0, MPI_COMM_WORLD, &st);
    int count = 0;
    MPI_Get_count(&st, face, &count);
    if (count != 1) MPI_Abort(MPI_COMM_WORLD, 4);
    if (on_gpu && gpu.copy(host.data(), grid, elems * sizeof(float)) != tempi::Status::Ok) MPI_Abort(MPI_COMM_WORLD, 3);
    size_t wrong = 0, inside = 0;
    for (int z = 0; z < n; ++z)
      for (int y = 0; y < n; ++y)
        for (int x = 0; x < n; ++x) {
          const size_t i = (size_t(z) * n + y) * n + x;
          const bool in_face = y < depth;
          inside += in_face;
          wrong += host[i] != (in_face ? float(i) : -1.f);
        }
    std::printf("demo: rank 1 received the face into its %s grid with MPI_Recv: %zu elements placed, %zu wrong\n",
                on_gpu ? "GPU" : "host", inside, wrong);
    if (wrong) MPI_Abort(MPI_COMM_WORLD, 2);
  }
  if (on_gpu) gpu.free_device(grid);
  MPI_Type_free(&face);
  MPI_Finalize();
  return 0;
}
