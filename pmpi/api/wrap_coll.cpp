// The collectives that take buffers (collectives.hpp): thin wrappers. A blocking
// collective first lets the engine post every deferred send (engine.hpp: it may wait for a
// peer that waits for one of them), and the first on MPI_COMM_WORLD learns where the
// world's ranks run (peers.hpp); a nonblocking one never waits, so it only polls. Calls
// without GPU data forward at once; the others go to the handlers, which pack GPU blocks,
// run the same collective of the library once and unpack (or, for nonblocking calls,
// track the request so that its completion unpacks).
#include "coll/collectives.hpp"
#include "p2p/engine.hpp"
#include "base/forward.hpp"
#include "base/peers.hpp"
#include "base/runtime.hpp"
#include "zero_copy/zero_copy.hpp"

using namespace tempi;

namespace {

// A blocking collective first posts the deferred sends, then, the first time on
// MPI_COMM_WORLD, learns where the world's ranks run (peers.hpp: every rank makes this
// call, and a blocking collective may synchronize).
void before_blocking(MPI_Comm comm) {
  flush_sends();
  learn_peers_at_collective(comm);
}

bool ours(const void *a, const void *b = nullptr) { return active() && (gpu_data(a) || gpu_data(b)); }

// A blocking exchange collective: also on host buffers where peers may use zero-copy
// (zero_copy.hpp: every rank of the call takes part in its protocol).
bool ours_exchange(const void *a, const void *b, MPI_Comm comm) {
  // Asked first, at every rank alike: the first time on a communicator it is collective
  // (its node share is made then), whatever each rank's buffers are.
  if (!active()) return false;
  return zero_copy_participates(comm) || ours(a, b);
}

#if MPI_VERSION >= 4
// A persistent init that the library answers itself: a communicator it must judge (null,
// invalid, or without a topology for a neighbourhood call), so that the error comes at init.
bool library_judges(MPI_Comm comm, bool neighbourhood) {
  int inter = 0, topology = MPI_UNDEFINED;
  if (comm == MPI_COMM_NULL || PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS) return true;
  return neighbourhood && (PMPI_Topo_test(comm, &topology) != MPI_SUCCESS || topology == MPI_UNDEFINED);
}
#endif

}  // namespace

extern "C" {

int TEMPI_WRAPPER(MPI_Bcast)(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  before_blocking(comm);
  if (!ours(buf)) return TEMPI_NEXT(MPI_Bcast)(buf, count, type, root, comm);
  return coll::bcast(buf, count, type, root, comm, nullptr);
}

int TEMPI_WRAPPER(MPI_Ibcast)(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm, MPI_Request *request) {
  engine().poll();
  if (!ours(buf)) return TEMPI_NEXT(MPI_Ibcast)(buf, count, type, root, comm, request);
  return coll::bcast(buf, count, type, root, comm, request);
}

int TEMPI_WRAPPER(MPI_Gather)(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                              MPI_Datatype rtype, int root, MPI_Comm comm) {
  before_blocking(comm);
  if (!ours(sbuf, rbuf)) return TEMPI_NEXT(MPI_Gather)(sbuf, scount, stype, rbuf, rcount, rtype, root, comm);
  return coll::gather(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, nullptr);
}

int TEMPI_WRAPPER(MPI_Igather)(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                               MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Request *request) {
  engine().poll();
  if (!ours(sbuf, rbuf)) return TEMPI_NEXT(MPI_Igather)(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, request);
  return coll::gather(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, request);
}

int TEMPI_WRAPPER(MPI_Gatherv)(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, const int rcounts[],
                               const int displs[], MPI_Datatype rtype, int root, MPI_Comm comm) {
  before_blocking(comm);
  if (!ours(sbuf, rbuf)) return TEMPI_NEXT(MPI_Gatherv)(sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm);
  return coll::gatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm, nullptr);
}

int TEMPI_WRAPPER(MPI_Igatherv)(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, const int rcounts[],
                                const int displs[], MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Request *request) {
  engine().poll();
  if (!ours(sbuf, rbuf))
    return TEMPI_NEXT(MPI_Igatherv)(sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm, request);
  return coll::gatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm, request);
}

int TEMPI_WRAPPER(MPI_Scatter)(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                               MPI_Datatype rtype, int root, MPI_Comm comm) {
  before_blocking(comm);
  if (!ours(sbuf, rbuf)) return TEMPI_NEXT(MPI_Scatter)(sbuf, scount, stype, rbuf, rcount, rtype, root, comm);
  return coll::scatter(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, nullptr);
}

