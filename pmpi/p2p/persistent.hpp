// Persistent point-to-point requests on GPU buffers (MPI_Send_init, MPI_Ssend_init,
// MPI_Bsend_init, MPI_Rsend_init, MPI_Recv_init; MPI_Start, MPI_Startall), and the start of
// persistent collectives through CollectiveStart (PersistentOp::collective()).
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

#include <memory>
#include <vector>

#include "p2p/messages.hpp"

namespace tempi {

// What each MPI_Start of a persistent collective does (coll/persistent_coll.hpp makes it):
// the start of MPI_Startall runs it without knowing collectives.
class CollectiveStart {
 public:
  virtual ~CollectiveStart() = default;
  // Packs the send blocks' current data and issues the library's nonblocking collective
  // (and the start's zero-copy moves); `library` gets the request that completion calls
  // wait for in the handle's place. Returns an MPI error code.
  virtual int start(MPI_Request *library) = 0;
};

struct PersistentOp {
  // A persistent collective (MPI-4 MPI_X_init, coll/persistent_coll.hpp): the application's
  // handle is a generalized request of TEMPI's that never completes while the request lives
  // (persistent_handle), each start runs `starts`, and completion calls wait for the
  // start's request (`library`) in the handle's place: the library's nonblocking
  // collective, or, with zero-copy pairs, a generalized request that completes when it and
  // the start's zero-copy moves have.
  std::shared_ptr<CollectiveStart> starts;
  MPI_Request library = MPI_REQUEST_NULL;
  std::shared_ptr<const void> arrays;  // what a start's library call reads besides the application's arguments
  bool collective() const { return bool(starts); }

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
