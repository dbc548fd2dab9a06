// Probes on a communicator with zero-copy point-to-point (zero_copy_p2p.hpp,
// p2p_after_probe): a probe that found what may be a control message reports the control
// message's size (the contract, docs/using.md "Zero-copy point-to-point"); said once, counted.
#include <atomic>

#include "log.hpp"
#include "zero_copy/p2p_flight.hpp"

namespace tempi {

using namespace zcp2p;

void p2p_after_probe(MPI_Comm comm, const MPI_Status &status) {
  std::shared_ptr<NodeShare> share = p2p_share(comm);
  if (!share) return;
  MPI_Count bytes = 0;
  PMPI_Get_elements_x(&status, MPI_BYTE, &bytes);
  const int sender = node_rank_of(*share, status.MPI_SOURCE);
  if (bytes != kControlBytes || sender < 0) return;
  const P2pEntry *board = board_of(*share, sender);
  const int me = my_node_rank(*share);
  for (int i = 0; i < kP2pEntries; ++i)
    if (board[i].state.load(std::memory_order_acquire) == 1 && board[i].dest == me && board[i].tag == status.MPI_TAG) {
      g_probed.fetch_add(1, std::memory_order_relaxed);
      static std::atomic<bool> said{false};
      if (!said.exchange(true))
        TEMPI_LOG(Warn, "a probe on a communicator with zero-copy point-to-point found a 48-byte message from rank %d "
                        "that is likely a zero-copy control message: probes report its size, not the message's "
                        "(docs/using.md, \"Zero-copy point-to-point\")",
                  status.MPI_SOURCE);
      return;
    }
}

}  // namespace tempi