int TEMPI_WRAPPER(MPI_Iscatter)(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                                MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Request *request) {
  engine().poll();
  if (!ours(sbuf, rbuf)) return TEMPI_NEXT(MPI_Iscatter)(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, request);
  return coll::scatter(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, request);
}

int TEMPI_WRAPPER(MPI_Scatterv)(const void *sbuf, const int scounts[], const int displs[], MPI_Datatype stype,
                                void *rbuf, int rcount, MPI_Datatype rtype, int root, MPI_Comm comm) {
  before_blocking(comm);
  if (!ours(sbuf, rbuf)) return TEMPI_NEXT(MPI_Scatterv)(sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm);
  return coll::scatterv(sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm, nullptr);
}

int TEMPI_WRAPPER(MPI_Iscatterv)(const void *sbuf, const int scounts[], const int displs[], MPI_Datatype stype,
                                 void *rbuf, int rcount, MPI_Datatype rtype, int root, MPI_Comm comm,
                                 MPI_Request *request) {
  engine().poll();
  if (!ours(sbuf, rbuf))
    return TEMPI_NEXT(MPI_Iscatterv)(sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm, request);
  return coll::scatterv(sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm, request);
}

int TEMPI_WRAPPER(MPI_Allgather)(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                                 MPI_Datatype rtype, MPI_Comm comm) {
  before_blocking(comm);
  if (!ours_exchange(sbuf, rbuf, comm))
    return TEMPI_NEXT(MPI_Allgather)(sbuf, scount, stype, rbuf, rcount, rtype, comm);
  return coll::allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm, nullptr);
}

int TEMPI_WRAPPER(MPI_Iallgather)(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                                  MPI_Datatype rtype, MPI_Comm comm, MPI_Request *request) {
  engine().poll();
  if (!ours(sbuf, rbuf)) return TEMPI_NEXT(MPI_Iallgather)(sbuf, scount, stype, rbuf, rcount, rtype, comm, request);
  return coll::allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm, request);
}

int TEMPI_WRAPPER(MPI_Allgatherv)(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, const int rcounts[],
                                  const int displs[], MPI_Datatype rtype, MPI_Comm comm) {
  before_blocking(comm);
  if (!ours_exchange(sbuf, rbuf, comm))
    return TEMPI_NEXT(MPI_Allgatherv)(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm);
  return coll::allgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm, nullptr);
}

int TEMPI_WRAPPER(MPI_Iallgatherv)(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, const int rcounts[],
                                   const int displs[], MPI_Datatype rtype, MPI_Comm comm, MPI_Request *request) {
  engine().poll();
  if (!ours(sbuf, rbuf))
    return TEMPI_NEXT(MPI_Iallgatherv)(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm, request);
  return coll::allgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm, request);
}

int TEMPI_WRAPPER(MPI_Alltoall)(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                                MPI_Datatype rtype, MPI_Comm comm) {
  before_blocking(comm);
  if (!ours_exchange(sbuf, rbuf, comm)) return TEMPI_NEXT(MPI_Alltoall)(sbuf, scount, stype, rbuf, rcount, rtype, comm);
  return coll::alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm, nullptr);
}

int TEMPI_WRAPPER(MPI_Ialltoall)(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                                 MPI_Datatype rtype, MPI_Comm comm, MPI_Request *request) {
  engine().poll();
  if (!ours(sbuf, rbuf)) return TEMPI_NEXT(MPI_Ialltoall)(sbuf, scount, stype, rbuf, rcount, rtype, comm, request);
  return coll::alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm, request);
}

int TEMPI_WRAPPER(MPI_Alltoallv)(const void *sbuf, const int scounts[], const int sdispls[], MPI_Datatype stype,
                                 void *rbuf, const int rcounts[], const int rdispls[], MPI_Datatype rtype,
                                 MPI_Comm comm) {
  before_blocking(comm);
  if (!ours_exchange(sbuf, rbuf, comm))
    return TEMPI_NEXT(MPI_Alltoallv)(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm);
  return coll::alltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm, nullptr);
}

int TEMPI_WRAPPER(MPI_Ialltoallv)(const void *sbuf, const int scounts[], const int sdispls[], MPI_Datatype stype,
                                  void *rbuf, const int rcounts[], const int rdispls[], MPI_Datatype rtype,
                                  MPI_Comm comm, MPI_Request *request) {
  engine().poll();
  if (!ours(sbuf, rbuf))
    return TEMPI_NEXT(MPI_Ialltoallv)(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm, request);
  return coll::alltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm, request);
}

