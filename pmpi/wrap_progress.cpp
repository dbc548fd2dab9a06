// Calls that TEMPI intercepts only so that its engine posts every deferred send before
// they run (engine.hpp): each may wait for another process, which may be waiting for
// one of those sends (MPI's progress rule: a started send must be able to complete).
// Then they forward the user's arguments unchanged.
#include "engine.hpp"
#include "forward.hpp"

using namespace tempi;

extern "C" {

int TEMPI_WRAPPER(MPI_Probe)(int source, int tag, MPI_Comm comm, MPI_Status *status) {
  flush_sends();
  return TEMPI_NEXT(MPI_Probe)(source, tag, comm, status);
}

int TEMPI_WRAPPER(MPI_Iprobe)(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status) {
  flush_sends();
  return TEMPI_NEXT(MPI_Iprobe)(source, tag, comm, flag, status);
}

int TEMPI_WRAPPER(MPI_Mprobe)(int source, int tag, MPI_Comm comm, MPI_Message *message, MPI_Status *status) {
  flush_sends();
  return TEMPI_NEXT(MPI_Mprobe)(source, tag, comm, message, status);
}

int TEMPI_WRAPPER(MPI_Improbe)(int source, int tag, MPI_Comm comm, int *flag, MPI_Message *message,
                               MPI_Status *status) {
  flush_sends();
  return TEMPI_NEXT(MPI_Improbe)(source, tag, comm, flag, message, status);
}

int TEMPI_WRAPPER(MPI_Barrier)(MPI_Comm comm) {
  flush_sends();
  return TEMPI_NEXT(MPI_Barrier)(comm);
}

int TEMPI_WRAPPER(MPI_Bcast)(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  flush_sends();
  return TEMPI_NEXT(MPI_Bcast)(buf, count, type, root, comm);
}

int TEMPI_WRAPPER(MPI_Gather)(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                              MPI_Datatype rtype, int root, MPI_Comm comm) {
  flush_sends();
  return TEMPI_NEXT(MPI_Gather)(sbuf, scount, stype, rbuf, rcount, rtype, root, comm);
}

int TEMPI_WRAPPER(MPI_Gatherv)(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, const int rcounts[],
                               const int displs[], MPI_Datatype rtype, int root, MPI_Comm comm) {
  flush_sends();
  return TEMPI_NEXT(MPI_Gatherv)(sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm);
}

int TEMPI_WRAPPER(MPI_Scatter)(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                               MPI_Datatype rtype, int root, MPI_Comm comm) {
  flush_sends();
  return TEMPI_NEXT(MPI_Scatter)(sbuf, scount, stype, rbuf, rcount, rtype, root, comm);
}

int TEMPI_WRAPPER(MPI_Scatterv)(const void *sbuf, const int scounts[], const int displs[], MPI_Datatype stype,
                                void *rbuf, int rcount, MPI_Datatype rtype, int root, MPI_Comm comm) {
  flush_sends();
  return TEMPI_NEXT(MPI_Scatterv)(sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm);
}

int TEMPI_WRAPPER(MPI_Allgather)(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                                 MPI_Datatype rtype, MPI_Comm comm) {
  flush_sends();
  return TEMPI_NEXT(MPI_Allgather)(sbuf, scount, stype, rbuf, rcount, rtype, comm);
}

int TEMPI_WRAPPER(MPI_Allgatherv)(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, const int rcounts[],
                                  const int displs[], MPI_Datatype rtype, MPI_Comm comm) {
  flush_sends();
  return TEMPI_NEXT(MPI_Allgatherv)(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm);
}

int TEMPI_WRAPPER(MPI_Alltoall)(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                                MPI_Datatype rtype, MPI_Comm comm) {
  flush_sends();
  return TEMPI_NEXT(MPI_Alltoall)(sbuf, scount, stype, rbuf, rcount, rtype, comm);
}

int TEMPI_WRAPPER(MPI_Alltoallv)(const void *sbuf, const int scounts[], const int sdispls[], MPI_Datatype stype,
                                 void *rbuf, const int rcounts[], const int rdispls[], MPI_Datatype rtype,
                                 MPI_Comm comm) {
  flush_sends();
  return TEMPI_NEXT(MPI_Alltoallv)(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm);
}

int TEMPI_WRAPPER(MPI_Alltoallw)(const void *sbuf, const int scounts[], const int sdispls[],
                                 const MPI_Datatype stypes[], void *rbuf, const int rcounts[], const int rdispls[],
                                 const MPI_Datatype rtypes[], MPI_Comm comm) {
  flush_sends();
  return TEMPI_NEXT(MPI_Alltoallw)(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm);
}

int TEMPI_WRAPPER(MPI_Reduce)(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, int root,
                              MPI_Comm comm) {
  flush_sends();
  return TEMPI_NEXT(MPI_Reduce)(sbuf, rbuf, count, type, op, root, comm);
}

int TEMPI_WRAPPER(MPI_Allreduce)(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,
                                 MPI_Comm comm) {
  flush_sends();
  return TEMPI_NEXT(MPI_Allreduce)(sbuf, rbuf, count, type, op, comm);
}

int TEMPI_WRAPPER(MPI_Reduce_scatter)(const void *sbuf, void *rbuf, const int rcounts[], MPI_Datatype type,
                                      MPI_Op op, MPI_Comm comm) {
  flush_sends();
  return TEMPI_NEXT(MPI_Reduce_scatter)(sbuf, rbuf, rcounts, type, op, comm);
}

int TEMPI_WRAPPER(MPI_Reduce_scatter_block)(const void *sbuf, void *rbuf, int rcount, MPI_Datatype type, MPI_Op op,
                                            MPI_Comm comm) {
  flush_sends();
  return TEMPI_NEXT(MPI_Reduce_scatter_block)(sbuf, rbuf, rcount, type, op, comm);
}

int TEMPI_WRAPPER(MPI_Scan)(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  flush_sends();
  return TEMPI_NEXT(MPI_Scan)(sbuf, rbuf, count, type, op, comm);
}

int TEMPI_WRAPPER(MPI_Exscan)(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  flush_sends();
  return TEMPI_NEXT(MPI_Exscan)(sbuf, rbuf, count, type, op, comm);
}

int TEMPI_WRAPPER(MPI_Neighbor_allgather)(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                                          MPI_Datatype rtype, MPI_Comm comm) {
  flush_sends();
  return TEMPI_NEXT(MPI_Neighbor_allgather)(sbuf, scount, stype, rbuf, rcount, rtype, comm);
}

int TEMPI_WRAPPER(MPI_Neighbor_allgatherv)(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                                           const int rcounts[], const int displs[], MPI_Datatype rtype,
                                           MPI_Comm comm) {
  flush_sends();
  return TEMPI_NEXT(MPI_Neighbor_allgatherv)(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm);
}

int TEMPI_WRAPPER(MPI_Neighbor_alltoall)(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                                         MPI_Datatype rtype, MPI_Comm comm) {
  flush_sends();
  return TEMPI_NEXT(MPI_Neighbor_alltoall)(sbuf, scount, stype, rbuf, rcount, rtype, comm);
}

int TEMPI_WRAPPER(MPI_Neighbor_alltoallv)(const void *sbuf, const int scounts[], const int sdispls[],
                                          MPI_Datatype stype, void *rbuf, const int rcounts[], const int rdispls[],
                                          MPI_Datatype rtype, MPI_Comm comm) {
  flush_sends();
  return TEMPI_NEXT(MPI_Neighbor_alltoallv)(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm);
}

int TEMPI_WRAPPER(MPI_Neighbor_alltoallw)(const void *sbuf, const int scounts[], const MPI_Aint sdispls[],
                                          const MPI_Datatype stypes[], void *rbuf, const int rcounts[],
                                          const MPI_Aint rdispls[], const MPI_Datatype rtypes[], MPI_Comm comm) {
  flush_sends();
  return TEMPI_NEXT(MPI_Neighbor_alltoallw)(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm);
}

int TEMPI_WRAPPER(MPI_Comm_dup)(MPI_Comm comm, MPI_Comm *newcomm) {
  flush_sends();
  return TEMPI_NEXT(MPI_Comm_dup)(comm, newcomm);
}

int TEMPI_WRAPPER(MPI_Comm_split)(MPI_Comm comm, int color, int key, MPI_Comm *newcomm) {
  flush_sends();
  return TEMPI_NEXT(MPI_Comm_split)(comm, color, key, newcomm);
}

int TEMPI_WRAPPER(MPI_Comm_create)(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm) {
  flush_sends();
  return TEMPI_NEXT(MPI_Comm_create)(comm, group, newcomm);
}

// A send posted later must not name a freed communicator.
int TEMPI_WRAPPER(MPI_Comm_free)(MPI_Comm *comm) {
  flush_sends();
  return TEMPI_NEXT(MPI_Comm_free)(comm);
}

// Detaching waits for buffered sends, which must be posted first.
int TEMPI_WRAPPER(MPI_Buffer_detach)(void *buffer, int *size) {
  flush_sends();
  return TEMPI_NEXT(MPI_Buffer_detach)(buffer, size);
}

}  // extern "C"
