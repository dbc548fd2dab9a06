// Reading the peers' slots of a zero-copy collective (zero_copy/slots.hpp says the contract).
#include "zero_copy/slots.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>

namespace tempi {

bool snapshot(Slot &s, uint64_t seq, int me, int tag_at, uint64_t kept, PeerView &view, MPI_Comm node,
              const char *call, int peer) {
  uint64_t seen = 0;
  spin_until([&] { return (seen = s.seq.load(std::memory_order_acquire)) >= seq; }, node, call,
             "to enter the call", peer);
  if (seen != seq) return false;
  view.tag = tag_at >= 0 && tag_at < kMaxNodeRanks ? s.pair_tag[tag_at] : 0;
  if (kept != 0 && view.tag == kept) {
    std::atomic_thread_fence(std::memory_order_acquire);
    return s.seq.load(std::memory_order_relaxed) == seq;
  }
  view.handle = s.handle;
  view.flags_at = s.flags_at;
  std::memcpy(view.send_device, s.send_device, kIdBytes);
  view.send_device[kIdBytes - 1] = 0;
  const int ns = std::max(0, std::min(s.nsend, int32_t(kMaxEntries)));
  const int nr = std::max(0, std::min(s.nrecv, int32_t(kMaxEntries)));
  for (int k = 0; k < ns + nr; ++k) {
    const Entry e = s.entries[k];
    if (e.peer != me) continue;
    if (k < ns) {
      view.sends.push_back(e);
      view.send_at.push_back(k);
    } else {
      view.recvs.push_back(e);
    }
  }
  std::atomic_thread_fence(std::memory_order_acquire);
  return s.seq.load(std::memory_order_relaxed) == seq;
}

int find_entry(const std::vector<Entry> &entries, int occurrence) {
  for (size_t k = 0; k < entries.size(); ++k)
    if (entries[k].occurrence == occurrence) return int(k);
  return -1;
}

std::vector<int> occurrences(const std::vector<int> &peers, size_t n, bool cartesian, int me,
                             const std::vector<int> *node_of) {
  std::vector<int> occ(n, -1);
  std::map<int, int> seen;
  for (size_t i = 0; i < n && i < peers.size(); ++i) {
    const int p = peers[i];
    if (p == MPI_PROC_NULL || p < 0) continue;
    if (p != me && (!node_of || p >= int(node_of->size()) || (*node_of)[size_t(p)] < 0)) continue;
    occ[i] = seen[p]++;
  }
  if (cartesian)
    for (size_t i = 0; i < n && i < peers.size(); ++i)
      if (occ[i] >= 0 && seen[peers[i]] > 1) occ[i] = -1;
  return occ;
}

}  // namespace tempi
