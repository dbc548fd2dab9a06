// Progress by registration (docs/design.md, "Layout"). Every mechanism that can have work
// in flight (this thread's queued MPI_Pack moves, the engine's deferred sends, requests the
// application freed while active, zero-copy collectives, zero-copy point-to-point, and
// whatever comes next) registers its hooks here at its first use: no work can be in
// flight in a mechanism before that, so registering then is exactly enough, and it holds
// whichever objects of the static archive a program links. Completion calls, blocking
// calls and MPI_Finalize then drive every mechanism through this room and never name one.
//
// Slots fix the order. Flushing and polling run in slot order (lower first: a higher
// mechanism is built on the lower ones, so what it hands on finds their work ahead of it);
// draining and shutting down run in reverse (a mechanism's drain may still use the ones
// below it).
#pragma once

#include <mpi.h>

namespace tempi {

enum class ProgressSlot {
  LocalMoves,            // this thread's queued MPI_Pack/MPI_Unpack moves (TEMPI_DEFER_PACK)
  Engine,                // deferred sends of GPU data, posted in the application's order
  Detached,              // requests freed with MPI_Request_free while active
  ZeroCopyCollectives,   // persistent zero-copy collectives' starts
  ZeroCopyP2p,           // zero-copy point-to-point messages and their queued control messages
  Streams,               // stream-ordered operations whose starts a stream holds back (pmpi/stream)
  Count
};

// A mechanism's hooks; any may be null. They run on any application thread (each hook
// takes its own locks) and must not call back into this room's drain or shutdown.
struct ProgressHooks {
  const char *name = "";
  // Cheap (an atomic load): work waits to be handed to the MPI library.
  bool (*queued)() = nullptr;
  // Hands queued sends to the library now: those to (comm, dest), or every one
  // (comm == MPI_COMM_NULL). MPI's non-overtaking rule across mechanisms rests on this.
  void (*flush)(MPI_Comm comm, int dest) = nullptr;
  // Advances work in flight without waiting.
  void (*poll)() = nullptr;
  // Requests exist that complete only through poll (blocking completion calls then loop).
  bool (*in_flight)() = nullptr;
  // At MPI_Finalize, after everything in flight finished: what is left to finish.
  void (*drain)() = nullptr;
  // At MPI_Finalize, after every drain: threads stopped, memory released.
  void (*shutdown)() = nullptr;
  // Requests the mechanism completed itself with an error that a completion call must
  // return (a generalized request's error cannot reach the communicator's handler through
  // the library): whether any exist, forgetting those seen, and the error of one handle
  // the library freed since (taken once; MPI_SUCCESS when none).
  bool (*failures_pending)() = nullptr;
  void (*clear_failed)() = nullptr;
  int (*failed)(MPI_Request handle) = nullptr;
};

// Registers `hooks` (which must live for the process) in `slot`; a second registration of
// a slot is ignored. Cheap to call again: mechanisms call it at every first use they see.
void register_progress(ProgressSlot slot, const ProgressHooks &hooks);

// Every queued send goes to the library: the first thing each call that may block does,
// so that a started send reaches the library before this process waits for anyone.
void flush_sends();
// Before a send to (comm, dest) is handed to the library or queued by `self` (null: by
// none): the other mechanisms' earlier sends to that destination go first.
void flush_before_send(MPI_Comm comm, int dest, ProgressSlot self = ProgressSlot::Count);
// Polls every mechanism once.
void poll_all();
// Whether some mechanism has requests that complete only through poll_all.
bool any_in_flight();

bool failures_pending();
void clear_failed();
int failed(MPI_Request handle);

// At MPI_Finalize: flushes, polls until nothing is in flight (a warning every 30 s), then
// runs every drain; shutdown_all after that stops and releases everything.
void drain_all();
void shutdown_all();

}  // namespace tempi
