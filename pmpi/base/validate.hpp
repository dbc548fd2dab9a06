// Checks of the arguments of a call TEMPI handles itself (GPU data), made before any
// GPU work: the MPI library never sees these arguments, or sees them only after TEMPI
// has acted on them (a deferred send is posted by TEMPI's progress, long after the
// application's call returned). Each check answers with the error class the MPI
// library gives for the same bad call on a host buffer, raised through the
// communicator's error handler with one log line naming the call and the argument
// (errors.hpp); MPI_SUCCESS when the argument is fine. The checks follow MPICH's order:
// the communicator first, then the arguments in the order the call lists them.
// docs/using.md, "Errors", has the table.
#pragma once

#include <mpi.h>

#include <initializer_list>
#include <memory>

#include "base/type_cache.hpp"

namespace tempi {

// MPI_COMM_NULL: MPI_ERR_COMM, raised on MPI_COMM_WORLD (the null handle has no
// error handler; MPICH raises there too).
int check_comm(MPI_Comm comm, const char *call);

// A negative element count: MPI_ERR_COUNT.
int check_count(MPI_Comm comm, const char *call, int count);

// MPI_DATATYPE_NULL, or a type the MPI library does not accept for communication (not
// committed): MPI_ERR_TYPE. On success `info` is the type's entry in the type cache.
int check_datatype(MPI_Comm comm, const char *call, MPI_Datatype type, std::shared_ptr<const TypeInfo> &info);

// A destination (or, for a receive, a source) outside the communicator's group (the
// remote group of an intercommunicator): MPI_ERR_RANK. MPI_PROC_NULL is fine, and so
// is MPI_ANY_SOURCE for a receive.
int check_rank(MPI_Comm comm, const char *call, int rank, bool source);

// A tag outside [0, MPI_TAG_UB] (MPI_ANY_TAG allowed for a receive): MPI_ERR_TAG.
int check_tag(MPI_Comm comm, const char *call, int tag, bool receive);

// A null pointer where the call must write or read (position, request): MPI_ERR_ARG.
int check_not_null(MPI_Comm comm, const char *call, const void *ptr, const char *name);

// A negative byte size (MPI_Pack's outsize, MPI_Unpack's insize): MPI_ERR_ARG.
int check_size(MPI_Comm comm, const char *call, int bytes, const char *name);

// Whether the MPI library accepts `type` for communication (committed), asked without
// raising anything: the type cache records it with each type's plan.
bool library_accepts(MPI_Datatype type);

// The arrays and output arguments of a completion call are all there (a negative count,
// or a null array or output pointer, is for the MPI library to report: TEMPI then
// forwards the call untouched).
bool completion_args_present(int count, const MPI_Request *requests, std::initializer_list<const void *> outputs = {});

// The communicator TEMPI asks the library's questions on (MPI_ERRORS_RETURN); released
// when MPI is finalized.
void release_quiet_comm();

}  // namespace tempi
