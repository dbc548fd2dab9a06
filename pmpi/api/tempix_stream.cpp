// tempi.h's stream-ordered calls: the C entry points of pmpi/stream/ (streams.hpp).
#include <mpi.h>

#include "base/runtime.hpp"
#include "log.hpp"
#include "stream/streams.hpp"
#include "tempi.h"

namespace {

tempi::streams::AppStream *of(TEMPIX_Stream s) { return reinterpret_cast<tempi::streams::AppStream *>(s); }

// The enqueue calls need TEMPI running (the stream thread, the plans).
int inactive(const char *what) {
  TEMPI_LOG(Error, "%s: TEMPI is not active (called before MPI_Init, after MPI_Finalize, or TEMPI_DISABLE)", what);
  return MPI_ERR_OTHER;
}

}  // namespace

extern "C" {

int TEMPIX_Info_set_hex(MPI_Info info, const char *key, const void *value, int value_size) {
  return tempi::streams::info_set_hex(info, key, value, value_size);
}

int TEMPIX_Stream_create(MPI_Info info, TEMPIX_Stream *stream) {
  if (!tempi::active()) return inactive("TEMPIX_Stream_create");
  tempi::streams::AppStream *s = nullptr;
  const int err = tempi::streams::stream_create(info, &s);
  if (stream) *stream = reinterpret_cast<TEMPIX_Stream>(s);
  return err;
}

int TEMPIX_Stream_free(TEMPIX_Stream *stream) {
  tempi::streams::AppStream *s = stream ? of(*stream) : nullptr;
  const int err = tempi::streams::stream_free(stream ? &s : nullptr);
  if (err == MPI_SUCCESS) *stream = TEMPIX_STREAM_NULL;
  return err;
}

int TEMPIX_Stream_comm_create(MPI_Comm comm, TEMPIX_Stream stream, MPI_Comm *newcomm) {
  if (!tempi::active()) return inactive("TEMPIX_Stream_comm_create");
  return tempi::streams::comm_create(comm, of(stream), newcomm);
}

int TEMPIX_Send_enqueue(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
  return tempi::streams::send(buf, count, datatype, dest, tag, comm, nullptr);
}

int TEMPIX_Recv_enqueue(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
                        MPI_Status *status) {
  return tempi::streams::recv(buf, count, datatype, source, tag, comm, status, nullptr);
}

int TEMPIX_Isend_enqueue(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                         MPI_Request *request) {
  if (!request) return MPI_ERR_REQUEST;
  return tempi::streams::send(buf, count, datatype, dest, tag, comm, request);
}

int TEMPIX_Irecv_enqueue(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
                         MPI_Request *request) {
  if (!request) return MPI_ERR_REQUEST;
  return tempi::streams::recv(buf, count, datatype, source, tag, comm, MPI_STATUS_IGNORE, request);
}

int TEMPIX_Wait_enqueue(MPI_Request *request, MPI_Status *status) {
  return tempi::streams::wait(1, request, status == MPI_STATUS_IGNORE ? MPI_STATUSES_IGNORE : status);
}

int TEMPIX_Waitall_enqueue(int count, MPI_Request array_of_requests[], MPI_Status array_of_statuses[]) {
  return tempi::streams::wait(count, array_of_requests, array_of_statuses);
}

}  // extern "C"
