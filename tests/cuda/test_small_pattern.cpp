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

// The typed offset of each packed byte of one repetition of the pattern, from the host packer.
std::vector<int64_t> pattern_bytes(const Plan &p) {
  Plan one = p;
  one.dims.clear();
  std::vector<int64_t> at(size_t(p.pattern_size), -1);
  for_each_segment(one, 0, one.pattern_size, [&](int64_t typed, int64_t packed, int64_t n) {
    for (int64_t b = 0; b < n; ++b) at[size_t(packed + b)] = typed - one.start + b;
  });
  return at;
}

int64_t block_count_of(const Plan &p) {
  int64_t n = 0;
  for (const Run &r : p.pattern) n += r.count;
  return n;
}

void check_tables(const Plan &p) {
  const SmallPatternImage im = small_pattern_image(p);
  const std::vector<int64_t> at = pattern_bytes(p);
  INFO(to_string(p));
  // One repetition is the instances' packed bytes back to back, group g's `groups[g]`
  // bytes after group 0's.
  const size_t groups = im.groups.empty() ? 1 : im.groups.size();
  REQUIRE(im.map.size() * groups == at.size());
  if (!im.groups.empty()) {
    REQUIRE(groups >= 2);
    REQUIRE(im.groups[0] == 0);
    for (int64_t g : im.groups) REQUIRE(g % im.group_step == 0);
  }
  REQUIRE(16 % im.group_step == 0);
  for (size_t g = 0; g < groups; ++g) {
    const int64_t shift = im.groups.empty() ? 0 : im.groups[g];
    for (size_t o = 0; o < im.map.size(); ++o)
      REQUIRE(int64_t(im.map[o]) == at[g * im.map.size() + o] - shift - im.span_lo);
  }
  REQUIRE(im.span > 0);
  REQUIRE(im.span <= policy::kMaxSmallSpan);
  // An instance is one block exactly when its packed bytes are its span, in order.
  bool identity = int64_t(at.size() / groups) == im.span;
  for (size_t o = 0; o < im.map.size() && identity; ++o) identity = at[o] - at[0] == int64_t(o);
  REQUIRE(im.one_block == identity);
  std::vector<bool> typed(size_t(im.span), false);
  for (uint16_t x : im.map) typed[x] = true;
  REQUIRE(typed.front());
  REQUIRE(typed.back());
  // Packing's lists take accesses of up to 16 bytes; unpacking scattered instances, bytes.
  for (const AccessLists *lists : {&im.pack, &im.unpack}) {
    const bool bytes_only = lists == &im.unpack && !im.groups.empty();
    INFO((lists == &im.pack ? "pack" : "unpack") << " lists");
    REQUIRE(lists->list.size() == size_t(16 * lists->stride));
    for (int phase = 0; phase < 16; ++phase) {
      INFO("alignment " << phase);
      REQUIRE(lists->accesses[phase] <= lists->stride);
      std::vector<int> covered(size_t(im.span), 0);
      for (int k = 0; k < lists->stride; ++k) {
        const uint32_t e = lists->list[size_t(phase * lists->stride + k)];
        if (k >= lists->accesses[phase]) {
          REQUIRE(e == kNoAccess);
          continue;
        }
        const uint32_t code = e & 7u;
        REQUIRE(code <= (bytes_only ? 0u : 4u));
        const int width = 1 << code, slot = int(e >> 3);
        REQUIRE(slot % width == 0);
        REQUIRE(slot >= phase);
        REQUIRE(slot - phase + width <= im.span);
        for (int b = 0; b < width; ++b) ++covered[size_t(slot - phase + b)];
      }
      for (int x = 0; x < im.span; ++x) REQUIRE(covered[size_t(x)] == (typed[size_t(x)] ? 1 : 0));
    }
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
  CHECK(im.pack.accesses[0] == 6);  // 4 + 8 + 16 + 1 + 2 + 2 bytes, each as wide as its alignment allows
  CHECK(im.pack.accesses[8] == 6);
  CHECK(im.unpack.accesses[0] == 6);  // one instance of the whole pattern: the same accesses
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
  // gathered blocks are instances of one block, structs with a gap are not
  std::vector<int64_t> spread;
  for (int64_t i = 0; i < 300; ++i) spread.push_back(i * 100 + (i * 37) % 29);
  for (int64_t b : {8, 48, 64}) {
    const Plan gathered = plan(desc::hindexed_block(b, spread, B1), 3);
    REQUIRE(taken(gathered));
    check_tables(gathered);
    CHECK(small_pattern_image(gathered).one_block);
  }
  CHECK_FALSE(im.one_block);
  // blocks of 256 bytes or more on average are the long-block kernel's
  CHECK_FALSE(taken(plan(desc::hindexed({600, 1}, {0, 700}, B1), 10)));
}

TEST_CASE("gathers of one small shape at a list of offsets are groups of one instance shape", "[small_pattern]") {
  const TypeDesc B1 = desc::named(1);
  auto plan = [](const TypeDesc &d, int64_t count) { return plan_type(d)->for_count(count); };
  std::mt19937_64 rng(64);
  // 64-byte blocks at random byte offsets (the benchmark's row, smaller): one block a group
  std::vector<int64_t> disp;
  for (int64_t i = 0; i < 5000; ++i) disp.push_back(i * 300 + int64_t(rng() % 237));
  const Plan blocks = plan(desc::hindexed_block(64, disp, B1), 2);
  REQUIRE(taken(blocks));
  check_tables(blocks);
  CHECK(small_pattern_blocks(blocks) == 1);
  CHECK(small_pattern_image(blocks).groups.size() == disp.size());
  CHECK(small_pattern_image(blocks).group_step == 1);
  CHECK(small_pattern_image(blocks).unpack.accesses[3] == 64);  // scattered: unpacked byte by byte
  // selected structs, in any order and some twice (a particle code's send list): three blocks a group
  const TypeDesc s = desc::resized(0, 40, desc::structure({1, 3, 1, 2}, {0, 8, 32, 34},
                                                          {desc::named(4), desc::named(8), desc::named(1),
                                                           desc::named(2)}));
  std::vector<int64_t> picked;
  for (int i = 0; i < 3000; ++i) picked.push_back(int64_t(rng() % 100000));
  const Plan structs = plan(desc::indexed_block(1, picked, s), 3);
  REQUIRE(taken(structs));
  check_tables(structs);
  CHECK(small_pattern_blocks(structs) == 3);  // the char abuts the doubles
  CHECK(small_pattern_image(structs).group_step == 8);  // extent 40: offsets of 8 mod 16
  // doubles picked in order, adjacent ones merged into longer blocks by the plan: pieces of 8 bytes
  std::vector<int64_t> near;
  for (int64_t i = 0; i < 4000; ++i) near.push_back(3 * i + int64_t(rng() % 3));
  const Plan doubles = plan(desc::indexed_block(1, near, desc::named(8)), 1);
  REQUIRE(block_count_of(doubles) < int64_t(near.size()));
  REQUIRE(taken(doubles));
  check_tables(doubles);
  CHECK(small_pattern_blocks(doubles) == 1);
  CHECK(small_pattern_image(doubles).groups.size() == near.size());
  CHECK(small_pattern_image(doubles).group_step == 8);
  // an indexed type of vectors: runs of many blocks each stay with the byte-balanced kernel
  std::vector<int64_t> lens, at;
  for (int64_t i = 0, x = 0; i < 500; ++i) {
    lens.push_back(1 + int64_t(rng() % 3));
    at.push_back(x);
    x += lens.back() + int64_t(rng() % 2);
  }
  CHECK_FALSE(small_pattern_plan(plan(desc::indexed(lens, at, desc::vector(64, 4, 8, desc::named(4))), 1)));
  // random types gathered at random offsets
  test::RandomTypes types(20261124);
  int grouped = 0;
  for (int i = 0; i < 1500; ++i) {
    const TypeDesc d = types.next();
    std::vector<int64_t> where;
    for (int k = 0, n = 2 + int(rng() % 40); k < n; ++k) where.push_back(int64_t(rng() % 5000) - 1000);
    const std::optional<Plan> p = plan_type(desc::hindexed_block(1, where, d));
    if (!p) continue;
    for (int64_t count : {1, 2}) {
      const Plan q = p->for_count(count);
      if (!taken(q)) continue;
      check_tables(q);
      grouped += !small_pattern_image(q).groups.empty();
    }
  }
  REQUIRE(grouped >= 100);
  // blocks whose lengths do not repeat in groups are not taken; nor groups too sparse
  std::vector<int64_t> varied;
  for (int64_t i = 0; i < 110; ++i) varied.push_back(19 + i % 3);
  std::vector<int64_t> spaced;
  for (int64_t i = 0; i < 110; ++i) spaced.push_back(40 * i);
  CHECK_FALSE(small_pattern_plan(plan(desc::hindexed(varied, spaced, B1), 1)));
  const std::vector<int64_t> pair_len(200, 2);
  std::vector<int64_t> pairs;  // groups of two 2-byte blocks 40 bytes apart: 4 bytes in a span of 42
  for (int64_t i = 0; i < 100; ++i) pairs.insert(pairs.end(), {1000 * i, 1000 * i + 40});
  CHECK_FALSE(small_pattern_plan(plan(desc::hindexed(pair_len, pairs, B1), 1)));
}
