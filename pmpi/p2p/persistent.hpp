// Persistent point-to-point requests on GPU buffers (MPI_Send_init, MPI_Ssend_init,
// MPI_Bsend_init, MPI_Rsend_init, MPI_Recv_init; MPI_Start, MPI_Startall), and the start of
// persistent collectives (PersistentOp::collective()).
//
// At init TEMPI decides once what every start does: plan, method and staging (plan_send /
// prepare_recv, as for MPI_Send and MPI_Recv), and creates the MPI library's own persistent
// request on the staging (PMPI_Send_init(staging, bytes, MPI_PACKED, ...) or
// PMPI_Recv_init). That request is the handle the application gets; the request table
// tracks it with a PersistentOp until MPI_Request_free, across any number of starts.
//   start of a send     packs the buffer's current contents into the staging (the sends of
//                       one MPI_Startall in one Backend::pack_async batch), then PMPI_Start;
//   start of a receive  PMPI_Start (a type TEMPI cannot plan copies its region in first);
//   completion          a receive is unpacked by the completion call that reports it
//                       complete (with the other receives of the call, in one batch); the
//                       handle stays, inactive (wrap_completion.cpp);
//   MPI_Request_free    of an inactive request frees the library's request and the entry;
//                       of an active one, TEMPI finishes it at a later completion call.
// Host buffers, MPI_PROC_NULL and empty messages pass the user's arguments through.
#pragma once

#include <mpi.h>

#include <functional>
#include <memory>
#include <vector>

#include "p2p/messages.hpp"

namespace tempi {

class ZeroCopyPersistent;

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

struct PersistentOp {
  // A persistent collective (MPI-4 MPI_X_init on GPU buffers, collectives.hpp): the
  // application's handle is a generalized request of TEMPI's that never completes while the
  // request lives, each start issues the library's nonblocking collective on the staging
  // (`restart`), and completion calls wait for that request (`library`) in its place. The
  // library's own persistent collectives are not used: MPICH 4.0.2's returned wrong bytes on
  // host buffers (a root's own block copied at init, not at start; wrong data at a second
  // start of MPI_Allgather).
  std::function<int(MPI_Request *)> restart;
  MPI_Request library = MPI_REQUEST_NULL;
  // Zero-copy pairs between GPUs of the node (zero_copy.hpp), where there are: `library`
  // is then a generalized request that completes when the library's request of the start
  // and the start's zero-copy moves have.
  std::shared_ptr<ZeroCopyPersistent> zero_copy;
  std::shared_ptr<const void> arrays;  // what `restart` reads besides the application's arguments
  std::shared_ptr<HeldHandles> held;   // the handles `restart` names
  bool collective() const { return bool(restart); }

  bool is_send = false;
  bool active = false;  // started and not yet reported complete
  const char *call = "";
  MPI_Comm comm = MPI_COMM_NULL;
  int peer = MPI_PROC_NULL;
  // A send: how each start fills the staging (Pending::out) from `typed`.
  SendPlan plan;
  const void *typed = nullptr;
  int device = -1;
};

using SendInitFn = int (*)(const void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);
using RecvInitFn = int (*)(void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);

int persistent_send_init(SendInitFn next, const char *call, const void *buf, int count, MPI_Datatype type, int dest,
                         int tag, MPI_Comm comm, MPI_Request *request);
int persistent_recv_init(RecvInitFn next, const char *call, void *buf, int count, MPI_Datatype type, int source,
                         int tag, MPI_Comm comm, MPI_Request *request);
// MPI_Start (all = false, count 1) and MPI_Startall.
int persistent_start(int count, MPI_Request requests[], bool all);

// The application's handle of a persistent collective: a generalized request that stays
// incomplete until persistent_free_handle. Returns an MPI error code (raised on `comm`).
int persistent_handle(MPI_Comm comm, const char *call, MPI_Request *handle);
// MPI_Request_free of a persistent collective's handle: completes and frees it.
int persistent_free_handle(MPI_Request *handle);

}  // namespace tempi
