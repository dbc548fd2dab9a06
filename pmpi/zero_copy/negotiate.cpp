// ZeroCopyCall::negotiate (zero_copy.hpp): the handshake of a zero-copy collective and each
// pair's decision, in the order it runs: this rank's half (kept from the last call where its
// arguments are the same, zero_copy/memo.hpp), its slot of this call written, its node
// peers' slots read and each pair decided (offered, mapped, refused or kept), the readers'
// answers collected, and the blocks that move by zero-copy taken out of the library's call
// (their counts 0). Both ends of a pair decide it from the same two slot entries, so they
// agree without another message; see zero_copy.hpp for the synchronization it keeps.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "base/errors.hpp"
#include "base/type_cache.hpp"
#include "config.hpp"
#include "log.hpp"
#include "node/share.hpp"
#include "zero_copy/counters.hpp"
#include "zero_copy/memo.hpp"
#include "zero_copy/registration.hpp"
#include "zero_copy/slots.hpp"
#include "zero_copy/zero_copy.hpp"

namespace tempi {

namespace {

// memcpy of n bytes that may be 0, where an empty vector's data() may be null (memcpy's
// pointers must never be null, whatever n).
void copy_bytes(void *dst, const void *src, size_t n) {
  if (n > 0) std::memcpy(dst, src, n);
}

}  // namespace

// One run of ZeroCopyCall::negotiate: the call's arguments and what its steps hand on.
struct Negotiation {
  using Read = ZeroCopyCall::Read;
  Negotiation(ZeroCopyCall &call_, MPI_Comm comm_, const char *name, void *sbuf_, std::vector<Block> &sblocks_,
              const std::vector<int> &dests_, void *rbuf_, std::vector<Block> &rblocks_,
              const std::vector<int> &sources_, bool cartesian_, int flags_at_)
      : c(call_), comm(comm_), call(name), sbuf(sbuf_), sblocks(sblocks_), dests(dests_), rbuf(rbuf_),
        rblocks(rblocks_), sources(sources_), cartesian(cartesian_), flags_at(flags_at_) {}
  Negotiation(const Negotiation &) = delete;
  Negotiation &operator=(const Negotiation &) = delete;
  ZeroCopyCall &c;
  MPI_Comm comm;
  const char *call;
  void *sbuf;
  std::vector<Block> &sblocks;
  const std::vector<int> &dests;
  void *rbuf;
  std::vector<Block> &rblocks;
  const std::vector<int> &sources;
  bool cartesian;
  int flags_at;
  // A persistent init without flags of its own (all taken) lists no pair: the pack path.
  bool listing = flags_at != kNoFlags;
  bool persistent = flags_at != kBlockingCall;
  uint64_t types_now = 0;
  int me = 0;
  // This rank's half.
  ZeroCopyMemo *memo = nullptr;  // where this call's decisions are kept (null: in c.reads_)
  bool reused = false;           // the half is the memo's, from the last call
  LocalHalf fresh;
  LocalHalf *local = &fresh;
  // The pairs' decisions.
  std::vector<std::pair<int, int>> offered;  // (entry in this rank's slot, node rank that reads it)
  std::vector<int> decided;                  // node ranks whose pairs this call decides (memo)
  uint64_t askers = 0;                       // node ranks that must answer this rank

