// Collectives on GPU buffers (docs/design.md, "Collectives and persistent requests"). One application collective
// stays one collective of the MPI library on the application's communicator:
//
//   1. each buffer argument of this rank that holds GPU data becomes a Side: its blocks
//      (one per peer) are packed into one staging buffer, all of them in one
//      Backend::pack_async batch and one wait;
//   2. the library runs the same collective on the packed bytes (MPI_BYTE counts and
//      displacements in bytes; MPI_BYTE types for the w-variants);
//   3. the blocks of the receive side are unpacked in one batch (one unpack_async, one wait).
//
// The decision is per buffer and per rank: a rank whose buffer is host memory passes its
// own arguments, and the packed bytes match any user type of the same signature, so ranks
// may mix GPU and host buffers and send and receive types may differ. MPI_IN_PLACE stays
// MPI_IN_PLACE (MPI requires it at all ranks for some calls, and a library may choose its
// algorithm by it). Where the library must see typed data (reductions), or TEMPI cannot
// plan a type, the library gets a host copy of the buffer's whole region instead
// (`Region`; only the blocks go back where TEMPI can plan them), so no GPU pointer
// reaches it — except that a blocking non-reduction collective on a CUDA-aware library
// gets the application's buffer as it is. Reductions
// and nonblocking collectives never get GPU memory: Open MPI 4.1's CUDA-aware build crashes
// in nonblocking reductions and MPI_Reduce_local and returns wrong bytes from nonblocking
// collectives on device buffers.
//
// Nonblocking collectives pack at the call, start the library's nonblocking collective on
// the packed bytes and record a CollectiveOp in the request table: the completion call
// that completes the request unpacks the receive blocks (wrap_completion.cpp), and the
// op keeps staging, wire arrays and wire types alive until then.
//
// The rooms of coll/: block.hpp (blocks and their plans), side.hpp (one buffer argument),
// wire.hpp (what the library gets), collective_op.hpp (the steps around the library's
// call), issue.hpp (blocking, nonblocking, persistent), exchange.hpp (the one exchange
// path of the all-to-alls), persistent_coll.hpp (persistent collectives); the handlers are
// in rooted.cpp, all_to_all.cpp and reductions.cpp.
#pragma once

#include <mpi.h>

#include "base/block.hpp"
#include "coll/collective_op.hpp"
#include "coll/issue.hpp"
#include "coll/persistent_coll.hpp"
#include "coll/side.hpp"

namespace tempi {

// The handlers (see Issue). Each runs the library's call exactly once.
namespace coll {

int bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm, Issue how);
int gather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype, int root,
           MPI_Comm comm, Issue how);
int gatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, const int rcounts[], const int displs[],
            MPI_Datatype rtype, int root, MPI_Comm comm, Issue how);
int scatter(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype, int root,
            MPI_Comm comm, Issue how);
int scatterv(const void *sbuf, const int scounts[], const int displs[], MPI_Datatype stype, void *rbuf, int rcount,
             MPI_Datatype rtype, int root, MPI_Comm comm, Issue how);
int allgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
              MPI_Comm comm, Issue how);
int allgatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, const int rcounts[], const int displs[],
               MPI_Datatype rtype, MPI_Comm comm, Issue how);
int alltoall(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
             MPI_Comm comm, Issue how);
int alltoallv(const void *sbuf, const int scounts[], const int sdispls[], MPI_Datatype stype, void *rbuf,
              const int rcounts[], const int rdispls[], MPI_Datatype rtype, MPI_Comm comm, Issue how);
int alltoallw(const void *sbuf, const int scounts[], const int sdispls[], const MPI_Datatype stypes[], void *rbuf,
              const int rcounts[], const int rdispls[], const MPI_Datatype rtypes[], MPI_Comm comm,
              Issue how);
int neighbor_allgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
                       MPI_Comm comm, Issue how);
int neighbor_allgatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, const int rcounts[],
                        const int displs[], MPI_Datatype rtype, MPI_Comm comm, Issue how);
int neighbor_alltoall(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
                      MPI_Comm comm, Issue how);
int neighbor_alltoallv(const void *sbuf, const int scounts[], const int sdispls[], MPI_Datatype stype, void *rbuf,
                       const int rcounts[], const int rdispls[], MPI_Datatype rtype, MPI_Comm comm,
                       Issue how);
int neighbor_alltoallw(const void *sbuf, const int scounts[], const MPI_Aint sdispls[], const MPI_Datatype stypes[],
                       void *rbuf, const int rcounts[], const MPI_Aint rdispls[], const MPI_Datatype rtypes[],
                       MPI_Comm comm, Issue how);

// Reductions: staged through host copies, on every library (see above).
int reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm,
           Issue how);
int allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
              Issue how);
int reduce_scatter(const void *sbuf, void *rbuf, const int rcounts[], MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                   Issue how);
int reduce_scatter_block(const void *sbuf, void *rbuf, int rcount, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                         Issue how);
int scan(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm, Issue how);
int exscan(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
           Issue how);
int reduce_local(const void *inbuf, void *inoutbuf, int count, MPI_Datatype type, MPI_Op op);

}  // namespace coll

}  // namespace tempi

