// Permuted strided plans on the GPU (transposes, permutations of a grid's dimensions,
// batched and sub-block transposes), compared byte for byte with the host reference
// packer with poisoned outputs: every element size, edge tiles, byte ranges that start
// and end inside tiles, counts > 1 with resized extents, pack and unpack. Where the
// shape calls for it, the test also checks that the tiled kernels take it. [small]: the
// cases quick enough for compute-sanitizer's racecheck.
// Exits 77 (skipped) with a message where no GPU is usable.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <vector>

#include "backend.hpp"
#include "host_packer.hpp"
#include "plan_check.hpp"
#include "random_type.hpp"
#include "transpose.hpp"
#include "type_plan.hpp"

using namespace tempi;

namespace {

// What run_kernel gives the tiled kernels for `plan` between 256-byte aligned buffers
// shifted by `ts` and `ps` bytes, over stream bytes [first, last).
bool takes_tiles(const Plan &plan, int ts, int ps, int64_t first, int64_t last) {
  if (!plan.strided() || int(plan.dims.size()) > kMaxKernelDims) return false;
  StridedArgs a;
  a.start = plan.start;
  a.block = plan.pattern_size;
  a.ndims = int(plan.dims.size());
  uint64_t bits = uint64_t(ts) | uint64_t(ps) | uint64_t(first) | uint64_t(last) | uint64_t(plan.start) |
                  uint64_t(a.block);
  for (int d = 0; d < a.ndims; ++d) {
    a.counts[d] = plan.dims[d].count;
    a.strides[d] = plan.dims[d].stride;
    bits |= uint64_t(a.strides[d]);
  }
  a.first = first;
  a.last = last;
  int word = 16;
  while (word > 1 && (bits & uint64_t(word - 1))) word /= 2;
  return tiled_transpose_fits(a, word);
}

void check_whole(const Plan &plan, uint64_t seed) { check_plan(plan, 0, 0, 0, plan.packed_size(), seed); }

Plan planned(const TypeDesc &d, int64_t count = 1) {
  const std::optional<Plan> p = plan_type(d);
  REQUIRE(p);
  return p->for_count(count);
}

// The packed stream of an rows × cols row-major matrix (leading dimension ld elements)
// read column by column: the transpose, as an FFT's reshape describes it.
TypeDesc transpose(int64_t rows, int64_t cols, int64_t ld, const TypeDesc &e) {
  return desc::hvector(cols, 1, e.extent, desc::vector(rows, 1, ld, e));
}

// An n-D grid (sizes[0] fastest in memory) packed in the order `order` (order[0] fastest).
TypeDesc permuted(const std::vector<int64_t> &sizes, const std::vector<int> &order, const TypeDesc &e) {
  std::vector<int64_t> strides(sizes.size());
  int64_t pitch = e.extent;
  for (size_t d = 0; d < sizes.size(); ++d) {
    strides[d] = pitch;
    pitch *= sizes[d];
  }
  TypeDesc t = e;
  for (int d : order) t = desc::hvector(sizes[d], 1, strides[d], t);
  return t;
}

const int kElementSizes[] = {1, 2, 4, 8, 16};

}  // namespace

TEST_CASE("transposes of every element size, edge tiles included", "[gpu][transpose]") {
  uint64_t seed = 1;
  for (int e : kElementSizes)
    for (int64_t rows : {1, 31, 33, 100, 1000})
      for (int64_t cols : {1, 31, 64, 100, 1000}) {
        if (rows * cols * e > (int64_t(4) << 20) && rows != cols) continue;  // keeps the suite quick
        const Plan plan = planned(transpose(rows, cols, cols, desc::named(e)));
        INFO("element " << e << " rows " << rows << " cols " << cols << ": " << to_string(plan));
        if (rows >= 8 && cols >= 8) CHECK(takes_tiles(plan, 0, 0, 0, plan.packed_size()));
        check_whole(plan, seed++);
        // shifted buffers: aligned to the element (tiles) and misaligned (strided kernels)
        check_plan(plan, e, 2 * e, 0, plan.packed_size(), seed++);
        check_plan(plan, 1, 3, 0, plan.packed_size(), seed++);
      }
}

