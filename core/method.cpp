#include "method.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>

namespace tempi {

namespace {

// ---------------------------------------------------------------- built-in rules (no profile)

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
// Large blocks go the other way: an FFT transpose's 8 MiB blocks (tools/bench_alltoallw,
// N=128, same machine and date) move in 87 us as device memory through that library's
// CUDA IPC path, where a host round trip costs milliseconds.
constexpr int64_t kOneShotMaxBytesBatched = 2 * 1024 * 1024;

// A message to the rank itself goes through host memory whatever the library: CUDA-aware
// Open MPI 4.1 loops GPU buffers back at 0.6 GB/s (tempi-measure, one H200, 2026-11-24),
// 20 us for 64 bytes, where one-shot costs a few microseconds and staged runs at the copy
// engines' rate.
Method builtin_method(bool cuda_aware, const TransferQuery &q) {
  if (cuda_aware && q.peer != PeerClass::Self) {
    // One contiguous run goes to the library as it is (no pack at all).
    if (q.contiguous) return Method::Device;
    return q.bytes < (q.batched ? kOneShotMaxBytesBatched : kOneShotMaxBytesCudaAware) ? Method::OneShot
                                                                                        : Method::Device;
  }
  // A contiguous buffer is one DMA copy when staged, 30% faster than a copy kernel; but
  // in a batch one-shot packs it inside the batch's one fused kernel, where a DMA copy is
  // one more operation to wait for (26-neighbour halo, n=64, MPICH, two H200s,
  // 2026-11-23: 140 us one-shot against 208 us with the contiguous faces staged).
  if (q.contiguous && !(q.batched && q.bytes < kOneShotMaxBytes)) return Method::Staged;
  return q.bytes < kOneShotMaxBytes ? Method::OneShot : Method::Staged;
}

// ---------------------------------------------------------------- the model

// Pipeline chunks the model tries for the staged method (besides TEMPI_PIPELINE_CHUNK).
constexpr std::array<int64_t, 4> kChunkCandidates = {256 << 10, 1 << 20, 4 << 20, 16 << 20};

// One synchronous GPU step as the profile measured it (launch, work, wait). In a batch
// the wait is shared by every message of the batch, so a message pays launch and work.
double step(const Profile &p, double measured, bool batched) {
  return batched ? std::max(measured - p.sync, 0.0) : measured;
}

// The GPU's own time in a measured step: what overlaps in a pipeline.
double work(const Profile &p, double measured) { return std::max(measured - p.launch - p.sync, 0.0); }

}  // namespace

double staged_side(const Profile &p, bool pack, const TransferQuery &q, int64_t chunk) {
  const KernelTable &kernel = pack ? p.pack_device : p.unpack_device;
  const Curve &copy = pack ? p.copy_to_host : p.copy_to_device;
  const int64_t c = std::min(chunk, q.bytes);
  const int64_t n = (q.bytes + c - 1) / c;
  const double k = work(p, kernel.at(double(c), q.block, q.word));
  const double x = work(p, copy.at(double(c)));
  const double floor = p.launch + (q.batched ? 0 : p.sync);
  return floor + k + x + double(n - 1) * std::max(k, x) + double(n) * p.staged_chunk;
}

namespace {

Prediction predict_staged(const Profile &p, const TransferQuery &q, const Config &cfg) {
  const double wire = p.host_wire(q.batched).at(double(q.bytes));
  if (q.contiguous)  // one copy each way, no kernel
    return {step(p, p.copy_to_host.at(double(q.bytes)), q.batched) + wire +
                step(p, p.copy_to_device.at(double(q.bytes)), q.batched),
            q.bytes};
  auto total = [&](int64_t chunk) {
    return staged_side(p, true, q, chunk) + wire + staged_side(p, false, q, chunk);
  };
  Prediction best{total(q.bytes), q.bytes};
  auto consider = [&](int64_t chunk) {
    if (chunk <= 0 || 2 * chunk > q.bytes) return;  // a pipeline needs two chunks at least
    const double t = total(chunk);
    if (t < best.seconds) best = {t, chunk};
  };
  consider(cfg.pipeline_chunk);
  for (int64_t chunk : kChunkCandidates) consider(chunk);
  return best;
}

}  // namespace

TransferQuery describe_message(const Plan &plan, bool batched, PeerClass peer) {
  TransferQuery q;
  q.bytes = plan.packed_size();
  q.contiguous = plan.contiguous();
  q.batched = batched;
  q.peer = peer;
  int64_t blocks = 0;
  uint64_t bits = uint64_t(plan.start);
  for (const Run &r : plan.pattern) {
    blocks += r.count;
    bits |= uint64_t(r.offset) | uint64_t(r.length) | (r.count > 1 ? uint64_t(r.stride) : 0);
  }
  for (const Dim &d : plan.dims) bits |= uint64_t(d.stride);
  q.block = q.contiguous ? q.bytes : (blocks > 0 ? std::max<int64_t>(1, plan.pattern_size / blocks) : 0);
  q.word = 16;
  while (q.word > 1 && (bits & uint64_t(q.word - 1))) q.word /= 2;
  return q;
}

std::optional<Prediction> predict(const Profile &p, Method m, const TransferQuery &q, const Config &cfg) {
  const double b = double(q.bytes);
  switch (m) {
    case Method::Device: {
      // In a batch, the library's time per message of many in flight (a library overlaps
      // messages in flight, on one path more than on another).
      const Curve *wire = p.device_wire(q.peer, q.batched);
      if (!wire) return std::nullopt;
      if (q.contiguous) return Prediction{wire->at(b), q.bytes};  // the library reads the buffer itself
      return Prediction{step(p, p.pack_device.at(b, q.block, q.word), q.batched) + wire->at(b) +
                            step(p, p.unpack_device.at(b, q.block, q.word), q.batched),
                        q.bytes};
    }
    case Method::OneShot:
      // Alone, the backend copies a contiguous run with the copy engines; in a batch it is
      // one more job of the batch's fused kernel.
      if (q.contiguous && !q.batched)
        return Prediction{step(p, p.copy_to_host.at(b), q.batched) + p.mpi_host.at(b) +
                              step(p, p.copy_to_device.at(b), q.batched),
                          q.bytes};
      return Prediction{step(p, p.pack_host.at(b, q.block, q.word), q.batched) + p.host_wire(q.batched).at(b) +
                            step(p, p.unpack_host.at(b, q.block, q.word), q.batched),
                        q.bytes};
    case Method::Staged:
      return predict_staged(p, q, cfg);
    case Method::Auto:
      break;
  }
  return std::nullopt;
}

Transfer choose_transfer(Method requested, bool cuda_aware, const TransferQuery &q, const Config &cfg,
                         const Profile *profile) {
  Method m = requested;
  if (m == Method::Device && !cuda_aware) m = Method::Staged;
  if (profile && (m == Method::Auto || m == Method::Staged)) {
    Transfer best{Method::Staged, q.bytes};
    double best_seconds = -1;
    for (Method candidate : {Method::Device, Method::OneShot, Method::Staged}) {
      if (m != Method::Auto && candidate != m) continue;
      if (candidate == Method::Device && !cuda_aware) continue;
      const std::optional<Prediction> t = predict(*profile, candidate, q, cfg);
      if (t && (best_seconds < 0 || t->seconds < best_seconds)) {
        best = {candidate, t->chunk};
        best_seconds = t->seconds;
      }
    }
    if (best_seconds >= 0) return best;
  }
  if (m == Method::Auto) m = builtin_method(cuda_aware, q);
  const bool pipelined = m == Method::Staged && q.bytes >= cfg.pipeline_threshold;
  return {m, pipelined ? cfg.pipeline_chunk : q.bytes};
}

namespace {

// A per-thread direct-mapped cache of model decisions: no lock, a few loads on a hit.
struct CachedDecision {
  const Profile *profile = nullptr;
  TransferQuery q;
  Method requested = Method::Auto;
  bool cuda_aware = false;
  int64_t chunk_setting = 0;
  Transfer transfer{Method::Staged, 0};
};
constexpr size_t kCacheEntries = 256;

bool same(const CachedDecision &e, const Profile *p, Method requested, bool aware, const TransferQuery &q,
          const Config &cfg) {
  return e.profile == p && e.requested == requested && e.cuda_aware == aware && e.q.bytes == q.bytes &&
         e.q.block == q.block && e.q.word == q.word && e.q.contiguous == q.contiguous && e.q.batched == q.batched &&
         e.q.peer == q.peer && e.chunk_setting == cfg.pipeline_chunk;
}

size_t slot(Method requested, bool aware, const TransferQuery &q) {
  uint64_t h = uint64_t(q.bytes) * 0x9E3779B97F4A7C15ull;
  h ^= uint64_t(q.block) * 0xC2B2AE3D27D4EB4Full;
  h ^= uint64_t(q.word) << 3 ^ uint64_t(q.contiguous) << 8 ^ uint64_t(q.batched) << 9 ^ uint64_t(q.peer) << 10 ^
       uint64_t(requested) << 12 ^ uint64_t(aware) << 14;
  return size_t(h ^ (h >> 29)) % kCacheEntries;
}

}  // namespace

Transfer choose_transfer(Method requested, bool cuda_aware, const TransferQuery &q, const Config &cfg) {
  const Profile *p = active_profile();
  if (!p || (requested != Method::Auto && requested != Method::Staged))
    return choose_transfer(requested, cuda_aware, q, cfg, p);
  thread_local std::array<CachedDecision, kCacheEntries> cache;
  CachedDecision &e = cache[slot(requested, cuda_aware, q)];
  if (!same(e, p, requested, cuda_aware, q, cfg)) {
    e.transfer = choose_transfer(requested, cuda_aware, q, cfg, p);
    e.profile = p;
    e.q = q;
    e.requested = requested;
    e.cuda_aware = cuda_aware;
    e.chunk_setting = cfg.pipeline_chunk;
  }
  return e.transfer;
}

Transfer choose_transfer(Method requested, bool cuda_aware, int64_t bytes, bool contiguous, const Config &cfg,
                         bool batched) {
  TransferQuery q;
  q.bytes = bytes;
  q.contiguous = contiguous;
  q.block = contiguous ? bytes : std::min(bytes, kAssumedBlock);
  q.word = 8;
  while (q.word > 1 && q.block % q.word) q.word /= 2;
  q.batched = batched;
  return choose_transfer(requested, cuda_aware, q, cfg);
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
