// Side: planning a buffer argument, loading it before the library's call and the unpack
// jobs after it (side.hpp).
#include "coll/side.hpp"

#include <algorithm>
#include <climits>

#include "config.hpp"
#include "host_packer.hpp"
#include "log.hpp"
#include "base/errors.hpp"
#include "base/runtime.hpp"
#include "p2p/local_work.hpp"

namespace tempi {

namespace {

// Where a side with no bytes points the library, which reads and writes nothing there.
// Two places, so that a send side and a receive side never look aliased.
char g_nothing[2][16];

int copy_failed(MPI_Comm comm, const char *call, const char *where, Status st) {
  return raise_error(comm, MPI_ERR_INTERN, "%s: copying data %s failed: %s", call, where, to_string(st));
}

}  // namespace

int Side::plan(void *buf, std::vector<Block> blocks, bool typed_only, MPI_Comm comm, const char *call) {
  user_ = buf;
  blocks_ = std::move(blocks);
  if (const int err = check_types(blocks_, comm, call)) return err;
  for (const Block &b : blocks_) stores_ = stores_ || b.store;
  settle_other_threads();
  const bool aware = library_reads_gpu_ && !typed_only;
  const size_t n = blocks_.size();
  bool plannable = !typed_only, contiguous = true;
  int64_t total = 0;
  if (plannable) {
    bytes_.assign(n, 0);
    offsets_.assign(n, 0);
    plans_.assign(n, Plan{});
    infos_.assign(n, nullptr);
    typed_.assign(n, nullptr);
    for (size_t i = 0; i < n && plannable; ++i) {
      const Block &b = blocks_[i];
      offsets_[i] = total;
      if (b.count == 0) continue;
      const bool same = i > 0 && blocks_[i - 1].type == b.type && infos_[i - 1];
      PlacedBlock placed;
      if (!place_block(buf, b, same ? &infos_[i - 1] : nullptr, placed)) {
        plannable = false;
        break;
      }
      infos_[i] = std::move(placed.info);
      if (placed.bytes == 0) continue;
      plans_[i] = std::move(placed.plan);
      bytes_[i] = placed.bytes;
      typed_[i] = placed.typed;
      contiguous = contiguous && plans_[i].contiguous();
      total += bytes_[i];
    }
  }
  if (plannable) {
    // A collective moves many blocks with one synchronization: the batched choice, for
    // blocks of the average size (what the library moves per message).
    int64_t moving = 0;
    for (size_t i = 0; i < n; ++i) moving += bytes_[i] > 0;
    transfer_ = choose_transfer(requested_method(), aware, moving ? total / moving : 0, contiguous, config(), true);
    // Contiguous data on a CUDA-aware library needs no packing: the library reads it, as
    // bytes at each block's first byte (Direct), or through the user's types where a block
    // would lie below the buffer's address.
    if (aware && transfer_.method == Method::Device && contiguous) {
      if (local_work().pending()) local_work().settle();
      bool below = false;
      for (size_t i = 0; i < n; ++i) {
        if (bytes_[i] == 0) continue;
        offsets_[i] = typed_[i] + plans_[i].start + plans_[i].pattern[0].offset - static_cast<char *>(buf);
        below = below || offsets_[i] < 0;
      }
      if (!below) mode_ = Mode::Direct;
      return MPI_SUCCESS;
    }
    mode_ = Mode::Pack;
    device_ = gpu_backend().device_of(buf);
    if (total == 0) {
      lib_ = g_nothing[stores_ ? 1 : 0];
      return MPI_SUCCESS;
    }
    Backend &b = gpu_backend();
    const OnDeviceOf on_its_gpu(buf);  // device staging from this GPU's pool
    if (transfer_.method == Method::Device) {
      if (b.acquire(ScratchKind::Device, size_t(total), staging_) != Status::Ok) {
        TEMPI_LOG(Warn, "%s: no device memory for %lld packed bytes; using the one-shot method", call,
                  (long long)total);
        transfer_ = {Method::OneShot, total};
      }
    }
    if (!staging_.owner) {  // pinned, else pageable memory, which only the staged method reaches
      bool pageable = false;
      if (const int err = acquire_host_staging(total, comm, call, staging_, pageable)) return err;
      if (pageable && transfer_.method != Method::Staged) transfer_ = {Method::Staged, total};
    }
    lib_ = staging_.ptr;
    return MPI_SUCCESS;
  }
  // The library must see the user's types: never in GPU memory (a CUDA-aware Open MPI
  // crashes copying such a block to itself), always a host copy of the region.
  mode_ = Mode::Region;
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (const Block &b : blocks_) {
    if (b.count == 0) continue;
    int size = 0;
    PMPI_Type_size(b.type, &size);
    if (size == 0) continue;
    int64_t l, s;
    span_of(b.count, b.type, l, s);
    lo = std::min(lo, b.disp + l);
    hi = std::max(hi, b.disp + l + s);
  }
  if (lo >= hi) {  // nothing to move
    lib_ = g_nothing[stores_ ? 1 : 0];
    return MPI_SUCCESS;
  }
  lo_ = lo;
  span_ = hi - lo;
  device_ = gpu_backend().device_of(buf);
  bool pageable = false;  // the copies in and out reach pageable memory too
  if (const int err = acquire_host_staging(span_, comm, call, staging_, pageable)) return err;
  lib_ = static_cast<char *>(staging_.ptr) - lo_;
  return plan_region_back(buf, comm, call);
}

int Side::plan_region_back(void *buf, MPI_Comm comm, const char *call) {
  if (!stores_) return MPI_SUCCESS;
  const size_t n = blocks_.size();
  bytes_.assign(n, 0);
  offsets_.assign(n, 0);
  plans_.assign(n, Plan{});
  infos_.assign(n, nullptr);
  typed_.assign(n, nullptr);
  int64_t total = 0;
  for (size_t i = 0; i < n; ++i) {
    const Block &b = blocks_[i];
    if (!b.store || b.count == 0) continue;
    PlacedBlock placed;
    if (!place_block(buf, b, nullptr, placed)) return MPI_SUCCESS;  // the whole region goes back
    offsets_[i] = total;
    infos_[i] = std::move(placed.info);
    plans_[i] = std::move(placed.plan);
    bytes_[i] = placed.bytes;
    typed_[i] = placed.typed;
    total += placed.bytes;
  }
  // Blocks with no bytes between them (a reduction on contiguous data, the common case):
  // the copy of the whole region is the same bytes, without the pack.
  if (total == span_ && std::all_of(plans_.begin(), plans_.end(), [&](const Plan &p) {
        return p.packed_size() == 0 || p.contiguous();
      }))
    return MPI_SUCCESS;
  whole_back_ = false;
  transfer_ = {Method::OneShot, total};
  if (total == 0) return MPI_SUCCESS;
  bool pageable = false;
  if (const int err = acquire_host_staging(total, comm, call, back_, pageable)) return err;
  if (pageable) transfer_ = {Method::Staged, total};
  return MPI_SUCCESS;
}

int Side::load(MPI_Comm comm, const char *call) {
  Backend &b = gpu_backend();
  if (mode_ == Mode::Region) {
    // Always, for a receive side too: the bytes between its blocks go back unchanged.
    if (span_ == 0) return MPI_SUCCESS;
    const Status st = b.copy(staging_.ptr, static_cast<char *>(user_) + lo_, size_t(span_));
    return st == Status::Ok ? MPI_SUCCESS : copy_failed(comm, call, "from the GPU to the host", st);
  }
  if (mode_ != Mode::Pack) return MPI_SUCCESS;
  std::vector<MoveJob> jobs;
  for (size_t i = 0; i < blocks_.size(); ++i)
    if (blocks_[i].load && bytes_[i] > 0)
      jobs.push_back({&plans_[i], typed_[i],
                      static_cast<char *>(staging_.ptr) + offsets_[i], bytes_[i], transfer_});
  if (jobs.empty()) return MPI_SUCCESS;
  const OnDeviceOf on_its_gpu(user_);
  Fence done;
  Status st = b.pack_async(jobs, done);
  if (st == Status::Ok) st = b.wait(done);
  if (st != Status::Ok)
    return raise_error(comm, MPI_ERR_INTERN, "%s: packing GPU data (%s method) failed: %s", call,
                       to_string(transfer_.method), to_string(st));
  return MPI_SUCCESS;
}

void Side::unpack_jobs(std::vector<MoveJob> &jobs) {
  const bool by_plan = mode_ == Mode::Region && !whole_back_;
  if (mode_ != Mode::Pack && !by_plan) return;
  char *packed = static_cast<char *>(by_plan ? back_.ptr : staging_.ptr);
  for (size_t i = 0; i < blocks_.size(); ++i)
    if (blocks_[i].store && bytes_[i] > 0)
      jobs.push_back({&plans_[i], typed_[i], packed + offsets_[i], bytes_[i], transfer_});
}

int Side::region_back(MPI_Comm comm, const char *call) {
  if (mode_ != Mode::Region || !stores_ || span_ == 0) return MPI_SUCCESS;
  if (!whole_back_) {  // the blocks' bytes, packed from the host copy; unpack_jobs puts them back
    char *const host_user = static_cast<char *>(staging_.ptr) - lo_;
    for (size_t i = 0; i < blocks_.size(); ++i)
      if (blocks_[i].store && bytes_[i] > 0)
        host_pack(plans_[i], host_user + (typed_[i] - static_cast<char *>(user_)),
                  static_cast<char *>(back_.ptr) + offsets_[i], 0, bytes_[i]);
    return MPI_SUCCESS;
  }
  const OnDeviceOf on_its_gpu(user_);
  const Status st = gpu_backend().copy(static_cast<char *>(user_) + lo_, staging_.ptr, size_t(span_));
  return st == Status::Ok ? MPI_SUCCESS : copy_failed(comm, call, "from the host to the GPU", st);
}

}  // namespace tempi
