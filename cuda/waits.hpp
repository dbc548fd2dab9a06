// Waits for the GPU, counted (Backend::synchronizations; waits.cpp), plan uploads, and
// what a Fence holds on the GPU: an event from a per-device pool after the work, and the
// device memory the work uses until then.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "backend.hpp"
#include "open_launch.hpp"

namespace tempi {

// Waits for the work issued so far on `stream`: one synchronization, counted. By polling a
// completion word where TEMPI_WAIT allows and the GPU takes stream memory operations.
cudaError_t synchronize(cudaStream_t stream);
// A wait made elsewhere (an event's), counted here; and the count.
void count_synchronization();
uint64_t synchronization_count();

// Plan data to device memory on a non-blocking stream of its own, waited for (once per
// plan, not counted): a cudaMemcpy would first wait for the application's legacy stream.
Status upload(void *device, const void *host, size_t bytes);

// Events that mark the end of asynchronous work, reused: creating one costs more than
// recording it. One pool per device (an event belongs to the device it was made on).
class EventPool {
 public:
  Status take(cudaEvent_t &out);
  void give_back(cudaEvent_t e);

 private:
  std::mutex mutex_;
  std::vector<cudaEvent_t> free_;
};
EventPool &event_pool(int device);

// What a Fence holds on the GPU: the event after the work, and the device memory the
// work uses until then.
struct CudaFence {
  int device = 0;
  cudaEvent_t event = nullptr;
  std::vector<std::shared_ptr<void>> temps;
  OpenMark open;  // the open launch whose end `event` marks (its event, not the pool's)
  ~CudaFence();
};

// Records `fence`'s event (from the pool) on `stream` after the work issued there, and
// makes `done` hold the fence.
Status record_fence(std::shared_ptr<CudaFence> fence, cudaStream_t stream, Fence &done);

}  // namespace tempi
