// The host half of the tiled kernel for small patterns (cuda/small_pattern.cu), on the
// CPU: which plans it takes, and the tables it uploads. For thousands of random datatypes
// and counts, every plan it takes gets a map that names each packed byte's place in the
// instance's span (checked against the host packer's segments), and, for each of the 16
// alignments a span may have, access lists that are aligned, inside the span, disjoint,
// and cover exactly its typed bytes: what lets the kernel read and write nothing else.
// No GPU needed; the kernels themselves are checked in tests/gpu/test_gpu_blocklist.cpp.
#include <algorithm>
#include <catch2/catch.hpp>
#include <vector>

#include "blocklist.hpp"
#include "host_packer.hpp"
#include "random_type.hpp"
#include "type_plan.hpp"

using namespace tempi;

namespace {

bool taken(const Plan &p) { return !p.strided() && !p.contiguous() && !long_block_plan(p) && small_pattern_plan(p); }

// The typed offset of each packed byte of one instance, from the host packer.
std::vector<int64_t> instance_bytes(const Plan &p) {
  Plan one = p;
  one.dims.clear();
  std::vector<int64_t> at(size_t(p.pattern_size), -1);
  for_each_segment(one, 0, one.pattern_size, [&](int64_t typed, int64_t packed, int64_t n) {
    for (int64_t b = 0; b < n; ++b) at[size_t(packed + b)] = typed - one.start + b;
  });
  return at;
}

void check_tables(const Plan &p) {
  const SmallPatternImage im = small_pattern_image(p);
  const std::vector<int64_t> at = instance_bytes(p);
  INFO(to_string(p));
  REQUIRE(im.map.size() == at.size());
  REQUIRE(im.span > 0);
  REQUIRE(im.span <= kMaxSmallSpan);
  std::vector<bool> typed(size_t(im.span), false);
  for (size_t o = 0; o < at.size(); ++o) {
    REQUIRE(int64_t(im.map[o]) == at[o] - im.span_lo);
    typed[im.map[o]] = true;
  }
  REQUIRE(typed.front());
  REQUIRE(typed.back());
  REQUIRE(im.access.size() == size_t(16 * im.stride));
  for (int phase = 0; phase < 16; ++phase) {
    INFO("alignment " << phase);
    REQUIRE(im.accesses[phase] <= im.stride);
    std::vector<int> covered(size_t(im.span), 0);
    for (int k = 0; k < im.stride; ++k) {
      const uint32_t e = im.access[size_t(phase * im.stride + k)];
      if (k >= im.accesses[phase]) {
        REQUIRE(e == kNoAccess);
        continue;
      }
      const uint32_t code = e & 7u;
      REQUIRE(code <= 4);
      const int width = 1 << code, slot = int(e >> 3);
      REQUIRE(slot % width == 0);
      REQUIRE(slot >= phase);
      REQUIRE(slot - phase + width <= im.span);
      for (int b = 0; b < width; ++b) ++covered[size_t(slot - phase + b)];
    }
    for (int x = 0; x < im.span; ++x) REQUIRE(covered[size_t(x)] == (typed[size_t(x)] ? 1 : 0));
  }
}

}  // namespace

TEST_CASE("small-pattern tables of random datatypes cover exactly the typed bytes", "[small_pattern]") {
  test::RandomTypes types(20261123);
  int checked = 0;
  for (int i = 0; i < 4000; ++i) {
    const TypeDesc d = types.next();
    const std::optional<Plan> plan = plan_type(d);
    if (!plan) continue;
    for (int64_t count : {1, 3}) {
      const Plan p = plan->for_count(count);
      if (!taken(p)) continue;
      check_tables(p);
      ++checked;
    }
  }
  REQUIRE(checked >= 200);
}

TEST_CASE("the plans the tiled kernel takes, at its limits", "[small_pattern]") {
  const TypeDesc B1 = desc::named(1);
  auto plan = [](const TypeDesc &d, int64_t count) { return plan_type(d)->for_count(count); };
  // a struct {int; double[3]; char; short[2]}: 33 bytes in a span of 38
  const TypeDesc s = desc::structure({1, 3, 1, 2}, {0, 8, 32, 34},
                                     {desc::named(4), desc::named(8), desc::named(1), desc::named(2)});
  const Plan structs = plan(desc::resized(0, 40, s), 1000);
  REQUIRE(taken(structs));
  check_tables(structs);
  const SmallPatternImage im = small_pattern_image(structs);
  CHECK(im.accesses[0] == 6);  // 4 + 8 + 16 + 1 + 2 + 2 bytes, each as wide as its alignment allows
  CHECK(im.accesses[8] == 6);
  // spans of 2048 bytes are taken, 2049 not
  std::vector<int64_t> len, disp;
  for (int64_t i = 0; i < 16; ++i) {
    len.push_back(i == 15 ? 128 : 127 - (i * 7) % 13);
    disp.push_back(128 * i);
  }
  CHECK(taken(plan(desc::hindexed(len, disp, B1), 10)));
  len.back() = 129;
  CHECK_FALSE(taken(plan(desc::hindexed(len, disp, B1), 10)));
  // 8 packed bytes in a span of 64 are taken, of 65 not; fewer than 4 packed bytes not
  CHECK(taken(plan(desc::hindexed({5, 3}, {0, 61}, B1), 10)));
  CHECK_FALSE(taken(plan(desc::hindexed({5, 3}, {0, 62}, B1), 10)));
  CHECK_FALSE(small_pattern_plan(plan(desc::hindexed({2, 1}, {0, 5}, B1), 10)));
  // blocks of 256 bytes or more on average are the long-block kernel's
  CHECK_FALSE(taken(plan(desc::hindexed({600, 1}, {0, 700}, B1), 10)));
}