int TEMPI_WRAPPER(MPI_Alltoallw)(const void *sbuf, const int scounts[], const int sdispls[],
                                 const MPI_Datatype stypes[], void *rbuf, const int rcounts[], const int rdispls[],
                                 const MPI_Datatype rtypes[], MPI_Comm comm) {
  before_blocking(comm);
  if (!ours_exchange(sbuf, rbuf, comm))
    return TEMPI_NEXT(MPI_Alltoallw)(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm);
  return coll::alltoallw(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm, nullptr);
}

int TEMPI_WRAPPER(MPI_Ialltoallw)(const void *sbuf, const int scounts[], const int sdispls[],
                                  const MPI_Datatype stypes[], void *rbuf, const int rcounts[], const int rdispls[],
                                  const MPI_Datatype rtypes[], MPI_Comm comm, MPI_Request *request) {
  engine().poll();
  if (!ours(sbuf, rbuf))
    return TEMPI_NEXT(MPI_Ialltoallw)(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm, request);
  return coll::alltoallw(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm, request);
}

int TEMPI_WRAPPER(MPI_Neighbor_allgather)(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                                          MPI_Datatype rtype, MPI_Comm comm) {
  before_blocking(comm);
  if (!ours_exchange(sbuf, rbuf, comm))
    return TEMPI_NEXT(MPI_Neighbor_allgather)(sbuf, scount, stype, rbuf, rcount, rtype, comm);
  return coll::neighbor_allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm, nullptr);
}

int TEMPI_WRAPPER(MPI_Ineighbor_allgather)(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                                           MPI_Datatype rtype, MPI_Comm comm, MPI_Request *request) {
  engine().poll();
  if (!ours(sbuf, rbuf))
    return TEMPI_NEXT(MPI_Ineighbor_allgather)(sbuf, scount, stype, rbuf, rcount, rtype, comm, request);
  return coll::neighbor_allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm, request);
}

int TEMPI_WRAPPER(MPI_Neighbor_allgatherv)(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                                           const int rcounts[], const int displs[], MPI_Datatype rtype, MPI_Comm comm) {
  before_blocking(comm);
  if (!ours_exchange(sbuf, rbuf, comm))
    return TEMPI_NEXT(MPI_Neighbor_allgatherv)(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm);
  return coll::neighbor_allgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm, nullptr);
}

int TEMPI_WRAPPER(MPI_Ineighbor_allgatherv)(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                                            const int rcounts[], const int displs[], MPI_Datatype rtype, MPI_Comm comm,
                                            MPI_Request *request) {
  engine().poll();
  if (!ours(sbuf, rbuf))
    return TEMPI_NEXT(MPI_Ineighbor_allgatherv)(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm, request);
  return coll::neighbor_allgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm, request);
}

int TEMPI_WRAPPER(MPI_Neighbor_alltoall)(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                                         MPI_Datatype rtype, MPI_Comm comm) {
  before_blocking(comm);
  if (!ours_exchange(sbuf, rbuf, comm))
    return TEMPI_NEXT(MPI_Neighbor_alltoall)(sbuf, scount, stype, rbuf, rcount, rtype, comm);
  return coll::neighbor_alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm, nullptr);
}

int TEMPI_WRAPPER(MPI_Ineighbor_alltoall)(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                                          MPI_Datatype rtype, MPI_Comm comm, MPI_Request *request) {
  engine().poll();
  if (!ours(sbuf, rbuf))
    return TEMPI_NEXT(MPI_Ineighbor_alltoall)(sbuf, scount, stype, rbuf, rcount, rtype, comm, request);
  return coll::neighbor_alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm, request);
}

int TEMPI_WRAPPER(MPI_Neighbor_alltoallv)(const void *sbuf, const int scounts[], const int sdispls[],
                                          MPI_Datatype stype, void *rbuf, const int rcounts[], const int rdispls[],
                                          MPI_Datatype rtype, MPI_Comm comm) {
  before_blocking(comm);
  if (!ours_exchange(sbuf, rbuf, comm))
    return TEMPI_NEXT(MPI_Neighbor_alltoallv)(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm);
  return coll::neighbor_alltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm, nullptr);
}

