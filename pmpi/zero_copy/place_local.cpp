// ZeroCopyCall::place_local (zero_copy.hpp): one rank's half of a zero-copy collective from
// its own arguments alone (zero_copy/memo.hpp, LocalHalf): its blocks placed, the blocks it
// sends to itself paired with those it receives from itself, and the entries of its slot
// (the plans of its sends published in its arena).
#include <algorithm>

#include "node/share.hpp"
#include "zero_copy/memo.hpp"
#include "zero_copy/slots.hpp"
#include "zero_copy/zero_copy.hpp"

namespace tempi {

void ZeroCopyCall::place_local(MPI_Comm comm, void *sbuf, const std::vector<Block> &sblocks,
                               const std::vector<int> &dests, void *rbuf, const std::vector<Block> &rblocks,
                               const std::vector<int> &sources, bool cartesian, bool listing, LocalHalf &local) {
  int me = 0;
  PMPI_Comm_rank(comm, &me);
  const std::vector<int> *node_of = node_ ? &node_->node_of : nullptr;
  // A side that is not GPU data takes no part (its blocks stay as they are).
  local.socc = occurrences(dests, sbuf ? sblocks.size() : 0, cartesian, me, node_of);
  local.rocc = occurrences(sources, rbuf ? rblocks.size() : 0, cartesian, me, node_of);
  local.splaced.assign(local.socc.size(), PlacedBlock{});
  local.rplaced.assign(local.rocc.size(), PlacedBlock{});
  local.sok.assign(local.socc.size(), 0);
  local.rok.assign(local.rocc.size(), 0);
  // A side with a block TEMPI cannot plan reaches the library as a host copy of its region,
  // through the application's own counts: none of its blocks may be left out, so the side
  // takes no part.
  auto place_side = [](void *buf, const std::vector<Block> &blocks, const std::vector<int> &occ,
                       std::vector<PlacedBlock> &placed, std::vector<char> &ok) {
    for (size_t i = 0; i < occ.size(); ++i) {
      if (blocks[i].count <= 0) continue;
      const bool same = i > 0 && placed[i - 1].info && blocks[i - 1].type == blocks[i].type;
      if (!place_block(buf, blocks[i], same ? &placed[i - 1].info : nullptr, placed[i])) {
        std::fill(ok.begin(), ok.end(), 0);
        return;
      }
      ok[i] = occ[i] >= 0 && placed[i].bytes > 0;
    }
  };
  place_side(sbuf, sblocks, local.socc, local.splaced, local.sok);
  place_side(rbuf, rblocks, local.rocc, local.rplaced, local.rok);

  // Blocks to itself: the k-th send to this rank pairs with the k-th receive from it.
  for (size_t i = 0; i < local.socc.size(); ++i) {
    if (!local.sok[i] || dests[i] != me) continue;
    for (size_t j = 0; j < local.rocc.size(); ++j)
      if (local.rok[j] && sources[j] == me && local.rocc[j] == local.socc[i] &&
          local.rplaced[j].bytes == local.splaced[i].bytes) {
        Read rd;
        rd.from = -1;
        rd.own_plan = local.splaced[i].plan;
        rd.typed = local.splaced[i].typed;
        rd.into = local.rplaced[j];
        local.self_reads.push_back(std::move(rd));
        local.self_sends.push_back(i);
        local.self_recvs.push_back(j);
        break;
      }
  }
  if (!node_) return;
  // This rank's entries: its sends to node peers (plans published), then its receives.
  for (size_t i = 0; listing && local.exported && i < local.socc.size() && local.sends.size() < size_t(kMaxEntries);
       ++i) {
    if (!local.sok[i] || dests[i] == me) continue;
    const PlacedBlock &p = local.splaced[i];
    const int64_t at = int64_t(p.typed - static_cast<char *>(sbuf)) + local.handle.offset;
    if (at + p.low < 0 || at + p.high > local.handle.size) continue;  // data beyond the exported allocation
    const int64_t plan_at = node_->publish(p.plan, p.info->plan->id, sblocks[i].count);
    if (plan_at < 0) continue;
    local.sends.push_back(Entry{dests[i], local.socc[i], p.bytes, plan_at, at});
    const int64_t from_sbuf = int64_t(p.typed - static_cast<char *>(sbuf));
    const bool first = local.sends.size() == 1;
    local.send_lo = first ? from_sbuf + p.low : std::min(local.send_lo, from_sbuf + p.low);
    local.send_hi = first ? from_sbuf + p.high : std::max(local.send_hi, from_sbuf + p.high);
  }
  for (size_t j = 0; listing && local.recv_home && j < local.rocc.size() && local.recvs.size() < size_t(kMaxEntries);
       ++j) {
    if (!local.rok[j] || sources[j] == me) continue;
    local.recvs.push_back(Entry{sources[j], local.rocc[j], local.rplaced[j].bytes, -1, 0});
  }
}

}  // namespace tempi
