// The end of a zero-copy collective call (zero_copy.hpp, ZeroCopyCall): the round in which
// the ranks of a communicator that lies on this node say whether any of them gives the MPI
// library data (library_needed), and finish: this rank's reads waited for, their owners
// told, and the wait until every reader of this rank's send buffer (and of its slot) is done.
#include <atomic>

#include "base/errors.hpp"
#include "backend.hpp"
#include "node/share.hpp"
#include "zero_copy/counters.hpp"
#include "zero_copy/slots.hpp"
#include "zero_copy/zero_copy.hpp"

namespace tempi {

// A blocking call, and a persistent init (whose starts then skip the library's call where
// no rank gives it data: the counts are the init's at every start), on a communicator that
// lies on this node. A nonblocking call takes no part in zero-copy.
bool ZeroCopyCall::library_round() const {
  return started_ && node_->segments.size() == node_->node_of.size();
}

bool ZeroCopyCall::library_needed(bool carries) {
  if (!library_round()) return true;
  return tell_library(carries ? kLibraryData : kLibraryNoData);
}

bool ZeroCopyCall::tell_library(uint32_t mine_says) {
  Slot &mine = node_->mine().slots[seq_ & 1];
  mine.library.store(mine_says, std::memory_order_release);
  bool any = mine_says == kLibraryData;
  int failed = -1;
  for (size_t r = 0; r < node_->segments.size(); ++r) {
    if (int(r) == node_->node_rank) continue;
    Slot &theirs = node_->segments[r]->slots[seq_ & 1];
    uint32_t says = 0;
    spin_until(
        [&] {
          return theirs.seq.load(std::memory_order_acquire) == seq_ &&
                 (says = theirs.library.load(std::memory_order_acquire)) != 0;
        },
        node_->node, call_, "to say whether it gives the library data", node_->comm_of[r]);
    any = any || says == kLibraryData;
    if (says == kLibraryFailed) failed = node_->comm_of[r];
    theirs.library_seen.fetch_add(1, std::memory_order_acq_rel);
  }
  library_round_ = true;
  if (failed >= 0) {
    // That rank will not call the library: nobody does, and the call fails here too.
    if (error_ == MPI_SUCCESS && mine_says != kLibraryFailed)
      error_ = raise_error(comm_, MPI_ERR_OTHER, "%s: comm rank %d failed in this call; no rank calls the MPI library",
                           call_, failed);
    return false;
  }
  if (!any && blocking_) zero_copy_counters().library_skipped.fetch_add(1, std::memory_order_relaxed);
  return any;
}

int ZeroCopyCall::finish(int err) {
  if (!started_ && active_.empty()) return err;
  if (fence_) {
    Status st;
    {
      const OnDevice on_it(device_);
      st = gpu_backend().wait(fence_);
    }
    fence_ = Fence{};
    if (st != Status::Ok && error_ == MPI_SUCCESS)
      error_ = raise_error(comm_, MPI_ERR_INTERN, "%s: zero-copy moves on the GPU failed: %s", call_, to_string(st));
  }
  for (const Read *rd : active_) zero_copy_counters().read_one(rd->from);
  active_.clear();
  reads_.clear();
  mapped_.clear();  // the GPU is done with the peers' buffers
  if (started_) {
    // A rank that failed before asking whether to call the library says so in the round,
    // or its peers would wait there for it (and skip the library: it will not call it).
    if (!library_round_ && library_round()) tell_library(kLibraryFailed);
    started_ = false;
    for (size_t peer = 0; peer < told_.size(); ++peer)
      if (told_[peer]) node_->segments[peer]->slots[seq_ & 1].done.fetch_add(uint64_t(told_[peer]));
    Slot &slot = node_->mine().slots[seq_ & 1];
    const uint64_t peers = peers_.size();
    const uint64_t told = library_round_ ? node_->segments.size() - 1 : 0;
    spin_until(
        [&] {
          return slot.done.load(std::memory_order_acquire) >= uint64_t(readers_) &&
                 slot.seen.load(std::memory_order_acquire) >= peers &&
                 slot.library_seen.load(std::memory_order_acquire) >= told;
        },
        node_->node, call_, "to finish with this rank's zero-copy slot", -1);
  }
  return err != MPI_SUCCESS ? err : error_;
}

}  // namespace tempi