TEST_CASE("3-D and 4-D permutations of a grid's dimensions", "[gpu][transpose]") {
  uint64_t seed = 100;
  const std::vector<std::vector<int>> orders3 = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
  for (int e : kElementSizes)
    for (const std::vector<int> &order : orders3) {
      const Plan plan = planned(permuted({45, 33, 20}, order, desc::named(e)));
      INFO("element " << e << " order " << order[0] << order[1] << order[2] << ": " << to_string(plan));
      if (order[0] != 0) CHECK(takes_tiles(plan, 0, 0, 0, plan.packed_size()));
      check_whole(plan, seed++);
    }
  for (const std::vector<int> &order : {std::vector<int>{3, 1, 0, 2}, {2, 3, 1, 0}, {1, 3, 2, 0}}) {
    const Plan plan = planned(permuted({9, 17, 11, 40}, order, desc::named(8)));
    INFO("4-D order " << order[0] << order[1] << order[2] << order[3] << ": " << to_string(plan));
    CHECK(takes_tiles(plan, 0, 0, 0, plan.packed_size()));
    check_whole(plan, seed++);
  }
  // (x, y, z) -> (z, x, y) of a 256^3 float grid, as tools/bench_pack measures it
  const Plan plan = planned(permuted({256, 256, 256}, {2, 0, 1}, desc::named(4)));
  CHECK(takes_tiles(plan, 0, 0, 0, plan.packed_size()));
  check_whole(plan, seed++);
}

TEST_CASE("batched and sub-block transposes, counts > 1 with resized extents", "[gpu][transpose][small]") {
  uint64_t seed = 200;
  for (int e : kElementSizes) {
    INFO("element " << e);
    const TypeDesc el = desc::named(e);
    // a 37 × 45 block of a 100 × 120 matrix at row 3, column 5, transposed
    const TypeDesc block = desc::hindexed_block(1, {(3 * 120 + 5) * e}, transpose(37, 45, 120, el));
    const Plan sub = planned(block);
    CHECK(takes_tiles(sub, 0, 0, 0, sub.packed_size()));
    check_whole(sub, seed++);
    // three such matrices one after another (and with a gap) through count
    for (int64_t extent : {int64_t(100) * 120 * e, int64_t(100) * 120 * e + 3 * e}) {
      const Plan batch = planned(desc::resized(0, extent, block), 3);
      INFO(to_string(batch));
      CHECK(takes_tiles(batch, 0, 0, 0, batch.packed_size()));
      check_whole(batch, seed++);
    }
    // one column resized to one element: a count of 70 columns is the transpose
    const Plan columns = planned(desc::resized(0, e, desc::vector(50, 1, 70, el)), 70);
    CHECK(takes_tiles(columns, 0, 0, 0, columns.packed_size()));
    check_whole(columns, seed++);
  }
}

TEST_CASE("byte ranges that start and end inside tiles", "[gpu][transpose][small]") {
  std::mt19937_64 rng(7);
  for (int e : kElementSizes)
    for (const TypeDesc &d : {transpose(100, 70, 70, desc::named(e)), permuted({40, 21, 33}, {2, 0, 1}, desc::named(e)),
                              permuted({40, 21, 33}, {1, 2, 0}, desc::named(e))}) {
      const Plan plan = planned(d, 2);
      const int64_t elements = plan.packed_size() / e;
      for (int i = 0; i < 12; ++i) {
        // element-aligned ranges take tiles; the last ones are byte ranges (strided kernels)
        const int64_t a = int64_t(rng() % elements), b = a + 1 + int64_t(rng() % (elements - a));
        const bool aligned = i < 9;
        const int64_t first = aligned ? a * e : a * e + (e > 1 ? 1 : 0), last = aligned ? b * e : b * e;
        INFO("element " << e << " " << to_string(plan) << " range [" << first << "," << last << ")");
        if (aligned) CHECK(takes_tiles(plan, 0, 0, first, last));
        check_plan(plan, 0, 0, first, last, rng());
      }
      // a pipeline's chunks, one after another: together they move the whole object
      const int64_t chunk = e * 777;
      for (int64_t first = 0; first < plan.packed_size(); first += chunk)
        check_plan(plan, 0, 0, first, std::min(plan.packed_size(), first + chunk), rng());
    }
}

TEST_CASE("random permuted subarrays", "[gpu][transpose][property]") {
  const uint64_t seed = test::seed_from(0, nullptr, 20261124);
  test::RandomTypes gen(seed);
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 300; ++i) {
    const TypeDesc d = gen.permuted_subarray(64, 1 << 16);
    const Plan plan = planned(d, 1 + int64_t(rng() % 3));
    INFO("seed " << seed << " type " << i << ": " << to_string(d) << " plan " << to_string(plan));
    const int64_t size = plan.packed_size();
    check_whole(plan, rng());
    const int64_t a = int64_t(rng() % size), b = a + 1 + int64_t(rng() % (size - a));
    check_plan(plan, 0, 0, a, b, rng());
  }
}
