// What the zero-copy tests (test_zero_copy.cpp, test_zero_copy_p2p.cpp) share: seeded bytes,
// a buffer in GPU or host memory with a host shadow (the reference runs on the shadow), and
// whether a rank shares this rank's node (TEMPI_IPC_RANKS_PER_NODE). Include after Catch2.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "backend.hpp"

namespace zero_copy_test {

inline uint8_t byte_at(uint64_t seed, size_t i) {
  uint64_t h = (seed + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t(i) * 0xbf58476d1ce4e5b9ull);
  h ^= h >> 31;
  return uint8_t(h * 0x94d049bb133111ebull >> 56);
}

struct Buf {
  bool gpu;
  size_t bytes;
  void *ptr = nullptr;
  std::vector<uint8_t> host;
  Buf(bool on_gpu, size_t n, uint64_t seed) : gpu(on_gpu), bytes(n), host(n) {
    for (size_t i = 0; i < n; ++i) host[i] = byte_at(seed, i);
    if (gpu) {
      REQUIRE(tempi::gpu_backend().allocate_device(n, &ptr) == tempi::Status::Ok);
      REQUIRE(tempi::gpu_backend().copy(ptr, host.data(), n) == tempi::Status::Ok);
    } else {
      ptr = std::malloc(n);
      std::memcpy(ptr, host.data(), n);
    }
  }
  ~Buf() {
    if (gpu) tempi::gpu_backend().free_device(ptr);
    else std::free(ptr);
  }
  Buf(const Buf &) = delete;
  Buf &operator=(const Buf &) = delete;
  std::vector<uint8_t> contents() const {
    std::vector<uint8_t> v(bytes);
    if (gpu) REQUIRE(tempi::gpu_backend().copy(v.data(), ptr, bytes) == tempi::Status::Ok);
    else std::memcpy(v.data(), ptr, bytes);
    return v;
  }
};

// Whether world ranks `r` and `me` share a node (TEMPI_IPC_RANKS_PER_NODE makes "nodes" of
// that many consecutive ranks).
inline bool same_node(int r, int me) {
  const char *k = std::getenv("TEMPI_IPC_RANKS_PER_NODE");
  const int per = k ? std::atoi(k) : 0;
  return per <= 0 || r / per == me / per;
}

// What a CUDA-aware MPI library's IPC cache can leave in a process: each rank maps the next
// rank's buffer (as the library would for its own transfers), and that rank then frees it
// and allocates one of the same size, `replacement`, which the allocator usually puts at the
// same address. CUDA refuses this process a mapping of the replacement while the stale one
// lives ("resource already mapped"), which is what happened under Open MPI's smcuda with
// TEMPI_COLL_DEVICE=1. `refused`: whether this process's own attempt to map the next rank's
// replacement was refused (so TEMPI's will be too). Collective on MPI_COMM_WORLD, also when
// it is dropped (the stale mapping is closed then).
struct StaleLibraryMapping {
  void *mapping = nullptr;
  bool held = false, refused = false;
  StaleLibraryMapping(int rank, int size, bool next_on_node, size_t bytes, uint64_t seed,
                      std::unique_ptr<Buf> &replacement) {
    tempi::Backend &b = tempi::gpu_backend();
    const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    held = next != rank && next_on_node;
    auto first = std::make_unique<Buf>(true, bytes, seed);
    tempi::IpcHandle theirs = exchange(first->ptr, prev, next);
    if (held) REQUIRE(b.ipc_open(theirs, &mapping) == tempi::Status::Ok);
    MPI_Barrier(MPI_COMM_WORLD);  // mapped before its owner frees it
    first.reset();
    replacement = std::make_unique<Buf>(true, bytes, seed + 1);
    theirs = exchange(replacement->ptr, prev, next);
    void *probe = nullptr;
    if (held) {
      refused = b.ipc_open(theirs, &probe) != tempi::Status::Ok;
      if (!refused) b.ipc_close(probe);
    }
  }
  ~StaleLibraryMapping() {
    MPI_Barrier(MPI_COMM_WORLD);  // every read of the replacements is over
    if (held) tempi::gpu_backend().ipc_close(mapping);
    MPI_Barrier(MPI_COMM_WORLD);
  }
  StaleLibraryMapping(const StaleLibraryMapping &) = delete;
  StaleLibraryMapping &operator=(const StaleLibraryMapping &) = delete;

 private:
  // Sends the handle of `ptr`'s allocation to `prev`, returns `next`'s.
  static tempi::IpcHandle exchange(void *ptr, int prev, int next) {
    tempi::IpcHandle mine, theirs;
    REQUIRE(tempi::gpu_backend().ipc_export(ptr, mine) == tempi::Status::Ok);
    REQUIRE(MPI_Sendrecv(&mine, sizeof mine, MPI_BYTE, prev, 5, &theirs, sizeof theirs, MPI_BYTE, next, 5,
                         MPI_COMM_WORLD, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    return theirs;
  }
};

}  // namespace zero_copy_test
