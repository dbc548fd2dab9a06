// Applications' streams on the emulated GPU (emulated_streams.hpp). A stream's thread
// runs its work in order; a wait spins (then sleeps) until its words hold the value, as
// cuStreamWaitValue32 holds a GPU stream; moves run the backend's synchronous pack and
// unpack, which translate emulated device memory, on the stream's thread.
#include "emulated_streams.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

namespace tempi {

namespace {

class EmulatedStream {
 public:
  EmulatedStream() : thread_([this] { run(); }) {}
  ~EmulatedStream() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  void enqueue(std::function<void()> work) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      work_.push_back(std::move(work));
    }
    wake_.notify_all();
  }
  void synchronize() {
    std::unique_lock<std::mutex> lock(mutex_);
    idle_.wait(lock, [&] { return work_.empty() && !running_; });
  }

 private:
  void run() {
    for (;;) {
      std::function<void()> work;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        running_ = false;
        if (work_.empty()) idle_.notify_all();
        wake_.wait(lock, [&] { return stopping_ || !work_.empty(); });
        if (work_.empty()) return;  // stopping, and everything ran
        work = std::move(work_.front());
        work_.pop_front();
        running_ = true;
      }
      work();
    }
  }
  std::mutex mutex_;
  std::condition_variable wake_, idle_;
  std::deque<std::function<void()>> work_;
  bool running_ = false, stopping_ = false;
  std::thread thread_;  // last: starts once the members it uses exist
};

std::mutex g_mutex;
std::set<void *> g_streams;

EmulatedStream *of(void *stream) { return static_cast<EmulatedStream *>(stream); }

std::atomic<uint32_t> &word(uint32_t *w) { return *reinterpret_cast<std::atomic<uint32_t> *>(w); }

}  // namespace

void *emulated_stream_create() {
  auto *s = new EmulatedStream;
  std::lock_guard<std::mutex> lock(g_mutex);
  g_streams.insert(s);
  return s;
}

void emulated_stream_destroy(void *stream) {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_streams.erase(stream);
  }
  delete of(stream);
}

void emulated_stream_run(void *stream, std::function<void()> work) { of(stream)->enqueue(std::move(work)); }

void emulated_stream_synchronize(void *stream) { of(stream)->synchronize(); }

bool emulated_stream_known(void *stream) {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_streams.count(stream) > 0;
}

Status emulated_stream_moves(void *stream, const std::vector<MoveJob> &jobs, bool to_packed) {
  if (jobs.empty()) return Status::Ok;
  if (!emulated_stream_known(stream)) return Status::GpuError;
  struct Kept {
    std::shared_ptr<const Plan> plan;
    void *typed, *packed;
    int64_t bytes;
  };
  std::vector<Kept> kept;  // a launch takes its arguments with it
  for (const MoveJob &j : jobs) kept.push_back({std::make_shared<const Plan>(*j.plan), j.typed, j.packed, j.bytes});
  of(stream)->enqueue([kept, to_packed] {
    Backend &b = gpu_backend();
    for (const Kept &k : kept) {
      const Status s = to_packed ? b.pack(*k.plan, k.typed, k.packed, 0, k.bytes)
                                 : b.unpack(*k.plan, k.packed, k.typed, 0, k.bytes);
      if (s != Status::Ok) std::fprintf(stderr, "emulated stream: a move failed: %s\n", to_string(s));
    }
  });
  return Status::Ok;
}

Status emulated_stream_write(void *stream, const std::vector<uint32_t *> &words, uint32_t value) {
  if (words.empty()) return Status::Ok;
  if (!emulated_stream_known(stream)) return Status::GpuError;
  of(stream)->enqueue([words, value] {
    for (uint32_t *w : words) word(w).store(value, std::memory_order_release);
  });
  return Status::Ok;
}

Status emulated_stream_wait(void *stream, const std::vector<uint32_t *> &words, uint32_t value) {
  if (words.empty()) return Status::Ok;
  if (!emulated_stream_known(stream)) return Status::GpuError;
  of(stream)->enqueue([words, value] {
    for (uint32_t *w : words)
      for (unsigned spins = 0; word(w).load(std::memory_order_acquire) != value; ++spins)
        if (spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(20));
        else std::this_thread::yield();
  });
  return Status::Ok;
}

}  // namespace tempi