int TEMPI_WRAPPER(MPI_Ineighbor_alltoallv)(const void *sbuf, const int scounts[], const int sdispls[],
                                           MPI_Datatype stype, void *rbuf, const int rcounts[], const int rdispls[],
                                           MPI_Datatype rtype, MPI_Comm comm, MPI_Request *request) {
  engine().poll();
  if (!ours(sbuf, rbuf))
    return TEMPI_NEXT(MPI_Ineighbor_alltoallv)(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm,
                                               request);
  return coll::neighbor_alltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm, request);
}

int TEMPI_WRAPPER(MPI_Neighbor_alltoallw)(const void *sbuf, const int scounts[], const MPI_Aint sdispls[],
                                          const MPI_Datatype stypes[], void *rbuf, const int rcounts[],
                                          const MPI_Aint rdispls[], const MPI_Datatype rtypes[], MPI_Comm comm) {
  before_blocking(comm);
  if (!ours_exchange(sbuf, rbuf, comm))
    return TEMPI_NEXT(MPI_Neighbor_alltoallw)(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm);
  return coll::neighbor_alltoallw(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm, nullptr);
}

int TEMPI_WRAPPER(MPI_Ineighbor_alltoallw)(const void *sbuf, const int scounts[], const MPI_Aint sdispls[],
                                           const MPI_Datatype stypes[], void *rbuf, const int rcounts[],
                                           const MPI_Aint rdispls[], const MPI_Datatype rtypes[], MPI_Comm comm,
                                           MPI_Request *request) {
  engine().poll();
  if (!ours(sbuf, rbuf))
    return TEMPI_NEXT(MPI_Ineighbor_alltoallw)(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm,
                                               request);
  return coll::neighbor_alltoallw(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm, request);
}

int TEMPI_WRAPPER(MPI_Reduce)(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, int root,
                              MPI_Comm comm) {
  before_blocking(comm);
  if (!ours(sbuf, rbuf)) return TEMPI_NEXT(MPI_Reduce)(sbuf, rbuf, count, type, op, root, comm);
  return coll::reduce(sbuf, rbuf, count, type, op, root, comm, nullptr);
}

int TEMPI_WRAPPER(MPI_Ireduce)(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, int root,
                               MPI_Comm comm, MPI_Request *request) {
  engine().poll();
  if (!ours(sbuf, rbuf)) return TEMPI_NEXT(MPI_Ireduce)(sbuf, rbuf, count, type, op, root, comm, request);
  return coll::reduce(sbuf, rbuf, count, type, op, root, comm, request);
}

int TEMPI_WRAPPER(MPI_Allreduce)(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  before_blocking(comm);
  if (!ours(sbuf, rbuf)) return TEMPI_NEXT(MPI_Allreduce)(sbuf, rbuf, count, type, op, comm);
  return coll::allreduce(sbuf, rbuf, count, type, op, comm, nullptr);
}

int TEMPI_WRAPPER(MPI_Iallreduce)(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                                  MPI_Request *request) {
  engine().poll();
  if (!ours(sbuf, rbuf)) return TEMPI_NEXT(MPI_Iallreduce)(sbuf, rbuf, count, type, op, comm, request);
  return coll::allreduce(sbuf, rbuf, count, type, op, comm, request);
}

int TEMPI_WRAPPER(MPI_Reduce_scatter)(const void *sbuf, void *rbuf, const int rcounts[], MPI_Datatype type, MPI_Op op,
                                      MPI_Comm comm) {
  before_blocking(comm);
  if (!ours(sbuf, rbuf)) return TEMPI_NEXT(MPI_Reduce_scatter)(sbuf, rbuf, rcounts, type, op, comm);
  return coll::reduce_scatter(sbuf, rbuf, rcounts, type, op, comm, nullptr);
}

int TEMPI_WRAPPER(MPI_Ireduce_scatter)(const void *sbuf, void *rbuf, const int rcounts[], MPI_Datatype type, MPI_Op op,
                                       MPI_Comm comm, MPI_Request *request) {
  engine().poll();
  if (!ours(sbuf, rbuf)) return TEMPI_NEXT(MPI_Ireduce_scatter)(sbuf, rbuf, rcounts, type, op, comm, request);
  return coll::reduce_scatter(sbuf, rbuf, rcounts, type, op, comm, request);
}

