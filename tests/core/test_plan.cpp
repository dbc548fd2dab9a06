#include <catch2/catch.hpp>

#include "byte_map.hpp"
#include "canonicalize.hpp"
#include "random_type.hpp"
#include "translate.hpp"
#include "type_plan.hpp"

using namespace tempi;
using tempi::test::byte_offsets;

TEST_CASE("a 3-D strided type plans to a 3-D StridedBlock", "[plan]") {
  const std::optional<Plan> p =
      plan_type(desc::subarray({8, 16, 32}, {4, 5, 6}, {1, 2, 3}, ArrayOrder::C, desc::named(4)));
  REQUIRE(p);
  REQUIRE(p->strided());
  const StridedBlock sb = p->strided_block();
  CHECK(sb.counts == std::vector<int64_t>{24, 5, 4});
  CHECK(sb.strides == std::vector<int64_t>{1, 128, 2048});
  CHECK(sb.start == (1 * 16 * 32 + 2 * 32 + 3) * 4);
}

TEST_CASE("StridedBlock dimensions are not capped", "[plan]") {
  TypeDesc t = desc::named(4);
  for (int d = 0; d < 6; ++d) t = desc::hvector(2, 1, t.extent * 3, t);  // each level leaves a gap
  const std::optional<Plan> p = plan_type(t);
  REQUIRE(p);
  REQUIRE(p->strided());
  CHECK(p->strided_block().counts.size() == 7);
}

TEST_CASE("count folds into the plan", "[plan]") {
  const std::optional<Plan> row = plan_type(desc::contiguous(8, desc::named(4)));
  REQUIRE(row);
  const Plan p = row->for_count(10);
  CHECK(p.strided());
  CHECK(p.dims.empty());
  CHECK(p.pattern_size == 320);

  const std::optional<Plan> v = plan_type(desc::vector(4, 1, 2, desc::named(4)));  // extent 28
  const Plan pv = v->for_count(3);
  REQUIRE(pv.dims.size() == 2);
  CHECK(pv.dims[1] == Dim{3, 28});
}

TEST_CASE("contiguous plans are recognized", "[plan]") {
  const std::optional<Plan> row = plan_type(desc::contiguous(8, desc::named(4)));
  CHECK(row->contiguous());
  CHECK(row->for_count(1000).contiguous());
  // a resized type whose extent equals its size packs as one copy too
  CHECK(plan_type(desc::resized(0, 8, desc::contiguous(2, desc::named(4))))->for_count(5).contiguous());
  const std::optional<Plan> col = plan_type(desc::vector(4, 1, 2, desc::named(4)));
  CHECK_FALSE(col->contiguous());
  CHECK_FALSE(col->for_count(3).contiguous());
  // one element of a padded type is one run, two are not
  const std::optional<Plan> padded = plan_type(desc::resized(0, 16, desc::named(4)));
  CHECK(padded->for_count(1).contiguous());
  CHECK_FALSE(padded->for_count(2).contiguous());
  CHECK_FALSE(plan_type(desc::indexed({1, 3}, {5, 0}, desc::named(8)))->contiguous());
}

TEST_CASE("irregular types plan to a compact block list", "[plan]") {
  const std::optional<Plan> p = plan_type(desc::indexed({1, 3, 2}, {5, 0, 9}, desc::named(8)));
  REQUIRE(p);
  CHECK_FALSE(p->strided());
  CHECK(p->pattern == std::vector<Run>{{0, 8, 0, 1}, {-40, 24, 0, 1}, {32, 16, 0, 1}});
  CHECK(p->start == 40);

  // a vector of structs keeps the struct as the pattern and the vector as a dimension
  const TypeDesc s = desc::structure({1, 1}, {0, 8}, {desc::named(4), desc::named(8)});
  const std::optional<Plan> pv = plan_type(desc::contiguous(100000, desc::resized(0, 32, s)));
  REQUIRE(pv);
  CHECK(pv->pattern.size() == 2);
  CHECK(pv->dims == std::vector<Dim>{{100000, 32}});
}

TEST_CASE("plans visit the same bytes as the type (random types)", "[plan][property]") {
  test::RandomTypes gen(7);
  for (int i = 0; i < 3000; ++i) {
    const TypeDesc d = gen.next();
    const std::optional<Type> ir = translate(d);
    REQUIRE(ir);
    const std::optional<Plan> p = make_plan(canonicalize(*ir), d.extent);
    REQUIRE(p);
    INFO("type " << to_string(d) << "\nplan " << to_string(*p));
    REQUIRE(p->packed_size() == d.size);
    REQUIRE(byte_offsets(*p) == byte_offsets(*ir));
    const int64_t count = gen.uniform(0, 3);
    std::vector<int64_t> expect;
    for (int64_t k = 0; k < count; ++k)
      for (int64_t b : byte_offsets(*ir)) expect.push_back(b + k * d.extent);
    REQUIRE(byte_offsets(p->for_count(count)) == expect);
  }
}
