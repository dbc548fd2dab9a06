// Typed-to-typed moves on the GPU (Backend::move_async, prepare_moves, move_prepared;
// pairs.hpp): pairs of strided plans in fused launches, a large transpose into or out of a
// contiguous side by the tiled kernels, block lists of long runs as paired runs (one pass),
// the others packed into their scratch and unpacked from it, all on this thread's stream.
#include <cuda_runtime.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "batches.hpp"
#include "check.hpp"
#include "dispatch.hpp"
#include "pairs.hpp"
#include "resources.hpp"
#include "waits.hpp"

namespace tempi {

namespace {

// A move's paired runs on the device (paired_runs_for).
struct DevicePairedRuns {
  Buffer owned;
  const PairedRun *runs = nullptr;
  int64_t n = 0;
};

struct PairedKey {
  uint64_t from_id, to_id;
  int64_t from_size, to_size, bytes;
  int device;
  bool operator<(const PairedKey &o) const {
    return std::tie(from_id, to_id, from_size, to_size, bytes, device) <
           std::tie(o.from_id, o.to_id, o.from_size, o.to_size, o.bytes, o.device);
  }
};

std::mutex g_paired_mutex;
std::map<PairedKey, std::shared_ptr<const DevicePairedRuns>> &paired() {
  static auto *m = new std::map<PairedKey, std::shared_ptr<const DevicePairedRuns>>;  // immortal, like the backend
  return *m;
}
size_t g_paired_bytes = 0;

// The paired runs of a move between two plans (core/paired_runs.hpp) on this device,
// made and uploaded once per pair of plans, sizes and device; null where the move is not
// worth them (runs of under policy::kMinPairedRun bytes on average, more than policy::kMaxPairedRuns
// runs, a plan without an id) or the cache is full. Plan ids are never reused, so an
// entry is never wrong, only perhaps unused: entries are kept (at most policy::kMaxPairedBytes
// of device memory), and a kernel that reads one never outlives it.
std::shared_ptr<const DevicePairedRuns> paired_runs_for(const Plan &from, const Plan &to, int64_t bytes) {
  if (from.id == 0 || to.id == 0) return nullptr;
  const PairedKey key{from.id, to.id, from.packed_size(), to.packed_size(), bytes, current_device()};
  std::lock_guard<std::mutex> lock(g_paired_mutex);
  const auto it = paired().find(key);
  if (it != paired().end()) return it->second;
  std::shared_ptr<DevicePairedRuns> made;
  const std::vector<PairedRun> runs = paired_runs(from, to, bytes, kPairedRunBytes, policy::kMaxPairedRuns);
  const size_t size = runs.size() * sizeof(PairedRun);
  if (!runs.empty() && bytes / int64_t(runs.size()) >= policy::kMinPairedRun &&
      g_paired_bytes + size <= policy::kMaxPairedBytes) {
    made = std::make_shared<DevicePairedRuns>();
    if (Buffer::allocate(Buffer::Kind::Device, size, made->owned) != Status::Ok ||
        upload(made->owned.get(), runs.data(), size) != Status::Ok) {
      cudaGetLastError();
      made.reset();
    } else {
      made->runs = static_cast<const PairedRun *>(made->owned.get());
      made->n = int64_t(runs.size());
      g_paired_bytes += size;
    }
  }
  paired().emplace(key, made);  // a null entry too: the pair is not looked at again
  return made;
}

Status issue_pairs(Backend &b, const std::vector<PairJob> &jobs, cudaStream_t stream, Fence &done) {
  auto fence = std::make_shared<CudaFence>();
  fence->device = current_device();
  std::vector<FusedPair> fused;
  std::vector<MoveJob> packs, unpacks, into_runs, from_runs;
  bool launched = false;  // paired runs
  for (const PairJob &j : jobs) {
    const int64_t bytes = std::min({j.bytes, j.from->packed_size(), j.to->packed_size()});
    if (bytes <= 0) continue;
    const Transfer device{Method::Device, bytes};
    FusedPair p;
    switch (choose_pair(j, bytes, p)) {
      case PairRoute::Fused:
        fused.push_back(p);
        continue;
      case PairRoute::PackIntoRun:
        into_runs.push_back({j.from, const_cast<void *>(j.from_typed), run_of(*j.to, j.to_typed), bytes, device});
        continue;
      case PairRoute::UnpackFromRun:
        from_runs.push_back({j.to, j.to_typed, run_of(*j.from, const_cast<void *>(j.from_typed)), bytes, device});
        continue;
      case PairRoute::Other:
        break;
    }
    if (const std::shared_ptr<const DevicePairedRuns> runs = paired_runs_for(*j.from, *j.to, bytes)) {
      TEMPI_TRY(launch_paired_runs(runs->runs, runs->n, j.from_typed, j.to_typed, stream));
      launched = true;
      continue;
    }
    if (!j.scratch) return Status::Unsupported;
    packs.push_back({j.from, const_cast<void *>(j.from_typed), j.scratch, bytes, device});
    unpacks.push_back({j.to, j.to_typed, j.scratch, bytes, device});
  }
  for (size_t k = 0; k < fused.size(); k += policy::kMaxFusedPairs)
    TEMPI_TRY(
        launch_fused_pairs(fused.data() + k, int(std::min<size_t>(policy::kMaxFusedPairs, fused.size() - k)), stream));
  Fence issued;  // on this stream too: the fence below follows every launch
  if (!into_runs.empty()) TEMPI_TRY(issue_moves(b, into_runs, true, issued));
  if (!from_runs.empty()) TEMPI_TRY(issue_moves(b, from_runs, false, issued));
  if (!packs.empty()) {
    TEMPI_TRY(issue_moves(b, packs, true, issued));
    TEMPI_TRY(issue_moves(b, unpacks, false, issued));
  }
  if (fused.empty() && packs.empty() && into_runs.empty() && from_runs.empty() && !launched) return Status::Ok;
  return record_fence(std::move(fence), stream, done);
}

// Repeated moves (Backend::prepare_moves): where every pair is one of a fused launch (two
// strided plans, neither a large transpose), their descriptions go to device memory once.
struct PreparedPairs {
  BufferPool::Lease items;
  int n = 0;
  uint32_t blocks = 0;
  int device = 0;
};

}  // namespace

// Pairs whose plans are both strided: one fused launch per policy::kMaxFusedPairs, one access
// width for both sides of a pair. A large transpose or permutation whose other side is
// contiguous is a pack into that side or an unpack from it, for the tiled kernels (word
// by word, a zero-copy 128 MiB transpose took 1.3 ms a round trip on one H200, 2026-11-24,
// writing 8-byte words at a pitch of N). Block lists of long runs move as paired runs
// (one pass; a triangle through scratch made two). The others are packed into their
// scratch and unpacked from it. All on the same stream.
Status move_pairs(Backend &b, const std::vector<PairJob> &jobs, Fence &done) {
  done = Fence{};
  cudaStream_t stream;
  TEMPI_TRY(thread_stream(stream));
  const Status st = issue_pairs(b, jobs, stream, done);
  // A failure after some launches: they may still read the sources and write the scratch,
  // which a caller gives back at once on an error (and a zero-copy sender's buffer is
  // released), so they finish first. The failure itself is what the caller reports.
  if (st != Status::Ok) synchronize(stream);
  return st;
}

Status prepare_pairs(const std::vector<PairJob> &jobs, Prepared &out) {
  out = Prepared{};
  std::vector<FusedPair> fused;
  for (const PairJob &j : jobs) {
    const int64_t bytes = std::min({j.bytes, j.from->packed_size(), j.to->packed_size()});
    if (bytes <= 0) continue;
    FusedPair p;
    if (choose_pair(j, bytes, p) != PairRoute::Fused) return Status::Unsupported;
    fused.push_back(p);
  }
  if (fused.empty()) return Status::Unsupported;
  auto state = std::make_shared<PreparedPairs>();
  state->n = int(fused.size());
  state->device = current_device();
  cudaStream_t stream;
  TEMPI_TRY(thread_stream(stream));
  TEMPI_TRY(device_pool().acquire(fused_pairs_bytes(state->n), state->items));
  TEMPI_TRY(prepare_fused_pairs(fused.data(), state->n, state->items.get(), state->blocks, stream));
  out.state = std::move(state);
  return Status::Ok;
}

Status move_prepared_pairs(const Prepared &p, Fence &done) {
  done = Fence{};
  const auto *state = static_cast<const PreparedPairs *>(p.state.get());
  if (!state) return Status::Unsupported;
  cudaStream_t stream;
  TEMPI_TRY(thread_stream(stream));
  auto fence = std::make_shared<CudaFence>();
  fence->device = current_device();
  TEMPI_TRY(launch_prepared_pairs(state->items.get(), state->n, state->blocks, stream));
  return record_fence(std::move(fence), stream, done);
}

}  // namespace tempi