int TEMPI_WRAPPER(MPI_Reduce_scatter_block)(const void *sbuf, void *rbuf, int rcount, MPI_Datatype type, MPI_Op op,
                                            MPI_Comm comm) {
  before_blocking(comm);
  if (!ours(sbuf, rbuf)) return TEMPI_NEXT(MPI_Reduce_scatter_block)(sbuf, rbuf, rcount, type, op, comm);
  return coll::reduce_scatter_block(sbuf, rbuf, rcount, type, op, comm, nullptr);
}

int TEMPI_WRAPPER(MPI_Ireduce_scatter_block)(const void *sbuf, void *rbuf, int rcount, MPI_Datatype type, MPI_Op op,
                                             MPI_Comm comm, MPI_Request *request) {
  engine().poll();
  if (!ours(sbuf, rbuf)) return TEMPI_NEXT(MPI_Ireduce_scatter_block)(sbuf, rbuf, rcount, type, op, comm, request);
  return coll::reduce_scatter_block(sbuf, rbuf, rcount, type, op, comm, request);
}

int TEMPI_WRAPPER(MPI_Scan)(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  before_blocking(comm);
  if (!ours(sbuf, rbuf)) return TEMPI_NEXT(MPI_Scan)(sbuf, rbuf, count, type, op, comm);
  return coll::scan(sbuf, rbuf, count, type, op, comm, nullptr);
}

int TEMPI_WRAPPER(MPI_Iscan)(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                             MPI_Request *request) {
  engine().poll();
  if (!ours(sbuf, rbuf)) return TEMPI_NEXT(MPI_Iscan)(sbuf, rbuf, count, type, op, comm, request);
  return coll::scan(sbuf, rbuf, count, type, op, comm, request);
}

int TEMPI_WRAPPER(MPI_Exscan)(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  before_blocking(comm);
  if (!ours(sbuf, rbuf)) return TEMPI_NEXT(MPI_Exscan)(sbuf, rbuf, count, type, op, comm);
  return coll::exscan(sbuf, rbuf, count, type, op, comm, nullptr);
}

int TEMPI_WRAPPER(MPI_Iexscan)(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                               MPI_Request *request) {
  engine().poll();
  if (!ours(sbuf, rbuf)) return TEMPI_NEXT(MPI_Iexscan)(sbuf, rbuf, count, type, op, comm, request);
  return coll::exscan(sbuf, rbuf, count, type, op, comm, request);
}

// Local, but the library computes on the buffers: staged like the reductions.
int TEMPI_WRAPPER(MPI_Reduce_local)(const void *inbuf, void *inoutbuf, int count, MPI_Datatype type, MPI_Op op) {
  if (!ours(inbuf, inoutbuf)) return TEMPI_NEXT(MPI_Reduce_local)(inbuf, inoutbuf, count, type, op);
  return coll::reduce_local(inbuf, inoutbuf, count, type, op);
}

// MPI-4 persistent collectives (MPI_X_init), where the library has them: TEMPI plans the
// GPU buffers and takes staging once; every MPI_Start packs the send blocks' current data
// and issues the library's nonblocking collective on the staging (coll/persistent_coll.hpp).
// Host buffers too: a persistent collective matches only persistent collectives, so every
// rank of one must make the same kind of call, and a rank cannot know whether its peers'
// buffers are GPU memory. `info` carries hints for the library's own persistent call, which TEMPI
// does not make. Zero-copy pairs are agreed at init (ZeroCopyPersistent, zero_copy.hpp).
// The application may free the communicator and datatypes after init: the request holds
// them for its starts (Issue::Init, HeldHandles in coll/persistent_coll.hpp).
#if MPI_VERSION >= 4

int TEMPI_WRAPPER(MPI_Bcast_init)(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm, MPI_Info info,
                                  MPI_Request *request) {
  flush_sends();  // an init may wait for its peers: sends queued before it go first
  if (!active() || library_judges(comm, false))
    return TEMPI_NEXT(MPI_Bcast_init)(buf, count, type, root, comm, info, request);
  Issue::Init init(comm, {type});
  return persistent_made(coll::bcast(buf, count, type, root, comm, Issue::persistent_init(request, &init)), init, comm,
                         "MPI_Bcast_init", request);
}

int TEMPI_WRAPPER(MPI_Gather_init)(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                                   MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Info info, MPI_Request *request) {
  flush_sends();  // an init may wait for its peers: sends queued before it go first
  if (!active() || library_judges(comm, false))
    return TEMPI_NEXT(MPI_Gather_init)(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, info, request);
  Issue::Init init(comm, {stype, rtype});
  return persistent_made(
      coll::gather(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, Issue::persistent_init(request, &init)), init,
      comm, "MPI_Gather_init", request);
}

