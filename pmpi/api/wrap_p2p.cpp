// Point-to-point calls. GPU buffers go through messages.hpp (packed bytes on the
// wire); everything else reaches the MPI library with the user's own arguments.
// Nonblocking sends of GPU data go through the engine (engine.hpp) and return a
// generalized request; nonblocking receives return the MPI library's request and record
// in the request table what its completion must do. Blocking calls first let the engine
// post every deferred send (they may wait for a peer that waits for one of them), and
// every send keeps MPI's order after deferred sends to the same destination.
#include "p2p/engine.hpp"
#include "base/errors.hpp"
#include "base/forward.hpp"
#include "phases.hpp"
#include "p2p/messages.hpp"
#include "p2p/requests.hpp"
#include "config.hpp"
#include "base/runtime.hpp"
#include "base/validate.hpp"
#include "zero_copy/zero_copy_p2p.hpp"

namespace tempi {

namespace {

using SendFn = int (*)(const void *, int, MPI_Datatype, int, int, MPI_Comm);

// The tag of a message TEMPI moves, checked before its GPU work (validate.hpp): the
// MPI library sees it only afterwards.
int check_tag_if(bool ours, MPI_Comm comm, const char *call, int tag, bool receive) {
  return ours ? check_tag(comm, call, tag, receive) : MPI_SUCCESS;
}

int send_with(SendFn next, const char *call, const void *buf, int count, MPI_Datatype type, int dest, int tag,
              MPI_Comm comm) {
  flush_sends();
  SendPlan sp;
  Outgoing out;
  {
    const PointerScope planning;  // ends before the library's call, which may wait long
    if (const int err = plan_send(buf, count, type, dest, comm, call, sp, out)) return err;
    if (const int err = check_tag_if(sp.kind != SendPlan::Kind::PassThrough, comm, call, tag, false)) return err;
    if (const int err = fill_staging(buf, sp, out, comm, call)) return err;
  }
  return next(out.buf, out.count, out.type, dest, tag, comm);
}

int isend_with(IsendFn next, const char *call, const void *buf, int count, MPI_Datatype type, int dest, int tag,
               MPI_Comm comm, MPI_Request *request) {
  const PhaseTimer timed(Phase::Isend);
  engine().poll();
  const PointerScope one_call;
  SendPlan sp;
  Outgoing out;
  // A buffered send may reuse its buffer at once: never read in place by a peer.
  const bool may_zero_copy = next != TEMPI_NEXT(MPI_Ibsend);
  if (const int err = plan_send(buf, count, type, dest, comm, call, sp, out, !config().eager_sends, may_zero_copy))
    return err;
  if (const int err = check_tag_if(sp.kind != SendPlan::Kind::PassThrough, comm, call, tag, false)) return err;
  if (sp.kind == SendPlan::Kind::Pack && may_zero_copy) {
    if (const int err = check_not_null(comm, call, request, "the request argument")) return err;
    int err = MPI_SUCCESS;
    if (p2p_isend(next, call, buf, count, sp, dest, tag, comm, request, err)) return err;
  }
  // Deferred sends keep their order among themselves (the engine posts in start order);
  // any other send waits for earlier deferred ones to the same destination.
  if (sp.kind == SendPlan::Kind::Pack && !config().eager_sends) {
    if (const int err = check_not_null(comm, call, request, "the request argument")) return err;
    return start_deferred_send(next, call, buf, sp, out, dest, tag, comm, request);
  }
  engine().before_send(comm, dest);
  if (const int err = fill_staging(buf, sp, out, comm, call)) return err;
  if (!out.staging.owner) return next(out.buf, out.count, out.type, dest, tag, comm, request);
  const int err = next(out.buf, out.count, out.type, dest, tag, comm, request);
  if (err == MPI_SUCCESS) {
    auto p = std::make_unique<Pending>();
    p->out = std::move(out);
    requests().add(*request, std::move(p));
  }
  return err;
}

// Records a posted receive whose data TEMPI moves into the user's buffer at completion.
int track_recv(Incoming &in, MPI_Request *request, int err) {
  if (err != MPI_SUCCESS) return err;
  const PhaseTimer timed(Phase::Request);
  auto p = std::make_unique<Pending>();
  p->in = std::move(in);
  requests().add(*request, std::move(p));
  return MPI_SUCCESS;
}

// The first error of a call and of TEMPI's completion of it.
int first_error(int mpi_err, int tempi_err) { return mpi_err != MPI_SUCCESS ? mpi_err : tempi_err; }

}  // namespace

}  // namespace tempi

