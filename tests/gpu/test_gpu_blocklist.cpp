// Block-list plans and contiguous runs on the GPU (cuda/blocklist.cu for short blocks,
// cuda/long_blocks.cu for long ones; issues 11 and 19), compared byte for byte with the
// host reference packer: random block lists of every length and alignment, byte ranges
// that start and end inside blocks, triangular matrices, long blocks beside 1-byte ones,
// structs of mixed members, indexed types of vectors, one contiguous run, and streams
// past 2^31 bytes (the 64-bit paths of the kernels); small patterns repeated many times
// (cuda/small_pattern.cu) at their limits and with ranges that cut instances; medium
// blocks. Outputs are
// poisoned; the typed and the packed source buffers end at their last byte, so that
// compute-sanitizer's memcheck sees any read past them. Exits 77 (skipped) with a
// message where no GPU is usable.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend.hpp"
#include "device_buf.hpp"
#include "blocklist.hpp"
#include "host_packer.hpp"
#include "type_plan.hpp"

using namespace tempi;

namespace {

// Bytes that differ from their neighbours and between calls (splitmix64).
std::vector<unsigned char> random_bytes(int64_t n, uint64_t seed) {
  std::vector<unsigned char> v(size_t(n) + 8);
  for (int64_t i = 0; i < n; i += 8) {
    uint64_t z = (seed += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    std::memcpy(v.data() + i, &z, 8);
  }
  v.resize(size_t(n));
  return v;
}

// The typed bytes a plan touches, [lo, hi) relative to the typed pointer, with the
// pointer itself (lo <= 0): TEMPI classifies the buffer by that pointer, which must lie
// in the allocation, as an application's does. Nothing follows the last byte touched.
struct Span {
  int64_t lo = 0, hi = 0;
  // Over stream bytes [first, last): a plan of more instances than a host can walk needs
  // the range's alone.
  explicit Span(const Plan &p, int64_t first = 0, int64_t last = -1) {
    for_each_segment(p, first, last < 0 ? p.packed_size() : last, [&](int64_t t, int64_t, int64_t n) {
      lo = std::min(lo, t);
      hi = std::max(hi, t + n);
    });
  }
  int64_t bytes() const { return hi - lo; }
};

// Packs stream bytes [first, last) of `plan` on the GPU with the typed data `ts` bytes
// past an allocation's start and the packed bytes `ps` bytes past one, then unpacks
// them into a poisoned typed buffer; both compared with the host packer.
// With `range_span`, the typed buffer holds only the instances that [first, last) touches.
void check_range(const Plan &plan, int ts, int ps, int64_t first, int64_t last, uint64_t seed,
                 bool range_span = false) {
  const int64_t size = plan.pattern_size;
  const Span span = range_span ? Span(plan, first / size * size, std::min(plan.packed_size(), (last + size - 1) / size * size))
                               : Span(plan);
  const int64_t n = last - first;
  INFO(to_string(plan) << " range [" << first << "," << last << ") typed shift " << ts << " packed shift " << ps);
  const std::vector<unsigned char> typed = random_bytes(span.bytes(), seed);
  DeviceBuf dtyped(ts + span.bytes());
  char *t0 = dtyped.at(ts) - span.lo;  // the address of typed offset 0
  CUDA_OK(cudaMemcpy(dtyped.at(ts), typed.data(), size_t(span.bytes()), cudaMemcpyHostToDevice));

  // pack into a poisoned buffer: nothing outside [ps, ps + n) may change
  const int64_t room = ps + n + 64;
  const std::vector<unsigned char> poison = random_bytes(room, seed + 1);
  DeviceBuf dout(room);
  CUDA_OK(cudaMemcpy(dout.base, poison.data(), size_t(room), cudaMemcpyHostToDevice));
  REQUIRE(gpu_backend().pack(plan, t0, dout.at(ps), first, last) == Status::Ok);
  std::vector<unsigned char> expect = poison;
  std::vector<unsigned char> got(static_cast<size_t>(room));
  host_pack(plan, typed.data() - span.lo, expect.data() + ps, first, last);
  CUDA_OK(cudaMemcpy(got.data(), dout.base, size_t(room), cudaMemcpyDeviceToHost));
  REQUIRE(got == expect);

  // unpack from a buffer of exactly the packed bytes into a poisoned typed buffer
  DeviceBuf din(ps + n);
  CUDA_OK(cudaMemcpy(din.at(ps), expect.data() + ps, size_t(n), cudaMemcpyHostToDevice));
  std::vector<unsigned char> image = random_bytes(span.bytes(), seed + 2);
  CUDA_OK(cudaMemcpy(dtyped.at(ts), image.data(), size_t(span.bytes()), cudaMemcpyHostToDevice));
  REQUIRE(gpu_backend().unpack(plan, din.at(ps), t0, first, last) == Status::Ok);
  host_unpack(plan, expect.data() + ps, image.data() - span.lo, first, last);
  std::vector<unsigned char> back(size_t(span.bytes()));
  CUDA_OK(cudaMemcpy(back.data(), dtyped.at(ts), size_t(span.bytes()), cudaMemcpyDeviceToHost));
  REQUIRE(back == image);
}

// The whole stream at several alignments, then random ranges.
void check_plan(const Plan &plan, std::mt19937_64 &rng, int ranges = 6) {
  const int64_t size = plan.packed_size();
  REQUIRE(size > 0);
  for (int ts : {0, 1, 8}) check_range(plan, ts, int(rng() % 16), 0, size, rng());
  for (int i = 0; i < ranges; ++i) {
    const int64_t a = int64_t(rng() % uint64_t(size)), b = a + 1 + int64_t(rng() % uint64_t(size - a));
    check_range(plan, int(rng() % 16), int(rng() % 16), a, b, rng());
  }
}

Plan planned(const TypeDesc &d, int64_t count) {
  const std::optional<Plan> p = plan_type(d);
  REQUIRE(p);
  return p->for_count(count);
}

const TypeDesc B1 = desc::named(1), B2 = desc::named(2), B4 = desc::named(4), B8 = desc::named(8);

// Blocks of MPI_BYTE, packed in memory order or (shuffled) in another.
TypeDesc blocks_in_order(std::vector<int64_t> len, std::vector<int64_t> disp, bool shuffled, std::mt19937_64 &rng) {
  if (shuffled) {
    std::vector<size_t> order(len.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<int64_t> l2, d2;
    for (size_t i : order) {
      l2.push_back(len[i]);
      d2.push_back(disp[i]);
    }
    len.swap(l2);
    disp.swap(d2);
  }
  return desc::hindexed(len, disp, B1);
}

// `n` blocks of MPI_BYTE: lengths from 1 to max_len (log-uniform, so short and long
// ones both occur), gaps of 0-99 bytes, the first block at any alignment.
TypeDesc random_blocks(std::mt19937_64 &rng, int n, int64_t max_len, bool shuffled) {
  std::vector<int64_t> len, disp;
  int64_t at = int64_t(rng() % 64);
  for (int i = 0; i < n; ++i) {
    const double u = std::uniform_real_distribution<double>(0, std::log(double(max_len)))(rng);
    len.push_back(std::max<int64_t>(1, std::min<int64_t>(max_len, int64_t(std::exp(u)))));
    disp.push_back(at);
    at += len.back() + int64_t(rng() % 100);
  }
  return blocks_in_order(len, disp, shuffled, rng);
}

// Column-major N x N doubles, one column per block (the ScaLAPACK case, issue 19).
TypeDesc triangle(int64_t n, bool lower) {
  std::vector<int64_t> len, disp;
  for (int64_t j = 0; j < n; ++j) {
    len.push_back(lower ? n - j : j + 1);
    disp.push_back(lower ? j * n + j : j * n);
  }
  return desc::indexed(len, disp, B8);
}

// Whether the backend moves `plan` with the long-block kernel (cuda/long_blocks.cu).
bool takes_long_blocks(const Plan &plan) { return !plan.strided() && !plan.contiguous() && long_block_plan(plan); }

// Whether it moves `plan`'s whole instances with the tiled kernel (cuda/small_pattern.cu).
bool takes_small_pattern(const Plan &plan) {
  return !plan.strided() && !plan.contiguous() && !long_block_plan(plan) && small_pattern_plan(plan);
}

// `n` blocks of 32-300 bytes at any alignment,
// gaps of 0-99 bytes, in memory order or shuffled.
TypeDesc medium_blocks(std::mt19937_64 &rng, int n, bool shuffled) {
  std::vector<int64_t> len, disp;
  int64_t at = int64_t(rng() % 64);
  for (int i = 0; i < n; ++i) {
    len.push_back(32 + int64_t(rng() % 269));
    disp.push_back(at);
    at += len.back() + int64_t(rng() % 100);
  }
  return blocks_in_order(len, disp, shuffled, rng);
}

// Ranges that start and end near instance boundaries of the tiled kernel (and so near tile
// boundaries, which are instance boundaries): `n` of them, each ending up to 40 bytes
// either side.
void check_instance_cuts(const Plan &plan, std::mt19937_64 &rng, int n) {
  const int64_t size = int64_t(small_pattern_image(plan).map.size()), instances = plan.packed_size() / size;
  for (int i = 0; i < n; ++i) {
    const int64_t a = std::max<int64_t>(0, int64_t(rng() % uint64_t(instances)) * size - int64_t(rng() % 41) + 20);
    const int64_t b = std::min(plan.packed_size(),
                               a + 1 + int64_t(rng() % uint64_t(instances)) * size / 4 + int64_t(rng() % 41));
    check_range(plan, int(rng() % 16), int(rng() % 16), std::min(a, plan.packed_size() - 1), b, rng());
  }
}

const TypeDesc kStruct = desc::structure({1, 3, 1, 2}, {0, 5, 29, 33}, {desc::named(4), desc::named(8),
                                                                         desc::named(1), desc::named(2)});

// `n` long blocks of MPI_BYTE (300 B to 9 KiB, some longer than a warp's piece, at any
// alignment), each with a 1-byte block beside it, gaps of 0-99 bytes; in memory order or
// shuffled. The blocks average well above the long-block threshold.
TypeDesc long_blocks_with_bytes(std::mt19937_64 &rng, int n, bool shuffled) {
  std::vector<int64_t> len, disp;
  int64_t at = int64_t(rng() % 64);
  for (int i = 0; i < n; ++i) {
    for (int64_t l : {int64_t(300 + rng() % 9000), int64_t(1)}) {
      len.push_back(l);
      disp.push_back(at);
      at += l + int64_t(rng() % 100);
    }
    if (rng() % 2) std::swap(len[len.size() - 1], len[len.size() - 2]), std::swap(disp[disp.size() - 1], disp[disp.size() - 2]);
  }
  return blocks_in_order(len, disp, shuffled, rng);
}

// A range across 2^31 (small host images), typed and packed data `ts` and `ps` bytes past
// their allocations' starts, then with `whole` the whole stream; skipped with a warning
// where the device has not the memory.
void check_past_2_31(const Plan &plan, uint64_t seed, int ts, int ps, bool whole) {
  size_t free_bytes = 0, total = 0;
  CUDA_OK(cudaMemGetInfo(&free_bytes, &total));
  if (int64_t(free_bytes) < Span(plan).bytes() + 2 * plan.packed_size() + (int64_t(1) << 30)) {
    WARN("skipped: not enough free device memory for a 2^31-byte stream");
    return;
  }
  std::mt19937_64 rng(seed);
  check_range(plan, ts, ps, (int64_t(1) << 31) - 100000, (int64_t(1) << 31) + 100000, rng());
  if (whole) check_range(plan, 0, 0, 0, plan.packed_size(), rng());
}

}  // namespace

TEST_CASE("random block lists: lengths 1 B to 64 KiB, every alignment, byte ranges", "[gpu][blocklist]") {
  std::mt19937_64 rng(20261123);
  for (int64_t max_len : {3, 16, 100, 4096, 65536})
    for (bool shuffled : {false, true})
      for (int64_t count : {1, 3}) {
        const Plan plan = planned(random_blocks(rng, 1 + int(rng() % 300), max_len, shuffled), count);
        check_plan(plan, rng);
      }
}

TEST_CASE("byte ranges that start and end inside blocks", "[gpu][blocklist]") {
  std::mt19937_64 rng(7);
  const Plan plan = planned(random_blocks(rng, 50, 2000, false), 2);
  std::vector<int64_t> ends;  // packed offsets where blocks end
  for_each_segment(plan, 0, plan.packed_size(), [&](int64_t, int64_t p, int64_t n) { ends.push_back(p + n); });
  for (int i = 0; i < 40; ++i) {
    const int64_t e = ends[rng() % ends.size()];
    const int64_t a = std::max<int64_t>(0, e - 1 - int64_t(rng() % 40));
    const int64_t b = std::min(plan.packed_size(), e + 1 + int64_t(rng() % 40));
    check_range(plan, int(rng() % 16), int(rng() % 16), a, b, rng());
  }
}

TEST_CASE("lower and upper triangles, one column per block", "[gpu][blocklist]") {
  std::mt19937_64 rng(19);
  for (int64_t n : {1, 2, 7, 100, 1000})
    for (bool lower : {true, false})
      for (int64_t count : {1, 2}) check_plan(planned(triangle(n, lower), count), rng, 4);
}

TEST_CASE("long blocks: 1-byte blocks beside long ones, every alignment, count > 1", "[gpu][blocklist][long]") {
  std::mt19937_64 rng(1919);
  for (bool shuffled : {false, true})
    for (int64_t count : {1, 2, 5}) {
      const Plan plan = planned(long_blocks_with_bytes(rng, 1 + int(rng() % 40), shuffled), count);
      REQUIRE(takes_long_blocks(plan));
      check_plan(plan, rng, 8);
    }
  // blocks of exactly a warp's piece (2016 B), of a piece and a byte, of 2 and 64 KiB; odd offsets
  for (int64_t l : {2016, 2017, 2048, 65536}) {
    const Plan plan = planned(desc::hindexed({l, 1, l}, {3, l + 5, l + 17}, B1), 3);
    REQUIRE(takes_long_blocks(plan));
    check_plan(plan, rng);
  }
}

TEST_CASE("long blocks: byte ranges that cut blocks, pieces and instances", "[gpu][blocklist][long]") {
  std::mt19937_64 rng(2019);
  const Plan plan = planned(long_blocks_with_bytes(rng, 12, true), 3);
  REQUIRE(takes_long_blocks(plan));
  std::vector<int64_t> ends;  // packed offsets where blocks end (instances end there too)
  for_each_segment(plan, 0, plan.packed_size(), [&](int64_t, int64_t p, int64_t n) { ends.push_back(p + n); });
  for (int i = 0; i < 40; ++i) {  // around a block's end
    const int64_t e = ends[rng() % ends.size()];
    const int64_t a = std::max<int64_t>(0, e - 1 - int64_t(rng() % 40));
    const int64_t b = std::min(plan.packed_size(), e + 1 + int64_t(rng() % 40));
    check_range(plan, int(rng() % 16), int(rng() % 16), a, b, rng());
  }
  for (int i = 0; i < 30; ++i) {  // short ranges anywhere, and ranges of a few pieces
    const int64_t len = i % 2 ? 1 + int64_t(rng() % 48) : 1 + int64_t(rng() % 10000);
    const int64_t a = int64_t(rng() % uint64_t(plan.packed_size() - len));
    check_range(plan, int(rng() % 16), int(rng() % 16), a, a + len, rng());
  }
}

TEST_CASE("long blocks: indexed types of long vectors, triangles of the benchmark's size", "[gpu][blocklist][long]") {
  std::mt19937_64 rng(4000);
  // runs of equal blocks, 800 or 803 bytes at strides of 1040 or 1041
  for (const TypeDesc &d : {desc::indexed({2, 1, 3}, {0, 7, 11}, desc::vector(5, 100, 130, B8)),
                            desc::hindexed({1, 2}, {3, 60001}, desc::vector(7, 803, 1041, B1))})
    for (int64_t count : {1, 4}) {
      const Plan plan = planned(d, count);
      REQUIRE(takes_long_blocks(plan));
      check_plan(plan, rng, 4);
    }
  for (bool lower : {true, false}) {
    const Plan plan = planned(triangle(2000, lower), 1);
    REQUIRE(takes_long_blocks(plan));
    check_plan(plan, rng, 3);
  }
}

TEST_CASE("medium blocks (32-300 bytes) at every alignment, ranges that cut blocks", "[gpu][blocklist]") {
  std::mt19937_64 rng(6464);
  for (bool shuffled : {false, true})
    for (int64_t count : {1, 2, 5}) {
      const Plan plan = planned(medium_blocks(rng, 20 + int(rng() % 200), shuffled), count);
      check_plan(plan, rng, 8);
      std::vector<int64_t> ends;  // around block ends, and short ranges anywhere
      for_each_segment(plan, 0, plan.packed_size(), [&](int64_t, int64_t p, int64_t n) { ends.push_back(p + n); });
      for (int i = 0; i < 16; ++i) {
        const int64_t e = ends[rng() % ends.size()];
        check_range(plan, int(rng() % 16), int(rng() % 16), std::max<int64_t>(0, e - 1 - int64_t(rng() % 300)),
                    std::min(plan.packed_size(), e + 1 + int64_t(rng() % 300)), rng());
      }
    }
  // 64-byte blocks at random byte offsets (the benchmark's row, smaller); 32-byte blocks
  for (int64_t len : {64, 32}) {
    std::vector<int64_t> disp;
    for (int64_t i = 0; i < 3000; ++i) disp.push_back(i * 200 + int64_t(rng() % 137));
    const Plan plan = planned(desc::hindexed_block(len, disp, B1), 1);
    check_plan(plan, rng, 8);
  }
}

TEST_CASE("structs of mixed members, many small instances", "[gpu][blocklist][small]") {
  std::mt19937_64 rng(5);
  const TypeDesc &s = kStruct;
  for (const TypeDesc &d : {s, desc::resized(0, 48, s), desc::resized(-8, 40, s)})
    for (int64_t count : {1, 7, 1000, 100000}) {
      const Plan plan = planned(d, count);
      REQUIRE(takes_small_pattern(plan));
      check_plan(plan, rng, 3);
    }
}

TEST_CASE("small patterns: arrays and subarrays of structs, overlapping spans, repeated bytes, cut ranges",
          "[gpu][blocklist][small]") {
  std::mt19937_64 rng(2611);
  const TypeDesc &s = kStruct;
  const std::vector<TypeDesc> types = {
      desc::resized(0, 40, s),
      desc::resized(0, 24, s),                                   // spans overlap, typed bytes too
      desc::vector(6, 2, 5, desc::resized(0, 40, s)),            // a subarray: two dimensions of instances
      desc::resized(0, 16, desc::hindexed({3, 1, 2}, {13, 0, 5}, B1)),  // packed order not memory order
      desc::indexed_block(1, {7, 7, 1, 3}, desc::named(16)),      // bytes repeated in an instance
      desc::hindexed({5, 3}, {0, 61}, B1),                       // the sparsest: span 8 x the packed bytes
  };
  for (const TypeDesc &d : types)
    for (int64_t count : {1, 3, 1000, 20000}) {
      const Plan plan = planned(d, count);
      REQUIRE(takes_small_pattern(plan));
      check_plan(plan, rng, 3);
      if (count >= 1000) check_instance_cuts(plan, rng, 12);
    }
  // random short blocks at every alignment, shuffled or not, extents with gaps after
  int taken = 0;
  for (int k = 0; k < 16; ++k) {
    const TypeDesc b = random_blocks(rng, 2 + int(rng() % 30), 40, k % 2 == 1);
    const Plan one = planned(b, 1);
    const Plan plan = planned(desc::resized(0, Span(one).hi + int64_t(rng() % 9), b), 1 + int64_t(rng() % 3000));
    if (!takes_small_pattern(plan)) continue;  // a draw too sparse or too long
    ++taken;
    check_plan(plan, rng, 4);
    check_instance_cuts(plan, rng, 4);
  }
  REQUIRE(taken >= 8);
}

TEST_CASE("small patterns: the largest that take the tiled kernel, and the first that do not",
          "[gpu][blocklist][small]") {
  std::mt19937_64 rng(2048);
  // 16 blocks of 115-127 bytes, 128 apart: a span of 2048 bytes (the most a tile takes)
  std::vector<int64_t> len, disp;
  for (int64_t i = 0; i < 16; ++i) {
    len.push_back(i == 15 ? 128 : 127 - (i * 7) % 13);
    disp.push_back(128 * i);
  }
  const Plan largest = planned(desc::hindexed(len, disp, B1), 500);
  REQUIRE(takes_small_pattern(largest));
  check_plan(largest, rng, 4);
  check_instance_cuts(largest, rng, 8);
  // the last block a byte longer: a span of 2049
  len.back() = 129;
  const Plan over = planned(desc::hindexed(len, disp, B1), 50);
  REQUIRE_FALSE(takes_small_pattern(over));
  check_plan(over, rng, 2);
  // 8 packed bytes in a span of 64 take it; in a span of 65 (sparser than 1 in 8) not
  const Plan sparsest = planned(desc::hindexed({5, 3}, {0, 61}, B1), 300);
  REQUIRE(takes_small_pattern(sparsest));
  check_plan(sparsest, rng, 2);
  const Plan sparse = planned(desc::hindexed({5, 3}, {0, 62}, B1), 300);
  REQUIRE_FALSE(takes_small_pattern(sparse));
  check_plan(sparse, rng, 2);
}

TEST_CASE("small patterns: instance numbers past 2^31 take the 64-bit path", "[gpu][blocklist][small]") {
  // 2^31 + 4000 structs; the typed buffer holds only the ~3000 around instance 2^31 that the
  // ranges touch (the plan's start moved so that they lie at the allocation)
  Plan plan = planned(desc::resized(0, 40, kStruct), (int64_t(1) << 31) + 4000);
  REQUIRE(takes_small_pattern(plan));
  const int64_t skip = (int64_t(1) << 31) - 1000, size = plan.pattern_size;
  plan.start -= skip * plan.extent;
  plan.id = 0;
  std::mt19937_64 rng(31);
  check_range(plan, 3, 5, skip * size, (skip + 3000) * size, rng(), true);
  check_range(plan, 0, 7, skip * size + 17, (skip + 2500) * size - 3, rng(), true);
}

TEST_CASE("gathers of one small shape: groups of the tiled kernel", "[gpu][blocklist][small]") {
  std::mt19937_64 rng(4100);
  std::vector<TypeDesc> types;
  // 64-byte and 8-byte blocks at random byte offsets, in memory order or shuffled
  for (int64_t len : {64, 8})
    for (bool shuffled : {false, true}) {
      std::vector<int64_t> disp;
      for (int64_t i = 0; i < 3000; ++i) disp.push_back(i * 200 + int64_t(rng() % 131));
      if (shuffled) std::shuffle(disp.begin(), disp.end(), rng);
      types.push_back(desc::hindexed_block(len, disp, B1));
    }
  // selected structs in any order, some twice; doubles picked from an array
  std::vector<int64_t> picked;
  for (int i = 0; i < 2000; ++i) picked.push_back(int64_t(rng() % 40000));
  types.push_back(desc::indexed_block(1, picked, desc::resized(0, 40, kStruct)));
  types.push_back(desc::indexed_block(1, picked, B8));
  // floats picked in order, adjacent ones merged into longer blocks: pieces of 4 bytes
  std::vector<int64_t> near;
  for (int64_t i = 0; i < 3000; ++i) near.push_back(3 * i + int64_t(rng() % 3));
  types.push_back(desc::indexed_block(1, near, B4));
  for (const TypeDesc &d : types)
    for (int64_t count : {1, 3}) {
      const Plan plan = planned(d, count);
      REQUIRE(takes_small_pattern(plan));
      REQUIRE_FALSE(small_pattern_image(plan).groups.empty());
      check_plan(plan, rng, 4);
      check_instance_cuts(plan, rng, 8);
    }
}

// Whether the tiled kernel's instances of `plan` are one block of a multiple of 16 bytes:
// with the packed side 16-byte aligned, the one-lane-per-word kernels move them.
bool takes_words(const Plan &plan) {
  if (!takes_small_pattern(plan)) return false;
  const SmallPatternImage im = small_pattern_image(plan);
  return im.one_block && im.map.size() % 16 == 0;
}

// The packed shift that puts the first whole instance of [first, last) on 16 bytes.
int aligned_shift(const Plan &plan, int64_t first) {
  const int64_t size = int64_t(small_pattern_image(plan).map.size());
  const int64_t whole = (first + size - 1) / size * size;
  return int(((first - whole) % 16 + 16) % 16);
}

TEST_CASE("gathers of blocks of 16 k bytes: one lane per word, every typed alignment", "[gpu][blocklist][small][words]") {
  std::mt19937_64 rng(4200);
  for (int64_t len : {16, 48, 64, 208})
    for (int layout = 0; layout < 3; ++layout) {
      // 0: random byte offsets; 1: shuffled; 2: blocks 0-15 bytes apart, so that neighbours
      // share the aligned 16-byte chunks at their ends
      std::vector<int64_t> disp;
      for (int64_t i = 0, at = int64_t(rng() % 16); i < 1500; ++i) {
        disp.push_back(layout == 2 ? at : i * (len + 150) + int64_t(rng() % 131));
        at += len + int64_t(rng() % 16);
      }
      if (layout == 1) std::shuffle(disp.begin(), disp.end(), rng);
      for (int64_t count : {1, 3}) {
        const Plan plan = planned(desc::hindexed_block(len, disp, B1), count);
        INFO("block " << len << " layout " << layout << " count " << count);
        REQUIRE(takes_words(plan));
        const int64_t size = plan.packed_size();
        for (int ts : {0, 1, 7, 8, 15}) check_range(plan, ts, 0, 0, size, rng());
        check_range(plan, 3, 16, 0, size, rng());
        for (int i = 0; i < 6; ++i) {  // ranges that cut blocks, the whole ones aligned
          const int64_t a = int64_t(rng() % uint64_t(size)), b = a + 1 + int64_t(rng() % uint64_t(size - a));
          check_range(plan, int(rng() % 16), aligned_shift(plan, a), a, b, rng());
        }
        check_range(plan, 5, 3, 0, size, rng());  // packed side unaligned: the tiled kernel
      }
    }
}

// Packing a small pattern reads whole 16-byte chunks past the type's bytes only inside the
// typed buffer's allocation, as the driver reports it for the address of typed offset 0.
// Here the allocation is exactly the instances' span, from each allocator an application
// uses, so that compute-sanitizer's memcheck sees any read past it: its first instance at
// every alignment, its last one ending at the allocation's last byte. Both kernels: 64-byte
// blocks (one lane per word) and picked structs of mixed members (the tiled kernel). With
// typed offset 0 in another allocation (a type at large displacements), the driver's range
// is not the instances' and every chunk is read the narrow way.
TEST_CASE("small patterns read nothing outside the typed allocation when packing", "[gpu][blocklist][small][words]") {
  enum class Alloc { Device, Pool, Managed };
  std::mt19937_64 rng(4300);
  DeviceBuf elsewhere(1 << 20);
  const TypeDesc picked_struct = desc::resized(0, 40, kStruct);
  for (Alloc alloc : {Alloc::Device, Alloc::Pool, Alloc::Managed})
    for (bool structs : {false, true})
      for (bool same : {true, false})
        for (int ts = 0; ts < 16; ++ts) {
          std::vector<int64_t> at;  // the instances' offsets in the allocation
          for (int64_t i = 0, x = ts; i < 300; ++i, x += structs ? 40 * int64_t(1 + rng() % 3) : 64 + int64_t(rng() % 40))
            at.push_back(x);
          std::shuffle(at.begin() + 1, at.end() - 1, rng);  // the first and last stay at the two ends
          auto gather = [&](const std::vector<int64_t> &disp) {
            return structs ? desc::hindexed_block(1, disp, picked_struct) : desc::hindexed_block(64, disp, B1);
          };
          const Plan local = planned(gather(at), 1);
          const int64_t bytes = Span(local).hi;  // ends at the last instance's last typed byte
          void *base = nullptr;
          if (alloc == Alloc::Device) CUDA_OK(cudaMalloc(&base, size_t(bytes)));
          if (alloc == Alloc::Pool) CUDA_OK(cudaMallocAsync(&base, size_t(bytes), nullptr));
          if (alloc == Alloc::Managed) CUDA_OK(cudaMallocManaged(&base, size_t(bytes)));
          char *t0 = same ? static_cast<char *>(base) : elsewhere.at(0);  // typed offset 0
          const int64_t off = static_cast<char *>(base) - t0;
          std::vector<int64_t> disp;
          for (int64_t x : at) disp.push_back(off + x);
          const Plan plan = planned(gather(disp), 1);
          REQUIRE(takes_small_pattern(plan));
          CHECK(takes_words(plan) == !structs);
          INFO((structs ? "picked structs" : "64-byte blocks") << ", allocator " << int(alloc)
                                                                << (same ? ", typed offset 0 at its start" : ", typed offset 0 elsewhere")
                                                                << ", allocation of " << bytes << " bytes, first instance at +" << ts);
          const std::vector<unsigned char> typed = random_bytes(bytes, rng());
          CUDA_OK(cudaMemcpy(base, typed.data(), size_t(bytes), cudaMemcpyHostToDevice));
          const int64_t n = plan.packed_size();
          DeviceBuf out(n);
          REQUIRE(gpu_backend().pack(plan, t0, out.base, 0, n) == Status::Ok);
          std::vector<unsigned char> expect(static_cast<size_t>(n)), got(static_cast<size_t>(n));
          host_pack(local, typed.data(), expect.data(), 0, n);  // the same bytes, offsets from the allocation
          CUDA_OK(cudaMemcpy(got.data(), out.base, size_t(n), cudaMemcpyDeviceToHost));
          CHECK(got == expect);
          CUDA_OK(alloc == Alloc::Pool ? cudaFreeAsync(base, nullptr) : cudaFree(base));
        }
  CUDA_OK(cudaDeviceSynchronize());
}

TEST_CASE("gathers of one small shape: instance numbers past 2^31 take the 64-bit path", "[gpu][blocklist][small]") {
  // 300 blocks of 8 bytes at random offsets in an extent of 30,000 (2,400 packed bytes: groups
  // of one block), 7.16 million times: instances (repetition x 300 + group) pass 2^31; the
  // typed buffer holds only the repetitions the ranges touch
  std::mt19937_64 rng(3100);
  std::vector<int64_t> disp;
  for (int64_t i = 0; i < 300; ++i) disp.push_back(i * 100 + int64_t(rng() % 93));
  const int64_t reps = (int64_t(1) << 31) / 300 + 40;
  Plan plan = planned(desc::resized(0, 30000, desc::hindexed_block(8, disp, B1)), reps);
  REQUIRE(takes_small_pattern(plan));
  REQUIRE(small_pattern_image(plan).groups.size() == 300);
  const int64_t skip = (int64_t(1) << 31) / 300 - 10, size = plan.pattern_size;
  REQUIRE((skip + 30) * 300 > (int64_t(1) << 31));
  plan.start -= skip * plan.extent;
  plan.id = 0;
  check_range(plan, 3, 5, skip * size, (skip + 30) * size, rng(), true);
  check_range(plan, 0, 7, skip * size + 13, (skip + 25) * size - 5, rng(), true);
  // the same with blocks of 16 bytes, packed side aligned: the word kernels' 64-bit path
  Plan words = planned(desc::resized(0, 30000, desc::hindexed_block(16, disp, B1)), reps);
  REQUIRE(takes_words(words));
  words.start -= skip * words.extent;
  words.id = 0;
  const int64_t wsize = words.pattern_size;
  check_range(words, 3, 0, skip * wsize, (skip + 30) * wsize, rng(), true);
  check_range(words, 9, aligned_shift(words, skip * wsize + 21), skip * wsize + 21, (skip + 25) * wsize - 7, rng(), true);
}

TEST_CASE("indexed types of vectors", "[gpu][blocklist]") {
  std::mt19937_64 rng(3);
  const TypeDesc v = desc::vector(5, 3, 7, B4);
  for (const TypeDesc &d : {desc::indexed({2, 1, 3}, {0, 7, 11}, v), desc::hindexed({1, 2}, {3, 1000}, v),
                            desc::indexed({1, 1}, {0, 1}, desc::vector(1000, 1, 3, B2))})
    for (int64_t count : {1, 5, 3000}) check_plan(planned(d, count), rng, 3);
}

TEST_CASE("repeated and overlapping blocks", "[gpu][blocklist]") {
  // Packing reads such bytes twice; unpacking the packed bytes writes equal values twice.
  std::mt19937_64 rng(17);
  for (const TypeDesc &d : {desc::indexed_block(1, {7, 7, 1, 3}, desc::named(16)),
                            desc::hindexed({40, 40, 100}, {3, 3, 20}, B1),
                            desc::indexed({2, 3}, {0, 1}, desc::vector(4, 2, 3, B4))})
    for (int64_t count : {1, 3}) check_plan(planned(d, count), rng, 3);
}

TEST_CASE("one contiguous run goes to the copy engine, byte ranges too", "[gpu][blocklist]") {
  std::mt19937_64 rng(11);
  for (const TypeDesc &d : {desc::contiguous(1000, B1), desc::vector(64, 512, 512, B1),
                            desc::hindexed({100, 156}, {7, 107}, B1)}) {
    const Plan plan = planned(d, 3);
    REQUIRE(plan.contiguous());
    check_plan(plan, rng);
  }
}

TEST_CASE("a stream past 2^31 bytes takes the 64-bit path", "[gpu][blocklist][large]") {
  // 3 short blocks (141 bytes: the tiled kernel for whole instances, the byte-balanced one
  // for the ends of ranges) in an extent of 200, 15.3 million times: 2.16 GB packed, 3.1 GB
  // typed
  const Plan plan = planned(desc::resized(0, 200, desc::hindexed({100, 40, 1}, {3, 110, 160}, B1)), 15300000);
  REQUIRE(plan.packed_size() > (int64_t(1) << 31));
  REQUIRE(takes_small_pattern(plan));
  check_past_2_31(plan, 13, 3, 5, true);
}

TEST_CASE("a stream of short blocks past 2^31 bytes, byte-balanced kernel alone", "[gpu][blocklist][large]") {
  // 110 blocks of 19-21 bytes 24 apart (2199 packed bytes: too many for one instance of the
  // tiled kernel; lengths that repeat every 3 blocks make no groups, since 3 divides no
  // divisor of 110) in an extent of 2640, a million times: 2.2 GB packed, 2.64 GB typed
  std::vector<int64_t> len, disp;
  for (int64_t i = 0; i < 110; ++i) {
    len.push_back(19 + i % 3);
    disp.push_back(7 + 24 * i + (i % 3));
  }
  const Plan plan = planned(desc::resized(0, 2640, desc::hindexed(len, disp, B1)), 1000000);
  REQUIRE(plan.packed_size() > (int64_t(1) << 31));
  REQUIRE_FALSE(takes_small_pattern(plan));
  REQUIRE_FALSE(takes_long_blocks(plan));
  check_past_2_31(plan, 29, 3, 5, true);
}

TEST_CASE("a stream of long blocks past 2^31 bytes takes the 64-bit path", "[gpu][blocklist][large]") {
  // 1000, 1 and 3000 bytes (the long-block kernel) in an extent of 4200, 540,000 times:
  // 2.16 GB packed
  const Plan plan = planned(desc::resized(0, 4200, desc::hindexed({1000, 1, 3000}, {3, 1010, 1100}, B1)), 540000);
  REQUIRE(plan.packed_size() > (int64_t(1) << 31));
  REQUIRE(takes_long_blocks(plan));
  check_past_2_31(plan, 17, 5, 3, false);
}
