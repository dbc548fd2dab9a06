// Zero-copy's paired runs on the GPU (launch_paired_runs in cuda/pairs_kernels.cu), compared
// byte for byte with packing the source object and unpacking into the destination on the
// host: random block lists with blocks of 1 byte to several kilobytes at every alignment
// of either side (runs cut at kPairedRunBytes, and at the ends of both sides' blocks),
// prefixes of the stream, and triangles of doubles at every shift of either base mod 16.
// The destination is poisoned, with a margin on both sides, so that a byte written
// outside the runs fails the comparison; the source is allocated to the byte, so that
// compute-sanitizer's memcheck sees any read past it. Exits 77 (skipped) with a message
// where no GPU is usable.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <random>
#include <vector>

#include "backend.hpp"
#include "device_buf.hpp"
#include "host_packer.hpp"
#include "kernels.hpp"
#include "paired_runs.hpp"

using namespace tempi;

namespace {

constexpr int64_t kMargin = 64;  // poisoned bytes either side of the destination's span

// The typed bytes a plan touches over stream bytes [0, bytes): [lo, hi) from its origin.
struct Span {
  int64_t lo = 0, hi = 0;
  Span(const Plan &p, int64_t bytes) {
    bool first = true;
    for_each_segment(p, 0, bytes, [&](int64_t t, int64_t, int64_t n) {
      lo = first ? t : std::min(lo, t);
      hi = first ? t + n : std::max(hi, t + n);
      first = false;
    });
  }
};

std::vector<unsigned char> random_bytes(int64_t n, uint64_t seed) {
  std::vector<unsigned char> v(size_t(std::max<int64_t>(n, 0)));
  std::mt19937_64 rng(seed);
  for (unsigned char &c : v) c = static_cast<unsigned char>(rng());
  return v;
}

// Moves `bytes` stream bytes from `from` to `to` with launch_paired_runs and checks the
// destination (with its margins) against the host's pack and unpack.
void check_move(const Plan &from, const Plan &to, int64_t bytes, uint64_t seed) {
  const std::vector<PairedRun> runs = paired_runs(from, to, bytes, kPairedRunBytes, size_t(1) << 22);
  REQUIRE_FALSE(runs.empty());
  for (const PairedRun &r : runs) REQUIRE(r.length <= kPairedRunBytes);
  const Span fs(from, bytes), ts(to, bytes);
  const int64_t src_bytes = fs.hi - fs.lo, dst_bytes = ts.hi - ts.lo + 2 * kMargin;

  const std::vector<unsigned char> src = random_bytes(src_bytes, seed);
  std::vector<unsigned char> expect = random_bytes(dst_bytes, seed ^ 0x5a5a5a5aull);
  std::vector<unsigned char> packed(static_cast<size_t>(bytes));
  const int64_t dst_origin = kMargin - ts.lo;  // where the destination plan's offset 0 is
  host_pack(from, src.data() - fs.lo, packed.data(), 0, bytes);
  std::vector<unsigned char> got = expect;  // the poison, before the move
  host_unpack(to, packed.data(), expect.data() + dst_origin, 0, bytes);

  DeviceBuf dsrc(src_bytes), ddst(dst_bytes), druns(int64_t(runs.size() * sizeof(PairedRun)));
  CUDA_OK(cudaMemcpy(dsrc.base, src.data(), src.size(), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(ddst.base, got.data(), got.size(), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(druns.base, runs.data(), runs.size() * sizeof(PairedRun), cudaMemcpyHostToDevice));
  const char *from_origin = static_cast<const char *>(dsrc.base) - fs.lo;
  char *to_origin = static_cast<char *>(ddst.base) + dst_origin;
  REQUIRE(launch_paired_runs(static_cast<const PairedRun *>(druns.base), int64_t(runs.size()), from_origin, to_origin,
                             nullptr) == Status::Ok);
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaMemcpy(got.data(), ddst.base, got.size(), cudaMemcpyDeviceToHost));
  size_t wrong = 0, first_wrong = got.size();
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != expect[i]) first_wrong = std::min(first_wrong, i), ++wrong;
  INFO(runs.size() << " runs, " << wrong << " wrong bytes, the first at destination offset "
                   << int64_t(first_wrong) - dst_origin);
  CHECK(wrong == 0);
}

// `n` blocks of random lengths (short ones and ones longer than a run), placed one after
// another in typed memory with random gaps (none, or a few bytes) from offset `shift`,
// visited in a random order: a receive type's block list, which never writes a byte twice.
Plan random_blocks(std::mt19937_64 &rng, int n, int64_t shift) {
  std::vector<Run> runs;
  int64_t at = shift, size = 0;
  for (int k = 0; k < n; ++k) {
    const int64_t length = rng() % 3 == 0 ? 1 + int64_t(rng() % 40) : 1 + int64_t(rng() % 5000);
    runs.push_back({at, length, 0, 1});
    at += length + int64_t(rng() % 3 == 0 ? 0 : rng() % 24);
    size += length;
  }
  std::shuffle(runs.begin(), runs.end(), rng);
  Plan p;
  p.pattern = RunList(runs);
  p.pattern_size = size;
  if (rng() % 2) p.dims.push_back({1 + int64_t(rng() % 3), at + int64_t(rng() % 40)});  // repeated, apart
  return p;
}

// Row i of an n x n matrix of doubles from byte `shift`: columns [0, i] or [i, n).
Plan triangle(int64_t n, bool lower, int64_t shift) {
  Plan p;
  std::vector<Run> rows;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t first = lower ? 0 : i, count = lower ? i + 1 : n - i;
    rows.push_back({shift + (i * n + first) * 8, count * 8, 0, 1});
    p.pattern_size += count * 8;
  }
  p.pattern = RunList(rows);
  return p;
}

}  // namespace

TEST_CASE("paired runs between random block lists, at every alignment and length", "[paired_runs]") {
  std::mt19937_64 rng(20261124);
  for (int trial = 0; trial < 400; ++trial) {
    const Plan from = random_blocks(rng, 1 + int(rng() % 12), int64_t(rng() % 16));
    const Plan to = random_blocks(rng, 1 + int(rng() % 12), int64_t(rng() % 16));
    const int64_t common = std::min(from.packed_size(), to.packed_size());
    const int64_t bytes = trial % 3 == 0 ? 1 + int64_t(rng() % uint64_t(common)) : common;  // a prefix too
    INFO("trial " << trial << ": from " << to_string(from) << ", to " << to_string(to) << ", " << bytes << " bytes");
    check_move(from, to, bytes, uint64_t(trial));
  }
}

TEST_CASE("paired runs between triangles of doubles, every shift of either side mod 16", "[paired_runs]") {
  for (const int64_t n : {1, 37, 300}) {
    for (int64_t fshift = 0; fshift < 16; fshift += (n == 300 ? 5 : 1)) {
      for (int64_t tshift = 0; tshift < 16; tshift += (n == 300 ? 3 : 1)) {
        const Plan lower = triangle(n, true, fshift), upper = triangle(n, false, tshift);
        INFO("n = " << n << ", shifts " << fshift << " and " << tshift);
        check_move(lower, upper, lower.packed_size(), uint64_t(n * 256 + fshift * 16 + tshift));
        check_move(upper, triangle(n, true, tshift), upper.packed_size(), uint64_t(n * 256 + fshift * 16 + tshift + 1));
      }
    }
  }
}
