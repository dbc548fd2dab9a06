// Persistent collectives (MPI-4 MPI_X_init; docs/design.md, "Collectives and persistent
// requests"): what the request keeps from its init and what each MPI_Start does. The
// application's handle is a generalized request of TEMPI's that never completes while the
// request lives (p2p/persistent.hpp, persistent_handle); the request table tracks it with
// the op's CollectiveOp and a PersistentOp whose `starts` is this file's: each start packs
// the send blocks' current data, issues the library's nonblocking collective on the staging
// (Issue::Init::restart) and, where zero-copy pairs were agreed at init, their moves; the
// completion calls wait for PersistentOp::library in the handle's place. The library's own
// persistent collectives are not used: MPICH 4.0.2's returned wrong bytes on host buffers
// (a root's own block copied at init, not at start; wrong data at a second start of
// MPI_Allgather).
#pragma once

#include <mpi.h>

#include <memory>
#include <vector>

#include "coll/collective_op.hpp"
#include "coll/issue.hpp"

namespace tempi {

struct Pending;

// The communicator and derived datatypes that every start of a persistent collective
// names again (each start issues a new library call with them). MPI lets the application
// free them once the request exists (MPI_Comm_free and MPI_Type_free only mark them for
// deallocation), and the library may then give their handles to new objects. TEMPI holds
// them as the library holds those of its own persistent requests: with an inactive
// persistent receive of the library's on each, never started, freed with TEMPI's request.
// From rank 0 rather than MPI_PROC_NULL: Open MPI's requests to MPI_PROC_NULL hold nothing.
class HeldHandles {
 public:
  HeldHandles(MPI_Comm comm, const std::vector<MPI_Datatype> &types);
  ~HeldHandles();
  HeldHandles(const HeldHandles &) = delete;
  HeldHandles &operator=(const HeldHandles &) = delete;

 private:
  std::vector<MPI_Request> holds_;
};

// The datatypes of a w-variant's arrays, as many as the call has blocks on each side (an
// all-to-all's peers, or a neighbourhood's destinations and sources); none of an array
// that is null or, with MPI_IN_PLACE, ignored.
std::vector<MPI_Datatype> block_types(MPI_Comm comm, bool neighbourhood, const MPI_Datatype stypes[],
                                      const MPI_Datatype rtypes[], bool in_place);

// After a handler ran a persistent init that returned `err`: makes the request where the
// handler did not. Returns an MPI error code.
int persistent_made(int err, Issue::Init &init, MPI_Comm comm, const char *call, MPI_Request *request);

namespace coll {

// conclude()'s part for a persistent init: the request's handle made in `*request`, and
// `p` given the PersistentOp whose starts run `op` with what `init` kept (init.made set).
// Returns an MPI error code.
int keep_persistent(const std::shared_ptr<CollectiveOp> &op, Issue::Init &init, MPI_Request *request, Pending &p);

}  // namespace coll

}  // namespace tempi
