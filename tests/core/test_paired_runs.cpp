// paired_runs (core/paired_runs.hpp) against the reference packer: moving each run from
// the source object to the destination object must leave the destination as packing the
// source and unpacking into the destination does, on random plans and on triangles.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <vector>

#include "host_packer.hpp"
#include "paired_runs.hpp"
#include "random_plan.hpp"

using namespace tempi;
using tempi::test::random_plan;

namespace {

// Row i of an n x n matrix of 8-byte elements: columns [0, i] (lower) or [i, n) (upper).
Plan triangle(int64_t n, bool lower) {
  Plan p;
  std::vector<Run> rows;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t first = lower ? 0 : i, count = lower ? i + 1 : n - i;
    rows.push_back({(i * n + first) * 8, count * 8, 0, 1});
    p.pattern_size += count * 8;
  }
  p.pattern = RunList(rows);
  return p;
}

constexpr int64_t kBase = 2048;  // random plans reach below their base address

// What moving the runs gives, and what packing and unpacking gives, for `bytes` stream bytes.
void check_move(const Plan &from, const Plan &to, int64_t bytes, int64_t max_length, size_t buffer) {
  std::mt19937_64 fill(bytes * 31 + max_length);
  std::vector<unsigned char> src(buffer), expect(buffer, 0), got(buffer, 0), packed(size_t(std::max<int64_t>(bytes, 1)));
  for (unsigned char &c : src) c = static_cast<unsigned char>(fill());
  host_pack(from, src.data() + kBase, packed.data(), 0, bytes);
  host_unpack(to, packed.data(), expect.data() + kBase, 0, bytes);
  const std::vector<PairedRun> runs = paired_runs(from, to, bytes, max_length, size_t(1) << 20);
  int64_t total = 0;
  for (const PairedRun &r : runs) {
    REQUIRE(r.length >= 1);
    REQUIRE(r.length <= max_length);
    std::memcpy(got.data() + kBase + r.to, src.data() + kBase + r.from, size_t(r.length));
    total += r.length;
  }
  REQUIRE(total == bytes);
  REQUIRE(got == expect);
}

}  // namespace

TEST_CASE("paired runs move what packing and unpacking move, on random plans", "[paired_runs]") {
  std::mt19937_64 rng(20261124);
  for (int trial = 0; trial < 5000; ++trial) {
    const Plan from = random_plan(rng), to = random_plan(rng);
    const int64_t common = std::min(from.packed_size(), to.packed_size());
    const int64_t bytes = trial % 4 == 0 ? int64_t(rng() % uint64_t(common + 1)) : common;  // a prefix too
    const int64_t max_length = 1 + int64_t(rng() % 8);
    INFO("from " << to_string(from) << ", to " << to_string(to) << ", " << bytes << " bytes, runs of at most "
                 << max_length);
    check_move(from, to, bytes, max_length, 2 * kBase);
  }
}

TEST_CASE("a lower triangle into an upper one: runs cut at both sides' row ends", "[paired_runs]") {
  for (const int64_t n : {1, 2, 7, 33}) {
    const Plan lower = triangle(n, true), upper = triangle(n, false);
    const int64_t bytes = lower.packed_size();
    REQUIRE(bytes == upper.packed_size());
    INFO("n = " << n);
    const size_t buffer = size_t(kBase + n * n * 8 + 64);
    check_move(lower, upper, bytes, 1 << 20, buffer);
    check_move(upper, lower, bytes, 24, buffer);
    // every run ends where a row of either side ends: at most 2n runs without a length cap
    CHECK(paired_runs(lower, upper, bytes, 1 << 20, 1 << 20).size() <= size_t(2 * n));
  }
}

TEST_CASE("paired runs give up beyond their budget, and on nothing to move", "[paired_runs]") {
  Plan many;  // 1,000 one-byte blocks, two bytes apart
  many.pattern = RunList({{0, 1, 2, 1000}});
  many.pattern_size = 1000;
  Plan one;  // the same 1,000 bytes in one block
  one.pattern = RunList({{0, 1000, 0, 1}});
  one.pattern_size = 1000;
  CHECK(paired_runs(many, one, 1000, 1 << 20, 999).empty());
  CHECK(paired_runs(many, one, 1000, 1 << 20, 1000).size() == 1000);
  CHECK(paired_runs(one, one, 1000, 100, 5).empty());  // ten runs of 100 bytes: over a budget of 5
  CHECK(paired_runs(one, one, 1000, 100, 10).size() == 10);
  CHECK(paired_runs(one, one, 0, 100, 10).empty());
}
