// A collective call's op and the steps around the library's call (collective_op.hpp).
#include "coll/collective_op.hpp"

#include <algorithm>
#include <mutex>
#include <set>
#include <string>

#include "config.hpp"
#include "base/errors.hpp"
#include "base/requests.hpp"
#include "base/runtime.hpp"
#include "coll/persistent_coll.hpp"

namespace tempi {

int finish_collectives(std::vector<CollectiveFinishing> &batch) {
  Backend &b = gpu_backend();
  struct OnGpu {
    int device;
    std::vector<MoveJob> jobs;
    std::vector<CollectiveFinishing *> owners;
  };
  std::vector<OnGpu> gpus;
  for (CollectiveFinishing &f : batch) {
    CollectiveOp &op = *f.op;
    if (op.finished) continue;
    op.finished = true;
    if (f.err != MPI_SUCCESS) continue;  // the library reported it; the buffer is undefined
    f.result = op.recv.region_back(op.comm, op.call);
    std::vector<MoveJob> jobs;
    op.recv.unpack_jobs(jobs);
    if (jobs.empty()) continue;
    auto g = std::find_if(gpus.begin(), gpus.end(), [&](const OnGpu &o) { return o.device == op.recv.device(); });
    if (g == gpus.end()) g = gpus.insert(gpus.end(), OnGpu{op.recv.device(), {}, {}});
    g->jobs.insert(g->jobs.end(), jobs.begin(), jobs.end());
    g->owners.push_back(&f);
  }
  auto failed = [](CollectiveFinishing &f, Status st) {
    if (f.result == MPI_SUCCESS)
      f.result = raise_error(f.op->comm, MPI_ERR_INTERN, "%s: unpacking received data on the GPU failed: %s",
                             f.op->call, to_string(st));
  };
  std::vector<Fence> fences(gpus.size());
  std::vector<Status> issued(gpus.size(), Status::Ok);
  for (size_t i = 0; i < gpus.size(); ++i) {
    const int previous = gpus[i].device >= 0 ? b.use_device(gpus[i].device) : -1;
    issued[i] = b.unpack_async(gpus[i].jobs, fences[i]);
    if (previous >= 0) b.use_device(previous);
  }
  for (size_t i = 0; i < gpus.size(); ++i) {
    const int previous = gpus[i].device >= 0 ? b.use_device(gpus[i].device) : -1;
    Status st = issued[i];
    const Status waited = b.wait(fences[i]);
    if (st == Status::Ok) st = waited;
    if (previous >= 0) b.use_device(previous);
    if (st != Status::Ok)
      for (CollectiveFinishing *f : gpus[i].owners) failed(*f, st);
  }
  int first = MPI_SUCCESS;
  for (const CollectiveFinishing &f : batch)
    if (first == MPI_SUCCESS) first = f.result;
  return first;
}

int start_collective(CollectiveOp &op) {
  if (const int err = op.send.load(op.comm, op.call)) return err;
  if (const int err = op.recv.load(op.comm, op.call)) return err;
  op.finished = false;
  return MPI_SUCCESS;
}

int finish_collective(CollectiveOp &op, int err) {
  std::vector<CollectiveFinishing> one{{&op, err}};
  return finish_collectives(one);
}

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
  p->coll = std::move(op);
  requests().add(*how.request, std::move(p));
  return MPI_SUCCESS;
}

}  // namespace coll

}  // namespace tempi
