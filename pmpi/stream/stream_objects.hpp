// A stream object (TEMPIX_Stream): the application's GPU stream, and the starts of
// nonblocking operations it holds back (enqueue.cpp).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "stream/op.hpp"

namespace tempi {
namespace streams {

struct AppStream {
  void *handle = nullptr;  // the cudaStream_t
  int device = -1;         // its GPU
  std::mutex mutex;        // over `deferred` and the order of work this object puts on the stream
  std::vector<std::shared_ptr<Op>> deferred;
  std::atomic<int> comms{0};  // communicators bound to it
};

}  // namespace streams
}  // namespace tempi
