// Zero-copy point-to-point between GPUs of one node (docs/design.md, "Zero-copy
// point-to-point"; the contract in docs/using.md). On a communicator where the application
// enabled it (TEMPIX_Comm_enable_zero_copy, collective), a nonblocking send of GPU data to a
// rank of the same node whose GPU can read the sender's carries, through the MPI library,
// only a control message of kControlBytes on the application's communicator and tag (so
// matching and ordering stay the library's); the receiving GPU reads the sender's typed
// object through a cached IPC mapping and writes its own typed object in one kernel (one
// launch for the messages that complete together), then tells the sender, whose request
// completes. Where the receiver cannot map the sender's allocation, the sender's pusher
// thread packs the message into a landing buffer the receiver lends (a push). A control
// message is recognized by its size, a magic number, the sender's
// random nonce and a live entry of the sender's board with the same serial, tag and
// receiver: never by chance.
//
// Where it is: enabling, zero_copy/p2p_enable.cpp; sends and their queue,
// zero_copy/p2p_send.cpp; receives, zero_copy/p2p_recv.cpp; the requests the application
// holds and their failures, zero_copy/p2p_flight.cpp; reading control messages,
// zero_copy/p2p_reads.cpp; pushes, zero_copy/p2p_push.cpp; progress,
// zero_copy/p2p_progress.cpp; probes, zero_copy/p2p_probe.cpp.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <vector>

#include "p2p/engine.hpp"
#include "p2p/messages.hpp"

namespace tempi {

// TEMPIX_Comm_enable_zero_copy: collective on `comm`. *enabled: whether every rank of it has
// zero-copy point-to-point on now (all must ask alike; TEMPI_IPC=off, a rank without a GPU or
// an intercommunicator turn it off everywhere).
int p2p_enable(MPI_Comm comm, bool on, int *enabled);

// A nonblocking send planned as SendPlan::Kind::Pack: when it goes by zero-copy, posts the
// control message through `post`, hands the application a generalized request in *request,
// and returns true (`err`: the call's result). False: it takes the usual path.
bool p2p_isend(IsendFn post, const char *call, const void *buf, int count, const SendPlan &sp, int dest, int tag,
               MPI_Comm comm, MPI_Request *request, int &err);

// Whether a receive from comm rank `source` (or MPI_ANY_SOURCE) on a communicator with
// zero-copy point-to-point (`s`) expects a control message rather than data: the last message
// of at least TEMPI_P2P_ZERO_COPY_MIN bytes from that rank (from any rank) was one, or none
// came yet. On a CUDA-aware library such a receive stages in host memory (messages.cpp,
// `decide`); a wrong guess costs time, never bytes. Counts the receives staged so.
bool p2p_stage_for_control(NodeShare &s, int source);

// A receive that prepare_recv marked (Incoming::p2p): posts the library's receive into the
// staging and hands the application a generalized request that TEMPI completes
// (p2p_progress), whether a control message or data arrives. Returns an MPI error code.
int p2p_irecv(Incoming &in, int source, int tag, MPI_Comm comm, MPI_Request *request);
// The blocking form: progresses every zero-copy message of this process while it waits.
int p2p_recv(Incoming &in, int source, int tag, MPI_Comm comm, MPI_Status *status);

// For receives that completed together (finish_recvs): those that got a control message
// read the sender's object (one launch per GPU, one wait), tell their senders and get the
// message's size in their status; data beyond a receive's own capacity (its staging is at
// least kControlBytes) is a truncation. Each handled entry is marked finished.
void p2p_take_controls(std::vector<Finishing> &batch);

// Control messages of zero-copy sends queued to be posted together (one wait for the legacy
// default stream): whether there are any, and posting those to (comm, dest), or every one
// (comm MPI_COMM_NULL). The progress room runs these before any other send to a destination.
bool p2p_queued();
void p2p_post_queued(MPI_Comm comm, int dest);

// Completes the zero-copy sends whose receivers finished reading and the receives that
// completed (called by every completion call, through zero_copy_progress).
void p2p_progress();
bool p2p_in_flight();

// Errors of zero-copy requests. A generalized request's error cannot take the communicator's
// error handler through the library (MPICH raises it on MPI_COMM_WORLD's), so TEMPI raised it
// when the request finished and its query reports success; the completion call that frees the
// request returns the error instead. p2p_failures_pending: such requests exist, not yet freed.
// p2p_failed: the error of `handle` if the library freed it with one on this thread since
// p2p_clear_failed (taken once), else MPI_SUCCESS.
bool p2p_failures_pending();
void p2p_clear_failed();
int p2p_failed(MPI_Request handle);

// After a probe on `comm` found a message (`status`): where it may be a zero-copy control
// message (48 bytes from a rank of the node that has a posted entry for this rank with that
// tag), says once that probes of zero-copy messages report the control message's size (the
// contract, docs/using.md) and counts it.
void p2p_after_probe(MPI_Comm comm, const MPI_Status &status);

// Messages this process read by zero-copy point-to-point, sends it made that way, probes
// that may have found a control message, messages it received through a push (their
// senders' buffers could not be mapped here), and receives staged in host memory for an
// expected control message (p2p_stage_for_control) (tests).
struct P2pCounts {
  uint64_t reads = 0, sends = 0, probed_controls = 0, pushed = 0, staged_for_control = 0;
};
P2pCounts p2p_counts();

// At MPI_Finalize: stops the pusher threads and frees the landing buffers.
void p2p_shutdown();

}  // namespace tempi
