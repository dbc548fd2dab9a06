/* MPICH's stream calls (MPIX_Stream_create, MPIX_Stream_comm_create, MPIX_Send_enqueue, ...)
 * on any MPI library, through TEMPI: a program written for them includes this header after
 * mpi.h and builds unchanged. Where the MPI library has them itself (MPICH 4.1 and later
 * define MPIX_STREAM_NULL), the program keeps the library's, and this header adds nothing
 * (TEMPI_MPIX_FROM_LIBRARY is 1; `tempi-info` says which a build of TEMPI got). TEMPI's own
 * calls are always there under their TEMPIX_ names (tempi.h; docs/using.md,
 * "Stream-ordered communication"). */
#ifndef TEMPI_MPIX_H
#define TEMPI_MPIX_H

#include "tempi.h"

#if defined(MPIX_STREAM_NULL)
#define TEMPI_MPIX_FROM_LIBRARY 1
#else
#define TEMPI_MPIX_FROM_LIBRARY 0
typedef TEMPIX_Stream MPIX_Stream;
#define MPIX_STREAM_NULL TEMPIX_STREAM_NULL
#define MPIX_Info_set_hex TEMPIX_Info_set_hex
#define MPIX_Stream_create TEMPIX_Stream_create
#define MPIX_Stream_free TEMPIX_Stream_free
#define MPIX_Stream_comm_create TEMPIX_Stream_comm_create
#define MPIX_Send_enqueue TEMPIX_Send_enqueue
#define MPIX_Recv_enqueue TEMPIX_Recv_enqueue
#define MPIX_Isend_enqueue TEMPIX_Isend_enqueue
#define MPIX_Irecv_enqueue TEMPIX_Irecv_enqueue
#define MPIX_Wait_enqueue TEMPIX_Wait_enqueue
#define MPIX_Waitall_enqueue TEMPIX_Waitall_enqueue
#endif

#endif
