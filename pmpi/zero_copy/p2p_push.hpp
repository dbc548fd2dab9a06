// Pushes of zero-copy point-to-point (zero_copy_p2p.hpp): where a receiver cannot map its
// sender's buffer (CUDA maps an allocation once per process, and the receiver's MPI library
// may hold it), it lends a landing buffer of its own and the sender's pusher thread packs the
// message into it. The receiver wakes the pusher through a futex in node-shared memory.
// Internal to the zero_copy/p2p_*.cpp files.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "backend.hpp"
#include "node/node_share.hpp"

namespace tempi {
namespace zcp2p {

// Wakes every process of the node that sleeps on `word` (a futex in node-shared memory).
void futex_wake(std::atomic<uint32_t> &word);

// The pusher thread of this rank on the communicator of `s`, started once.
void start_pusher(std::shared_ptr<NodeShare> s);

// Landing buffers: device memory of this process that a sender packs a message into when
// this process cannot map the sender's buffer. Allocated like the application's memory so
// that senders can map it, never given to the MPI library (so no library maps it), and
// kept for the next push until MPI_Finalize.
struct Landing {
  int device = -1;
  void *ptr = nullptr;
  size_t bytes = 0;
  IpcHandle handle;
  bool busy = false;
};

// A free landing buffer of at least `bytes` on `device` (current), taken; null on failure.
Landing *take_landing(int device, int64_t bytes);
void give_landing(Landing *l);

}  // namespace zcp2p
}  // namespace tempi
