// What a pause before each send does to the MPI library's host-to-host ping-pong at 1, 4 and
// 16 MiB: tight, as tempi-measure times it, and with 300 µs of spinning before each send as
// TEMPI's messages have (the pack, and the peer's unpack), from one buffer or two, in malloc'd
// or pinned memory. Prints the median one-way time of 40 round trips after 5 untimed ones,
// pauses excluded, each variant three times in turn (docs/model.md quotes it; data:
// docs/results/s24-h200-mps-2026-11-28/hostwire-gap.txt). Stand-alone (MPI and the CUDA
// runtime, no TEMPI), two ranks:
//   mpicxx -O2 -o hostwire_gap tools/gpu/hostwire_gap.cpp -I/usr/local/cuda/include \
//     -L/usr/local/cuda/lib64 -lcudart && mpiexec -n 2 ./hostwire_gap
#include <cuda_runtime.h>
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

static void spin(double s) {
  const double t = MPI_Wtime();
  while (MPI_Wtime() - t < s) {
  }
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const size_t max = size_t(16) << 20;
  char *heap = static_cast<char *>(std::malloc(2 * max));
  char *pinned = nullptr;
  cudaHostAlloc(reinterpret_cast<void **>(&pinned), 2 * max, cudaHostAllocPortable | cudaHostAllocMapped);
  std::memset(heap, 1, 2 * max);
  std::memset(pinned, 1, 2 * max);
  for (int round = 0; round < 3; ++round)
    for (size_t n : {size_t(1) << 20, size_t(4) << 20, size_t(16) << 20})
      for (int pin = 0; pin < 2; ++pin)
        for (int two = 0; two < 2; ++two)
          for (double gap : {0.0, 300e-6}) {
            char *send = pin ? pinned : heap, *recv = two ? send + max : send;
            std::vector<double> t;
            for (int it = 0; it < 45; ++it) {
              MPI_Barrier(MPI_COMM_WORLD);
              const double t0 = MPI_Wtime();
              if (rank == 0) {
                spin(gap);
                MPI_Send(send, int(n), MPI_BYTE, 1, 0, MPI_COMM_WORLD);
                MPI_Recv(recv, int(n), MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
              } else {
                MPI_Recv(recv, int(n), MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                spin(gap);
                MPI_Send(send, int(n), MPI_BYTE, 0, 0, MPI_COMM_WORLD);
              }
              if (it >= 5) t.push_back((MPI_Wtime() - t0 - 2 * gap) / 2);
            }
            std::sort(t.begin(), t.end());
            if (rank == 0)
              std::printf("round %d %8zu B %-6s %-3s buffer(s) pause %3.0f us: %8.1f us one-way, %5.2f GB/s\n", round,
                          n, pin ? "pinned" : "heap", two ? "two" : "one", gap * 1e6, t[t.size() / 2] * 1e6,
                          n / t[t.size() / 2] / 1e9);
          }
  MPI_Finalize();
  return 0;
}
