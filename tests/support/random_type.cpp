#include "random_type.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace tempi::test {

TypeDesc RandomTypes::gen_named() {
  static const int64_t sizes[] = {1, 2, 4, 8, 16};
  return desc::named(sizes[uniform(0, 4)]);
}

TypeDesc RandomTypes::next() {
  for (;;) {
    TypeDesc t = gen(opt_.max_depth);
    const int64_t span = t.extent < 0 ? -t.extent : t.extent;
    if (span <= opt_.max_extent && t.size <= opt_.max_extent) return t;
  }
}

TypeDesc RandomTypes::permuted_subarray(int64_t max_side, int64_t max_elements) {
  const int nd = int(uniform(2, 4));
  std::vector<int64_t> sizes(nd);
  for (;;) {
    int64_t elements = 1;
    for (int64_t &n : sizes) elements *= n = uniform(1, max_side);
    if (elements <= max_elements) break;
  }
  TypeDesc t = gen_named();
  std::vector<int64_t> strides(nd);  // bytes, dimension 0 fastest in memory
  int64_t grid = t.extent, displacement = 0;
  std::vector<int64_t> subsizes(nd);
  for (int d = 0; d < nd; ++d) {
    strides[d] = grid;
    grid *= sizes[d];
    subsizes[d] = uniform(1, sizes[d]);
    displacement += uniform(0, sizes[d] - subsizes[d]) * strides[d];
  }
  std::vector<int> order(nd);  // order[0]: the packed order's fastest dimension
  for (int d = 0; d < nd; ++d) order[d] = d;
  std::shuffle(order.begin(), order.end(), rng_);
  for (int d : order) t = desc::hvector(subsizes[d], 1, strides[d], t);
  return desc::resized(0, grid, desc::hindexed_block(1, {displacement}, t));
}

TypeDesc RandomTypes::child(int depth) {
  for (;;) {
    TypeDesc t = gen(depth);
    if (opt_.empty_children || t.size > 0) return t;
  }
}

TypeDesc RandomTypes::gen(int depth) {
  if (depth == 0 || uniform(0, 5) == 0) return gen_named();
  const int64_t neg = opt_.allow_negative ? 1 : 0;
  auto small = [&](int64_t lo, int64_t hi) { return uniform(lo, hi); };
  switch (uniform(0, 12)) {
    case 0:
      return desc::dup(child(depth - 1));
    case 1:
      return desc::contiguous(small(0, 4), child(depth - 1));
    case 2:
      return desc::vector(small(0, 4), small(0, 3), small(-4 * neg, 6), child(depth - 1));
    case 3: {
      TypeDesc old = child(depth - 1);
      return desc::hvector(small(0, 4), small(0, 3), small(-64 * neg, 96), old);
    }
    case 4:
    case 5: {
      const int64_t n = small(1, 4);
      std::vector<int64_t> bl, disp;
      for (int64_t i = 0; i < n; ++i) {
        bl.push_back(small(0, 3));
        disp.push_back(small(-3 * neg, 10));
      }
      TypeDesc old = child(depth - 1);
      if (uniform(0, 1)) return desc::indexed(bl, disp, old);
      for (auto &d : disp) d = d * 3 + small(0, 2);  // byte displacements, not always aligned
      return desc::hindexed(bl, disp, old);
    }
    case 6:
    case 7: {
      const int64_t n = small(1, 4), bl = small(0, 3);
      std::vector<int64_t> disp;
      for (int64_t i = 0; i < n; ++i) disp.push_back(small(-3 * neg, 10));
      TypeDesc old = child(depth - 1);
      if (uniform(0, 1)) return desc::indexed_block(bl, disp, old);
      for (auto &d : disp) d = d * 5 + small(0, 3);
      return desc::hindexed_block(bl, disp, old);
    }
    case 8: {
      const int64_t n = small(1, 3);
      std::vector<int64_t> bl, disp;
      std::vector<TypeDesc> types;
      int64_t at = small(-8 * neg, 8);
      for (int64_t i = 0; i < n; ++i) {
        types.push_back(child(depth - 1));
        bl.push_back(small(0, 3));
        disp.push_back(at);
        at += small(-16 * neg, 24) + bl.back() * types.back().extent;
      }
      return desc::structure(bl, disp, types);
    }
    case 9: {
      const int64_t nd = small(1, 3);
      std::vector<int64_t> sizes, subsizes, starts;
      for (int64_t i = 0; i < nd; ++i) {
        sizes.push_back(small(1, 5));
        subsizes.push_back(small(1, sizes.back()));
        starts.push_back(small(0, sizes.back() - subsizes.back()));
      }
      return desc::subarray(sizes, subsizes, starts, uniform(0, 1) ? ArrayOrder::C : ArrayOrder::Fortran,
                            child(depth - 1));
    }
    case 10: {
      const int64_t nd = small(1, 3);
      std::vector<int64_t> gsizes, dargs, psizes;
      std::vector<Distribution> dist;
      int64_t nprocs = 1;
      for (int64_t i = 0; i < nd; ++i) {
        gsizes.push_back(small(1, 7));
        const Distribution d = Distribution(small(0, 2));
        dist.push_back(d);
        psizes.push_back(d == Distribution::None ? 1 : small(1, 3));
        nprocs *= psizes.back();
        if (d == Distribution::Block)
          dargs.push_back(uniform(0, 1) ? kDefaultDistArg
                                        : (gsizes.back() + psizes.back() - 1) / psizes.back() + small(0, 2));
        else if (d == Distribution::Cyclic)
          dargs.push_back(uniform(0, 1) ? kDefaultDistArg : small(1, 3));
        else
          dargs.push_back(kDefaultDistArg);
      }
      // Open MPI 4.1 refuses a darray of a type without data (MPI_ERR_TYPE), MPICH builds it.
      TypeDesc old = child(depth - 1);
      while (old.size == 0) old = gen(depth - 1);
      return desc::darray(nprocs, small(0, nprocs - 1), gsizes, dist, dargs, psizes,
                          uniform(0, 1) ? ArrayOrder::C : ArrayOrder::Fortran, old);
    }
    default: {
      TypeDesc old = child(depth - 1);
      const int64_t span = old.extent > 0 ? old.extent : 1;
      return desc::resized(small(-8 * neg, 8), small(1, 2 * span + 8), old);
    }
  }
}

uint64_t seed_from(int argc, char **argv, uint64_t fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (!std::strcmp(argv[i], "--seed")) return std::strtoull(argv[i + 1], nullptr, 10);
  if (const char *s = std::getenv("TEMPI_TEST_SEED")) return std::strtoull(s, nullptr, 10);
  return fallback;
}

}  // namespace tempi::test
