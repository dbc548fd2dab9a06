// Progress of zero-copy point-to-point (zero_copy_p2p.hpp, p2p_progress): the reads issued
// in earlier rounds finished, the sends whose control messages went and whose receivers
// have read them completed, and the receives the library completed recognized and read (or
// unpacked, for data), each kind tested in one call of the library. One thread at a time.
#include <algorithm>
#include <list>
#include <memory>
#include <vector>

#include "base/next.hpp"
#include "zero_copy/p2p_flight.hpp"
#include "zero_copy/p2p_reads.hpp"

namespace tempi {

using namespace zcp2p;

namespace {

// A send whose control message the library reported done (`err`: its error): true when
// that finished the send (the message failed or was cancelled, so nobody reads the buffer).
bool control_done(Flight &f, const MPI_Status &st, int err) {
  P2pEntry &e = board_of(*f.share, my_node_rank(*f.share))[f.entry];
  f.inner_done = true;
  if (err != MPI_SUCCESS) {
    f.error = err;
    give_entry(e);
    return true;
  }
  int cancelled = 0;
  PMPI_Test_cancelled(&st, &cancelled);
  if (!cancelled) return false;
  PMPI_Status_set_cancelled(&f.status, 1);
  give_entry(e);
  return true;
}

// A send whose control message went: true when its receiver has read the data.
bool read_by_receiver(Flight &f) {
  P2pEntry &e = board_of(*f.share, my_node_rank(*f.share))[f.entry];
  if (e.state.load(std::memory_order_acquire) != 2) return false;
  give_entry(e);
  return true;
}

// Tests the library's requests of `flights` in one MPI_Testsome (one call of the library's
// progress for all of them) and calls `done(flight, status, error)` for each completed one.
template <class Done>
void test_inner(const std::vector<std::shared_ptr<Flight>> &flights, Done done) {
  if (flights.empty()) return;
  std::vector<MPI_Request> inner(flights.size());
  for (size_t k = 0; k < flights.size(); ++k) inner[k] = flights[k]->inner;
  std::vector<int> index(flights.size());
  std::vector<MPI_Status> st(flights.size());
  int n = 0;
  const int err = next::MPI_Testsome(int(inner.size()), inner.data(), &n, index.data(), st.data());
  if (err != MPI_SUCCESS && err != MPI_ERR_IN_STATUS) {  // no statuses: test each for its own error
    n = 0;
    for (size_t k = 0; k < flights.size(); ++k) {
      int flag = 0;
      const int e = next::MPI_Test(&inner[k], &flag, &st[size_t(n)]);
      if (flag || e != MPI_SUCCESS) {
        st[size_t(n)].MPI_ERROR = e;
        index[size_t(n++)] = int(k);
      }
    }
  }
  for (int d = 0; d < n && n != MPI_UNDEFINED; ++d) {
    const size_t k = size_t(index[size_t(d)]);
    flights[k]->inner = inner[k];
    done(flights[k], st[size_t(d)], err == MPI_SUCCESS ? MPI_SUCCESS : st[size_t(d)].MPI_ERROR);
  }
}

std::list<Reads> g_reading;  // under g_flights_mutex: reads issued by progress, not finished

using Flights = std::vector<std::shared_ptr<Flight>>;

// Reads issued in earlier rounds: their receives finish once the GPU is done.
void finish_reads(Flights &finished) {
  for (auto it = g_reading.begin(); it != g_reading.end();) {
    int err = MPI_SUCCESS;
    if (!reads_done(*it, false, err)) {
      ++it;
      continue;
    }
    for (auto &f : it->flights) {
      if (f->error == MPI_SUCCESS) f->error = err;
      finished.push_back(f);
    }
    it = g_reading.erase(it);
  }
}

// Sends whose control message is still the library's (`unsent`), tested in one call; the
// sends that ended with it or whose receivers read them leave g_flights for `finished`.
void test_sends(const Flights &unsent, Flights &finished) {
  Flights over;  // sends that ended with their control message
  test_inner(unsent, [&](const std::shared_ptr<Flight> &f, const MPI_Status &st, int e) {
    if (control_done(*f, st, e)) over.push_back(f);
  });
  for (auto it = g_flights.begin(); it != g_flights.end();) {
    Flight &f = **it;
    const bool ended = std::find(over.begin(), over.end(), *it) != over.end();
    if (f.is_send && (ended || (f.inner_done && read_by_receiver(f)))) {
      finished.push_back(*it);
      it = g_flights.erase(it);
      continue;
    }
    ++it;
  }
}

// Receives waiting for the library (`waiting`), tested in one call at a time: the control
// messages among those that arrived get their reads issued (they finish in a later round,
// so that messages arriving one after another overlap on the GPU instead of waiting in
// turn), the data is unpacked now and its receives go to `finished`.
void test_receives(Flights waiting, Flights &finished) {
  std::vector<Finishing> arrived;
  Flights receivers;
  // Once one has arrived, tested again until kQuietTests tests in a row find no more: Open
  // MPI hands over a few messages per test call while its sender is still sending, and the
  // reads issued per round cost a launch (and, on device staging, a wait for the heads)
  // each, 19 rounds a halo exchange where MPICH's 26 messages came in 1 or 2.
  constexpr int kQuietTests = 8;
  size_t seen = 0;
  for (int quiet = 0; !waiting.empty() && quiet < kQuietTests;) {
    test_inner(waiting, [&](const std::shared_ptr<Flight> &p, const MPI_Status &one, int e) {
      Flight &f = *p;
      f.status = one;
      f.error = e;
      arrived.push_back({&f.in, one, e});
      receivers.push_back(p);
    });
    if (receivers.empty()) break;  // nothing yet: this round does not wait for it
    quiet = receivers.size() == seen ? quiet + 1 : 0;
    for (size_t k = seen; k < receivers.size(); ++k)
      waiting.erase(std::find(waiting.begin(), waiting.end(), receivers[k]));
    seen = receivers.size();
  }
  if (arrived.empty()) return;
  std::vector<Reads> issued = issue_reads(arrived);
  for (Reads &g : issued) {
    for (Reads::Read &r : g.reads) {
      const size_t k = size_t(r.f - arrived.data());
      receivers[k]->status = r.f->status;
      receivers[k]->reading = true;
      g.flights.push_back(receivers[k]);
      r.f = nullptr;
    }
    g_reading.push_back(std::move(g));
  }
  finish_recvs(arrived);  // data (the rest are finished already)
  for (size_t k = 0; k < arrived.size(); ++k) {
    Flight &f = *receivers[k];
    if (f.reading) continue;
    f.status = arrived[k].status;
    if (f.error == MPI_SUCCESS) f.error = arrived[k].result;
    finished.push_back(receivers[k]);
  }
}

}  // namespace

void p2p_progress() {
  if (g_flight_count.load(std::memory_order_relaxed) == 0) return;
  std::unique_lock<std::mutex> lock(g_flights_mutex, std::try_to_lock);
  if (!lock.owns_lock()) return;  // another thread is at it
  Flights finished;
  finish_reads(finished);
  // Sends whose control message is still the library's, and receives waiting for the
  // library: each kind tested in one call.
  Flights unsent, waiting;
  for (const auto &p : g_flights) {
    Flight &f = *p;
    if (f.is_send && !f.inner_done) {
      cancel_if_asked(f);
      unsent.push_back(p);
    } else if (!f.is_send && !f.reading) {
      cancel_if_asked(f);
      waiting.push_back(p);
    }
  }
  test_sends(unsent, finished);
  test_receives(std::move(waiting), finished);
  for (auto &f : finished) {
    if (!f->is_send) g_flights.remove(f);
    f->done = true;
    if (f->outer == MPI_REQUEST_NULL) continue;
    if (f->error != MPI_SUCCESS) ++g_failures;
    PMPI_Grequest_complete(f->outer);
  }
  g_flight_count = g_flights.size();
}

}  // namespace tempi
