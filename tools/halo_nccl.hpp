// The NCCL side of tempi_halo's "fused-nccl" baseline (tools/halo_nccl.cpp), in plain
// types so that halo.cpp includes neither nccl.h nor the CUDA headers. Built only where
// meson found NCCL (TEMPI_HALO_NCCL; docs/using.md, "NCCL for tempi_halo"); only the
// tempi_halo program links NCCL, the TEMPI libraries never do.
#pragma once

#include <mpi.h>

#include <string>

namespace halo_nccl {

// One message of an exchange: `bytes` bytes at `offset` of the packed buffer, to or from
// rank `peer` of the communicator init() was given.
struct Message {
  int peer;
  long long offset, bytes;
};

// "2.28.9" (the library loaded at run time), plus " (built with X)" where the header differs.
std::string version();

// Collective over `comm`: sets NCCL_NVLS_ENABLE=0 unless the environment sets it (NVLink
// multicast stays off on shared hosts), rank 0 makes the unique id, MPI_Bcast hands it to
// every rank, ncclCommInitRank on this rank's current GPU, and a CUDA stream for the
// exchanges. Returns "" and the context in *out on every rank, or on every rank a message
// (the context is then torn down everywhere and *out is left null).
std::string init(MPI_Comm comm, void **out);

// The stream of the context (a cudaStream_t): the pack kernel, the NCCL group and the
// unpack kernel go on it, in that order.
void *stream(void *ctx);

// Enqueues one ncclSend per entry of `sends` (from `send_buffer`) and one ncclRecv per
// entry of `recvs` (into `recv_buffer`) on the context's stream inside one
// ncclGroupStart/ncclGroupEnd; the group is always closed. NCCL has no tags: messages
// between two ranks pair in the order they are issued, so each list must be ordered as
// its peers' matching list is. "" or the first error.
std::string exchange(void *ctx, const Message *sends, int send_count, const void *send_buffer,
                     const Message *recvs, int recv_count, void *recv_buffer);

// The one synchronization of an exchange: waits for the context's stream, then asks the
// communicator for an asynchronous error. "" or the error.
std::string synchronize(void *ctx);

// Collective: ncclCommFinalize (NCCL >= 2.14) and ncclCommDestroy, then the stream.
// Null is a no-op. "" or the first error.
std::string destroy(void *ctx);

}  // namespace halo_nccl
