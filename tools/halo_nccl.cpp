// The NCCL side of tempi_halo's "fused-nccl" baseline (interface in halo_nccl.hpp): what a
// GPU code that gave up on MPI for its halo writes. The fused pack kernel of
// halo_fused_kernels.cu, one ncclSend/ncclRecv per message inside one
// ncclGroupStart/ncclGroupEnd, the fused unpack kernel, all on one stream, one
// synchronization. Compiled only where meson found NCCL (tools/meson.build).
#include "halo_nccl.hpp"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdlib>
#include <string>

namespace halo_nccl {

namespace {

struct Context {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
};

// NCCL's version codes: X*1000 + Y*100 + Z up to 2.8, X*10000 + Y*100 + Z from 2.9.
std::string version_text(int code) {
  const bool old = code < 10000;
  const int major = old ? code / 1000 : code / 10000, minor = old ? (code % 1000) / 100 : (code % 10000) / 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(code % 100);
}

std::string nccl_error(const std::string &what, ncclResult_t r, ncclComm_t comm) {
  std::string text = what + ": " + ncclGetErrorString(r);
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 13, 0)
  const char *last = ncclGetLastError(comm);
  if (last && *last) text += std::string(" (") + last + ")";
#else
  (void)comm;
#endif
  return text;
}

std::string cuda_error(const std::string &what, cudaError_t e) {
  return what + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
}

bool all_ranks(MPI_Comm comm, bool ok) {
  int mine = ok ? 1 : 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, comm);
  return all == 1;
}

}  // namespace

std::string version() {
  int code = 0;
  const std::string built = version_text(NCCL_VERSION_CODE);
  if (ncclGetVersion(&code) != ncclSuccess) return "unknown (built with " + built + ")";
  const std::string loaded = version_text(code);
  return loaded == built ? loaded : loaded + " (built with " + built + ")";
}

std::string init(MPI_Comm comm, void **out) {
  *out = nullptr;
  // NVLink SHARP / multicast (NVLS) reserves multicast objects on the whole NVSwitch
  // fabric, which other jobs on a shared host then lack: off unless the user asks.
  setenv("NCCL_NVLS_ENABLE", "0", 0);
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);

  struct {
    ncclUniqueId id;
    int ok;
  } root{};
  std::string error;
  if (rank == 0) {
    const ncclResult_t r = ncclGetUniqueId(&root.id);
    root.ok = r == ncclSuccess;
    if (!root.ok) error = nccl_error("ncclGetUniqueId", r, nullptr);
  }
  MPI_Bcast(&root, int(sizeof root), MPI_BYTE, 0, comm);
  if (!root.ok) return rank == 0 ? error : "ncclGetUniqueId failed on rank 0";

  auto *c = new Context;
  const cudaError_t e = cudaStreamCreate(&c->stream);  // ordered after the legacy stream's work
  if (e != cudaSuccess) {
    c->stream = nullptr;
    error = cuda_error("cudaStreamCreate", e);
  }
  if (!all_ranks(comm, e == cudaSuccess)) {  // every rank or none enters ncclCommInitRank
    if (c->stream) cudaStreamDestroy(c->stream);
    delete c;
    return error.empty() ? "cudaStreamCreate failed on another rank" : error;
  }
  const ncclResult_t r = ncclCommInitRank(&c->comm, size, root.id, rank);
  if (r != ncclSuccess) error = nccl_error("ncclCommInitRank", r, c->comm);
  if (!all_ranks(comm, r == ncclSuccess)) {
    if (r == ncclSuccess) ncclCommAbort(c->comm);  // a peer has none: do not wait for it
    cudaStreamDestroy(c->stream);
    delete c;
    return error.empty() ? "ncclCommInitRank failed on another rank" : error;
  }
  *out = c;
  return "";
}

void *stream(void *ctx) { return ctx ? static_cast<Context *>(ctx)->stream : nullptr; }

std::string exchange(void *ctx, const Message *sends, int send_count, const void *send_buffer,
                     const Message *recvs, int recv_count, void *recv_buffer) {
  auto *c = static_cast<Context *>(ctx);
  std::string error;
  auto note = [&](ncclResult_t r, const std::string &what) {
    if (r != ncclSuccess && error.empty()) error = nccl_error(what, r, c->comm);
  };
  const ncclResult_t started = ncclGroupStart();
  if (started != ncclSuccess) return nccl_error("ncclGroupStart", started, c->comm);
  const char *out = static_cast<const char *>(send_buffer);
  char *in = static_cast<char *>(recv_buffer);
  for (int i = 0; i < send_count; ++i)
    note(ncclSend(out + sends[i].offset, size_t(sends[i].bytes), ncclUint8, sends[i].peer, c->comm, c->stream),
         "ncclSend of " + std::to_string(sends[i].bytes) + " B to rank " + std::to_string(sends[i].peer));
  for (int i = 0; i < recv_count; ++i)
    note(ncclRecv(in + recvs[i].offset, size_t(recvs[i].bytes), ncclUint8, recvs[i].peer, c->comm, c->stream),
         "ncclRecv of " + std::to_string(recvs[i].bytes) + " B from rank " + std::to_string(recvs[i].peer));
  note(ncclGroupEnd(), "ncclGroupEnd");  // always: an open group would swallow every later call
  return error;
}

std::string synchronize(void *ctx) {
  auto *c = static_cast<Context *>(ctx);
  const cudaError_t e = cudaStreamSynchronize(c->stream);
  if (e != cudaSuccess) return cuda_error("cudaStreamSynchronize", e);
  ncclResult_t async = ncclSuccess;
  const ncclResult_t r = ncclCommGetAsyncError(c->comm, &async);
  if (r != ncclSuccess) return nccl_error("ncclCommGetAsyncError", r, c->comm);
  if (async != ncclSuccess) return nccl_error("NCCL asynchronous error", async, c->comm);
  return "";
}

std::string destroy(void *ctx) {
  auto *c = static_cast<Context *>(ctx);
  if (!c) return "";
  std::string error;
  const cudaError_t e = cudaStreamSynchronize(c->stream);
  if (e != cudaSuccess) error = cuda_error("cudaStreamSynchronize", e);
  ncclResult_t r = ncclSuccess;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 14, 0)
  r = ncclCommFinalize(c->comm);  // completes the communicator's work, then frees it below
  if (r != ncclSuccess && error.empty()) error = nccl_error("ncclCommFinalize", r, c->comm);
#endif
  if (r == ncclSuccess) {
    r = ncclCommDestroy(c->comm);
    if (r != ncclSuccess && error.empty()) error = nccl_error("ncclCommDestroy", r, nullptr);
  } else {
    ncclCommAbort(c->comm);
  }
  cudaStreamDestroy(c->stream);
  delete c;
  return error;
}

}  // namespace halo_nccl
