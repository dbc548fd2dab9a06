// Who a collective's blocks go to and come from: the communicator's group and this rank's
// role in a rooted call, a process topology's neighbourhood in MPI's order, and whether any
// rank of it lists a neighbour twice.
#pragma once

#include <mpi.h>

#include <vector>

namespace tempi {
namespace coll {

struct Group {
  int rank = 0, size = 0, remote = 0;
  bool inter = false;
  int peers() const { return inter ? remote : size; }  // blocks of an all-to-all buffer
};
// False for a communicator the library must judge (it reports the error).
bool group_of(MPI_Comm comm, Group &g);

// A rooted collective: this process is its root (an intercommunicator's MPI_ROOT), another
// member (Leaf), or takes no part (an intercommunicator's MPI_PROC_NULL). False for a root
// the library must judge.
enum class Role { None, Root, Leaf };
bool role_of(const Group &g, int root, Role &r);
// Both, for a process that takes part in a rooted collective the library need not judge.
inline bool rooted(MPI_Comm comm, int root, Group &g, Role &r) {
  return group_of(comm, g) && role_of(g, root, r) && r != Role::None;
}

// The neighbourhood of a process topology, in MPI's order: a Cartesian one's missing
// neighbours are MPI_PROC_NULL (their blocks are left alone). False without a topology.
bool neighbourhood(MPI_Comm comm, std::vector<int> &sources, std::vector<int> &dests, bool *cartesian = nullptr);

// Comm ranks 0..n-1: the peers of an all-to-all's blocks.
std::vector<int> every_rank(int n);

// Whether no rank of `comm` lists a peer twice among its sources or among its
// destinations (MPI_PROC_NULL aside). Collective at a communicator's first call (every
// rank makes it), then an attribute of it.
bool distinct_neighbours(MPI_Comm comm, const std::vector<int> &sources, const std::vector<int> &dests);

}  // namespace coll
}  // namespace tempi
