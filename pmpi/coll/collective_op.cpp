// A collective call's op and the steps around the library's call (collective_op.hpp).
#include "coll/collective_op.hpp"

#include <algorithm>
#include <mutex>
#include <set>
#include <string>

#include "config.hpp"
#include "base/errors.hpp"
#include "base/gpu_batches.hpp"
#include "p2p/requests.hpp"
#include "base/runtime.hpp"
#include "coll/persistent_coll.hpp"

namespace tempi {

TrackedOp::Finisher CollectiveOp::finisher() const { return finish_collectives; }

int finish_collectives(std::vector<OpFinishing> &batch) {
  std::vector<GpuMoves<OpFinishing>> gpus;
  for (OpFinishing &f : batch) {
    CollectiveOp &op = static_cast<CollectiveOp &>(*f.op);
    if (op.finished) continue;
    op.finished = true;
    if (f.err != MPI_SUCCESS) continue;  // the library reported it; the buffer is undefined
    f.result = op.recv.region_back(op.comm, op.call);
    std::vector<MoveJob> jobs;
    op.recv.unpack_jobs(jobs);
    if (jobs.empty()) continue;
    for (const MoveJob &job : jobs) add_move(gpus, op.recv.device(), job, &f);  // a failure reaches f once
  }
  auto failed = [](OpFinishing &f, Status st) {
    const CollectiveOp &op = static_cast<const CollectiveOp &>(*f.op);
    if (f.result == MPI_SUCCESS)
      f.result = raise_error(op.comm, MPI_ERR_INTERN, "%s: unpacking received data on the GPU failed: %s", op.call,
                             to_string(st));
  };
  const std::vector<Status> status = move_by_gpu(gpus, false);
  for (size_t i = 0; i < gpus.size(); ++i)
    if (status[i] != Status::Ok)
      for (OpFinishing *f : gpus[i].owners) failed(*f, status[i]);
  int first = MPI_SUCCESS;
  for (const OpFinishing &f : batch)
    if (first == MPI_SUCCESS) first = f.result;
  return first;
}

int start_collective(CollectiveOp &op) {
  if (const int err = op.send.load(op.comm, op.call)) return err;
  if (const int err = op.recv.load(op.comm, op.call)) return err;
  op.finished = false;
  return MPI_SUCCESS;
}

int finish_collective(CollectiveOp &op, int err) { return finish_one(op, err); }

namespace coll {

namespace {

// "MPI_X_init" for a persistent collective: the name outlives the op (errors, logs).
const char *init_name(const char *blocking) {
  static std::mutex mutex;
  static std::set<std::string> names;
  std::lock_guard<std::mutex> lock(mutex);
  return names.insert(std::string(blocking) + "_init").first->c_str();
}

}  // namespace

const char *call_name(const char *blocking, const char *nonblocking, const Issue &how) {
  return how.persistent ? init_name(blocking) : how.request ? nonblocking : blocking;
}

std::shared_ptr<CollectiveOp> new_op(const char *blocking, const char *nonblocking, MPI_Comm comm, const Issue &how) {
  auto op = std::make_shared<CollectiveOp>();
  op->call = call_name(blocking, nonblocking, how);
  op->comm = comm;
  // By default no collective hands GPU memory to the library, even a CUDA-aware one: on
  // two H200s (2026-11-23) Open MPI 4.1's nonblocking collectives (libnbc) returned wrong
  // bytes for device buffers, its blocking MPI_Alltoallw crashed copying a rank's own block
  // of a non-contiguous type (ompi_datatype_sndrcv, plain memcpy), and a blocking
  // MPI_Alltoallv of device bytes hung now and then; MPI offers no query for which calls a
  // library's CUDA-awareness covers. TEMPI_COLL_DEVICE=1 hands packed bytes of blocking
  // calls to a CUDA-aware library (FFT transpose: 77 us instead of milliseconds).
  const bool gpu_ok = mpi_is_cuda_aware() && !how.request && config().coll_device;
  op->send.library_reads_gpu(gpu_ok);
  op->recv.library_reads_gpu(gpu_ok);
  return op;
}

int load(CollectiveOp &op, const Issue &how) {
  if (how.persistent) return MPI_SUCCESS;
  if (const int err = op.send.load(op.comm, op.call)) return err;
  return op.recv.load(op.comm, op.call);
}

int conclude(std::shared_ptr<CollectiveOp> op, int err, const Issue &how) {
  if (!how.request) return err != MPI_SUCCESS ? err : finish_collective(*op, err);
  if (err != MPI_SUCCESS) return err;
  auto p = std::make_unique<Pending>();
  if (how.persistent) {
    op->finished = true;  // nothing to unpack before the first start
    if (const int e = keep_persistent(op, *how.init, how.request, *p)) return e;
  }
  p->op = std::move(op);
  requests().add(*how.request, std::move(p));
  return MPI_SUCCESS;
}

}  // namespace coll

}  // namespace tempi
