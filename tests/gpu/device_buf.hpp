// What the GPU tests share besides their main() (gpu_test_main.cpp): a Catch2 check of a
// CUDA call, and device (or managed) memory of an exact size freed at scope exit.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>

#define CUDA_OK(x) REQUIRE((x) == cudaSuccess)

enum class Memory { Device, Managed };

// `bytes` of device (or managed) memory (at least 1), allocated to the byte so that an
// access past the end is caught by compute-sanitizer's memcheck.
struct DeviceBuf {
  void *base = nullptr;
  explicit DeviceBuf(int64_t bytes, Memory memory = Memory::Device) {
    const size_t n = size_t(std::max<int64_t>(bytes, 1));
    CUDA_OK(memory == Memory::Managed ? cudaMallocManaged(&base, n) : cudaMalloc(&base, n));
  }
  ~DeviceBuf() { cudaFree(base); }
  DeviceBuf(const DeviceBuf &) = delete;
  DeviceBuf &operator=(const DeviceBuf &) = delete;
  char *at(int64_t off) { return static_cast<char *>(base) + off; }
};
