// One enqueued operation (streams.hpp), shared by the thread that enqueued it and TEMPI's
// stream thread (engine.cpp), and the words through which the stream and that thread
// speak: the stream writes a word when it reaches a point, the thread writes one when the
// library finished, and the stream waits for it (docs/design.md, "Stream-ordered
// communication").
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

#include "backend_types.hpp"
#include "plan.hpp"

namespace tempi {
namespace streams {

// Words of pinned host memory, written and waited for by the stream and the thread (each
// goes from 0 to 1 once: an operation is enqueued once).
struct OpWords {
  uint32_t arrived;   // stream: the operation's start was reached (a device send: its bytes are packed)
  uint32_t done;      // thread: the library finished (a device receive: its bytes are in staging)
  uint32_t consumed;  // stream: it passed the completion (and unpacked): the words and staging may go
};

inline std::atomic<uint32_t> &word(uint32_t &w) {
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "a stream word is a plain 32-bit word");
  return reinterpret_cast<std::atomic<uint32_t> &>(w);
}

struct AppStream;

struct Op {
  AppStream *stream = nullptr;  // the stream of the operation's communicator
  bool is_send = false;
  // Device: the stream packs into (or unpacks from) pinned staging and the library moves
  // those bytes; Host: the library moves the application's host buffer itself.
  bool device = false;
  // What the library is given.
  void *buf = nullptr;
  int count = 0;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  int peer = MPI_PROC_NULL, tag = 0;
  MPI_Comm comm = MPI_COMM_NULL;
  // The device side: the plan of `count` elements, the typed buffer and its packed size.
  Plan plan;
  void *typed = nullptr;
  int64_t bytes = 0;
  int gpu = -1;
  // The words, then the staging, in one block of pinned memory from the pool.
  Scratch block;
  OpWords *words = nullptr;
  char *staging = nullptr;
  // The nonblocking forms' generalized request (what the application holds until its
  // Wait_enqueue), completed by the stream thread when the library finished.
  MPI_Request request = MPI_REQUEST_NULL;
  std::atomic<bool> freed{false};  // the application's Wait_enqueue freed `request`

  // The result, and where the application wants it: set by the thread when the library
  // finished (`finished`), and by Recv_enqueue or Wait_enqueue (`status_out`), whichever
  // comes second copying it.
  std::mutex result_mutex;
  MPI_Status result{};
  bool finished = false;
  MPI_Status *status_out = nullptr;
  void deliver(const MPI_Status &st);
  void want(MPI_Status *out);
};

}  // namespace streams
}  // namespace tempi
