// One macro for CUDA calls: on failure, one log line naming the call and place,
// CUDA's non-sticky error state cleared, and a Status returned to the caller.
#pragma once

#include <cuda_runtime_api.h>

#include "backend.hpp"

namespace tempi {

Status cuda_failure(cudaError_t err, const char *expr, const char *file, int line);

}  // namespace tempi

#define TEMPI_CUDA(expr)                                                               \
  do {                                                                                 \
    const cudaError_t tempi_err_ = (expr);                                             \
    if (tempi_err_ != cudaSuccess) return ::tempi::cuda_failure(tempi_err_, #expr, __FILE__, __LINE__); \
  } while (0)

// For a Status-returning call inside a Status-returning function.
#define TEMPI_TRY(expr)                                       \
  do {                                                        \
    const ::tempi::Status tempi_st_ = (expr);                 \
    if (tempi_st_ != ::tempi::Status::Ok) return tempi_st_;   \
  } while (0)
