// Repeated blocking calls (docs/design.md, "Repeated blocking calls"): one rank's half of a
// blocking zero-copy collective (LocalHalf), a function of its own arguments alone, and what
// the last blocking call on a communicator decided (ZeroCopyMemo), kept in the
// communicator's node share for its next call. Used by one call at a time (a communicator's
// collectives are ordered).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "node/share.hpp"
#include "zero_copy/zero_copy.hpp"

namespace tempi {

// One rank's half of a blocking call, a function of its own arguments alone (the types' plans,
// the send allocation): its blocks placed, its pairs with itself, its slot's entries.
struct LocalHalf {
  std::vector<int> socc, rocc;  // per position: which occurrence of its peer it is, or -1
  std::vector<PlacedBlock> splaced, rplaced;
  std::vector<char> sok, rok;   // per position: the block may move by zero-copy
  std::vector<ZeroCopyCall::Read> self_reads;  // blocks to itself
  std::vector<size_t> self_sends, self_recvs;  // their positions
  IpcHandle handle;             // of the send buffer's allocation
  bool exported = false;
  bool recv_home = false;       // the receive buffer is on this rank's GPU
  std::string send_device;      // the send buffer's GPU, where exported
  std::vector<Entry> sends, recvs;  // the slot's entries
  int64_t send_lo = 0, send_hi = 0;
};

// What one blocking exchange collective on a communicator decided, kept for its next call:
// a halo exchange or a transpose makes the same call with the same arguments at every step,
// and planning its blocks, publishing their plans, mapping the peers' buffers and deciding
// the pairs cost about as much as moving the bytes. A call whose arguments, send allocation
// and types (TypeCache::generation) are those of the memo reuses its local half; a pair
// reuses what both ends decided when each end's slot names the same deciding call for it
// (Slot::pair_tag), which each end does only while its arguments are unchanged since: both
// ends read the same two tags, so they agree.
struct ZeroCopyMemo {
  struct Pair {
    uint64_t tag = 0;                 // the call in which both ends decided it; 0: nothing kept
    std::vector<size_t> sends_read;   // positions of the send blocks that the peer reads
    std::vector<size_t> recvs_read;   // positions of the receive blocks read from the peer
    std::vector<ZeroCopyCall::Read> reads;
    // The peer's send allocation as mapped when decided. Not held between calls (a call on
    // another communicator may have to close it to map the peer's next allocation at the same
    // place, which it can only do for one the peer freed, and then the peer's tag changes):
    // a call that keeps the pair maps it again (found mapped, most often) and holds it.
    int32_t pid = 0;
    IpcHandle handle;
    char *base = nullptr;
  };
  // The arguments it was made for.
  const char *call = nullptr;
  void *sbuf = nullptr, *rbuf = nullptr;
  bool cartesian = false;
  std::vector<int> dests, sources;
  std::vector<Block> sblocks, rblocks;
  uint64_t types = 0;
  bool valid = false;
  LocalHalf local;
  std::vector<Pair> pairs;  // by node rank
  // The moves of a call that kept every pair, described for the device once
  // (Backend::prepare_moves), while no pair is decided again and no mapping moves.
  Prepared prepared;
  bool unpreparable = false;  // the backend said no for these moves
  int device = -1;            // the GPU the moves run on
  void forget_moves() {
    prepared = Prepared{};
    unpreparable = false;
  }

  static bool same_blocks(const std::vector<Block> &a, const std::vector<Block> &b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](const Block &x, const Block &y) {
             return x.disp == y.disp && x.count == y.count && x.type == y.type && x.load == y.load && x.store == y.store;
           });
  }
  bool matches(const char *c, void *s, const std::vector<Block> &sb, const std::vector<int> &d, void *r,
               const std::vector<Block> &rb, const std::vector<int> &src, bool cart, uint64_t generation,
               bool exported, const IpcHandle &h, bool recv_home) const {
    return valid && call == c && sbuf == s && rbuf == r && cartesian == cart && types == generation &&
           local.exported == exported && local.recv_home == recv_home &&
           (!exported || (local.handle.buffer_id == h.buffer_id && local.handle.offset == h.offset &&
                          local.handle.size == h.size)) &&
           dests == d && sources == src && same_blocks(sblocks, sb) && same_blocks(rblocks, rb);
  }
  void reset(size_t node_ranks) {
    valid = false;
    forget_moves();
    pairs.clear();
    pairs.resize(node_ranks);
    local = LocalHalf{};
  }
};

// The communicator's memo (made empty at its first blocking call).
inline ZeroCopyMemo &memo_of(NodeShare &s) {
  if (!s.memo) s.memo = std::make_shared<ZeroCopyMemo>();
  return *s.memo;
}

}  // namespace tempi
