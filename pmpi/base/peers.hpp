// Where the peer of a point-to-point message runs (core/profile.hpp's PeerClass: the same
// GPU, another GPU of this node, another node), so that the model predicts the device
// method with the library's measured time for that placement (docs/model.md, "The model"
// and "The peer of a message").
//
// Knowing it takes communication, and a point-to-point call must never start any: the
// peer may not be in an MPI call at all. So TEMPI learns the placement of every rank of
// MPI_COMM_WORLD once, inside the first blocking collective on MPI_COMM_WORLD that carries
// a buffer (MPI_Bcast, MPI_Allreduce, MPI_Gather, ...: pmpi/api/wrap_coll.cpp). Every rank
// makes that call, and makes it as its first such call, so every rank takes part in the
// exchange at the same point of its collective sequence; a blocking collective may
// synchronize (the MPI standard lets any of them), so the exchange adds no wait a correct
// program could trip over. Nonblocking collectives never learn (their caller may go on to
// wait for a peer that has not reached the collective yet). Neither do MPI_Barrier and the
// communicator constructors, although they are blocking collectives too: on MPICH's
// mpi_f08 and Open MPI's Fortran bindings those reach the library through TEMPI's Fortran
// entry points, not its C wrappers (wrap_fortran_*.cpp), and a program of C and Fortran
// ranks would then exchange on some ranks only. Every binding reaches the C wrappers of
// the collectives with buffers.
//
// Until then, and for peers TEMPI cannot name (MPI_ANY_SOURCE, processes outside
// MPI_COMM_WORLD), the class is Unknown: the model uses the placement the profile was
// measured in, what it did before it knew peers.
#pragma once

#include <mpi.h>

#include "profile.hpp"

namespace tempi {

// Called by every blocking collective with buffers on `comm`, after its deferred sends
// are posted: the first on MPI_COMM_WORLD exchanges the world's placement (collective on
// MPI_COMM_WORLD); every later call costs a compare and a load.
void learn_peers_at_collective(MPI_Comm comm);

// The class of rank `peer` of `comm` (of its remote group on an intercommunicator)
// relative to this process. Local: no communication. The first call for a communicator
// maps its ranks to MPI_COMM_WORLD's (group calls, which are local) and keeps the map
// until the communicator is freed; after that a call costs a few loads, no lock.
PeerClass peer_class(MPI_Comm comm, int peer);
// Moves on whenever a communicator is freed through MPI_Comm_free or MPI_Comm_disconnect
// (comm_freed), or the library drops one that peer_class was asked about: its handle may
// come back with another group.
uint64_t peers_generation();
void comm_freed();

}  // namespace tempi
