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

#ifdef __cplusplus
}
#endif

#endif
