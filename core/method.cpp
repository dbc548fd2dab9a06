#include "method.hpp"

namespace tempi {

namespace {

// Below this many packed bytes the one-shot method wins on a non-CUDA-aware MPI: one
// kernel writes the host buffer directly, where staging adds a copy and its launch.
// Measured with tools/bench_p2p (docs/benchmarks.md).
constexpr int64_t kOneShotMaxBytes = 64 * 1024;

Method auto_method(bool cuda_aware, int64_t bytes, bool contiguous) {
  if (cuda_aware) return Method::Device;
  // A contiguous buffer is one DMA copy when staged; a kernel gains nothing there.
  if (contiguous) return Method::Staged;
  return bytes < kOneShotMaxBytes ? Method::OneShot : Method::Staged;
}

}  // namespace

Transfer choose_transfer(Method requested, bool cuda_aware, int64_t bytes, bool contiguous, const Config &cfg) {
  Method m = requested;
  if (m == Method::Auto) m = auto_method(cuda_aware, bytes, contiguous);
  if (m == Method::Device && !cuda_aware) m = Method::Staged;
  const bool pipelined = m == Method::Staged && bytes >= cfg.pipeline_threshold;
  return {m, pipelined ? cfg.pipeline_chunk : bytes};
}

const char *to_string(Method m) {
  switch (m) {
    case Method::Auto:
      return "auto";
    case Method::Device:
      return "device";
    case Method::OneShot:
      return "oneshot";
    case Method::Staged:
      return "staged";
  }
  return "?";
}

}  // namespace tempi
