// What the zero-copy tests (test_zero_copy.cpp, test_zero_copy_p2p.cpp) share: seeded bytes,
// a buffer in GPU or host memory with a host shadow (the reference runs on the shadow), and
// whether a rank shares this rank's node (TEMPI_IPC_RANKS_PER_NODE). Include after Catch2.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
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

}  // namespace zero_copy_test
