// Communicator, topology, window and file calls that may wait for other processes:
// like wrap_progress.cpp, TEMPI intercepts them only to post every deferred send first
// (engine.hpp), then forwards the user's arguments unchanged.
#include <mutex>

#include "config.hpp"
#include "p2p/engine.hpp"
#include "base/forward.hpp"
#include "log.hpp"
#include "base/peers.hpp"
#include "stream/streams.hpp"

using namespace tempi;

extern "C" {

int TEMPI_WRAPPER(MPI_Comm_split_type)(MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm *newcomm) {
  flush_sends();
  return TEMPI_NEXT(MPI_Comm_split_type)(comm, split_type, key, info, newcomm);
}

int TEMPI_WRAPPER(MPI_Comm_create_group)(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm *newcomm) {
  flush_sends();
  return TEMPI_NEXT(MPI_Comm_create_group)(comm, group, tag, newcomm);
}

int TEMPI_WRAPPER(MPI_Comm_disconnect)(MPI_Comm *comm) {
  flush_sends();
  if (comm) streams::comm_freeing(*comm);
  comm_freed();  // before and after, as MPI_Comm_free (wrap_progress.cpp)
  const int err = TEMPI_NEXT(MPI_Comm_disconnect)(comm);
  comm_freed();
  return err;
}

int TEMPI_WRAPPER(MPI_Intercomm_create)(MPI_Comm local, int local_leader, MPI_Comm peer, int remote_leader, int tag,
                                        MPI_Comm *newcomm) {
  flush_sends();
  return TEMPI_NEXT(MPI_Intercomm_create)(local, local_leader, peer, remote_leader, tag, newcomm);
}

int TEMPI_WRAPPER(MPI_Intercomm_merge)(MPI_Comm intercomm, int high, MPI_Comm *newcomm) {
  flush_sends();
  return TEMPI_NEXT(MPI_Intercomm_merge)(intercomm, high, newcomm);
}

int TEMPI_WRAPPER(MPI_Cart_create)(MPI_Comm comm, int ndims, const int dims[], const int periods[], int reorder,
                                   MPI_Comm *newcomm) {
  flush_sends();
  return TEMPI_NEXT(MPI_Cart_create)(comm, ndims, dims, periods, reorder, newcomm);
}

int TEMPI_WRAPPER(MPI_Cart_sub)(MPI_Comm comm, const int remain_dims[], MPI_Comm *newcomm) {
  flush_sends();
  return TEMPI_NEXT(MPI_Cart_sub)(comm, remain_dims, newcomm);
}

int TEMPI_WRAPPER(MPI_Graph_create)(MPI_Comm comm, int nnodes, const int index[], const int edges[], int reorder,
                                    MPI_Comm *newcomm) {
  flush_sends();
  return TEMPI_NEXT(MPI_Graph_create)(comm, nnodes, index, edges, reorder, newcomm);
}

int TEMPI_WRAPPER(MPI_Dist_graph_create)(MPI_Comm comm, int n, const int sources[], const int degrees[],
                                         const int destinations[], const int weights[], MPI_Info info, int reorder,
                                         MPI_Comm *newcomm) {
  flush_sends();
  return TEMPI_NEXT(MPI_Dist_graph_create)(comm, n, sources, degrees, destinations, weights, info, reorder, newcomm);
}

int TEMPI_WRAPPER(MPI_Dist_graph_create_adjacent)(MPI_Comm comm, int indegree, const int sources[],
                                                  const int sourceweights[], int outdegree, const int destinations[],
                                                  const int destweights[], MPI_Info info, int reorder,
                                                  MPI_Comm *newcomm) {
  flush_sends();
  return TEMPI_NEXT(MPI_Dist_graph_create_adjacent)(comm, indegree, sources, sourceweights, outdegree, destinations,
                                                    destweights, info, reorder, newcomm);
}

int TEMPI_WRAPPER(MPI_Win_create)(void *base, MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm,
                                  MPI_Win *win) {
  flush_sends();
  return TEMPI_NEXT(MPI_Win_create)(base, size, disp_unit, info, comm, win);
}

int TEMPI_WRAPPER(MPI_Win_allocate)(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, void *baseptr,
                                    MPI_Win *win) {
  flush_sends();
  return TEMPI_NEXT(MPI_Win_allocate)(size, disp_unit, info, comm, baseptr, win);
}

int TEMPI_WRAPPER(MPI_Win_free)(MPI_Win *win) {
  flush_sends();
  return TEMPI_NEXT(MPI_Win_free)(win);
}

int TEMPI_WRAPPER(MPI_Win_fence)(int assert_, MPI_Win win) {
  flush_sends();
  return TEMPI_NEXT(MPI_Win_fence)(assert_, win);
}

int TEMPI_WRAPPER(MPI_File_open)(MPI_Comm comm, const char *filename, int amode, MPI_Info info, MPI_File *fh) {
  flush_sends();
  return TEMPI_NEXT(MPI_File_open)(comm, filename, amode, info, fh);
}

int TEMPI_WRAPPER(MPI_File_close)(MPI_File *fh) {
  flush_sends();
  return TEMPI_NEXT(MPI_File_close)(fh);
}

#if MPI_VERSION >= 4
// MPI-4 sessions: TEMPI starts at MPI_Init or MPI_Init_thread, so a program that opens only
// sessions is not accelerated. Said once, since its GPU buffers then reach the MPI library
// as they are, which only a CUDA-aware library can read.
int TEMPI_WRAPPER(MPI_Session_init)(MPI_Info info, MPI_Errhandler errhandler, MPI_Session *session) {
  int initialized = 0;
  PMPI_Initialized(&initialized);
  static std::once_flag said;
  if (!initialized && !config().disabled)
    std::call_once(said, [] {
      TEMPI_LOG(Warn, "MPI_Session_init before MPI_Init: TEMPI starts at MPI_Init, so until then GPU buffers reach "
                "the MPI library unhandled (docs/using.md, \"What is accelerated\")");
    });
  return TEMPI_NEXT(MPI_Session_init)(info, errhandler, session);
}
#endif

}  // extern "C"
