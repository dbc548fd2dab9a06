// Moves of objects on several GPUs that a call issues together (docs/design.md, "Many
// messages in flight (the engine)"): each GPU's moves go in one backend call on that GPU,
// all GPUs' before any is waited for, then each GPU is waited for once. What a completion
// call does for the receives and collectives it completed, and MPI_Startall for the sends
// it packs. `Owner` is what a failure is reported to (a receive, an op, a request).
#pragma once

#include <algorithm>
#include <vector>

#include "backend.hpp"

namespace tempi {

template <class Owner>
struct GpuMoves {
  int device;
  std::vector<MoveJob> jobs;
  std::vector<Owner *> owners;
};

// Adds `job` for `owner` to the moves of GPU `device` (the first job of a GPU opens its batch).
template <class Owner>
void add_move(std::vector<GpuMoves<Owner>> &gpus, int device, const MoveJob &job, Owner *owner) {
  auto g = std::find_if(gpus.begin(), gpus.end(), [&](const GpuMoves<Owner> &o) { return o.device == device; });
  if (g == gpus.end()) g = gpus.insert(gpus.end(), GpuMoves<Owner>{device, {}, {}});
  g->jobs.push_back(job);
  g->owners.push_back(owner);
}

// Issues every GPU's moves (packs when `to_packed`, else unpacks), then waits for each;
// returns each GPU's status: its issue's error, else its wait's.
template <class Owner>
std::vector<Status> move_by_gpu(const std::vector<GpuMoves<Owner>> &gpus, bool to_packed) {
  Backend &b = gpu_backend();
  std::vector<Fence> fences(gpus.size());
  std::vector<Status> status(gpus.size(), Status::Ok);
  for (size_t i = 0; i < gpus.size(); ++i) {
    const OnDevice on(gpus[i].device);
    status[i] = to_packed ? b.pack_async(gpus[i].jobs, fences[i]) : b.unpack_async(gpus[i].jobs, fences[i]);
  }
  for (size_t i = 0; i < gpus.size(); ++i) {
    const OnDevice on(gpus[i].device);
    const Status waited = b.wait(fences[i]);
    if (status[i] == Status::Ok) status[i] = waited;
  }
  return status;
}

}  // namespace tempi
