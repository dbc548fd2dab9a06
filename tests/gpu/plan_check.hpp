// What test_gpu_pack and test_gpu_transpose share: a plan packed and unpacked on the GPU
// between misaligned, poisoned buffers, compared byte for byte with the host packer.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "backend.hpp"
#include "device_buf.hpp"
#include "host_packer.hpp"
#include "type_plan.hpp"

// The typed bytes a plan touches: [lo, hi) relative to the typed buffer's origin.
struct Span {
  int64_t lo = 0, hi = 0;
  explicit Span(const tempi::Plan &p) {
    tempi::for_each_segment(p, 0, p.packed_size(), [&](int64_t t, int64_t, int64_t n) {
      lo = std::min(lo, t);
      hi = std::max(hi, t + n);
    });
  }
  int64_t bytes() const { return hi - lo; }
};

// The bytes past the end of a PaddedDeviceBuf: room to shift its start by up to
// kPadding bytes (misaligned accesses), and poisoned bytes that a pack must not write.
constexpr int64_t kPadding = 64;

// A DeviceBuf of `bytes` plus kPadding.
struct PaddedDeviceBuf : DeviceBuf {
  explicit PaddedDeviceBuf(int64_t bytes, Memory memory = Memory::Device) : DeviceBuf(bytes + kPadding, memory) {}
};

// n bytes of a seeded pseudo-random stream, eight bytes a draw (spans reach 64 MiB).
inline std::vector<unsigned char> random_bytes(int64_t n, uint64_t seed) {
  std::vector<unsigned char> v(n + 8);
  std::mt19937_64 rng(seed);
  for (int64_t i = 0; i < n; i += 8) {
    const uint64_t r = rng();
    std::memcpy(v.data() + i, &r, 8);
  }
  v.resize(n);
  return v;
}

// Packs and unpacks `plan` on the GPU with the typed buffer shifted by `ts` bytes and
// the packed one by `ps` bytes (each at most kPadding), over stream bytes [first, last);
// compares with the host.
inline void check_plan(const tempi::Plan &plan, int ts, int ps, int64_t first, int64_t last, uint64_t seed) {
  const Span span(plan);
  const int64_t n = last - first;
  const std::vector<unsigned char> typed = random_bytes(span.bytes(), seed);
  PaddedDeviceBuf dtyped(span.bytes()), dpacked(n);
  char *t0 = dtyped.at(ts) - span.lo;  // the address of typed offset 0
  CUDA_OK(cudaMemcpy(dtyped.at(ts), typed.data(), span.bytes(), cudaMemcpyHostToDevice));

  // pack: poisoned output, compare all of it (nothing written outside [0, n))
  const std::vector<unsigned char> poison = random_bytes(n + kPadding, seed + 1);
  CUDA_OK(cudaMemcpy(dpacked.base, poison.data(), n + kPadding, cudaMemcpyHostToDevice));
  REQUIRE(tempi::gpu_backend().pack(plan, t0, dpacked.at(ps), first, last) == tempi::Status::Ok);
  std::vector<unsigned char> expect = poison;
  tempi::host_pack(plan, typed.data() - span.lo, expect.data() + ps, first, last);
  std::vector<unsigned char> got(n + kPadding);
  CUDA_OK(cudaMemcpy(got.data(), dpacked.base, n + kPadding, cudaMemcpyDeviceToHost));
  REQUIRE(got == expect);

  // unpack the packed bytes into a poisoned typed buffer: gaps must stay poisoned
  std::vector<unsigned char> image = random_bytes(span.bytes(), seed + 2);
  CUDA_OK(cudaMemcpy(dtyped.at(ts), image.data(), span.bytes(), cudaMemcpyHostToDevice));
  REQUIRE(tempi::gpu_backend().unpack(plan, dpacked.at(ps), t0, first, last) == tempi::Status::Ok);
  tempi::host_unpack(plan, expect.data() + ps, image.data() - span.lo, first, last);
  std::vector<unsigned char> back(span.bytes());
  CUDA_OK(cudaMemcpy(back.data(), dtyped.at(ts), span.bytes(), cudaMemcpyDeviceToHost));
  REQUIRE(back == image);
}
