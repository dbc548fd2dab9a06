// Persistent point-to-point requests, and MPI_Start/MPI_Startall of every persistent request
// TEMPI tracks (persistent.hpp): collectives start through their CollectiveStart.
#include "p2p/persistent.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include "p2p/engine.hpp"
#include "base/errors.hpp"
#include "base/gpu_batches.hpp"
#include "base/next.hpp"
#include "p2p/local_work.hpp"
#include "p2p/requests.hpp"
#include "base/runtime.hpp"
#include "phases.hpp"

namespace tempi {

int persistent_send_init(SendInitFn next, const char *call, const void *buf, int count, MPI_Datatype type, int dest,
                         int tag, MPI_Comm comm, MPI_Request *request) {
  if (!active()) return next(buf, count, type, dest, tag, comm, request);
  auto op = std::make_shared<PersistentOp>();
  Outgoing out;
  // Persistent requests are started together (MPI_Startall packs them in one batch), so
  // the method is the batched one, as for MPI_Isend.
  if (const int err = plan_send(buf, count, type, dest, comm, call, op->plan, out, true)) return err;
  if (op->plan.kind == SendPlan::Kind::PassThrough) return next(buf, count, type, dest, tag, comm, request);
  if (const int err = next(out.buf, out.count, out.type, dest, tag, comm, request)) return err;
  op->is_send = true;
  op->call = call;
  op->comm = comm;
  op->peer = dest;
  op->typed = buf;
  op->device = gpu_backend().device_of(buf);
  auto p = std::make_unique<Pending>();
  p->out = std::move(out);
  p->persistent = std::move(op);
  requests().add(*request, std::move(p));
  return MPI_SUCCESS;
}

int persistent_recv_init(RecvInitFn next, const char *call, void *buf, int count, MPI_Datatype type, int source,
                         int tag, MPI_Comm comm, MPI_Request *request) {
  if (!active()) return next(buf, count, type, source, tag, comm, request);
  Incoming in;
  if (const int err = prepare_recv(buf, count, type, source, comm, call, in, true)) return err;
  if (in.after == Incoming::After::Nothing) return next(buf, count, type, source, tag, comm, request);
  if (const int err = next(in.buf, in.count, in.type, source, tag, comm, request)) return err;
  in.finished = true;  // nothing to unpack before the first start
  auto op = std::make_shared<PersistentOp>();
  op->call = call;
  op->comm = comm;
  op->peer = source;
  auto p = std::make_unique<Pending>();
  p->in = std::move(in);
  p->persistent = std::move(op);
  requests().add(*request, std::move(p));
  return MPI_SUCCESS;
}

namespace {

struct Starting {
  MPI_Request handle;
  std::unique_ptr<Pending> pending;
};

// Everything the library's start needs in place: sends packed (one batch per GPU where
// several pack), receives of types TEMPI cannot plan given their region's current bytes.
int prepare(std::vector<Starting> &ours) {
  Backend &b = gpu_backend();
  settle_other_threads();
  std::vector<GpuMoves<PersistentOp>> gpus;
  std::vector<Starting *> packs;
  for (Starting &s : ours) {
    Pending &p = *s.pending;
    if (!p.persistent) continue;
    PersistentOp &op = *p.persistent;
    if (op.collective()) {  // its send blocks' current data packed, then the library's call
      // Active as soon as the library's call is issued, whatever a later start of the same
      // MPI_Startall does: its completion then unpacks, and no start repacks its staging early.
      if (const int err = op.starts->start(&op.library)) return err;
      op.active = true;
      continue;
    }
    if (!op.is_send) {
      p.in.finished = false;
      p.in.early = false;
      if (p.in.after == Incoming::After::CopyBack) {
        const OnDeviceOf on_its_gpu(p.in.user);
        const Status st = b.copy(p.in.staging.ptr, static_cast<char *>(p.in.user) + p.in.region_lo,
                                 size_t(p.in.region_bytes));
        if (st != Status::Ok)
          return raise_error(op.comm, MPI_ERR_INTERN, "%s: copying GPU data to the host failed: %s", op.call,
                             to_string(st));
      }
      continue;
    }
    // MPI's order: earlier deferred sends to this destination go first.
    engine().before_send(op.comm, op.peer);
    if (op.plan.kind == SendPlan::Kind::Pack) packs.push_back(&s);
    else if (const int err = fill_staging(op.typed, op.plan, p.out, op.comm, op.call)) return err;
  }
  if (packs.size() == 1) {  // alone: the synchronous path (pitched copies for small objects)
    Pending &p = *packs[0]->pending;
    return fill_staging(p.persistent->typed, p.persistent->plan, p.out, p.persistent->comm, p.persistent->call);
  }
  for (Starting *s : packs) {
    PersistentOp &op = *s->pending->persistent;
    add_move(gpus, op.device,
             MoveJob{&op.plan.plan, const_cast<void *>(op.typed), s->pending->out.staging.ptr,
                     op.plan.plan.packed_size(), op.plan.transfer},
             &op);
  }
  const std::vector<Status> status = move_by_gpu(gpus, true);
  int first = MPI_SUCCESS;
  for (size_t i = 0; i < gpus.size(); ++i) {
    if (status[i] != Status::Ok && first == MPI_SUCCESS) {
      const PersistentOp &op = *gpus[i].owners.front();
      first = raise_error(op.comm, MPI_ERR_INTERN, "%s: packing GPU data (%s method) failed: %s", op.call,
                          to_string(op.plan.transfer.method), to_string(status[i]));
    }
  }
  return first;
}

}  // namespace

int persistent_start(int count, MPI_Request reqs[], bool all) {
  auto to_library = [&] { return all ? next::MPI_Startall(count, reqs) : next::MPI_Start(reqs); };
  if (!active()) return to_library();
  const PhaseTimer timed(Phase::Start);
  engine().poll();
  std::vector<Starting> ours;
  if (!requests().empty() && count > 0 && reqs)
    for (int i = 0; i < count; ++i)
      if (std::unique_ptr<Pending> p = requests().take(reqs[i])) ours.push_back({reqs[i], std::move(p)});
  // A request TEMPI does not track may be a send to a destination with a queued GPU send
  // (MPI's order): with sends queued, they are posted first.
  if (ours.size() < size_t(std::max(count, 0))) flush_sends();
  if (ours.empty()) return to_library();
  // Persistent collectives start in prepare (their handles are TEMPI's): the library
  // starts the others.
  std::vector<MPI_Request> library;
  for (int i = 0; i < count; ++i) {
    auto s = std::find_if(ours.begin(), ours.end(), [&](const Starting &o) { return o.handle == reqs[i]; });
    if (s == ours.end() || !s->pending->persistent || !s->pending->persistent->collective())
      library.push_back(reqs[i]);
  }
  int err = prepare(ours);
  if (err == MPI_SUCCESS && !library.empty())
    err = all ? next::MPI_Startall(int(library.size()), library.data()) : next::MPI_Start(library.data());
  for (Starting &s : ours) {  // the collectives started are active already (prepare)
    if (err == MPI_SUCCESS && s.pending->persistent) s.pending->persistent->active = true;
    requests().add(s.handle, std::move(s.pending));
  }
  return err;
}

namespace {

// The generalized request behind a persistent collective's handle: completed only when the
// application frees the handle, so its status is never looked at.
int query_empty(void *, MPI_Status *status) {
  PMPI_Status_set_elements(status, MPI_BYTE, 0);
  PMPI_Status_set_cancelled(status, 0);
  status->MPI_SOURCE = MPI_UNDEFINED;
  status->MPI_TAG = MPI_UNDEFINED;
  return MPI_SUCCESS;
}
int free_nothing(void *) { return MPI_SUCCESS; }
int cancel_nothing(void *, int) { return MPI_SUCCESS; }

}  // namespace

int persistent_handle(MPI_Comm comm, const char *call, MPI_Request *handle) {
  const int err = PMPI_Grequest_start(query_empty, free_nothing, cancel_nothing, nullptr, handle);
  if (err != MPI_SUCCESS) return raise_error(comm, err, "%s: cannot make the request's handle", call);
  return MPI_SUCCESS;
}

int persistent_free_handle(MPI_Request *handle) {
  const int err = PMPI_Grequest_complete(*handle);
  if (err != MPI_SUCCESS) return err;
  return next::MPI_Request_free(handle);
}

}  // namespace tempi
