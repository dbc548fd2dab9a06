// TEMPI demo: two ranks exchange a strided 3-D object (a halo face of a grid) that
// is described by an MPI subarray type. With a GPU the object lives in device
// memory and TEMPI packs it with a kernel; without one it lives in host memory and
// the calls pass through to MPI. Run with TEMPI_LOG_LEVEL=debug to see each plan.
#include <mpi.h>

#include <cstdio>
#include <vector>

#include "backend.hpp"
#include "type_cache.hpp"

int main(int argc, char **argv) {
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

  // The packed face travels as MPI_PACKED between MPI_Pack and MPI_Unpack: on a GPU
  // these run TEMPI's kernels; the packed bytes are host memory, so any MPI works.
  int bytes = 0;
  MPI_Pack_size(1, face, MPI_COMM_WORLD, &bytes);
  std::vector<char> packed(bytes);
  if (rank == 0) {
    int pos = 0;
    MPI_Pack(grid, 1, face, packed.data(), bytes, &pos, MPI_COMM_WORLD);
    MPI_Send(packed.data(), pos, MPI_PACKED, 1, 0, MPI_COMM_WORLD);
    std::printf("demo: rank 0 packed %d bytes of the face (%s) and sent them\n", pos,
                on_gpu ? "GPU kernel" : "MPI's own packing, host buffers pass through");
  } else if (rank == 1) {
    MPI_Status st;
    MPI_Recv(packed.data(), bytes, MPI_PACKED, 0, 0, MPI_COMM_WORLD, &st);
    int pos = 0;
    MPI_Unpack(packed.data(), bytes, &pos, grid, 1, face, MPI_COMM_WORLD);
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
    std::printf("demo: rank 1 unpacked the face into its %s grid: %zu elements placed, %zu wrong\n",
                on_gpu ? "GPU" : "host", inside, wrong);
    if (wrong) MPI_Abort(MPI_COMM_WORLD, 2);
  }
  if (on_gpu) gpu.free_device(grid);
  MPI_Type_free(&face);
  MPI_Finalize();
  return 0;
}