  int run();
  void place_half();
  void write_slot();
  void map_kept_pairs();
  void read_peer(int peer);
  void keep_pair(int peer);
  void offer_sends(int peer, const PeerView &theirs);
  void read_receives(int peer, PeerView &theirs, ZeroCopyMemo::Pair *pair);
  void collect_answers();
  void take_out_blocks();
  Slot &mine_slot() { return c.node_->mine().slots[c.seq_ & 1]; }
};

int Negotiation::run() {
  c.call_ = call;
  c.comm_ = comm;
  c.node_ = node_share(comm);  // collective the first time: before any decision of this rank's own
  if (c.node_) register_zero_copy();
  if (!config().ipc) return MPI_SUCCESS;
  c.blocking_ = !persistent;
  types_now = type_cache().generation();  // before any lookup of this call
  PMPI_Comm_rank(comm, &me);
  place_half();
  c.started_ = c.node_ != nullptr;
  if (c.node_) write_slot();
  // The peers' slots of this call, and each pair's decision. Both ends find the same pairs
  // from the same two entries; the reader then maps the owner's send buffer and answers
  // whether it could, and a pair whose mapping CUDA refused takes the pack path at both
  // ends. Every rank answers as it reads its peers' slots, and waits for answers only after
  // it has answered all of its own (reading a slot waits only for its peer to enter the
  // call): no rank waits for another that waits for it. A pair whose two slots name the same
  // deciding call keeps what was decided then, at both ends, and nobody answers for it.
  for (int peer : c.peers_) read_peer(peer);
  if (askers > 0) collect_answers();
  for (int peer : decided) memo->pairs[size_t(peer)].tag = c.seq_;
  if (memo && !decided.empty()) memo->forget_moves();
  take_out_blocks();
  return c.error_;
}

// This rank's half: the memo's where its arguments are those of the communicator's last
// blocking call, else placed now (into the memo, for the next call).
void Negotiation::place_half() {
  Backend &b = gpu_backend();
  IpcHandle handle;
  bool exported = false;
  if (c.node_ && sbuf) exported = b.ipc_export(sbuf, handle) == Status::Ok;
  if (sbuf && !exported && c.node_)
    TEMPI_LOG(Debug, "%s: the send buffer cannot be exported (IPC); its blocks to peers use the pack path", call);
  const bool recv_home = rbuf && (!c.node_ || b.device_of(rbuf) == c.node_->home_device);
  memo = c.node_ && !persistent ? &memo_of(*c.node_) : nullptr;
  reused = memo && memo->matches(call, sbuf, sblocks, dests, rbuf, rblocks, sources, cartesian, types_now, exported,
                                 handle, recv_home);
  if (memo && !reused) {
    memo->reset(c.node_->segments.size());
    memo->call = call;
    memo->sbuf = sbuf;
    memo->rbuf = rbuf;
    memo->cartesian = cartesian;
    memo->dests = dests;
    memo->sources = sources;
    memo->sblocks = sblocks;
    memo->rblocks = rblocks;
    memo->types = types_now;
  }
  local = memo ? &memo->local : &fresh;
  if (!reused) {
    local->handle = handle;
    local->exported = exported;
    local->recv_home = recv_home;
    if (exported) local->send_device = gpu_identity(b.device_of(sbuf));
    c.place_local(comm, sbuf, sblocks, dests, rbuf, rblocks, sources, cartesian, listing, *local);
  }
  // Kept for the next call only once this call's slot says what the memo says.
  if (memo) memo->valid = false;
}

// This call's slot, written and published (its seq last).
void Negotiation::write_slot() {
  NodeShare &node = *c.node_;
  // Every node peer of the call's pattern copies this slot and this rank copies theirs, host
  // buffers or not: so no rank rewrites a slot that a peer has yet to read.
  for (const std::vector<int> *list : {&dests, &sources})
    for (int p : *list)
      if (p >= 0 && p != me && p < int(node.node_of.size()) && node.node_of[size_t(p)] >= 0)
        c.peers_.push_back(node.node_of[size_t(p)]);
  std::sort(c.peers_.begin(), c.peers_.end());
  c.peers_.erase(std::unique(c.peers_.begin(), c.peers_.end()), c.peers_.end());
  c.told_.assign(node.segments.size(), 0);
  c.owner_flags_.assign(node.segments.size(), -1);

  c.seq_ = ++node.seq;
  Slot &slot = mine_slot();
  slot.seq.store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  slot.done.store(0, std::memory_order_relaxed);
  slot.seen.store(0, std::memory_order_relaxed);
  slot.answered.store(0, std::memory_order_relaxed);
  slot.library.store(0, std::memory_order_relaxed);
  slot.library_seen.store(0, std::memory_order_relaxed);
  slot.handle = local->exported ? local->handle : IpcHandle{};
  slot.flags_at = persistent ? flags_at : -1;
  copy_id(slot.send_device, local->exported ? local->send_device : std::string());
  int ns = int(local->sends.size());
  const int nr = int(local->recvs.size());
  copy_bytes(slot.entries, local->sends.data(), size_t(ns) * sizeof(Entry));
  copy_bytes(slot.entries + ns, local->recvs.data(), size_t(nr) * sizeof(Entry));
  c.send_lo_ = local->send_lo;
  c.send_hi_ = local->send_hi;
  bool keep = memo != nullptr;
  // Peers read the send blocks in place with their own GPUs, which do not follow this
  // process's legacy default stream as TEMPI's streams do: the application's work
  // there (a kernel or copy that filled the buffer) must be finished before they may.
  if (ns > 0) {
    const OnDeviceOf on_its_gpu(sbuf);
    if (const Status st = gpu_backend().wait_default_stream(); st != Status::Ok) {
      ns = 0;  // nobody reads this buffer: the pack path (which follows the stream) for all
      keep = false;
      copy_bytes(slot.entries, local->recvs.data(), size_t(nr) * sizeof(Entry));
      c.error_ = raise_error(comm, MPI_ERR_INTERN, "%s: waiting for the GPU's default stream failed: %s", call,
                             to_string(st));
    }
  }
  for (int k = 0; k < ns; ++k) slot.refused[k].store(0, std::memory_order_relaxed);
  slot.nsend = ns;
  slot.nrecv = nr;
  if (keep && reused) map_kept_pairs();
  for (int p : c.peers_)
    if (p < kMaxNodeRanks) slot.pair_tag[p] = keep && reused ? memo->pairs[size_t(p)].tag : 0;
  if (!keep) memo = nullptr;  // this call's decisions go to reads_ and mapped_, not to the memo
  slot.seq.store(c.seq_, std::memory_order_release);
}

// A pair kept from an earlier call reads the peer's allocation again: mapped now, before
// the tag says so (the cache may have unmapped it between calls, and mapping it again may
// be refused, as by a CUDA-aware library's own mapping): where it cannot be, the tag is 0
// and both ends decide the pair again, which refuses it the usual way.
void Negotiation::map_kept_pairs() {
  for (int p : c.peers_) {
    ZeroCopyMemo::Pair &pair = memo->pairs[size_t(p)];
    if (pair.tag == 0 || pair.reads.empty()) continue;
    PeerMapping mapped;
    Status st;
    {
      const OnDeviceOf on_its_gpu(rbuf);
      st = mapped.map(pair.pid, pair.handle);
    }
    if (st != Status::Ok) {
      pair = ZeroCopyMemo::Pair{};
      memo->forget_moves();
      continue;
    }
    if (mapped.base() != pair.base) {
      memo->forget_moves();
      pair.base = mapped.base();
      for (Read &rd : pair.reads) rd.typed = pair.base + rd.from_sbuf + pair.handle.offset;
    }
    c.mapped_.push_back(std::move(mapped));  // held until the GPU is done (finish)
  }
}

// Node rank `peer`'s slot of this call read, and the pairs with it kept or decided.
void Negotiation::read_peer(int peer) {
  NodeShare &node = *c.node_;
  PeerView theirs;
  const int peer_comm = node.comm_of[size_t(peer)];
  Slot &their_slot = node.segments[size_t(peer)]->slots[c.seq_ & 1];
  const uint64_t kept = peer < kMaxNodeRanks ? mine_slot().pair_tag[peer] : 0;
  const bool copied = snapshot(their_slot, c.seq_, me, node.node_rank, kept, theirs, node.node, call, peer_comm);
  their_slot.seen.fetch_add(1, std::memory_order_acq_rel);
  if (!copied) {
    TEMPI_LOG(Error, "%s: comm rank %d left the call before this rank read its zero-copy slot", call, peer_comm);
    if (memo) {
      memo->pairs[size_t(peer)] = ZeroCopyMemo::Pair{};
      memo->forget_moves();
    }
    return;
  }
  if (memo && kept != 0 && theirs.tag == kept) return keep_pair(peer);
  ZeroCopyMemo::Pair *pair = memo ? &memo->pairs[size_t(peer)] : nullptr;
  if (pair) {
    // The kept mapping taken before the slot was written goes first: the peer's buffer may
    // be a new allocation where the old one was, which CUDA maps only once the old is closed.
    if (pair->tag != 0 && !pair->reads.empty())
      for (PeerMapping &m : c.mapped_)
        if (m.pid() == pair->pid && m.buffer_id() == pair->handle.buffer_id) m.release();
    *pair = ZeroCopyMemo::Pair{};
    decided.push_back(peer);
  }
  offer_sends(peer, theirs);
  read_receives(peer, theirs, pair);
}

// Both ends kept the pairs decided at an earlier call: as decided then.
void Negotiation::keep_pair(int peer) {
  const ZeroCopyMemo::Pair &pair = memo->pairs[size_t(peer)];  // its mapping held since the slot was written
  for (size_t i : pair.sends_read) sblocks[i].count = 0;
  c.readers_ += int(pair.sends_read.size());
  if (!pair.sends_read.empty()) c.reader_ranks_.push_back(peer);
  for (size_t j : pair.recvs_read) rblocks[j].count = 0;
  c.told_[size_t(peer)] += int(pair.reads.size());
  zero_copy_counters().kept_pairs.fetch_add(1, std::memory_order_relaxed);
}

// Blocks this rank sends to the peer: offered when its entry matches; read once it answers.
void Negotiation::offer_sends(int peer, const PeerView &theirs) {
  const Slot &slot = mine_slot();
  const int peer_comm = c.node_->comm_of[size_t(peer)];
  const Segment &peer_seg = *c.node_->segments[size_t(peer)];
  const size_t offered_before = offered.size();
  for (int k = 0; k < slot.nsend; ++k) {
    const Entry &e = slot.entries[k];
    if (e.peer != peer_comm) continue;
    const int r = find_entry(theirs.recvs, e.occurrence);
    if (r < 0 || theirs.recvs[size_t(r)].bytes != e.bytes || !readable_by(peer_seg, slot.send_device)) continue;
    offered.push_back({k, peer});
  }
  askers += offered.size() > offered_before ? 1 : 0;
}

// Blocks this rank receives from the peer: read from its send buffer where it maps; the
// peer is answered either way.
void Negotiation::read_receives(int peer, PeerView &theirs, ZeroCopyMemo::Pair *pair) {
  NodeShare &node = *c.node_;
  const Slot &slot = mine_slot();
  const int peer_comm = node.comm_of[size_t(peer)];
  Segment &peer_seg = *node.segments[size_t(peer)];
  Slot &their_slot = peer_seg.slots[c.seq_ & 1];
  std::vector<Read> &reads = pair ? pair->reads : c.reads_;
  bool answer = false;
  for (int k = 0; k < slot.nrecv; ++k) {
    const Entry &e = slot.entries[slot.nsend + k];
    if (e.peer != peer_comm) continue;
    const int at = find_entry(theirs.sends, e.occurrence);
    if (at < 0) continue;
    const Entry &s = theirs.sends[size_t(at)];
    if (s.bytes != e.bytes || theirs.handle.size == 0 || !readable_by(node.mine(), theirs.send_device)) continue;
    answer = true;
    size_t j = 0;
    while (j < local->rocc.size() && !(sources[j] == peer_comm && local->rocc[j] == e.occurrence && local->rok[j])) ++j;
    PeerMapping mapped;
    Status st = Status::Unsupported;
    // The peer's plan first: where it cannot be read (peer_plan says why), the pair is refused.
    const Plan *plan = j < local->rocc.size() ? node.peer_plan(peer, s.plan_at) : nullptr;
    if (plan) {
      const OnDeviceOf on_its_gpu(rbuf);
      st = mapped.map(peer_seg.pid, theirs.handle);
    }
    if (st != Status::Ok) {
      their_slot.refused[theirs.send_at[size_t(at)]].store(1, std::memory_order_relaxed);
      if (st != Status::Unsupported)
        TEMPI_LOG(Info,
                  "%s: comm rank %d's GPU buffer cannot be mapped here (CUDA IPC refused it; the MPI library "
                  "may map it already); its blocks to this rank take the pack path from now on",
                  call, peer_comm);
      continue;
    }
    ++c.told_[size_t(peer)];  // the owner waits until this pair is read
    c.owner_flags_[size_t(peer)] = theirs.flags_at;
    rblocks[j].count = 0;
    if (pair) {
      pair->recvs_read.push_back(j);
      pair->pid = peer_seg.pid;
      pair->handle = theirs.handle;
      pair->base = mapped.base();
    }
    Read rd;
    rd.from = peer;
    rd.plan = plan;
    rd.typed = mapped.base() + s.offset;
    rd.from_sbuf = s.offset - theirs.handle.offset;
    rd.mapping = int(c.mapped_.size());
    rd.into = local->rplaced[j];
    reads.push_back(std::move(rd));
    c.mapped_.push_back(std::move(mapped));
  }
  if (answer) their_slot.answered.fetch_add(1, std::memory_order_acq_rel);
}

// The readers' answers: the send blocks none refused go by zero-copy.
void Negotiation::collect_answers() {
  Slot &slot = mine_slot();
  spin_until([&] { return slot.answered.load(std::memory_order_acquire) >= askers; }, c.node_->node, call,
             "to answer whether it maps this rank's send buffer", -1);
  for (const auto &[k, peer] : offered) {
    if (slot.refused[k].load(std::memory_order_relaxed)) continue;
    const Entry &e = slot.entries[k];
    for (size_t i = 0; i < local->socc.size(); ++i)
      if (dests[i] == e.peer && local->socc[i] == e.occurrence && local->sok[i]) {
        sblocks[i].count = 0;
        if (memo) memo->pairs[size_t(peer)].sends_read.push_back(i);
      }
    ++c.readers_;
    if (c.reader_ranks_.empty() || c.reader_ranks_.back() != peer) c.reader_ranks_.push_back(peer);
  }
}

// The blocks to itself leave the library's call too; the call's reads become active_.
void Negotiation::take_out_blocks() {
  for (size_t k = 0; k < local->self_reads.size(); ++k) {
    sblocks[local->self_sends[k]].count = 0;
    rblocks[local->self_recvs[k]].count = 0;
  }
  const size_t own = local->self_reads.size();
  c.active_.clear();
  if (memo) {
    for (int peer : c.peers_)
      for (const Read &rd : memo->pairs[size_t(peer)].reads) c.active_.push_back(&rd);
    for (const Read &rd : local->self_reads) c.active_.push_back(&rd);
    memo->valid = c.error_ == MPI_SUCCESS;
    c.as_before_ = memo->valid && reused && decided.empty();
  } else {
    for (Read &rd : local->self_reads) c.reads_.push_back(std::move(rd));
    local->self_reads.clear();
    for (const Read &rd : c.reads_) c.active_.push_back(&rd);
  }
  if (c.node_)
    TEMPI_LOG(Debug, "%s: zero-copy call %llu on this node: %zu blocks read from peers, %zu to itself, %d readers%s",
              call, (unsigned long long)c.seq_, c.active_.size() - own, own, c.readers_,
              reused ? " (arguments as at the last call)" : "");
}

int ZeroCopyCall::negotiate(MPI_Comm comm, const char *call, void *sbuf, std::vector<Block> &sblocks,
                            const std::vector<int> &dests, void *rbuf, std::vector<Block> &rblocks,
                            const std::vector<int> &sources, bool cartesian, int flags_at) {
  Negotiation n(*this, comm, call, sbuf, sblocks, dests, rbuf, rblocks, sources, cartesian, flags_at);
  return n.run();
}

}  // namespace tempi
