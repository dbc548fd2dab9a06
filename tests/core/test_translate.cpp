#include <catch2/catch.hpp>

#include "byte_map.hpp"
#include "translate.hpp"

using namespace tempi;
using tempi::test::byte_offsets;

namespace {
std::vector<int64_t> offsets_of(const TypeDesc &d) {
  const std::optional<Type> t = translate(d);
  REQUIRE(t);
  return byte_offsets(*t);
}
std::vector<int64_t> range(int64_t from, int64_t n) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(from + i);
  return v;
}
std::vector<int64_t> cat(std::initializer_list<std::vector<int64_t>> parts) {
  std::vector<int64_t> v;
  for (const auto &p : parts) v.insert(v.end(), p.begin(), p.end());
  return v;
}
}  // namespace

TEST_CASE("named types are dense; pair types with padding are not modelled", "[translate]") {
  CHECK(offsets_of(desc::named(4)) == range(0, 4));
  TypeDesc short_int = desc::named(6);  // MPI_SHORT_INT: 6 bytes of data in an extent of 8
  short_int.extent = 8;
  CHECK_FALSE(translate(short_int));
}

TEST_CASE("vector follows the MPI typemap", "[translate]") {
  // 3 blocks of 2 ints, stride 5 ints
  const auto v = offsets_of(desc::vector(3, 2, 5, desc::named(4)));
  CHECK(v == cat({range(0, 8), range(20, 8), range(40, 8)}));
  CHECK(offsets_of(desc::vector(2, 1, -3, desc::named(2))) == cat({range(0, 2), range(-6, 2)}));
}

TEST_CASE("indexed keeps the given block order", "[translate]") {
  const auto v = offsets_of(desc::indexed({1, 2}, {4, 0}, desc::named(2)));
  CHECK(v == cat({range(8, 2), range(0, 4)}));
}

TEST_CASE("struct places each member at its displacement", "[translate]") {
  const auto v = offsets_of(desc::structure({1, 2}, {0, 8}, {desc::named(4), desc::named(2)}));
  CHECK(v == cat({range(0, 4), range(8, 4)}));
}

TEST_CASE("subarray in C and Fortran order", "[translate]") {
  // 3x4 array of bytes, 2x2 subarray starting at (1,1)
  CHECK(offsets_of(desc::subarray({3, 4}, {2, 2}, {1, 1}, ArrayOrder::C, desc::named(1))) ==
        std::vector<int64_t>{5, 6, 9, 10});
  // Fortran: dimension 0 is fastest: sizes {4,3}: element (i,j) at i + 4j
  CHECK(offsets_of(desc::subarray({4, 3}, {2, 2}, {1, 1}, ArrayOrder::Fortran, desc::named(1))) ==
        std::vector<int64_t>{5, 6, 9, 10});
}

TEST_CASE("darray block and cyclic distributions", "[translate]") {
  // 1-D, 10 elements over 3 processes, block: rank 1 owns 4..7
  CHECK(offsets_of(desc::darray(3, 1, {10}, {Distribution::Block}, {kDefaultDistArg}, {3}, ArrayOrder::C,
                                desc::named(1))) == range(4, 4));
  // cyclic(2) over 3 processes: rank 1 owns 2,3, 8,9
  CHECK(offsets_of(desc::darray(3, 1, {10}, {Distribution::Cyclic}, {2}, {3}, ArrayOrder::C, desc::named(1))) ==
        std::vector<int64_t>{2, 3, 8, 9});
  // cyclic(2) with 11 elements over 2 processes: rank 1 owns 2,3, 6,7, 10 (a partial last block)
  CHECK(offsets_of(desc::darray(2, 1, {11}, {Distribution::Cyclic}, {2}, {2}, ArrayOrder::C, desc::named(1))) ==
        std::vector<int64_t>{2, 3, 6, 7, 10});
}

TEST_CASE("resized changes the extent, not the typemap", "[translate]") {
  const TypeDesc r = desc::resized(-4, 32, desc::vector(2, 1, 2, desc::named(4)));
  CHECK(r.lb == -4);
  CHECK(r.extent == 32);
  CHECK(offsets_of(r) == cat({range(0, 4), range(8, 4)}));
  // contiguous of the resized type spaces copies by the new extent
  CHECK(offsets_of(desc::contiguous(2, r)) == cat({range(0, 4), range(8, 4), range(32, 4), range(40, 4)}));
}

TEST_CASE("builders compute MPI bounds", "[translate]") {
  const TypeDesc v = desc::vector(3, 2, -5, desc::named(4));
  CHECK(v.lb == -40);
  CHECK(v.extent == 48);
  CHECK(v.size == 24);
  const TypeDesc s = desc::subarray({4, 5}, {2, 3}, {1, 1}, ArrayOrder::C, desc::named(8));
  CHECK(s.lb == 0);
  CHECK(s.extent == 160);
}
