// Persistent collectives: what the request keeps and what each start does (persistent_coll.hpp).
#include "coll/persistent_coll.hpp"

#include <algorithm>
#include <utility>

#include "base/errors.hpp"
#include "base/next.hpp"
#include "p2p/requests.hpp"
#include "base/validate.hpp"
#include "coll/topology.hpp"
#include "p2p/persistent.hpp"
#include "phases.hpp"
#include "zero_copy/zero_copy.hpp"

namespace tempi {

namespace {

// Predefined types need no holding: they are never freed.
bool derived(MPI_Datatype type) {
  int integers = 0, addresses = 0, types = 0, combiner = MPI_COMBINER_NAMED;
  return type != MPI_DATATYPE_NULL && PMPI_Type_get_envelope(type, &integers, &addresses, &types, &combiner) ==
                                          MPI_SUCCESS && combiner != MPI_COMBINER_NAMED;
}

// Every start of one persistent collective (p2p/persistent.hpp, CollectiveStart).
class Starts final : public CollectiveStart {
 public:
  Starts(std::shared_ptr<CollectiveOp> op, Issue::Init &init)
      : op_(std::move(op)),
        restart_(std::move(init.restart)),
        zero_copy_(std::move(init.zero_copy)),
        held_(std::move(init.held)) {}

  int start(MPI_Request *library) override {
    if (const int err = start_collective(*op_)) return err;
    if (!zero_copy_) return library_start(library, true);
    // Zero-copy pairs: peers may read from here on; the application's completion calls
    // wait for a request that covers those moves and the library's call.
    if (const int err = zero_copy_->begin()) return err;
    MPI_Request issued = MPI_REQUEST_NULL;
    {
      const PhaseTimer timed(Phase::LibraryStart);
      if (const int err = library_start(&issued, false)) return err;
    }
    const PhaseTimer gating(Phase::ZeroCopyGate);
    return zero_copy_->gate(issued, library);
  }

 private:
  // The library's part of a start: none where no rank gives it data (the init's library
  // round agreed on that at every rank: coll/exchange.cpp, step 7). Completion calls then
  // wait for the zero-copy gate's request or, without zero-copy moves here either
  // (`complete`), for a request that is complete already: an active request's completion must
  // be reported by the call that finds it (MPI_Waitany), which the null request is not.
  int library_start(MPI_Request *library, bool complete) {
    if (restart_) return restart_(library);
    *library = MPI_REQUEST_NULL;
    if (!complete) return MPI_SUCCESS;
    if (const int err = PMPI_Grequest_start(empty_status, no_free, no_cancel, nullptr, library))
      return raise_error(op_->comm, err, "%s: cannot make the start's request", op_->call);
    return PMPI_Grequest_complete(*library);
  }
  static int empty_status(void *, MPI_Status *status) {
    PMPI_Status_set_elements(status, MPI_BYTE, 0);
    PMPI_Status_set_cancelled(status, 0);
    status->MPI_SOURCE = MPI_UNDEFINED;
    status->MPI_TAG = MPI_UNDEFINED;
    return MPI_SUCCESS;
  }
  static int no_free(void *) { return MPI_SUCCESS; }
  static int no_cancel(void *, int) { return MPI_SUCCESS; }

  std::shared_ptr<CollectiveOp> op_;
  std::function<int(MPI_Request *)> restart_;       // the library's nonblocking call on the staging (or none)
  std::shared_ptr<ZeroCopyPersistent> zero_copy_;  // the zero-copy pairs every start moves (or null)
  std::shared_ptr<HeldHandles> held_;               // the handles `restart_` names
};

}  // namespace

HeldHandles::HeldHandles(MPI_Comm comm, const std::vector<MPI_Datatype> &types) {
  // Each distinct type once; MPI_BYTE holds the communicator alone. A type the library
  // would refuse (not committed: only allowed for empty blocks) cannot be held; nothing
  // reads such a block.
  std::vector<MPI_Datatype> held{MPI_BYTE};
  for (MPI_Datatype t : types)
    if (derived(t) && std::find(held.begin(), held.end(), t) == held.end() && library_accepts(t)) held.push_back(t);
  for (MPI_Datatype t : held) {
    MPI_Request hold = MPI_REQUEST_NULL;
    if (next::MPI_Recv_init(nullptr, 0, t, 0, 0, comm, &hold) == MPI_SUCCESS) holds_.push_back(hold);
  }
}

HeldHandles::~HeldHandles() {
  int finalized = 0;
  PMPI_Finalized(&finalized);
  if (finalized) return;
  for (MPI_Request &hold : holds_) next::MPI_Request_free(&hold);
}

Issue::Init::Init(MPI_Comm comm, const std::vector<MPI_Datatype> &types)
    : held(std::make_shared<HeldHandles>(comm, types)) {}

std::vector<MPI_Datatype> block_types(MPI_Comm comm, bool neighbourhood, const MPI_Datatype stypes[],
                                      const MPI_Datatype rtypes[], bool in_place) {
  std::vector<int> sources, dests;
  coll::Group g;
  if (neighbourhood) {
    if (!coll::neighbourhood(comm, sources, dests)) return {};
  } else {
    if (!coll::group_of(comm, g)) return {};
    sources.resize(size_t(g.peers()));
    dests.resize(size_t(g.peers()));
  }
  std::vector<MPI_Datatype> types;
  if (stypes && !in_place) types.insert(types.end(), stypes, stypes + dests.size());
  if (rtypes) types.insert(types.end(), rtypes, rtypes + sources.size());
  return types;
}

int persistent_made(int err, Issue::Init &init, MPI_Comm comm, const char *call, MPI_Request *request) {
  if (err != MPI_SUCCESS || init.made) return err;
  auto op = std::make_shared<CollectiveOp>();  // no side of TEMPI's: the application's arguments
  op->call = call;
  op->comm = comm;
  return coll::conclude(std::move(op), MPI_SUCCESS, Issue::persistent_init(request, &init));
}

namespace coll {

int keep_persistent(const std::shared_ptr<CollectiveOp> &op, Issue::Init &init, MPI_Request *request, Pending &p) {
  auto persistent = std::make_shared<PersistentOp>();
  persistent->call = op->call;
  persistent->comm = op->comm;
  persistent->arrays = std::move(init.arrays);
  persistent->starts = std::make_shared<Starts>(op, init);
  if (const int e = persistent_handle(op->comm, op->call, request)) return e;
  init.made = true;
  p.persistent = std::move(persistent);
  return MPI_SUCCESS;
}

}  // namespace coll

}  // namespace tempi
