// An application's streams on the emulated GPU (emulated_streams.cpp): each is a thread
// that runs what is queued on it, in order, as a GPU runs a stream. Tests make them (as an
// application calls cudaStreamCreate) and queue their own "kernels" on them; the emulated
// backend's stream hooks (core/backend_hooks.hpp, StreamHooks) queue TEMPI's work there.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "backend.hpp"

namespace tempi {

void *emulated_stream_create();
// Waits for the stream's work, then ends it.
void emulated_stream_destroy(void *stream);
void emulated_stream_run(void *stream, std::function<void()> work);
void emulated_stream_synchronize(void *stream);

// The backend's hooks (emulated_backend.cpp forwards to these).
bool emulated_stream_known(void *stream);
Status emulated_stream_moves(void *stream, const std::vector<MoveJob> &jobs, bool to_packed);
Status emulated_stream_write(void *stream, const std::vector<uint32_t *> &words, uint32_t value);
Status emulated_stream_wait(void *stream, const std::vector<uint32_t *> &words, uint32_t value);

}  // namespace tempi
