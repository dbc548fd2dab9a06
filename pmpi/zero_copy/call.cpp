// A zero-copy collective call's start (zero_copy.hpp, ZeroCopyCall): the handshake
// (zero_copy/negotiate.cpp), then this rank's reads issued on the GPU so that they overlap
// the library's call, or, at a persistent init, handed to the ZeroCopyPersistent that every
// start runs. The end of the call is zero_copy/finish.cpp.
#include <algorithm>

#include "base/errors.hpp"
#include "config.hpp"
#include "node/share.hpp"
#include "zero_copy/counters.hpp"
#include "zero_copy/memo.hpp"
#include "zero_copy/moves.hpp"
#include "zero_copy/slots.hpp"
#include "zero_copy/zero_copy.hpp"

namespace tempi {

ZeroCopyCall::~ZeroCopyCall() {
  if (started_) finish(MPI_SUCCESS);  // an error left the call early: peers still wait for this rank
}

int ZeroCopyCall::start(MPI_Comm comm, const char *call, void *sbuf, std::vector<Block> &sblocks,
                        const std::vector<int> &dests, void *rbuf, std::vector<Block> &rblocks,
                        const std::vector<int> &sources, bool cartesian) {
  if (const int err = negotiate(comm, call, sbuf, sblocks, dests, rbuf, rblocks, sources, cartesian, kBlockingCall))
    return err;
  if (active_.empty()) return MPI_SUCCESS;
  // Every block moved straight from the peer's typed block into this rank's (one launch
  // for the strided ones), issued now so that it overlaps the library's call.
  const OnDeviceOf on_its_gpu(rbuf);
  if (as_before_ && move_as_before()) return error_;
  prepare_moves();
  if (const Status st = move_pairs(moves_, fence_); st != Status::Ok)
    error_ = raise_error(comm, error_class_of(st), "%s: zero-copy moves on the GPU failed: %s", call, to_string(st));
  return error_;
}

int ZeroCopyCall::start_persistent(MPI_Comm comm, const char *call, void *sbuf, std::vector<Block> &sblocks,
                                   const std::vector<int> &dests, void *rbuf, std::vector<Block> &rblocks,
                                   const std::vector<int> &sources, bool cartesian,
                                   std::shared_ptr<ZeroCopyPersistent> &kept) {
  kept.reset();
  std::shared_ptr<NodeShare> node = node_share(comm);  // collective the first time
  if (node) node->had_persistent = true;
  const int flags_at = node && config().ipc ? node->take_flags() : -1;
  const int err = negotiate(comm, call, sbuf, sblocks, dests, rbuf, rblocks, sources, cartesian, flags_at);
  if (err == MPI_SUCCESS && (!reads_.empty() || !reader_ranks_.empty())) {
    const OnDeviceOf on_its_gpu(rbuf);
    prepare_moves();
  }
  if (err != MPI_SUCCESS || error_ != MPI_SUCCESS || (reads_.empty() && reader_ranks_.empty())) {
    if (node) node->give_flags(flags_at);
    mapped_.clear();
    // Pairs were decided at both ends: an error here leaves them undone, which the other
    // end's starts would wait for; the init fails (MPI_X_init returns the error).
    return err != MPI_SUCCESS ? err : error_;
  }
  auto p = std::make_shared<ZeroCopyPersistent>();
  p->call_ = call;
  p->comm_ = comm;
  p->node_ = node_;
  p->flags_at_ = flags_at;
  for (size_t peer = 0; peer < owner_flags_.size(); ++peer)
    if (told_[peer] > 0) p->owners_.push_back({int(peer), owner_flags_[peer]});
  p->readers_ = reader_ranks_;
  p->reads_ = std::move(reads_);
  p->moves_ = std::move(moves_);
  p->scratch_ = std::move(scratch_);
  p->mapped_ = std::move(mapped_);  // held for every start
  p->device_ = device_;
  p->sbuf_ = sbuf;
  p->send_lo_ = send_lo_;
  p->send_hi_ = send_hi_;
  p->send_device_ = sbuf ? gpu_backend().device_of(sbuf) : -1;
  reads_.clear();
  active_.clear();
  moves_.clear();
  mapped_.clear();
  // Nothing moved at init: finish() only ends the handshake.
  readers_ = 0;
  std::fill(told_.begin(), told_.end(), 0);
  kept = std::move(p);
  return MPI_SUCCESS;
}

bool ZeroCopyCall::move_as_before() {
  ZeroCopyMemo &memo = memo_of(*node_);
  Backend &b = gpu_backend();
  if (!memo.prepared && !memo.unpreparable) {
    prepare_moves(false);  // no scratch: a prepared move needs none
    memo.device = device_;
    memo.unpreparable = b.prepare_moves(moves_, memo.prepared) != Status::Ok;
    moves_.clear();
  }
  if (!memo.prepared) return false;
  device_ = memo.device;
  if (const Status st = b.move_prepared(memo.prepared, fence_); st != Status::Ok)
    error_ = raise_error(comm_, error_class_of(st), "%s: zero-copy moves on the GPU failed: %s", call_, to_string(st));
  zero_copy_counters().prepared_calls.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void ZeroCopyCall::prepare_moves(bool lend) {
  if (active_.empty()) return;
  device_ = gpu_backend().device_of(active_.front()->into.typed);
  for (const Read *rd : active_)
    moves_.push_back({rd->from < 0 ? &rd->own_plan : rd->plan, rd->typed, &rd->into.plan, rd->into.typed,
                      rd->into.bytes});
  if (lend) lend_scratch(moves_, scratch_);
}

bool zero_copy_participates(MPI_Comm comm) {
  int inter = 0;
  if (comm == MPI_COMM_NULL || PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter) return false;
  return node_share(comm) != nullptr;
}

}  // namespace tempi