using namespace tempi;

extern "C" {

int TEMPI_WRAPPER(MPI_Send)(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  return send_with(TEMPI_NEXT(MPI_Send), "MPI_Send", buf, count, type, dest, tag, comm);
}

int TEMPI_WRAPPER(MPI_Ssend)(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  return send_with(TEMPI_NEXT(MPI_Ssend), "MPI_Ssend", buf, count, type, dest, tag, comm);
}

int TEMPI_WRAPPER(MPI_Bsend)(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  return send_with(TEMPI_NEXT(MPI_Bsend), "MPI_Bsend", buf, count, type, dest, tag, comm);
}

int TEMPI_WRAPPER(MPI_Rsend)(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  return send_with(TEMPI_NEXT(MPI_Rsend), "MPI_Rsend", buf, count, type, dest, tag, comm);
}

int TEMPI_WRAPPER(MPI_Isend)(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                             MPI_Request *request) {
  return isend_with(TEMPI_NEXT(MPI_Isend), "MPI_Isend", buf, count, type, dest, tag, comm, request);
}

int TEMPI_WRAPPER(MPI_Issend)(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                              MPI_Request *request) {
  return isend_with(TEMPI_NEXT(MPI_Issend), "MPI_Issend", buf, count, type, dest, tag, comm, request);
}

int TEMPI_WRAPPER(MPI_Ibsend)(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                              MPI_Request *request) {
  return isend_with(TEMPI_NEXT(MPI_Ibsend), "MPI_Ibsend", buf, count, type, dest, tag, comm, request);
}

int TEMPI_WRAPPER(MPI_Irsend)(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                              MPI_Request *request) {
  return isend_with(TEMPI_NEXT(MPI_Irsend), "MPI_Irsend", buf, count, type, dest, tag, comm, request);
}

int TEMPI_WRAPPER(MPI_Recv)(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                            MPI_Status *status) {
  flush_sends();
  Incoming in;
  {
    const PointerScope planning;  // not across the library's blocking receive
    if (const int err = prepare_recv(buf, count, type, source, comm, "MPI_Recv", in)) return err;
  }
  if (in.after == Incoming::After::Nothing) return TEMPI_NEXT(MPI_Recv)(buf, count, type, source, tag, comm, status);
  if (const int err = check_tag(comm, "MPI_Recv", tag, true)) return err;
  if (in.p2p) return p2p_recv(in, source, tag, comm, status);
  MPI_Status local;
  MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
  const int err = TEMPI_NEXT(MPI_Recv)(in.buf, in.count, in.type, source, tag, comm, st);
  return first_error(err, finish_recv(in, *st, err));
}

int TEMPI_WRAPPER(MPI_Irecv)(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                             MPI_Request *request) {
  const PhaseTimer timed(Phase::Irecv);
  engine().poll();
  const PointerScope one_call;
  Incoming in;
  if (const int err = prepare_recv(buf, count, type, source, comm, "MPI_Irecv", in, true)) return err;
  if (in.after == Incoming::After::Nothing)
    return TEMPI_NEXT(MPI_Irecv)(buf, count, type, source, tag, comm, request);
  if (const int err = check_tag(comm, "MPI_Irecv", tag, true)) return err;
  if (in.p2p) return p2p_irecv(in, source, tag, comm, request);
  return track_recv(in, request, TEMPI_NEXT(MPI_Irecv)(in.buf, in.count, in.type, source, tag, comm, request));
}

int TEMPI_WRAPPER(MPI_Sendrecv)(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                                void *recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
                                MPI_Comm comm, MPI_Status *status) {
  flush_sends();
  SendPlan sp;
  Outgoing out;
  Incoming in;
  if (const int err = plan_send(sendbuf, sendcount, sendtype, dest, comm, "MPI_Sendrecv", sp, out)) return err;
  if (const int err = check_tag_if(sp.kind != SendPlan::Kind::PassThrough, comm, "MPI_Sendrecv", sendtag, false))
    return err;
  if (const int err = prepare_recv(recvbuf, recvcount, recvtype, source, comm, "MPI_Sendrecv", in)) return err;
  if (const int err = check_tag_if(in.after != Incoming::After::Nothing, comm, "MPI_Sendrecv", recvtag, true))
    return err;
  if (const int err = fill_staging(sendbuf, sp, out, comm, "MPI_Sendrecv")) return err;
  MPI_Status local;
  MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
  const int err = TEMPI_NEXT(MPI_Sendrecv)(out.buf, out.count, out.type, dest, sendtag, in.buf, in.count, in.type,
                                           source, recvtag, comm, st);
  return first_error(err, finish_recv(in, *st, err));
}

int TEMPI_WRAPPER(MPI_Sendrecv_replace)(void *buf, int count, MPI_Datatype type, int dest, int sendtag, int source,
                                        int recvtag, MPI_Comm comm, MPI_Status *status) {
  flush_sends();
  SendPlan sp;
  Outgoing out;
  Incoming in;
  const char *call = "MPI_Sendrecv_replace";
  if (const int err = plan_send(buf, count, type, dest, comm, call, sp, out)) return err;
  if (const int err = prepare_recv(buf, count, type, source, comm, call, in)) return err;
  if (sp.kind == SendPlan::Kind::PassThrough && in.after == Incoming::After::Nothing)
    return TEMPI_NEXT(MPI_Sendrecv_replace)(buf, count, type, dest, sendtag, source, recvtag, comm, status);
  if (const int err = check_tag_if(sp.kind != SendPlan::Kind::PassThrough, comm, call, sendtag, false)) return err;
  if (const int err = check_tag_if(in.after != Incoming::After::Nothing, comm, call, recvtag, true)) return err;
  if (const int err = fill_staging(buf, sp, out, comm, call)) return err;
  // The packed bytes left the user's buffer, so send and receive no longer share one.
  MPI_Status local;
  MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
  const int err = TEMPI_NEXT(MPI_Sendrecv)(out.buf, out.count, out.type, dest, sendtag, in.buf, in.count, in.type,
                                           source, recvtag, comm, st);
  return first_error(err, finish_recv(in, *st, err));
}

// A matched message has no communicator argument: TEMPI's own errors go to MPI_COMM_WORLD,
// and its sender is not known here (the model takes it as any source: PeerClass::Unknown).
int TEMPI_WRAPPER(MPI_Mrecv)(void *buf, int count, MPI_Datatype type, MPI_Message *message, MPI_Status *status) {
  if (!message) return TEMPI_NEXT(MPI_Mrecv)(buf, count, type, message, status);  // the library reports it
  flush_sends();
  Incoming in;
  const int peer = *message == MPI_MESSAGE_NO_PROC ? MPI_PROC_NULL : MPI_ANY_SOURCE;
  if (const int err = prepare_recv(buf, count, type, peer, MPI_COMM_WORLD, "MPI_Mrecv", in)) return err;
  if (in.after == Incoming::After::Nothing) return TEMPI_NEXT(MPI_Mrecv)(buf, count, type, message, status);
  MPI_Status local;
  MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
  const int err = TEMPI_NEXT(MPI_Mrecv)(in.buf, in.count, in.type, message, st);
  return first_error(err, finish_recv(in, *st, err));
}

int TEMPI_WRAPPER(MPI_Imrecv)(void *buf, int count, MPI_Datatype type, MPI_Message *message, MPI_Request *request) {
  if (!message) return TEMPI_NEXT(MPI_Imrecv)(buf, count, type, message, request);  // the library reports it
  engine().poll();
  Incoming in;
  const int peer = *message == MPI_MESSAGE_NO_PROC ? MPI_PROC_NULL : MPI_ANY_SOURCE;
  if (const int err = prepare_recv(buf, count, type, peer, MPI_COMM_WORLD, "MPI_Imrecv", in, true)) return err;
  if (in.after == Incoming::After::Nothing) return TEMPI_NEXT(MPI_Imrecv)(buf, count, type, message, request);
  return track_recv(in, request, TEMPI_NEXT(MPI_Imrecv)(in.buf, in.count, in.type, message, request));
}

}  // extern "C"