int TEMPI_WRAPPER(MPI_Gatherv_init)(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, const int rcounts[],
                                    const int displs[], MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Info info,
                                    MPI_Request *request) {
  flush_sends();  // an init may wait for its peers: sends queued before it go first
  if (!active() || library_judges(comm, false))
    return TEMPI_NEXT(MPI_Gatherv_init)(sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm, info, request);
  Issue::Init init(comm, {stype, rtype});
  return persistent_made(coll::gatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm,
                                       Issue::persistent_init(request, &init)),
                         init, comm, "MPI_Gatherv_init", request);
}

int TEMPI_WRAPPER(MPI_Scatter_init)(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                                    MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Info info, MPI_Request *request) {
  flush_sends();  // an init may wait for its peers: sends queued before it go first
  if (!active() || library_judges(comm, false))
    return TEMPI_NEXT(MPI_Scatter_init)(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, info, request);
  Issue::Init init(comm, {stype, rtype});
  return persistent_made(
      coll::scatter(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, Issue::persistent_init(request, &init)), init,
      comm, "MPI_Scatter_init", request);
}

int TEMPI_WRAPPER(MPI_Scatterv_init)(const void *sbuf, const int scounts[], const int displs[], MPI_Datatype stype,
                                     void *rbuf, int rcount, MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Info info,
                                     MPI_Request *request) {
  flush_sends();  // an init may wait for its peers: sends queued before it go first
  if (!active() || library_judges(comm, false))
    return TEMPI_NEXT(MPI_Scatterv_init)(sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm, info, request);
  Issue::Init init(comm, {stype, rtype});
  return persistent_made(coll::scatterv(sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm,
                                        Issue::persistent_init(request, &init)),
                         init, comm, "MPI_Scatterv_init", request);
}

int TEMPI_WRAPPER(MPI_Allgather_init)(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                                      MPI_Datatype rtype, MPI_Comm comm, MPI_Info info, MPI_Request *request) {
  flush_sends();  // an init may wait for its peers: sends queued before it go first
  if (!active() || library_judges(comm, false))
    return TEMPI_NEXT(MPI_Allgather_init)(sbuf, scount, stype, rbuf, rcount, rtype, comm, info, request);
  Issue::Init init(comm, {stype, rtype});
  return persistent_made(
      coll::allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm, Issue::persistent_init(request, &init)), init,
      comm, "MPI_Allgather_init", request);
}

int TEMPI_WRAPPER(MPI_Allgatherv_init)(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                                       const int rcounts[], const int displs[], MPI_Datatype rtype, MPI_Comm comm,
                                       MPI_Info info, MPI_Request *request) {
  flush_sends();  // an init may wait for its peers: sends queued before it go first
  if (!active() || library_judges(comm, false))
    return TEMPI_NEXT(MPI_Allgatherv_init)(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm, info, request);
  Issue::Init init(comm, {stype, rtype});
  return persistent_made(
      coll::allgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm, Issue::persistent_init(request, &init)),
      init, comm, "MPI_Allgatherv_init", request);
}

int TEMPI_WRAPPER(MPI_Alltoall_init)(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                                     MPI_Datatype rtype, MPI_Comm comm, MPI_Info info, MPI_Request *request) {
  flush_sends();  // an init may wait for its peers: sends queued before it go first
  if (!active() || library_judges(comm, false))
    return TEMPI_NEXT(MPI_Alltoall_init)(sbuf, scount, stype, rbuf, rcount, rtype, comm, info, request);
  Issue::Init init(comm, {stype, rtype});
  return persistent_made(
      coll::alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm, Issue::persistent_init(request, &init)), init,
      comm, "MPI_Alltoall_init", request);
}

int TEMPI_WRAPPER(MPI_Alltoallv_init)(const void *sbuf, const int scounts[], const int sdispls[], MPI_Datatype stype,
                                      void *rbuf, const int rcounts[], const int rdispls[], MPI_Datatype rtype,
                                      MPI_Comm comm, MPI_Info info, MPI_Request *request) {
  flush_sends();  // an init may wait for its peers: sends queued before it go first
  if (!active() || library_judges(comm, false))
    return TEMPI_NEXT(MPI_Alltoallv_init)(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm, info,
                                          request);
  Issue::Init init(comm, {stype, rtype});
  return persistent_made(coll::alltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm,
                                         Issue::persistent_init(request, &init)),
                         init, comm, "MPI_Alltoallv_init", request);
}

