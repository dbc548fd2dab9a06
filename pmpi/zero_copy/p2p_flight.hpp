// Zero-copy point-to-point's own state (zero_copy_p2p.hpp says the protocol): the control
// message the MPI library carries, the states of a board entry beyond P2pEntry's, the
// Flight behind each generalized request the application holds, and the process-wide lists
// and counters the zero_copy/p2p_*.cpp files share. Internal to those files.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "node/node_share.hpp"
#include "p2p/engine.hpp"
#include "p2p/messages.hpp"
#include "zero_copy/zero_copy_p2p.hpp"

namespace tempi {
namespace zcp2p {

constexpr uint64_t kMagic = 0x3143'5a49'504d'4554ull;  // "TEMPIZC1"

// What the MPI library carries for a zero-copy message: kControlBytes, MPI_BYTE.
struct Control {
  uint64_t magic = kMagic;
  uint64_t nonce = 0;   // the sender's segment's
  uint64_t serial = 0;  // the entry's
  int64_t bytes = 0;    // the message's packed size
  uint32_t entry = 0;   // index in the sender's board
  int32_t sender = 0;   // the sender's node rank
  uint64_t reserved = 0;
};
static_assert(sizeof(Control) == kControlBytes, "the control message has a fixed size");

// An entry's states: P2pEntry::state's 0, 1 and 2, and these. Filling: taken by a thread of
// this process that fills it (no receiver looks at it, no other thread takes it). A push,
// where the receiver cannot map the send buffer (CUDA maps an allocation once per process,
// and the receiver's MPI library may hold it): the receiver sets Refused with its landing
// buffer in the entry, the sender's pusher takes it (Pushing) and packs the message into that
// buffer (Pushed, or PushFailed), then the receiver sets 2 and unpacks.
constexpr uint32_t kFilling = 3;
constexpr uint32_t kRefused = 4;
constexpr uint32_t kPushing = 5;
constexpr uint32_t kPushed = 6;
constexpr uint32_t kPushFailed = 7;

// One zero-copy send or receive in flight (zero_copy/p2p_flight.cpp): what the application's
// generalized request reports and what progress (zero_copy/p2p_progress.cpp) still has to do.
struct Flight {
  bool is_send = false;
  MPI_Request outer = MPI_REQUEST_NULL;  // the application's generalized request (null: a blocking call)
  MPI_Request inner = MPI_REQUEST_NULL;  // the library's request
  MPI_Comm comm = MPI_COMM_NULL;
  bool done = false;                     // outer completed (or, blocking, finished)
  MPI_Status status{};                   // what the query reports
  int error = MPI_SUCCESS;
  // A send: its entry, the control message the library carries, and how to post it.
  std::shared_ptr<NodeShare> share;
  int entry = -1;
  IsendFn post = nullptr;
  int dest = 0, tag = 0, device = -1;
  Control control;
  bool inner_done = false;
  bool reading = false;  // a receive whose control message's read is on the GPU
  std::atomic<bool> cancel{false};  // MPI_Cancel asked; progress cancels the library's request
  // A receive.
  Incoming in;
};

// The sends' serials and this process's counts (p2p_counts).
extern std::atomic<uint64_t> g_serial, g_reads, g_sends, g_probed, g_pushed, g_staged_for_control;

extern std::atomic<int> g_failures;  // finished with an error, the handle not yet freed

// Flights posted to the library (sends whose control message is posted, receives), and
// their count for the fast checks. g_flights_mutex: p2p_progress runs on one thread at a time.
extern std::mutex g_flights_mutex;
extern std::list<std::shared_ptr<Flight>> g_flights;
extern std::atomic<size_t> g_flight_count;

// What the generalized request of `extra` (a std::shared_ptr<Flight> *) reports.
int query_flight(void *extra, MPI_Status *status);
// The application's generalized request for `f`, in *request. Returns an MPI error code.
int start_outer(std::shared_ptr<Flight> f, MPI_Request *request);
void add_flight(std::shared_ptr<Flight> f);
// Spins until `f` finished, progressing every zero-copy message of this process (and the
// library) meanwhile; says once every half minute what it waits for.
void wait_flight(const Flight &f, const char *call);
// Cancels the library's request of `f` once, where MPI_Cancel asked for it (under g_flights_mutex).
void cancel_if_asked(Flight &f);

// A free entry of this rank's board, taken, or -1; and an entry given back (zero_copy/p2p_send.cpp).
int take_entry(NodeShare &s);
void give_entry(P2pEntry &e);

}  // namespace zcp2p
}  // namespace tempi
