// The requests the application holds for zero-copy point-to-point (zero_copy/p2p_flight.hpp):
// generalized requests over Flights, their query, free and cancel callbacks, the list that
// progress walks, and the errors of requests that finished with one (zero_copy_p2p.hpp,
// p2p_failed).
#include <sched.h>

#include <chrono>

#include "log.hpp"
#include "zero_copy/p2p_flight.hpp"
#include "zero_copy/zero_copy.hpp"

namespace tempi {
namespace zcp2p {

std::atomic<uint64_t> g_serial{0}, g_reads{0}, g_sends{0}, g_probed{0}, g_pushed{0}, g_staged_for_control{0};
std::atomic<int> g_failures{0};
std::mutex g_flights_mutex;
std::list<std::shared_ptr<Flight>> g_flights;
std::atomic<size_t> g_flight_count{0};

namespace {

thread_local std::vector<std::pair<MPI_Request, int>> t_failed;  // freed with an error in this thread's call

int free_flight(void *extra) {
  auto *holder = static_cast<std::shared_ptr<Flight> *>(extra);
  if ((*holder)->error != MPI_SUCCESS && (*holder)->done) {
    t_failed.emplace_back((*holder)->outer, (*holder)->error);
    --g_failures;
  }
  delete holder;
  return MPI_SUCCESS;
}

// MPI_Cancel of the application's request: the library's request is cancelled if it can be
// (a send whose control message no receive matched yet, a receive that matched nothing);
// progress then completes the request as cancelled, or as usual.
// It only asks: the library calls this holding its own locks, which progress (holding
// g_flights_mutex) may be waiting for.
int cancel_flight(void *extra, int complete) {
  if (!complete) (*static_cast<std::shared_ptr<Flight> *>(extra))->cancel = true;
  return MPI_SUCCESS;
}

}  // namespace

int query_flight(void *extra, MPI_Status *status) {
  const Flight &f = **static_cast<std::shared_ptr<Flight> *>(extra);
  int is_cancelled = 0;
  PMPI_Test_cancelled(&f.status, &is_cancelled);
  MPI_Count bytes = 0;
  if (!f.is_send) PMPI_Get_elements_x(&f.status, MPI_BYTE, &bytes);
  PMPI_Status_set_elements_x(status, MPI_BYTE, bytes);
  PMPI_Status_set_cancelled(status, is_cancelled);
  status->MPI_SOURCE = f.is_send ? MPI_ANY_SOURCE : f.status.MPI_SOURCE;
  status->MPI_TAG = f.is_send ? MPI_ANY_TAG : f.status.MPI_TAG;
  status->MPI_ERROR = f.error;
  return MPI_SUCCESS;  // the error was raised already; the completion call returns it (p2p_failed)
}

void cancel_if_asked(Flight &f) {
  if (f.cancel.exchange(false) && f.inner != MPI_REQUEST_NULL) PMPI_Cancel(&f.inner);
}

int start_outer(std::shared_ptr<Flight> f, MPI_Request *request) {
  auto *holder = new std::shared_ptr<Flight>(f);
  const int err = PMPI_Grequest_start(query_flight, free_flight, cancel_flight, holder, request);
  if (err != MPI_SUCCESS) {
    delete holder;
    return err;
  }
  f->outer = *request;
  return MPI_SUCCESS;
}

void add_flight(std::shared_ptr<Flight> f) {
  std::lock_guard<std::mutex> lock(g_flights_mutex);
  g_flights.push_back(std::move(f));
  g_flight_count = g_flights.size();
}

void wait_flight(const Flight &f, const char *call) {
  auto began = std::chrono::steady_clock::now();
  for (uint64_t n = 1;; ++n) {
    zero_copy_progress();
    {
      std::lock_guard<std::mutex> lock(g_flights_mutex);
      if (f.done) return;
    }
    if (n % 64 == 0) sched_yield();
    if (n % 4096 == 0 && std::chrono::steady_clock::now() - began > std::chrono::seconds(30)) {
      TEMPI_LOG(Warn, "%s: still waiting for a zero-copy message after 30 s", call);
      began = std::chrono::steady_clock::now();
    }
  }
}

}  // namespace zcp2p

using namespace zcp2p;

bool p2p_in_flight() { return g_flight_count.load(std::memory_order_relaxed) > 0 || p2p_queued(); }

bool p2p_failures_pending() { return g_failures.load(std::memory_order_relaxed) > 0; }

void p2p_clear_failed() { t_failed.clear(); }

int p2p_failed(MPI_Request handle) {
  for (auto it = t_failed.begin(); it != t_failed.end(); ++it)
    if (it->first == handle) {
      const int err = it->second;
      t_failed.erase(it);
      return err;
    }
  return MPI_SUCCESS;
}

P2pCounts p2p_counts() {
  return {g_reads.load(), g_sends.load(), g_probed.load(), g_pushed.load(), g_staged_for_control.load()};
}

}  // namespace tempi
