// Persistent point-to-point requests (persistent.hpp): plan, method and staging are
// chosen once at init; each MPI_Start packs a send's current data and starts the
// library's own persistent request. Completion is wrap_completion.cpp's.
#include "base/forward.hpp"
#include "p2p/persistent.hpp"

using namespace tempi;

extern "C" {

int TEMPI_WRAPPER(MPI_Send_init)(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                                 MPI_Request *request) {
  return persistent_send_init(TEMPI_NEXT(MPI_Send_init), "MPI_Send_init", buf, count, type, dest, tag, comm, request);
}

int TEMPI_WRAPPER(MPI_Ssend_init)(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                                  MPI_Request *request) {
  return persistent_send_init(TEMPI_NEXT(MPI_Ssend_init), "MPI_Ssend_init", buf, count, type, dest, tag, comm,
                              request);
}

int TEMPI_WRAPPER(MPI_Bsend_init)(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                                  MPI_Request *request) {
  return persistent_send_init(TEMPI_NEXT(MPI_Bsend_init), "MPI_Bsend_init", buf, count, type, dest, tag, comm,
                              request);
}

int TEMPI_WRAPPER(MPI_Rsend_init)(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                                  MPI_Request *request) {
  return persistent_send_init(TEMPI_NEXT(MPI_Rsend_init), "MPI_Rsend_init", buf, count, type, dest, tag, comm,
                              request);
}

int TEMPI_WRAPPER(MPI_Recv_init)(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                                 MPI_Request *request) {
  return persistent_recv_init(TEMPI_NEXT(MPI_Recv_init), "MPI_Recv_init", buf, count, type, source, tag, comm,
                              request);
}

int TEMPI_WRAPPER(MPI_Start)(MPI_Request *request) { return persistent_start(1, request, false); }

int TEMPI_WRAPPER(MPI_Startall)(int count, MPI_Request requests[]) { return persistent_start(count, requests, true); }

}  // extern "C"