int TEMPI_WRAPPER(MPI_Alltoallw_init)(const void *sbuf, const int scounts[], const int sdispls[],
                                      const MPI_Datatype stypes[], void *rbuf, const int rcounts[], const int rdispls[],
                                      const MPI_Datatype rtypes[], MPI_Comm comm, MPI_Info info, MPI_Request *request) {
  flush_sends();  // an init may wait for its peers: sends queued before it go first
  if (!active() || library_judges(comm, false))
    return TEMPI_NEXT(MPI_Alltoallw_init)(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm, info,
                                          request);
  Issue::Init init(comm, block_types(comm, false, stypes, rtypes, sbuf == MPI_IN_PLACE));
  return persistent_made(coll::alltoallw(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm,
                                         Issue::persistent_init(request, &init)),
                         init, comm, "MPI_Alltoallw_init", request);
}

int TEMPI_WRAPPER(MPI_Neighbor_allgather_init)(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                                               MPI_Datatype rtype, MPI_Comm comm, MPI_Info info, MPI_Request *request) {
  flush_sends();  // an init may wait for its peers: sends queued before it go first
  if (!active() || library_judges(comm, true))
    return TEMPI_NEXT(MPI_Neighbor_allgather_init)(sbuf, scount, stype, rbuf, rcount, rtype, comm, info, request);
  Issue::Init init(comm, {stype, rtype});
  return persistent_made(
      coll::neighbor_allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm, Issue::persistent_init(request, &init)),
      init, comm, "MPI_Neighbor_allgather_init", request);
}

int TEMPI_WRAPPER(MPI_Neighbor_allgatherv_init)(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                                                const int rcounts[], const int displs[], MPI_Datatype rtype,
                                                MPI_Comm comm, MPI_Info info, MPI_Request *request) {
  flush_sends();  // an init may wait for its peers: sends queued before it go first
  if (!active() || library_judges(comm, true))
    return TEMPI_NEXT(MPI_Neighbor_allgatherv_init)(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm, info,
                                                    request);
  Issue::Init init(comm, {stype, rtype});
  return persistent_made(coll::neighbor_allgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm,
                                                   Issue::persistent_init(request, &init)),
                         init, comm, "MPI_Neighbor_allgatherv_init", request);
}

int TEMPI_WRAPPER(MPI_Neighbor_alltoall_init)(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                                              MPI_Datatype rtype, MPI_Comm comm, MPI_Info info, MPI_Request *request) {
  flush_sends();  // an init may wait for its peers: sends queued before it go first
  if (!active() || library_judges(comm, true))
    return TEMPI_NEXT(MPI_Neighbor_alltoall_init)(sbuf, scount, stype, rbuf, rcount, rtype, comm, info, request);
  Issue::Init init(comm, {stype, rtype});
  return persistent_made(
      coll::neighbor_alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm, Issue::persistent_init(request, &init)),
      init, comm, "MPI_Neighbor_alltoall_init", request);
}

int TEMPI_WRAPPER(MPI_Neighbor_alltoallv_init)(const void *sbuf, const int scounts[], const int sdispls[],
                                               MPI_Datatype stype, void *rbuf, const int rcounts[], const int rdispls[],
                                               MPI_Datatype rtype, MPI_Comm comm, MPI_Info info, MPI_Request *request) {
  flush_sends();  // an init may wait for its peers: sends queued before it go first
  if (!active() || library_judges(comm, true))
    return TEMPI_NEXT(MPI_Neighbor_alltoallv_init)(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm,
                                                   info, request);
  Issue::Init init(comm, {stype, rtype});
  return persistent_made(coll::neighbor_alltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm,
                                                  Issue::persistent_init(request, &init)),
                         init, comm, "MPI_Neighbor_alltoallv_init", request);
}

int TEMPI_WRAPPER(MPI_Neighbor_alltoallw_init)(const void *sbuf, const int scounts[], const MPI_Aint sdispls[],
                                               const MPI_Datatype stypes[], void *rbuf, const int rcounts[],
                                               const MPI_Aint rdispls[], const MPI_Datatype rtypes[], MPI_Comm comm,
                                               MPI_Info info, MPI_Request *request) {
  flush_sends();  // an init may wait for its peers: sends queued before it go first
  if (!active() || library_judges(comm, true))
    return TEMPI_NEXT(MPI_Neighbor_alltoallw_init)(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm,
                                                   info, request);
  Issue::Init init(comm, block_types(comm, true, stypes, rtypes, false));
  return persistent_made(coll::neighbor_alltoallw(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm,
                                                  Issue::persistent_init(request, &init)),
                         init, comm, "MPI_Neighbor_alltoallw_init", request);
}

