// Zero-copy receives (zero_copy_p2p.hpp): a receive that may get a control message posted
// to the library into its staging behind a generalized request (p2p_irecv) or waited for
// (p2p_recv); progress (zero_copy/p2p_progress.cpp) completes them.
#include <atomic>

#include "base/next.hpp"
#include "zero_copy/p2p_flight.hpp"

namespace tempi {

using namespace zcp2p;

bool p2p_stage_for_control(NodeShare &s, int source) {
  const int from = source == MPI_ANY_SOURCE ? -1 : node_rank_of(s, source);
  if (source != MPI_ANY_SOURCE && from < 0) return false;  // on another node: data only
  if (!expects_control(s, from)) return false;
  g_staged_for_control.fetch_add(1, std::memory_order_relaxed);
  return true;
}

namespace {

std::shared_ptr<Flight> post_recv(Incoming &in, int source, int tag, MPI_Comm comm, int &err) {
  auto f = std::make_shared<Flight>();
  f->comm = comm;
  err = next::MPI_Irecv(in.buf, in.count, in.type, source, tag, comm, &f->inner);
  if (err != MPI_SUCCESS) return nullptr;
  f->in = std::move(in);
  return f;
}

}  // namespace

int p2p_irecv(Incoming &in, int source, int tag, MPI_Comm comm, MPI_Request *request) {
  int err = MPI_SUCCESS;
  std::shared_ptr<Flight> f = post_recv(in, source, tag, comm, err);
  if (!f) return err;
  if ((err = start_outer(f, request)) != MPI_SUCCESS) {
    PMPI_Cancel(&f->inner);
    PMPI_Wait(&f->inner, MPI_STATUS_IGNORE);
    return err;
  }
  add_flight(std::move(f));
  return MPI_SUCCESS;
}

int p2p_recv(Incoming &in, int source, int tag, MPI_Comm comm, MPI_Status *status) {
  int err = MPI_SUCCESS;
  std::shared_ptr<Flight> f = post_recv(in, source, tag, comm, err);
  if (!f) return err;
  add_flight(f);
  wait_flight(*f, "MPI_Recv");
  if (status != MPI_STATUS_IGNORE) {
    MPI_Status out;
    query_flight(&f, &out);
    *status = out;
  }
  return f->error;
}

}  // namespace tempi
