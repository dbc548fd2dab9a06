#include "base/describe.hpp"

#include <vector>

namespace tempi {

namespace {

int64_t map_order(int order) { return int64_t(order == MPI_ORDER_FORTRAN ? ArrayOrder::Fortran : ArrayOrder::C); }

int64_t map_distribution(int d) {
  if (d == MPI_DISTRIBUTE_BLOCK) return int64_t(Distribution::Block);
  if (d == MPI_DISTRIBUTE_CYCLIC) return int64_t(Distribution::Cyclic);
  return int64_t(Distribution::None);
}

// Fortran-made (h)vector/hindexed/struct types return their byte displacements as
// integers; move them to `addrs` so they read like the C constructors.
void move_ints_to_addrs(TypeDesc &d, size_t first, size_t n) {
  d.addrs.assign(d.ints.begin() + first, d.ints.begin() + first + n);
  d.ints.erase(d.ints.begin() + first, d.ints.begin() + first + n);
}

}  // namespace

TypeDesc describe(MPI_Datatype type) {
  TypeDesc d;
  MPI_Count size = 0, lb = 0, extent = 0;
  PMPI_Type_size_x(type, &size);
  PMPI_Type_get_extent_x(type, &lb, &extent);
  d.size = size;
  d.lb = lb;
  d.extent = extent;

  int ni = 0, na = 0, nt = 0, combiner = 0;
  PMPI_Type_get_envelope(type, &ni, &na, &nt, &combiner);
  if (combiner == MPI_COMBINER_NAMED) {
    d.combiner = Combiner::Named;
    return d;
  }
  std::vector<int> ints(ni);
  std::vector<MPI_Aint> addrs(na);
  std::vector<MPI_Datatype> types(nt);
  PMPI_Type_get_contents(type, ni, na, nt, ints.data(), addrs.data(), types.data());
  d.ints.assign(ints.begin(), ints.end());
  d.addrs.assign(addrs.begin(), addrs.end());
  for (MPI_Datatype t : types) {
    d.children.push_back(describe(t));
    int cni, cna, cnt, ccomb;
    PMPI_Type_get_envelope(t, &cni, &cna, &cnt, &ccomb);
    if (ccomb != MPI_COMBINER_NAMED) PMPI_Type_free(&t);
  }

  auto &I = d.ints;
  switch (combiner) {
    case MPI_COMBINER_DUP: d.combiner = Combiner::Dup; break;
    case MPI_COMBINER_CONTIGUOUS: d.combiner = Combiner::Contiguous; break;
    case MPI_COMBINER_VECTOR: d.combiner = Combiner::Vector; break;
    case MPI_COMBINER_HVECTOR: d.combiner = Combiner::Hvector; break;
#if TEMPI_HAVE_MPI1_COMBINERS  // Open MPI built without MPI-1 compatibility lacks these
    case MPI_COMBINER_HVECTOR_INTEGER:
      move_ints_to_addrs(d, 2, 1);
      d.combiner = Combiner::Hvector;
      break;
    case MPI_COMBINER_HINDEXED_INTEGER:
      move_ints_to_addrs(d, 1 + I[0], I[0]);
      d.combiner = Combiner::Hindexed;
      break;
    case MPI_COMBINER_STRUCT_INTEGER:
      move_ints_to_addrs(d, 1 + I[0], I[0]);
      d.combiner = Combiner::Struct;
      break;
#endif
    case MPI_COMBINER_INDEXED: d.combiner = Combiner::Indexed; break;
    case MPI_COMBINER_HINDEXED: d.combiner = Combiner::Hindexed; break;
    case MPI_COMBINER_INDEXED_BLOCK: d.combiner = Combiner::IndexedBlock; break;
    case MPI_COMBINER_HINDEXED_BLOCK: d.combiner = Combiner::HindexedBlock; break;
    case MPI_COMBINER_STRUCT: d.combiner = Combiner::Struct; break;
    case MPI_COMBINER_SUBARRAY: {
      d.combiner = Combiner::Subarray;
      const size_t n = I[0];
      I[1 + 3 * n] = map_order(int(I[1 + 3 * n]));
      break;
    }
    case MPI_COMBINER_DARRAY: {
      d.combiner = Combiner::Darray;
      const size_t n = I[2];
      for (size_t i = 0; i < n; ++i) {
        I[3 + n + i] = map_distribution(int(I[3 + n + i]));
        if (I[3 + 2 * n + i] == MPI_DISTRIBUTE_DFLT_DARG) I[3 + 2 * n + i] = kDefaultDistArg;
      }
      I[3 + 4 * n] = map_order(int(I[3 + 4 * n]));
      break;
    }
    case MPI_COMBINER_RESIZED: d.combiner = Combiner::Resized; break;
    default: d.combiner = Combiner::Unsupported; break;
  }
  return d;
}

}  // namespace tempi
