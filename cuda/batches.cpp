// The engine's batches on the GPU (Backend::pack_async, unpack_async; batches.hpp):
// small strided objects and short contiguous runs share fused launches, the others go
// alone by the kernel dispatch.cpp picks, and the staged method's copies are issued
// around them; a fence recorded after all of it ends the batch.
#include <cuda_runtime.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <vector>

#include "batches.hpp"
#include "check.hpp"
#include "dispatch.hpp"
#include "phases.hpp"
#include "resources.hpp"
#include "waits.hpp"

namespace tempi {

namespace {

// The staged method without waiting (core/pipelines.cpp), its device staging held by the fence.
Status issue_staged(Backend &b, const MoveJob &j, int64_t bytes, bool to_packed, CudaFence &fence) {
  Scratch staging;
  TEMPI_TRY(b.acquire(ScratchKind::Device, size_t(bytes), staging));
  fence.temps.push_back(staging.owner);
  const int64_t chunk = j.transfer.chunk > 0 ? j.transfer.chunk : bytes;
  return queue_staged(b, *j.plan, j.typed, j.packed, staging.ptr, bytes, chunk, to_packed);
}

// One job alone, as the synchronous entry points do it but without waiting.
Status issue_one(Backend &b, const MoveJob &j, bool to_packed, cudaStream_t stream, CudaFence &fence) {
  const Plan &plan = *j.plan;
  const int64_t bytes = std::min(j.bytes, plan.packed_size());
  if (bytes <= 0) return Status::Ok;
  void *typed = j.typed;
  if (plan.contiguous()) {  // one copy by the copy engines
    char *run = run_of(plan, typed);
    TEMPI_CUDA(cudaMemcpyAsync(to_packed ? j.packed : run, to_packed ? run : j.packed, size_t(bytes),
                               cudaMemcpyDefault, stream));
    return Status::Ok;
  }
  switch (j.transfer.method) {
    case Method::OneShot: {
      bool copied = false;
      TEMPI_TRY(pitched_copy(plan, typed, j.packed, bytes, to_packed, stream, copied));
      if (copied) return Status::Ok;
      return run_kernel(plan, typed, j.packed, 0, bytes, to_packed, stream);
    }
    case Method::Staged:
      return issue_staged(b, j, bytes, to_packed, fence);
    default:
      return run_kernel(plan, typed, j.packed, 0, bytes, to_packed, stream);
  }
}

// Issues the jobs on `stream`, adding the device temporaries they use to `fence`. Small
// strided objects share fused launches, and so do contiguous runs up to policy::kOpenMaxBytes (a
// halo's corners and x-edges: a copy each cost about 4 us a call, 36 of them 150 us of
// a 26-neighbour exchange of 3 variables); the staged method's copies are issued around
// them (packed into one device area, then one copy per job to the host).
Status issue_on(Backend &b, const std::vector<MoveJob> &jobs, bool to_packed, cudaStream_t stream, CudaFence &fence) {
  std::optional<PhaseTimer> describing(std::in_place, Phase::Describe);
  if (jobs.size() == 1) {
    describing.reset();
    const PhaseTimer launching(Phase::Launch);
    TEMPI_TRY(issue_one(b, jobs[0], to_packed, stream, fence));
  } else {
    std::vector<FusedObject> fused;
    std::vector<const MoveJob *> staged;  // fused jobs of the staged method
    std::vector<size_t> staged_at;        // their offsets in the device area
    std::vector<size_t> staged_object;    // their places in `fused`
    size_t area = 0;
    for (const MoveJob &j : jobs) {
      if (j.bytes <= 0) continue;
      FusedObject o;
      const bool whole = j.transfer.method != Method::Staged || j.transfer.chunk >= j.bytes;
      // (The staged method keeps its one copy per contiguous job straight to the host.)
      const bool copy_engine =
          j.plan->contiguous() && (!shares_launch(j.bytes) || j.transfer.method == Method::Staged);
      if (copy_engine || !whole || !describe_fused(j, j.packed, o) || runs_alone(o)) {
        TEMPI_TRY(issue_one(b, j, to_packed, stream, fence));
        continue;
      }
      if (j.transfer.method == Method::Staged) {
        staged.push_back(&j);
        staged_at.push_back(area);
        staged_object.push_back(fused.size());
        area += (size_t(j.bytes) + 255) & ~size_t(255);
      }
      fused.push_back(o);
    }
    char *dev = nullptr;
    if (area > 0) {
      auto lease = std::make_shared<BufferPool::Lease>();
      TEMPI_TRY(device_pool().acquire(area, *lease));
      dev = static_cast<char *>(lease->get());
      fence.temps.push_back(std::move(lease));
      for (size_t k = 0; k < staged.size(); ++k) {
        fused[staged_object[k]].packed = dev + staged_at[k];
        if (!to_packed)
          TEMPI_CUDA(cudaMemcpyAsync(dev + staged_at[k], staged[k]->packed, size_t(staged[k]->bytes),
                                     cudaMemcpyHostToDevice, stream));
      }
    }
    describing.reset();
    const PhaseTimer launching(Phase::Launch);
    for (size_t k = 0; k < fused.size(); k += policy::kMaxFusedObjects)
      TEMPI_TRY(launch_fused(fused.data() + k, int(std::min<size_t>(policy::kMaxFusedObjects, fused.size() - k)),
                             to_packed, stream));
    if (to_packed)
      for (size_t k = 0; k < staged.size(); ++k)
        TEMPI_CUDA(cudaMemcpyAsync(staged[k]->packed, dev + staged_at[k], size_t(staged[k]->bytes),
                                   cudaMemcpyDeviceToHost, stream));
  }
  return Status::Ok;
}

}  // namespace

Status issue_moves(Backend &b, const std::vector<MoveJob> &jobs, bool to_packed, Fence &done) {
  cudaStream_t stream;
  TEMPI_TRY(thread_stream(stream));
  auto fence = std::make_shared<CudaFence>();
  fence->device = current_device();
  TEMPI_TRY(issue_on(b, jobs, to_packed, stream, *fence));
  const PhaseTimer fencing(Phase::Fence);
  return record_fence(std::move(fence), stream, done);
}

// On the application's stream nothing is fenced: the jobs' packed sides are mapped pinned
// memory (the one-shot method), so no device temporary has to outlive the call.
Status issue_moves_on(Backend &b, const std::vector<MoveJob> &jobs, bool to_packed, cudaStream_t stream) {
  CudaFence unused;
  for (const MoveJob &j : jobs)
    if (j.transfer.method == Method::Staged) return Status::Unsupported;
  return issue_on(b, jobs, to_packed, stream, unused);
}

}  // namespace tempi
