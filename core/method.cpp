#include "method.hpp"

namespace tempi {

namespace {

// Crossovers measured with tools/bench_p2p on two H200s, 2026-11-22 (docs/benchmarks.md).
// On a CUDA-aware MPI the one-shot method wins below this size: one kernel into host
// memory and a host send beat a kernel, a device send and the library's own GPU copies;
// from 64 KiB up the device method is 1.3x (64 KiB) to 33x (64 MiB) faster.
constexpr int64_t kOneShotMaxBytesCudaAware = 32 * 1024;
// Without CUDA awareness one-shot is 2-17% faster than staged up to 16 MiB; at 64 MiB
// the pipelined staged method is 4% ahead.
constexpr int64_t kOneShotMaxBytes = 32 * 1024 * 1024;
// Messages in flight together (a 26-neighbour halo exchange, tools/tempi_halo, two
// H200s, CUDA-aware Open MPI 4.1, 2026-11-23): one-shot 147 us against device 400 us
// at 32-128 KiB messages (n=64), 290 against 955 us at 128-512 KiB (n=128): the
// library's own per-message GPU copies cost more than one fused kernel into host memory.
constexpr int64_t kOneShotMaxBytesBatched = kOneShotMaxBytes;

Method auto_method(bool cuda_aware, int64_t bytes, bool contiguous, bool batched) {
  if (cuda_aware) {
    // One contiguous run goes to the library as it is (no pack at all).
    if (contiguous) return Method::Device;
    return bytes < (batched ? kOneShotMaxBytesBatched : kOneShotMaxBytesCudaAware) ? Method::OneShot
                                                                                    : Method::Device;
  }
  // A contiguous buffer is one DMA copy when staged, 30% faster than a copy kernel.
  if (contiguous) return Method::Staged;
  return bytes < kOneShotMaxBytes ? Method::OneShot : Method::Staged;
}

}  // namespace

Transfer choose_transfer(Method requested, bool cuda_aware, int64_t bytes, bool contiguous, const Config &cfg,
                         bool batched) {
  Method m = requested;
  if (m == Method::Auto) m = auto_method(cuda_aware, bytes, contiguous, batched);
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
