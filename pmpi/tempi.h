/* TEMPI's own calls, for tools that tune or measure it. Applications need none of
 * them: TEMPI works through the standard MPI calls alone. */
#ifndef TEMPI_H
#define TEMPI_H

#ifdef __cplusplus
extern "C" {
#endif

/* How packed GPU data moves in point-to-point calls from now on, overriding
 * TEMPI_METHOD: "auto", "device", "oneshot" or "staged" (docs/environment.md).
 * Returns MPI_SUCCESS, or MPI_ERR_ARG for any other name. */
int TEMPIX_Set_method(const char *method);

#ifdef __cplusplus
}
#endif

#endif
