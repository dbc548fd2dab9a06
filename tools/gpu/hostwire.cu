// What the MPI library's host path costs for large messages, by host buffer kind: a
// ping-pong of 64 KiB to 16 MiB from pinned, mapped and malloc'd memory, from one buffer or
// two, with and without the GPU writing the send buffer and reading the receive buffer
// first (as TEMPI's pack and unpack do), four interleaved rounds each (median one-way µs and
// the CPUs of the two ranks); then TEMPI's one-shot flow (copy, MPI, copy) and the wire it
// implies. Written to see why tempi-measure's host curve was up to 2x slower than TEMPI's
// one-shot (docs/results/model-h100-mps-2026-11-25/README.md gives what it found).
// Stand-alone (MPI and the CUDA runtime, no TEMPI), two ranks:
//   nvcc -O2 -arch=sm_90 -c tools/gpu/hostwire.cu -o hostwire.o $(pkg-config --cflags mpich)
//   g++ hostwire.o -o hostwire $(pkg-config --libs mpich) -L/usr/local/cuda/lib64 -lcudart
//   mpiexec -n 2 ./hostwire          (Open MPI: nvcc ... $(mpicxx --showme:compile) and its link line)
#include <mpi.h>
#include <cuda_runtime.h>
#include <sched.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
int rank;
char *dev;
double pp(char *s, char *r, long bytes, int reps, bool gpu_touch) {
  std::vector<double> t;
  for (int i = 0; i < reps + 2; ++i) {
    if (gpu_touch) {  // as a pack and an unpack would: the GPU writes the send buffer, reads the receive buffer
      cudaMemcpy(s, dev, bytes, cudaMemcpyDeviceToHost);
      cudaMemcpy(dev, r, bytes, cudaMemcpyHostToDevice);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    if (rank == 0) { MPI_Send(s, int(bytes), MPI_BYTE, 1, 7, MPI_COMM_WORLD); MPI_Recv(r, int(bytes), MPI_BYTE, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE); }
    else { MPI_Recv(r, int(bytes), MPI_BYTE, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE); MPI_Send(s, int(bytes), MPI_BYTE, 0, 7, MPI_COMM_WORLD); }
    if (i >= 2) t.push_back((MPI_Wtime() - t0) / 2 * 1e6);
  }
  std::sort(t.begin(), t.end());
  double m = t[t.size() / 2];
  MPI_Bcast(&m, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  return m;
}
// TEMPI's one-shot flow on one buffer per rank: the sender's copy engine writes the buffer
// (the pack), MPI moves it, the receiver's copy engine reads it (the unpack); one-way time
// of the whole, and of the copies alone, so that the wire it implies can be read off.
double flow(char *buf, long bytes, int reps, double *copies) {
  std::vector<double> t, c;
  for (int i = 0; i < reps + 2; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    if (rank == 0) {
      cudaMemcpy(buf, dev, bytes, cudaMemcpyDeviceToHost);
      MPI_Send(buf, int(bytes), MPI_BYTE, 1, 7, MPI_COMM_WORLD);
      MPI_Recv(buf, int(bytes), MPI_BYTE, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      cudaMemcpy(dev, buf, bytes, cudaMemcpyHostToDevice);
    } else {
      MPI_Recv(buf, int(bytes), MPI_BYTE, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      cudaMemcpy(dev, buf, bytes, cudaMemcpyHostToDevice);
      cudaMemcpy(buf, dev, bytes, cudaMemcpyDeviceToHost);
      MPI_Send(buf, int(bytes), MPI_BYTE, 0, 7, MPI_COMM_WORLD);
    }
    double t1 = MPI_Wtime();
    cudaMemcpy(buf, dev, bytes, cudaMemcpyDeviceToHost);
    cudaMemcpy(dev, buf, bytes, cudaMemcpyHostToDevice);
    double t2 = MPI_Wtime();
    if (i >= 2) t.push_back((t1 - t0) / 2 * 1e6), c.push_back((t2 - t1) * 1e6);
  }
  std::sort(t.begin(), t.end()); std::sort(c.begin(), c.end());
  double m[2] = {t[t.size() / 2], c[c.size() / 2]};
  MPI_Bcast(m, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  *copies = m[1];
  return m[0];
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const long max = 16l << 20;
  char *pin, *pin2, *mapped, *mapped2;
  cudaHostAlloc((void **)&pin, 2 * max, cudaHostAllocDefault);
  cudaHostAlloc((void **)&pin2, max, cudaHostAllocDefault);
  cudaHostAlloc((void **)&mapped, max, cudaHostAllocMapped | cudaHostAllocPortable);
  cudaHostAlloc((void **)&mapped2, max, cudaHostAllocMapped | cudaHostAllocPortable);
  char *pg = (char *)malloc(max), *pg2 = (char *)malloc(max);
  memset(pin, 1, 2 * max); memset(pin2, 2, max); memset(mapped, 3, max); memset(mapped2, 4, max); memset(pg, 5, max); memset(pg2, 6, max);
  cudaMalloc((void **)&dev, max);
  struct K { const char *name; char *s, *r; bool touch; } kinds[] = {
    {"pinned, one buffer (tempi-measure)", pin, pin, false}, {"pinned, two buffers", pin, pin2, false},
    {"mapped, two buffers (TEMPI staging)", mapped, mapped2, false}, {"mapped, two, GPU-touched", mapped, mapped2, true},
    {"pinned, two, GPU-touched", pin, pin2, true}, {"mapped, one, GPU-touched", mapped, mapped, true}};
  long sizes[] = {64l << 10, 256l << 10, 1l << 20, 4l << 20, 16l << 20};
  if (rank == 0) printf("%-38s %8s %s\n", "buffers", "bytes", "one-way us per round (cpu of rank 0/1)");
  for (long b : sizes)
    for (auto &k : kinds) {
      if (rank == 0) printf("%-38s %8ld", k.name, b);
      for (int round = 0; round < 4; ++round) {
        double m = pp(k.s, k.r, b, b >= (16l << 20) ? 10 : 30, k.touch);
        int cpu = sched_getcpu(), other = 0;
        MPI_Sendrecv(&cpu, 1, MPI_INT, 1 - rank, 9, &other, 1, MPI_INT, 1 - rank, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (rank == 0) printf(" %8.1f (%d/%d)", m, cpu, other);
      }
      if (rank == 0) printf("\n"), fflush(stdout);
    }
  for (long b : sizes) {
    if (rank == 0) printf("%-38s %8ld", "flow: copy, MPI, copy; implied wire", b);
    for (int round = 0; round < 4; ++round) {
      double copies = 0, m = flow(mapped, b, b >= (16l << 20) ? 10 : 30, &copies);
      if (rank == 0) printf(" %8.1f (%6.1f)", m - copies, m);
    }
    if (rank == 0) printf("\n"), fflush(stdout);
  }
  MPI_Finalize();
}
