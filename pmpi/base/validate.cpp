#include "base/validate.hpp"

#include <mutex>

#include "base/errors.hpp"

namespace tempi {

namespace {

std::once_flag g_quiet_once;
MPI_Comm g_quiet = MPI_COMM_NULL;

// A private duplicate of MPI_COMM_SELF that returns errors instead of raising them, so
// that TEMPI can ask the library whether it accepts an argument without invoking the
// application's error handler (which may abort) before TEMPI has said what was wrong.
MPI_Comm quiet_comm() {
  std::call_once(g_quiet_once, [] {
    MPI_Comm c = MPI_COMM_NULL;
    if (PMPI_Comm_dup(MPI_COMM_SELF, &c) == MPI_SUCCESS) {
      PMPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
      g_quiet = c;
    }
  });
  return g_quiet;
}

int tag_upper_bound() {
  static const int ub = [] {
    int *value = nullptr, flag = 0;
    PMPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &value, &flag);
    return flag && value ? *value : 32767;  // 32767: the least MPI guarantees
  }();
  return ub;
}

// The size of the group a rank argument names (the remote group of an intercommunicator).
int peer_group_size(MPI_Comm comm) {
  int inter = 0, size = 0;
  PMPI_Comm_test_inter(comm, &inter);
  if (inter)
    PMPI_Comm_remote_size(comm, &size);
  else
    PMPI_Comm_size(comm, &size);
  return size;
}

}  // namespace

int check_comm(MPI_Comm comm, const char *call) {
  if (comm != MPI_COMM_NULL) return MPI_SUCCESS;
  return raise_error(MPI_COMM_WORLD, MPI_ERR_COMM, "%s: the communicator is MPI_COMM_NULL", call);
}

int check_count(MPI_Comm comm, const char *call, int count) {
  if (count >= 0) return MPI_SUCCESS;
  return raise_error(comm, MPI_ERR_COUNT, "%s: negative count %d", call, count);
}

int check_datatype(MPI_Comm comm, const char *call, MPI_Datatype type, std::shared_ptr<const TypeInfo> &info) {
  if (type == MPI_DATATYPE_NULL) return raise_error(comm, MPI_ERR_TYPE, "%s: the datatype is MPI_DATATYPE_NULL", call);
  info = type_cache().find(type);
  if (info->committed) return MPI_SUCCESS;
  info.reset();
  return raise_error(comm, MPI_ERR_TYPE, "%s: the datatype is not committed (MPI_Type_commit)", call);
}

int check_rank(MPI_Comm comm, const char *call, int rank, bool source) {
  if (rank == MPI_PROC_NULL || (source && rank == MPI_ANY_SOURCE)) return MPI_SUCCESS;
  const int size = peer_group_size(comm);
  if (rank >= 0 && rank < size) return MPI_SUCCESS;
  return raise_error(comm, MPI_ERR_RANK, "%s: %s rank %d is not in the communicator's group of %d", call,
                     source ? "source" : "destination", rank, size);
}

int check_tag(MPI_Comm comm, const char *call, int tag, bool receive) {
  if ((tag >= 0 && tag <= tag_upper_bound()) || (receive && tag == MPI_ANY_TAG)) return MPI_SUCCESS;
  return raise_error(comm, MPI_ERR_TAG, "%s: tag %d is outside [0, MPI_TAG_UB = %d]%s", call, tag, tag_upper_bound(),
                     receive ? " and is not MPI_ANY_TAG" : "");
}

int check_not_null(MPI_Comm comm, const char *call, const void *ptr, const char *name) {
  if (ptr) return MPI_SUCCESS;
  return raise_error(comm, MPI_ERR_ARG, "%s: %s is NULL", call, name);
}

int check_size(MPI_Comm comm, const char *call, int bytes, const char *name) {
  if (bytes >= 0) return MPI_SUCCESS;
  return raise_error(comm, MPI_ERR_ARG, "%s: negative %s %d", call, name, bytes);
}

// MPI offers no query for "committed"; MPI_Pack of zero elements checks it (MPICH and
// Open MPI both do) and touches no memory.
bool library_accepts(MPI_Datatype type) {
  const MPI_Comm quiet = quiet_comm();
  if (quiet == MPI_COMM_NULL) return true;  // cannot ask: trust the application, as before
  char byte = 0;
  int position = 0;
  return PMPI_Pack(&byte, 0, type, &byte, 1, &position, quiet) == MPI_SUCCESS;
}

bool completion_args_present(int count, const MPI_Request *requests, std::initializer_list<const void *> outputs) {
  if (count < 0 || (count > 0 && !requests)) return false;
  for (const void *p : outputs)
    if (!p) return false;
  return true;
}

void release_quiet_comm() {
  if (g_quiet != MPI_COMM_NULL) PMPI_Comm_free(&g_quiet);
}

}  // namespace tempi
