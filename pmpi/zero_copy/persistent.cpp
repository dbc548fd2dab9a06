// Persistent zero-copy collectives (zero_copy.hpp, ZeroCopyPersistent; docs/design.md,
// "Persistent zero-copy"): what each start does for the pairs decided at init, the
// generalized request the application waits for in its place, and the test of whether a
// start finished. Nothing here waits for another process: the reads run on TEMPI's
// zero-copy thread (zero_copy/progress.cpp) or on a thread of the application that gets there
// first (try_advance).
#include <atomic>

#include "base/errors.hpp"
#include "base/next.hpp"
#include "backend.hpp"
#include "log.hpp"
#include "node/share.hpp"
#include "phases.hpp"
#include "zero_copy/counters.hpp"
#include "zero_copy/in_flight.hpp"
#include "zero_copy/moves.hpp"
#include "zero_copy/zero_copy.hpp"

namespace tempi {

// The generalized request of one start (its state: a shared_ptr to the op, so that the
// op outlives a handle freed while active): its status is the library's part's error.
int gated_query(void *state, MPI_Status *status) {
  ZeroCopyPersistent *op = static_cast<std::shared_ptr<ZeroCopyPersistent> *>(state)->get();
  const int err = op->library_error_ != MPI_SUCCESS ? op->library_error_ : op->error_.load();
  PMPI_Status_set_elements(status, MPI_BYTE, 0);
  PMPI_Status_set_cancelled(status, 0);
  status->MPI_SOURCE = MPI_UNDEFINED;
  status->MPI_TAG = MPI_UNDEFINED;
  status->MPI_ERROR = err;
  return err;
}

namespace {
int gated_free(void *state) {
  delete static_cast<std::shared_ptr<ZeroCopyPersistent> *>(state);
  return MPI_SUCCESS;
}
int gated_cancel(void *, int) { return MPI_SUCCESS; }
}  // namespace

ZeroCopyPersistent::~ZeroCopyPersistent() {
  if (node_) node_->give_flags(flags_at_);
}

bool ZeroCopyPersistent::publish_send_buffer() {
  Backend &b = gpu_backend();
  IpcHandle h;
  const bool readable = b.ipc_export(sbuf_, h) == Status::Ok && b.device_of(sbuf_) == send_device_ &&
                        h.offset + send_lo_ >= 0 && h.offset + send_hi_ <= h.size;
  if (!readable) h = IpcHandle{};
  node_->mine().flags[flags_at_].handle = h;
  return readable;
}

int ZeroCopyPersistent::begin() {
  const PhaseTimer timed(Phase::ZeroCopyBegin);
  const uint64_t n = ++started_;
  library_ = MPI_REQUEST_NULL;
  library_done_ = false;
  library_error_ = MPI_SUCCESS;
  error_ = MPI_SUCCESS;
  bool readable = true;
  if (!readers_.empty()) {
    // Peers read the send buffer from now on: the application's work on the legacy default
    // stream that fills it must be finished (see zero_copy/negotiate.cpp, write_slot).
    const OnDevice on_it(send_device_);
    const PhaseTimer waiting(Phase::DefaultStream);
    if (const Status st = gpu_backend().wait_default_stream(); st != Status::Ok)
      error_ = raise_error(comm_, MPI_ERR_INTERN, "%s: waiting for the GPU's default stream failed: %s", call_,
                           to_string(st));
    readable = publish_send_buffer();
  }
  if (flags_at_ >= 0) node_->mine().flags[flags_at_].started.store(n, std::memory_order_release);
  phase_.store(reads_.empty() ? 3 : 1, std::memory_order_release);
  const int err = error_.load();
  if (!readable) {
    // Its readers fail this start too: every end completes it, with the error (MPI_Start
    // itself succeeds, so that the library's part runs at every rank and nobody waits).
    TEMPI_LOG(Error, "%s: the send buffer is no longer in one GPU allocation that holds all of its blocks (freed and "
              "allocated again since the init?); this start moves nothing to node peers and fails", call_);
    error_ = MPI_ERR_BUFFER;
  }
  return err;
}

int ZeroCopyPersistent::follow_owners() {
  int err = MPI_SUCCESS;
  for (const auto &o : owners_) {
    const int owner = o.first;
    const IpcHandle h = node_->segments[size_t(owner)]->flags[o.second].handle;  // read after `started`
    bool current = h.size > 0;
    for (const ZeroCopyCall::Read &rd : reads_)
      if (rd.from == owner && mapped_[size_t(rd.mapping)].buffer_id() != h.buffer_id) current = false;
    if (current) continue;
    // The owner's send buffer is in another allocation now: every read from it goes through
    // a mapping of that one (the old mappings let go first, so that the cache can unmap the
    // freed allocation that CUDA would otherwise answer, or refuse, the new handle with).
    for (const ZeroCopyCall::Read &rd : reads_)
      if (rd.from == owner) mapped_[size_t(rd.mapping)].release();
    for (size_t k = 0; k < reads_.size(); ++k) {
      ZeroCopyCall::Read &rd = reads_[k];
      if (rd.from != owner) continue;
      PeerMapping &m = mapped_[size_t(rd.mapping)];
      if (h.size == 0 || m.map(node_->segments[size_t(owner)]->pid, h) != Status::Ok) {
        if (err == MPI_SUCCESS)
          TEMPI_LOG(Error, "%s: node rank %d's send buffer is in a new GPU allocation that this rank cannot read; "
                    "this start moves nothing from it and fails", call_, owner);
        err = h.size == 0 ? MPI_ERR_BUFFER : MPI_ERR_OTHER;
        continue;
      }
      rd.typed = m.base() + h.offset + rd.from_sbuf;
      moves_[k].from_typed = rd.typed;
      prepared_ = Prepared{};  // described with the old address
      unpreparable_ = false;
    }
  }
  return err;
}

Status ZeroCopyPersistent::move() {
  Backend &b = gpu_backend();
  // Every start moves the same pairs: described for the device at the first (kept until an
  // owner's send buffer moves to another allocation).
  if (!prepared_ && !unpreparable_) unpreparable_ = b.prepare_moves(moves_, prepared_) != Status::Ok;
  if (!prepared_) return move_pairs(moves_, fence_);
  zero_copy_counters().prepared_calls.fetch_add(1, std::memory_order_relaxed);
  return b.move_prepared(prepared_, fence_);
}

bool ZeroCopyPersistent::try_advance() {
  if (advancing_.exchange(true, std::memory_order_acquire)) return false;
  const bool done = advance();
  advancing_.store(false, std::memory_order_release);
  return done;
}

bool ZeroCopyPersistent::advance() {
  // Done already (by another thread): the fields of the next start may be changing, so the
  // phase is read before anything else (begin() sets it last).
  const int phase = phase_.load(std::memory_order_acquire);
  if (phase == 3 || phase == 0) return true;
  const uint64_t n = started_;
  if (phase == 1) {
    for (const auto &o : owners_)
      if (o.second < 0 ||
          node_->segments[size_t(o.first)]->flags[o.second].started.load(std::memory_order_acquire) < n)
        return false;
    {
      const OnDevice on_it(device_);
      if (const int err = follow_owners(); err != MPI_SUCCESS) {
        error_ = err;
      } else if (const Status st = move(); st != Status::Ok) {
        TEMPI_LOG(Error, "%s: zero-copy moves on the GPU failed: %s", call_, to_string(st));
        error_ = MPI_ERR_INTERN;
        fence_ = Fence{};
      }
    }
    phase_.store(2, std::memory_order_release);
  }
  if (fence_) {
    bool done = false;
    Status st;
    {
      const OnDevice on_it(device_);
      st = gpu_backend().poll(fence_, done);
    }
    if (!done) return false;
    if (st != Status::Ok) {  // the start ends with the error, its owners released
      TEMPI_LOG(Error, "%s: zero-copy moves on the GPU failed: %s", call_, to_string(st));
      error_ = MPI_ERR_INTERN;
    }
    fence_ = Fence{};
  }
  // Done reading: each owner may let its application change the send buffer again.
  for (const auto &o : owners_)
    if (o.second >= 0)
      node_->segments[size_t(o.first)]->flags[o.second].read_done[node_->node_rank].store(n, std::memory_order_release);
  for (const auto &rd : reads_) zero_copy_counters().read_one(rd.from);
  phase_.store(3, std::memory_order_release);
  return true;
}

int ZeroCopyPersistent::gate(MPI_Request library, MPI_Request *gated) {
  library_ = library;
  auto *state = new std::shared_ptr<ZeroCopyPersistent>(shared_from_this());
  const int err = PMPI_Grequest_start(gated_query, gated_free, gated_cancel, state, gated);
  if (err != MPI_SUCCESS) {
    delete state;
    return raise_error(comm_, err, "%s: cannot make the start's request", call_);
  }
  track_start(shared_from_this(), *gated);
  // Peers that started already are read at once; otherwise the zero-copy thread waits for
  // them, and a completion call of this rank moves the reads itself when it gets there first.
  if (phase_.load(std::memory_order_acquire) == 1 && !try_advance()) advance_on_thread(shared_from_this());
  return MPI_SUCCESS;
}

bool ZeroCopyPersistent::finished_now() {
  if (!library_done_) {
    int flag = 1;
    MPI_Status st;
    if (library_ != MPI_REQUEST_NULL) {
      const int err = next::MPI_Test(&library_, &flag, &st);
      if (err != MPI_SUCCESS) {
        library_error_ = err;
        flag = 1;
      }
    }
    if (!flag) return false;
    library_done_ = true;
  }
  if (phase_.load(std::memory_order_acquire) != 3) return false;
  if (flags_at_ < 0) return true;
  const PersistentFlags &f = node_->mine().flags[flags_at_];
  for (int r : readers_)
    if (f.read_done[r].load(std::memory_order_acquire) < started_) return false;
  return true;
}

}  // namespace tempi
