// Groups, roles and neighbourhoods of collectives (topology.hpp).
#include "coll/topology.hpp"

#include <algorithm>

namespace tempi {
namespace coll {

bool group_of(MPI_Comm comm, Group &g) {
  if (comm == MPI_COMM_NULL) return false;
  int inter = 0;
  if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS) return false;
  g.inter = inter != 0;
  PMPI_Comm_rank(comm, &g.rank);
  PMPI_Comm_size(comm, &g.size);
  if (g.inter) PMPI_Comm_remote_size(comm, &g.remote);
  return true;
}

bool role_of(const Group &g, int root, Role &r) {
  if (g.inter) {
    if (root == MPI_ROOT) r = Role::Root;
    else if (root == MPI_PROC_NULL) r = Role::None;
    else if (root >= 0 && root < g.remote) r = Role::Leaf;
    else return false;
    return true;
  }
  if (root < 0 || root >= g.size) return false;
  r = root == g.rank ? Role::Root : Role::Leaf;
  return true;
}

bool neighbourhood(MPI_Comm comm, std::vector<int> &sources, std::vector<int> &dests, bool *cartesian) {
  int status = MPI_UNDEFINED;
  if (comm == MPI_COMM_NULL || PMPI_Topo_test(comm, &status) != MPI_SUCCESS) return false;
  if (cartesian) *cartesian = status == MPI_CART;
  if (status == MPI_CART) {
    int ndims = 0;
    PMPI_Cartdim_get(comm, &ndims);
    for (int d = 0; d < ndims; ++d) {
      int negative = MPI_PROC_NULL, positive = MPI_PROC_NULL;
      PMPI_Cart_shift(comm, d, 1, &negative, &positive);
      sources.push_back(negative);
      sources.push_back(positive);
    }
    dests = sources;
    return true;
  }
  if (status == MPI_GRAPH) {
    int rank = 0, n = 0;
    PMPI_Comm_rank(comm, &rank);
    PMPI_Graph_neighbors_count(comm, rank, &n);
    sources.resize(size_t(n));
    if (n > 0) PMPI_Graph_neighbors(comm, rank, n, sources.data());
    dests = sources;
    return true;
  }
  if (status == MPI_DIST_GRAPH) {
    int in = 0, out = 0, weighted = 0;
    PMPI_Dist_graph_neighbors_count(comm, &in, &out, &weighted);
    sources.resize(size_t(in));
    dests.resize(size_t(out));
    std::vector<int> sw(size_t(std::max(in, 1))), dw(size_t(std::max(out, 1)));
    int nothing[1];
    PMPI_Dist_graph_neighbors(comm, in, in ? sources.data() : nothing, sw.data(), out,
                              out ? dests.data() : nothing, dw.data());
    return true;
  }
  return false;
}

// Comm ranks 0..n-1: the peers of an all-to-all's blocks.
std::vector<int> every_rank(int n) {
  std::vector<int> v(size_t(std::max(n, 0)));
  for (int i = 0; i < n; ++i) v[size_t(i)] = i;
  return v;
}

// Whether no rank of `comm` lists a peer twice among its sources or among its
// destinations (MPI_PROC_NULL aside). MPICH 4.0.2 pairs the blocks between repeated
// neighbours in MPI_Neighbor_alltoall in another order than in MPI_Neighbor_alltoallv
// (seen on a ring of 2 ranks: the first block sent meets the second block received), so
// that call runs as the v-variant only where no rank has repeated neighbours. Collective
// at a communicator's first call (every rank makes it), then an attribute of it.
bool distinct_neighbours(MPI_Comm comm, const std::vector<int> &sources, const std::vector<int> &dests) {
  static const int keyval = [] {
    int k = MPI_KEYVAL_INVALID;
    PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &k, nullptr);
    return k;
  }();
  void *value = nullptr;
  int found = 0;
  if (keyval != MPI_KEYVAL_INVALID && PMPI_Comm_get_attr(comm, keyval, &value, &found) == MPI_SUCCESS && found)
    return value != nullptr;
  auto repeats = [](std::vector<int> peers) {
    peers.erase(std::remove(peers.begin(), peers.end(), MPI_PROC_NULL), peers.end());
    std::sort(peers.begin(), peers.end());
    return std::adjacent_find(peers.begin(), peers.end()) != peers.end();
  };
  const int mine = repeats(sources) || repeats(dests) ? 0 : 1;
  int all = 0;
  if (PMPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS) return false;
  if (keyval != MPI_KEYVAL_INVALID) {
    static char yes;  // any non-null address
    PMPI_Comm_set_attr(comm, keyval, all ? &yes : nullptr);
  }
  return all != 0;
}

}  // namespace coll
}  // namespace tempi
