// The progress room and the stats table (pmpi/base/progress.hpp, pmpi/base/stats.hpp):
// hooks run in slot order (flush, poll) or in reverse (drain, shutdown), a flush runs only
// where its mechanism says work is queued, a send's flush skips the mechanism that sends,
// a slot keeps its first registration; counters are read by name, 0 until registered.
// No MPI call is made: the hooks here are the test's own.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "base/progress.hpp"
#include "base/stats.hpp"

namespace {

std::vector<std::string> g_calls;  // what the hooks did, in order
bool g_engine_queued = false;
int g_in_flight = 0;
MPI_Comm g_flushed_comm = MPI_COMM_WORLD;
int g_flushed_dest = -1;

tempi::ProgressHooks hooks_named(const char *name) {
  tempi::ProgressHooks h;
  h.name = name;
  return h;
}

// Three mechanisms in three slots, registered out of order.
const tempi::ProgressHooks &p2p_hooks() {
  static tempi::ProgressHooks h = [] {
    tempi::ProgressHooks x = hooks_named("p2p");
    x.flush = [](MPI_Comm comm, int dest) {
      g_calls.push_back("flush p2p");
      g_flushed_comm = comm;
      g_flushed_dest = dest;
    };
    x.poll = [] { g_calls.push_back("poll p2p"); };
    x.in_flight = [] { return g_in_flight > 0; };
    x.drain = [] { g_calls.push_back("drain p2p"); };
    x.shutdown = [] { g_calls.push_back("shutdown p2p"); };
    x.failures_pending = [] { return true; };
    x.failed = [](MPI_Request) { return int(MPI_ERR_TRUNCATE); };
    return x;
  }();
  return h;
}

const tempi::ProgressHooks &engine_hooks() {
  static tempi::ProgressHooks h = [] {
    tempi::ProgressHooks x = hooks_named("engine");
    x.queued = [] { return g_engine_queued; };
    x.flush = [](MPI_Comm, int) { g_calls.push_back("flush engine"); };
    x.drain = [] { g_calls.push_back("drain engine"); };
    return x;
  }();
  return h;
}

const tempi::ProgressHooks &local_hooks() {
  static tempi::ProgressHooks h = [] {
    tempi::ProgressHooks x = hooks_named("local");
    x.flush = [](MPI_Comm, int) { g_calls.push_back("flush local"); };
    x.poll = [] {
      g_calls.push_back("poll local");
      if (g_in_flight > 0) --g_in_flight;  // each poll finishes one
    };
    x.shutdown = [] { g_calls.push_back("shutdown local"); };
    return x;
  }();
  return h;
}

const tempi::ProgressHooks &impostor_hooks() {
  static tempi::ProgressHooks h = [] {
    tempi::ProgressHooks x = hooks_named("impostor");
    x.poll = [] { g_calls.push_back("poll impostor"); };
    return x;
  }();
  return h;
}

void register_all() {
  tempi::register_progress(tempi::ProgressSlot::ZeroCopyP2p, p2p_hooks());
  tempi::register_progress(tempi::ProgressSlot::LocalMoves, local_hooks());
  tempi::register_progress(tempi::ProgressSlot::Engine, engine_hooks());
  tempi::register_progress(tempi::ProgressSlot::ZeroCopyP2p, impostor_hooks());  // the slot is taken
}

}  // namespace

TEST_CASE("flushes run in slot order, and only where work is queued", "[progress]") {
  register_all();
  g_calls.clear();
  g_engine_queued = false;
  tempi::flush_sends();
  CHECK(g_calls == std::vector<std::string>{"flush local", "flush p2p"});
  CHECK(g_flushed_comm == MPI_COMM_NULL);

  g_calls.clear();
  g_engine_queued = true;
  tempi::flush_sends();
  CHECK(g_calls == std::vector<std::string>{"flush local", "flush engine", "flush p2p"});
}

TEST_CASE("a send's flush reaches every other mechanism with its destination", "[progress]") {
  register_all();
  g_calls.clear();
  g_engine_queued = true;
  tempi::flush_before_send(MPI_COMM_SELF, 3, tempi::ProgressSlot::Engine);
  CHECK(g_calls == std::vector<std::string>{"flush local", "flush p2p"});
  CHECK(g_flushed_comm == MPI_COMM_SELF);
  CHECK(g_flushed_dest == 3);

  g_calls.clear();
  tempi::flush_before_send(MPI_COMM_SELF, 5);
  CHECK(g_calls == std::vector<std::string>{"flush local", "flush engine", "flush p2p"});
  CHECK(g_flushed_dest == 5);
}

TEST_CASE("polls run in slot order; a slot keeps its first registration", "[progress]") {
  register_all();
  g_calls.clear();
  tempi::poll_all();
  CHECK(g_calls == std::vector<std::string>{"poll local", "poll p2p"});
}

TEST_CASE("in flight, failures: any mechanism's", "[progress]") {
  register_all();
  g_in_flight = 2;
  CHECK(tempi::any_in_flight());
  g_in_flight = 0;
  CHECK_FALSE(tempi::any_in_flight());
  CHECK(tempi::failures_pending());
  CHECK(tempi::failed(MPI_REQUEST_NULL) == MPI_ERR_TRUNCATE);
}

TEST_CASE("finalize: flush, poll until nothing is in flight, drains and shutdowns in reverse", "[progress]") {
  register_all();
  g_calls.clear();
  g_engine_queued = false;
  g_in_flight = 2;
  tempi::drain_all();
  CHECK(g_in_flight == 0);
  CHECK(g_calls == std::vector<std::string>{"flush local", "flush p2p", "poll local", "poll p2p", "poll local",
                                            "poll p2p", "drain p2p", "drain engine"});
  g_calls.clear();
  tempi::shutdown_all();
  CHECK(g_calls == std::vector<std::string>{"shutdown p2p", "shutdown local"});
}

TEST_CASE("counters are read by name, 0 until their mechanism registers them", "[stats]") {
  uint64_t v = 99;
  CHECK_FALSE(tempi::read_counter("no.such_counter", v));
  CHECK_FALSE(tempi::read_counter(nullptr, v));
  REQUIRE(tempi::read_counter("p2p.zero_copy_sends", v));
  CHECK(v == 0);
  CHECK(tempi::nonzero_counters().empty());

  static const tempi::CounterReader readers[] = {{"p2p.zero_copy_sends", [] { return uint64_t(7); }},
                                                 {"zero_copy.mappings", [] { return uint64_t(2); }}};
  tempi::register_counters(readers, 2);
  REQUIRE(tempi::read_counter("p2p.zero_copy_sends", v));
  CHECK(v == 7);
  CHECK(tempi::nonzero_counters() == "p2p.zero_copy_sends=7 zero_copy.mappings=2");
}
