// TEMPIX_Comm_enable_zero_copy (zero_copy_p2p.hpp, p2p_enable): switching zero-copy
// point-to-point on or off on a communicator, collectively, with every rank agreeing and no
// message in flight under the old setting (docs/using.md, "Zero-copy point-to-point").
#include <chrono>
#include <thread>

#include "base/errors.hpp"
#include "p2p/requests.hpp"
#include "base/runtime.hpp"
#include "log.hpp"
#include "zero_copy/p2p_flight.hpp"
#include "zero_copy/p2p_push.hpp"
#include "zero_copy/registration.hpp"
#include "zero_copy/zero_copy.hpp"

namespace tempi {

using namespace zcp2p;

namespace {

// Before the setting of `comm` changes: this rank's zero-copy sends on it, sent under the old
// setting, finish, and every rank goes on moving the messages that reach it until all have
// (a rank's last send may wait for a receiver that has none left of its own). Returns an MPI
// error code.
int settle_sends(MPI_Comm comm) {
  p2p_post_queued(MPI_COMM_NULL, MPI_ANY_SOURCE);
  MPI_Request all_settled = MPI_REQUEST_NULL;
  auto said = std::chrono::steady_clock::now();
  for (int done = 0; !done; std::this_thread::yield()) {
    zero_copy_progress();
    if (all_settled != MPI_REQUEST_NULL) {
      if (const int err = PMPI_Test(&all_settled, &done, MPI_STATUS_IGNORE)) return err;
      continue;
    }
    bool sending = false;
    {
      std::lock_guard<std::mutex> lock(g_flights_mutex);
      for (const auto &f : g_flights) sending = sending || (f->is_send && f->comm == comm);
    }
    if (!sending) {
      if (const int err = PMPI_Ibarrier(comm, &all_settled)) return err;
    } else if (std::chrono::steady_clock::now() - said > std::chrono::seconds(30)) {
      TEMPI_LOG(Warn, "TEMPIX_Comm_enable_zero_copy: a zero-copy send on this communicator is still not received "
                "after 30 s (its receive must be posted before the call)");
      said = std::chrono::steady_clock::now();
    }
  }
  return MPI_SUCCESS;
}

}  // namespace

int p2p_enable(MPI_Comm comm, bool on, int *enabled) {
  if (enabled) *enabled = 0;
  if (comm == MPI_COMM_NULL) return raise_error(MPI_COMM_WORLD, MPI_ERR_COMM, "TEMPIX_Comm_enable_zero_copy: MPI_COMM_NULL");
  int inter = 0;
  if (const int err = PMPI_Comm_test_inter(comm, &inter)) return err;
  // Every rank must agree, whatever it asked: the same decision at both ends of each message.
  int all = on && !inter && active() ? 1 : 0;
  if (const int err = PMPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_MIN, comm)) return err;
  if (inter) return MPI_SUCCESS;
  std::shared_ptr<NodeShare> share = all ? node_share(comm) : p2p_share(comm);  // collective the first time
  if (share) register_zero_copy();
  if (!share) {
    if (all) TEMPI_LOG(Info, "TEMPIX_Comm_enable_zero_copy: zero-copy is off on this communicator (TEMPI_IPC=off, or a rank without a GPU)");
    return MPI_SUCCESS;
  }
  // A GPU receive posted, or a persistent one made, before zero-copy was on cannot tell a
  // control message from data (the contract's item 5, docs/using.md): every rank refuses.
  int quiet = !all || !requests().any_receive([&](const Incoming &in) {
    return in.comm == comm && !in.p2p && (in.peer == MPI_ANY_SOURCE || node_rank_of(*share, in.peer) >= 0);
  });
  if (all)
    if (const int err = PMPI_Allreduce(MPI_IN_PLACE, &quiet, 1, MPI_INT, MPI_MIN, comm)) return err;
  if (!quiet)
    return raise_error(comm, MPI_ERR_PENDING,
                       "TEMPIX_Comm_enable_zero_copy: a rank has a GPU receive on this communicator from before the "
                       "call; call it when no receive on the communicator is pending, and make persistent receives "
                       "after it");
  if (const int err = settle_sends(comm)) return err;
  if (all) start_pusher(share);
  set_p2p(*share, all != 0);
  if (enabled) *enabled = all;
  return MPI_SUCCESS;
}

}  // namespace tempi
