/* TEMPI's own calls, for tools that tune or measure it and for applications that opt in
 * to what standard MPI cannot express. TEMPI works through the standard MPI calls alone. */
#ifndef TEMPI_H
#define TEMPI_H

#include <mpi.h>

/* The version of TEMPI this header belongs to (meson.build checks that they agree).
 * TEMPI_VERSION_NUMBER is MAJOR * 10000 + MINOR * 100 + PATCH, for #if. */
#define TEMPI_VERSION_MAJOR 0
#define TEMPI_VERSION_MINOR 1
#define TEMPI_VERSION_PATCH 0
#define TEMPI_VERSION "0.1.0"
#define TEMPI_VERSION_NUMBER (TEMPI_VERSION_MAJOR * 10000 + TEMPI_VERSION_MINOR * 100 + TEMPI_VERSION_PATCH)

#ifdef __cplusplus
extern "C" {
#endif

/* How packed GPU data moves in point-to-point calls from now on, overriding
 * TEMPI_METHOD: "auto", "device", "oneshot" or "staged" (docs/environment.md).
 * Returns MPI_SUCCESS, or MPI_ERR_ARG for any other name. */
int TEMPIX_Set_method(const char *method);

/* Zero-copy point-to-point between GPUs of one node on `comm` (docs/using.md, "Zero-copy
 * point-to-point", which gives the contract the application accepts): collective on `comm`,
 * every rank passing the same `enable`, when no point-to-point operation on `comm` is
 * pending. *enabled (may be NULL) says whether it is on now: off where TEMPI_IPC=off, a rank
 * has no GPU, or `comm` is an intercommunicator. Returns MPI_ERR_PENDING on every rank,
 * leaving the setting as it was, where a rank has a GPU receive on `comm` from before the
 * call (a persistent one included). */
int TEMPIX_Comm_enable_zero_copy(MPI_Comm comm, int enable, int *enabled);

/* The value of TEMPI's counter `name` in this process (docs/using.md, "Counters", lists
 * them): how many sends went by zero-copy, how many point-to-point decisions were made or
 * recalled, ... A counter whose mechanism this process has not used reads 0. Returns
 * MPI_SUCCESS, or MPI_ERR_ARG (and *value 0) for a name TEMPI does not keep. */
int TEMPIX_Counter(const char *name, unsigned long long *value);

/* Communication ordered on a CUDA stream (docs/using.md, "Stream-ordered communication"),
 * with the arguments and meaning of MPICH's MPIX_ stream calls; tempi_mpix.h maps those
 * names to these where the MPI library has none. A stream object names a cudaStream_t: an
 * info object with "type" "cudaStream_t" and "value" set by TEMPIX_Info_set_hex(info,
 * "value", &stream, sizeof stream). A communicator bound to it by TEMPIX_Stream_comm_create
 * takes the enqueue calls: each returns at once, and its operation happens when the stream
 * reaches it, ordered with the work queued there before and after. The library must run
 * under MPI_THREAD_MULTIPLE. */
typedef struct TEMPIX_Stream_s *TEMPIX_Stream;
#define TEMPIX_STREAM_NULL ((TEMPIX_Stream)0)

int TEMPIX_Info_set_hex(MPI_Info info, const char *key, const void *value, int value_size);
int TEMPIX_Stream_create(MPI_Info info, TEMPIX_Stream *stream);
int TEMPIX_Stream_free(TEMPIX_Stream *stream);
int TEMPIX_Stream_comm_create(MPI_Comm comm, TEMPIX_Stream stream, MPI_Comm *newcomm);
int TEMPIX_Send_enqueue(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm);
int TEMPIX_Recv_enqueue(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
                        MPI_Status *status);
int TEMPIX_Isend_enqueue(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                         MPI_Request *request);
int TEMPIX_Irecv_enqueue(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
                         MPI_Request *request);
int TEMPIX_Wait_enqueue(MPI_Request *request, MPI_Status *status);
int TEMPIX_Waitall_enqueue(int count, MPI_Request array_of_requests[], MPI_Status array_of_statuses[]);

#ifdef __cplusplus
}
#endif

#endif
