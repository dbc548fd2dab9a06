// may_share_bytes (core/overlap.hpp) against the byte sets themselves, on random plans of
// every shape the plan allows (negative and zero strides, several runs, interleaved
// levels), and on the ghost regions of a 3-D halo exchange.
#include <catch2/catch.hpp>

#include <random>
#include <set>

#include "overlap.hpp"
#include "random_plan.hpp"
#include "type_plan.hpp"

using namespace tempi;
using tempi::test::random_plan;

namespace {

// Every byte plan `p` at `at` touches.
std::set<int64_t> bytes_of(const Plan &p, int64_t at) {
  std::set<int64_t> out;
  std::vector<int64_t> index(p.dims.size(), 0);
  for (int64_t inst = 0; inst < p.instances(); ++inst) {
    int64_t o = at + p.start;
    int64_t rest = inst;
    for (const Dim &d : p.dims) {
      o += (rest % d.count) * d.stride;
      rest /= d.count;
    }
    for (const Run &r : p.pattern)
      for (int64_t k = 0; k < r.count; ++k)
        for (int64_t b = 0; b < r.length; ++b) out.insert(o + r.offset + k * r.stride + b);
  }
  return out;
}

bool share(const std::set<int64_t> &a, const std::set<int64_t> &b) {
  for (int64_t x : a)
    if (b.count(x)) return true;
  return false;
}

}  // namespace

TEST_CASE("may_share_bytes agrees with the byte sets of random plans", "[overlap]") {
  std::mt19937_64 rng(20261124);
  int shared = 0, apart = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    const Plan a = random_plan(rng), b = random_plan(rng);
    const int64_t a_at = 1000, b_at = 1000 + int64_t(rng() % 161) - 80;
    const bool truth = share(bytes_of(a, a_at), bytes_of(b, b_at));
    INFO("a = " << to_string(a) << " at " << a_at << ", b = " << to_string(b) << " at " << b_at);
    REQUIRE(may_share_bytes(a, a_at, b, b_at, 1 << 20) == truth);
    REQUIRE(may_share_bytes(b, b_at, a, a_at, 1 << 20) == truth);
    // a small budget may say "may share" where they do not, never the reverse
    if (truth) REQUIRE(may_share_bytes(a, a_at, b, b_at, 2));
    // against a contiguous range
    const int64_t lo = 950 + int64_t(rng() % 100), hi = lo + int64_t(rng() % 30);
    std::set<int64_t> range;
    for (int64_t x = lo; x < hi; ++x) range.insert(x);
    REQUIRE(may_share_bytes(a, a_at, lo, hi, 1 << 20) == share(bytes_of(a, a_at), range));
    (truth ? shared : apart)++;
  }
  CHECK(shared > 2000);  // both answers are exercised
  CHECK(apart > 2000);
}

TEST_CASE("the ghost regions of a halo exchange are told apart in a few steps", "[overlap]") {
  // A Fortran-order (n + 2r)^3 array of doubles: the 26 ghost regions (received) and the
  // 26 interior slabs next to them (sent), as subarray types of the whole array.
  const int64_t n = 256, r = 2, size = n + 2 * r;
  std::vector<Plan> ghosts, slabs;
  for (int dz = -1; dz <= 1; ++dz)
    for (int dy = -1; dy <= 1; ++dy)
      for (int dx = -1; dx <= 1; ++dx) {
        if (!dx && !dy && !dz) continue;
        std::vector<int64_t> sub, ghost, slab;
        for (int d : {dx, dy, dz}) {
          sub.push_back(d == 0 ? n : r);
          ghost.push_back(d < 0 ? 0 : d > 0 ? n + r : r);
          slab.push_back(d < 0 ? r : d > 0 ? n : r);
        }
        const auto g = plan_type(desc::subarray({size, size, size}, sub, ghost, ArrayOrder::Fortran, desc::named(8)));
        const auto s = plan_type(desc::subarray({size, size, size}, sub, slab, ArrayOrder::Fortran, desc::named(8)));
        REQUIRE(g);
        REQUIRE(s);
        ghosts.push_back(*g);
        slabs.push_back(*s);
      }
  for (size_t i = 0; i < ghosts.size(); ++i)
    for (size_t j = 0; j < ghosts.size(); ++j) {
      INFO("regions " << i << " and " << j);
      int64_t budget = 256;  // exact within this many steps
      CHECK(may_share_bytes(ghosts[i], 0, ghosts[j], 0, budget) == (i == j));
      // a sent slab overlaps the received ghost regions of no neighbour
      CHECK_FALSE(may_share_bytes(ghosts[i], 0, slabs[j], 0, budget));
    }
  // the same regions of two variables in one allocation, one array after the other
  const int64_t array = size * size * size * 8;
  CHECK_FALSE(may_share_bytes(ghosts[0], 0, ghosts[0], array, 256));
  CHECK(may_share_bytes(ghosts[0], 0, ghosts[0], 8, 256));  // shifted by one element: they meet
}
