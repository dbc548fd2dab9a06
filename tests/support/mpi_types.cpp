#include "mpi_types.hpp"

#include <stdexcept>
#include <vector>

namespace tempi::test {

namespace {

MPI_Datatype named(int64_t size) {
  switch (size) {
    case 1: return MPI_BYTE;
    case 2: return MPI_SHORT;
    case 4: return MPI_INT;
    case 8: return MPI_DOUBLE;
    case 16: return MPI_C_DOUBLE_COMPLEX;
  }
  throw std::runtime_error("no named type of that size");
}

std::vector<int> ints(const std::vector<int64_t> &v, size_t first, size_t n) {
  return std::vector<int>(v.begin() + first, v.begin() + first + n);
}

std::vector<MPI_Aint> aints(const std::vector<int64_t> &v, size_t first, size_t n) {
  return std::vector<MPI_Aint>(v.begin() + first, v.begin() + first + n);
}

int mpi_order(int64_t o) { return o == int64_t(ArrayOrder::C) ? MPI_ORDER_C : MPI_ORDER_FORTRAN; }

MPI_Datatype build(const TypeDesc &d) {
  if (d.combiner == Combiner::Named) return named(d.size);
  std::vector<MPI_Datatype> kids;
  for (const TypeDesc &c : d.children) kids.push_back(build(c));
  const auto &I = d.ints;
  const auto &A = d.addrs;
  MPI_Datatype t = MPI_DATATYPE_NULL;
  switch (d.combiner) {
    case Combiner::Dup: MPI_Type_dup(kids[0], &t); break;
    case Combiner::Contiguous: MPI_Type_contiguous(int(I[0]), kids[0], &t); break;
    case Combiner::Vector: MPI_Type_vector(int(I[0]), int(I[1]), int(I[2]), kids[0], &t); break;
    case Combiner::Hvector: MPI_Type_create_hvector(int(I[0]), int(I[1]), A[0], kids[0], &t); break;
    case Combiner::Indexed: {
      const size_t n = I[0];
      MPI_Type_indexed(int(n), ints(I, 1, n).data(), ints(I, 1 + n, n).data(), kids[0], &t);
      break;
    }
    case Combiner::Hindexed: {
      const size_t n = I[0];
      MPI_Type_create_hindexed(int(n), ints(I, 1, n).data(), aints(A, 0, n).data(), kids[0], &t);
      break;
    }
    case Combiner::IndexedBlock:
      MPI_Type_create_indexed_block(int(I[0]), int(I[1]), ints(I, 2, I[0]).data(), kids[0], &t);
      break;
    case Combiner::HindexedBlock:
      MPI_Type_create_hindexed_block(int(I[0]), int(I[1]), aints(A, 0, I[0]).data(), kids[0], &t);
      break;
    case Combiner::Struct: {
      const size_t n = I[0];
      MPI_Type_create_struct(int(n), ints(I, 1, n).data(), aints(A, 0, n).data(), kids.data(), &t);
      break;
    }
    case Combiner::Subarray: {
      const size_t n = I[0];
      MPI_Type_create_subarray(int(n), ints(I, 1, n).data(), ints(I, 1 + n, n).data(), ints(I, 1 + 2 * n, n).data(),
                               mpi_order(I[1 + 3 * n]), kids[0], &t);
      break;
    }
    case Combiner::Darray: {
      const size_t n = I[2];
      std::vector<int> dist, dargs;
      for (size_t i = 0; i < n; ++i) {
        const auto d = Distribution(I[3 + n + i]);
        dist.push_back(d == Distribution::Block    ? MPI_DISTRIBUTE_BLOCK
                       : d == Distribution::Cyclic ? MPI_DISTRIBUTE_CYCLIC
                                                   : MPI_DISTRIBUTE_NONE);
        dargs.push_back(I[3 + 2 * n + i] == kDefaultDistArg ? MPI_DISTRIBUTE_DFLT_DARG : int(I[3 + 2 * n + i]));
      }
      MPI_Type_create_darray(int(I[0]), int(I[1]), int(n), ints(I, 3, n).data(), dist.data(), dargs.data(),
                             ints(I, 3 + 3 * n, n).data(), mpi_order(I[3 + 4 * n]), kids[0], &t);
      break;
    }
    case Combiner::Resized: MPI_Type_create_resized(kids[0], A[0], A[1], &t); break;
    default: throw std::runtime_error("cannot build this combiner");
  }
  for (MPI_Datatype &k : kids)
    if (k != MPI_BYTE && k != MPI_SHORT && k != MPI_INT && k != MPI_DOUBLE && k != MPI_C_DOUBLE_COMPLEX)
      MPI_Type_free(&k);
  return t;
}

}  // namespace

MPI_Datatype build_mpi_type(const TypeDesc &d) {
  MPI_Datatype t = build(d);
  if (d.combiner == Combiner::Named) {
    MPI_Type_dup(t, &t);  // always hand out a derived type the caller may free
  }
  MPI_Type_commit(&t);
  return t;
}

}  // namespace tempi::test
