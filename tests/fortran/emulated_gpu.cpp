// What the Fortran tests need of the emulated GPU (tests/support/emulated_backend.cpp),
// callable through BIND(C): device memory the host cannot touch, and copies to and from
// it. A Fortran program hands the device address to MPI calls as its buffer.
#include <cstdint>

#include "backend.hpp"

extern "C" {

void *test_gpu_allocate(int64_t bytes) {
  void *p = nullptr;
  return tempi::gpu_backend().allocate_device(size_t(bytes), &p) == tempi::Status::Ok ? p : nullptr;
}

void test_gpu_free(void *p) { tempi::gpu_backend().free_device(p); }

int test_gpu_copy(void *dst, const void *src, int64_t bytes) {
  return tempi::gpu_backend().copy(dst, src, size_t(bytes)) == tempi::Status::Ok ? 0 : 1;
}

}  // extern "C"
