// Open launches (docs/design.md, "Open launches"): per thread and device, at most one
// kernel (kernels.hpp, launch_open) that keeps taking objects while it runs. A deferred
// MPI_Pack or MPI_Unpack (TEMPI_DEFER_PACK) joins it instead of launching a kernel of its
// own. A launch closes when:
//   - its thread issues any other GPU work (thread_stream() closes it first, so the work
//     the stream runs next is never overtaken by an object joined later);
//   - a fence of it is waited for or queried;
//   - it is full, or the next object goes the other way;
//   - nothing joined it for kOpenIdle (a timer thread), so that the application's own
//     synchronization, or its next kernel, never waits for more than that.
// Work the application queues on the legacy default stream while a launch is open waits for
// the launch's end, so an object joined after that work runs before it: the caller's
// contract (TEMPI_DEFER_PACK=3, docs/using.md) allows it. (The CUDA runtime cannot tell
// TEMPI whether such work was queued: the legacy stream reports busy while any blocking
// stream, TEMPI's included, has work.)
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

#include "backend.hpp"
#include "kernels.hpp"

namespace tempi {

struct OpenLaunch;

// Names one launch of an open-launch object (objects are reused for later launches).
struct OpenMark {
  std::shared_ptr<OpenLaunch> launch;
  uint64_t epoch = 0;
};

// Joins `o` (on the current device; both sides device memory, fusable) to this thread's
// open launch in direction `to_packed`, opening one on this thread's stream when there is
// none that takes it. On success `event` completes after the launch has ended and `mark`
// names it. Unsupported when this GPU cannot run open launches (the caller then issues the
// move on its own).
Status join_open(const FusedObject &o, bool to_packed, cudaEvent_t &event, OpenMark &mark);

// Closes the launch `mark` names, if it is still that launch and open.
void close_open(const OpenMark &mark);

// Closes this thread's open launch on `device` (every device: -1). Costs a load when there
// is none.
void close_thread_open(int device);

}  // namespace tempi
