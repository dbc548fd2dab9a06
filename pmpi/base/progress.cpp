#include "base/progress.hpp"

#include <array>
#include <atomic>
#include <chrono>
#include <thread>

#include "log.hpp"

namespace tempi {

namespace {

constexpr int kSlots = int(ProgressSlot::Count);

// Written once per slot (a mechanism's first use), read on every call: lock-free reads.
std::array<std::atomic<const ProgressHooks *>, kSlots> &slots() {
  static std::array<std::atomic<const ProgressHooks *>, kSlots> s{};
  return s;
}

const ProgressHooks *at(int i) { return slots()[size_t(i)].load(std::memory_order_acquire); }

}  // namespace

void register_progress(ProgressSlot slot, const ProgressHooks &hooks) {
  const ProgressHooks *expected = nullptr;
  slots()[size_t(slot)].compare_exchange_strong(expected, &hooks, std::memory_order_acq_rel);
}

void flush_sends() {
  for (int i = 0; i < kSlots; ++i)
    if (const ProgressHooks *h = at(i); h && h->flush && (!h->queued || h->queued())) h->flush(MPI_COMM_NULL, 0);
}

void flush_before_send(MPI_Comm comm, int dest, ProgressSlot self) {
  for (int i = 0; i < kSlots; ++i)
    if (const ProgressHooks *h = at(i); i != int(self) && h && h->flush && (!h->queued || h->queued()))
      h->flush(comm, dest);
}

void poll_all() {
  for (int i = 0; i < kSlots; ++i)
    if (const ProgressHooks *h = at(i); h && h->poll) h->poll();
}

bool any_in_flight() {
  for (int i = 0; i < kSlots; ++i)
    if (const ProgressHooks *h = at(i); h && h->in_flight && h->in_flight()) return true;
  return false;
}

bool failures_pending() {
  for (int i = 0; i < kSlots; ++i)
    if (const ProgressHooks *h = at(i); h && h->failures_pending && h->failures_pending()) return true;
  return false;
}

void clear_failed() {
  for (int i = 0; i < kSlots; ++i)
    if (const ProgressHooks *h = at(i); h && h->clear_failed) h->clear_failed();
}

int failed(MPI_Request handle) {
  for (int i = 0; i < kSlots; ++i)
    if (const ProgressHooks *h = at(i); h && h->failed)
      if (const int err = h->failed(handle)) return err;
  return MPI_SUCCESS;
}

void drain_all() {
  flush_sends();  // sends still queued, freed ones included: the drains below wait for them
  for (auto began = std::chrono::steady_clock::now(); any_in_flight();) {
    poll_all();
    std::this_thread::yield();
    if (std::chrono::steady_clock::now() - began > std::chrono::seconds(30)) {
      TEMPI_LOG(Warn, "MPI_Finalize: work in flight (a persistent collective's start, or a zero-copy send whose "
                "receive is not posted) has not finished after 30 s");
      began = std::chrono::steady_clock::now();
    }
  }
  for (int i = kSlots - 1; i >= 0; --i)
    if (const ProgressHooks *h = at(i); h && h->drain) h->drain();
}

void shutdown_all() {
  for (int i = kSlots - 1; i >= 0; --i)
    if (const ProgressHooks *h = at(i); h && h->shutdown) h->shutdown();
}

}  // namespace tempi