int TEMPI_WRAPPER(MPI_Reduce_init)(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, int root,
                                   MPI_Comm comm, MPI_Info info, MPI_Request *request) {
  flush_sends();  // an init may wait for its peers: sends queued before it go first
  if (!active() || library_judges(comm, false))
    return TEMPI_NEXT(MPI_Reduce_init)(sbuf, rbuf, count, type, op, root, comm, info, request);
  Issue::Init init(comm, {type});
  return persistent_made(coll::reduce(sbuf, rbuf, count, type, op, root, comm, Issue::persistent_init(request, &init)),
                         init, comm, "MPI_Reduce_init", request);
}

int TEMPI_WRAPPER(MPI_Allreduce_init)(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,
                                      MPI_Comm comm, MPI_Info info, MPI_Request *request) {
  flush_sends();  // an init may wait for its peers: sends queued before it go first
  if (!active() || library_judges(comm, false))
    return TEMPI_NEXT(MPI_Allreduce_init)(sbuf, rbuf, count, type, op, comm, info, request);
  Issue::Init init(comm, {type});
  return persistent_made(coll::allreduce(sbuf, rbuf, count, type, op, comm, Issue::persistent_init(request, &init)),
                         init, comm, "MPI_Allreduce_init", request);
}

int TEMPI_WRAPPER(MPI_Reduce_scatter_init)(const void *sbuf, void *rbuf, const int rcounts[], MPI_Datatype type,
                                           MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request *request) {
  flush_sends();  // an init may wait for its peers: sends queued before it go first
  if (!active() || library_judges(comm, false))
    return TEMPI_NEXT(MPI_Reduce_scatter_init)(sbuf, rbuf, rcounts, type, op, comm, info, request);
  Issue::Init init(comm, {type});
  return persistent_made(
      coll::reduce_scatter(sbuf, rbuf, rcounts, type, op, comm, Issue::persistent_init(request, &init)), init, comm,
      "MPI_Reduce_scatter_init", request);
}

int TEMPI_WRAPPER(MPI_Reduce_scatter_block_init)(const void *sbuf, void *rbuf, int rcount, MPI_Datatype type, MPI_Op op,
                                                 MPI_Comm comm, MPI_Info info, MPI_Request *request) {
  flush_sends();  // an init may wait for its peers: sends queued before it go first
  if (!active() || library_judges(comm, false))
    return TEMPI_NEXT(MPI_Reduce_scatter_block_init)(sbuf, rbuf, rcount, type, op, comm, info, request);
  Issue::Init init(comm, {type});
  return persistent_made(
      coll::reduce_scatter_block(sbuf, rbuf, rcount, type, op, comm, Issue::persistent_init(request, &init)), init,
      comm, "MPI_Reduce_scatter_block_init", request);
}

int TEMPI_WRAPPER(MPI_Scan_init)(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                                 MPI_Info info, MPI_Request *request) {
  flush_sends();  // an init may wait for its peers: sends queued before it go first
  if (!active() || library_judges(comm, false))
    return TEMPI_NEXT(MPI_Scan_init)(sbuf, rbuf, count, type, op, comm, info, request);
  Issue::Init init(comm, {type});
  return persistent_made(coll::scan(sbuf, rbuf, count, type, op, comm, Issue::persistent_init(request, &init)), init,
                         comm, "MPI_Scan_init", request);
}

int TEMPI_WRAPPER(MPI_Exscan_init)(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                                   MPI_Info info, MPI_Request *request) {
  flush_sends();  // an init may wait for its peers: sends queued before it go first
  if (!active() || library_judges(comm, false))
    return TEMPI_NEXT(MPI_Exscan_init)(sbuf, rbuf, count, type, op, comm, info, request);
  Issue::Init init(comm, {type});
  return persistent_made(coll::exscan(sbuf, rbuf, count, type, op, comm, Issue::persistent_init(request, &init)), init,
                         comm, "MPI_Exscan_init", request);
}
#endif  // MPI_VERSION >= 4

}  // extern "C"
