// The application's streams in cuda/ (core/backend_hooks.hpp, StreamHooks): what the
// enqueue calls queue there, by the same kernels as TEMPI's own work, and the driver's
// stream memory operations on words of pinned host memory.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "backend.hpp"

namespace tempi {

int app_stream_device(cudaStream_t stream);
Status app_stream_capturing(cudaStream_t stream, bool &capturing);
Status app_stream_moves(Backend &b, cudaStream_t stream, const std::vector<MoveJob> &jobs, bool to_packed);
Status app_stream_write(cudaStream_t stream, const std::vector<uint32_t *> &words, uint32_t value);
Status app_stream_wait(cudaStream_t stream, const std::vector<uint32_t *> &words, uint32_t value);

}  // namespace tempi
