// The TEMPI paper's alternative constructions of one object (its Fig. 2 and section
// 3): every one must reach the identical canonical StridedBlock.
#include <catch2/catch.hpp>

#include "type_plan.hpp"

using namespace tempi;

namespace {
const TypeDesc F = desc::named(4);  // float
const TypeDesc B = desc::named(1);  // byte

StridedBlock block_of(const TypeDesc &d) {
  const std::optional<Plan> p = plan_type(d);
  REQUIRE(p);
  REQUIRE(p->strided());
  return p->strided_block();
}

void all_equal(const std::vector<TypeDesc> &ways) {
  const StridedBlock first = block_of(ways[0]);
  for (const TypeDesc &w : ways) {
    INFO(to_string(w));
    CHECK(block_of(w) == first);
  }
}
}  // namespace

TEST_CASE("one row of floats", "[equivalence]") {
  const int64_t n = 100;
  all_equal({desc::contiguous(n, F), desc::contiguous(4 * n, B), desc::vector(1, n, 1, F),
             desc::vector(n, 1, 1, F), desc::hvector(n, 1, 4, F), desc::hvector(n, 4, 4, B),
             desc::subarray({n}, {n}, {0}, ArrayOrder::C, F), desc::subarray({4 * n}, {4 * n}, {0}, ArrayOrder::C, B),
             desc::indexed_block(n, {0}, F), desc::structure({n}, {0}, {F}),
             desc::structure({10, 90}, {0, 40}, {F, F})});
}

TEST_CASE("one 2-D plane of floats", "[equivalence]") {
  const int64_t n0 = 13, n1 = 7, a0 = 20, pitch = a0 * 4;
  all_equal({desc::vector(n1, n0, a0, F), desc::hvector(n1, n0, pitch, F), desc::hvector(n1, 4 * n0, pitch, B),
             desc::vector(n1, 4 * n0, 4 * a0, B), desc::hvector(n1, 1, pitch, desc::contiguous(n0, F)),
             desc::hvector(n1, 1, pitch, desc::contiguous(4 * n0, B)),
             desc::subarray({n1, a0}, {n1, n0}, {0, 0}, ArrayOrder::C, F),
             desc::subarray({n1, 4 * a0}, {n1, 4 * n0}, {0, 0}, ArrayOrder::C, B),
             desc::subarray({a0, n1}, {n0, n1}, {0, 0}, ArrayOrder::Fortran, F),
             desc::contiguous(n1, desc::resized(0, pitch, desc::contiguous(n0, F))),
             desc::subarray({n1}, {n1}, {0}, ArrayOrder::C, desc::resized(0, pitch, desc::contiguous(n0, F))),
             desc::hindexed_block(n0, {0, pitch, 2 * pitch, 3 * pitch, 4 * pitch, 5 * pitch, 6 * pitch}, F)});
}

TEST_CASE("one 3-D cuboid of floats", "[equivalence]") {
  const int64_t n0 = 10, n1 = 6, n2 = 4, a0 = 16, a1 = 9, a2 = 5;
  const int64_t p1 = a0 * 4, p2 = a1 * p1;
  const TypeDesc row = desc::contiguous(n0, F);
  const TypeDesc padded_row = desc::resized(0, p1, row);
  all_equal({
      desc::subarray({a2, a1, a0}, {n2, n1, n0}, {0, 0, 0}, ArrayOrder::C, F),
      desc::subarray({a2, a1, 4 * a0}, {n2, n1, 4 * n0}, {0, 0, 0}, ArrayOrder::C, B),
      desc::subarray({a0, a1, a2}, {n0, n1, n2}, {0, 0, 0}, ArrayOrder::Fortran, F),
      desc::hvector(n2, 1, p2, desc::vector(n1, n0, a0, F)),                   // hvector of vector
      desc::hvector(n2, 1, p2, desc::hvector(n1, 1, p1, desc::vector(1, n0, 1, F))),  // hvector^2 of vector
      desc::hvector(n2, 1, p2, desc::hvector(n1, 4 * n0, p1, B)),
      desc::hvector(n2, 1, p2, desc::hvector(n1, 1, p1, row)),
      desc::subarray({a2, a1}, {n2, n1}, {0, 0}, ArrayOrder::C, padded_row),  // subarray of a row type
      desc::subarray({a2, a1}, {n2, n1}, {0, 0}, ArrayOrder::C, desc::resized(0, p1, desc::vector(n0, 1, 1, F))),
  });
}

TEST_CASE("a cuboid at an offset: subarrays of floats, bytes and rows agree", "[equivalence]") {
  const int64_t n0 = 10, n1 = 6, n2 = 4, a0 = 16, a1 = 9, a2 = 5;
  all_equal({desc::subarray({a2, a1, a0}, {n2, n1, n0}, {1, 2, 3}, ArrayOrder::C, F),
             desc::subarray({a2, a1, 4 * a0}, {n2, n1, 4 * n0}, {1, 2, 12}, ArrayOrder::C, B),
             desc::subarray({a2, a1}, {n2, n1}, {1, 2}, ArrayOrder::C,
                            desc::resized(0, a0 * 4, desc::subarray({a0}, {n0}, {3}, ArrayOrder::C, F)))});
}
