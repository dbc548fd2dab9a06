// How a collective handler issues the library's call (Issue): blocking, nonblocking, or an
// MPI-4 persistent init, and TEMPI_FORWARD, which issues the library's own form of a call
// as the application made it. Every handler of coll/ takes an Issue, so one handler serves
// the three forms of its call.
#pragma once

#include <mpi.h>

#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "base/next.hpp"

namespace tempi {

class ZeroCopyPersistent;
class HeldHandles;

// How a handler issues the library's call: blocking (`request` null), nonblocking, or an
// MPI-4 persistent init (`persistent`): then the handler plans and takes staging once and
// keeps, instead of calling the library, how to issue the library's nonblocking call on
// the staging (Init::restart), which every MPI_Start runs (coll/persistent_coll.hpp).
struct Issue {
  // A persistent init's outcome, owned by the wrapper: the restart, and whether the
  // handler made the request; where it did not (it left the call to the library before
  // planning anything), persistent_made makes it.
  struct Init {
    // `comm` and `types`, the handles of the application's that every start names, held
    // for as long as the request lives (HeldHandles, coll/persistent_coll.hpp).
    Init(MPI_Comm comm, const std::vector<MPI_Datatype> &types);
    std::function<int(MPI_Request *)> restart;
    bool made = false;
    std::shared_ptr<ZeroCopyPersistent> zero_copy;  // the zero-copy pairs every start moves (or null)
    // Arrays TEMPI made that `restart` reads at every start (the per-peer counts of a
    // one-count init run as its v-variant): they live as long as the request.
    std::shared_ptr<const void> arrays;
    std::shared_ptr<HeldHandles> held;
  };
  Issue(MPI_Request *r = nullptr) : request(r) {}  // the blocking and nonblocking calls
  static Issue persistent_init(MPI_Request *r, Init *init) {
    Issue i(r);
    i.persistent = true;
    i.init = init;
    return i;
  }
  int keep(std::function<int(MPI_Request *)> f) const {
    init->restart = std::move(f);
    return MPI_SUCCESS;
  }
  MPI_Request *request = nullptr;
  bool persistent = false;
  Init *init = nullptr;
};

// The library's own form of a collective, as the application issued it (`how`, an Issue):
// persistent (kept, so that every start issues the nonblocking form on the same arguments),
// nonblocking (on the application's request) or blocking. ARGS are the arguments before the
// request. A macro, since the three forms are three functions of the library (reached at the
// next layer, base/next.hpp).
#define TEMPI_FORWARD(how, NONBLOCKING, BLOCKING, ...)                                                           \
  ((how).persistent ? (how).keep([=](MPI_Request *lib) { return ::tempi::next::NONBLOCKING(__VA_ARGS__, lib); }) \
   : (how).request  ? ::tempi::next::NONBLOCKING(__VA_ARGS__, (how).request)                                     \
                    : ::tempi::next::BLOCKING(__VA_ARGS__))

}  // namespace tempi
