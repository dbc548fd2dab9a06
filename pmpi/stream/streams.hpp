// Communication ordered on the application's CUDA streams (tempi.h's TEMPIX_ stream and
// enqueue calls; docs/design.md, "Stream-ordered communication"): the calls the API room
// forwards to, and what MPI_Comm_free asks of it.
#pragma once

#include <mpi.h>

namespace tempi {
namespace streams {

struct AppStream;

// A stream object for the GPU stream named in `info` ("type" "cudaStream_t", "value" the
// handle's bytes as TEMPIX_Info_set_hex writes them).
int stream_create(MPI_Info info, AppStream **out);
// Frees it; MPI_ERR_ARG while a communicator bound to it is still in use.
int stream_free(AppStream **stream);
// A duplicate of `comm` bound to `stream` (collective on `comm`).
int comm_create(MPI_Comm comm, AppStream *stream, MPI_Comm *newcomm);

// `request` null: the blocking Send_enqueue / Recv_enqueue; else the nonblocking form.
int send(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *request);
int recv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Status *status,
         MPI_Request *request);
// Wait_enqueue and Waitall_enqueue (`statuses` may be MPI_STATUSES_IGNORE).
int wait(int count, MPI_Request *requests, MPI_Status *statuses);

// Before the library frees `comm`: where it is bound to a stream, waits until that stream
// has reached every operation enqueued on it (they are with the library then), and forgets it.
void comm_freeing(MPI_Comm comm);

// MPIX_Info_set_hex: `value_size` bytes at `value` as lowercase hexadecimal digits.
int info_set_hex(MPI_Info info, const char *key, const void *value, int value_size);

}  // namespace streams
}  // namespace tempi
