#include <catch2/catch.hpp>

#include <random>

#include "host_packer.hpp"
#include "random_type.hpp"
#include "type_plan.hpp"

using namespace tempi;

namespace {
// A typed buffer spanning every byte the plan touches; `origin` is where offset 0 is.
struct Arena {
  std::vector<unsigned char> bytes;
  int64_t origin = 0;
  explicit Arena(const Plan &p, unsigned seed) {
    int64_t lo = 0, hi = 1;
    for_each_segment(p, 0, p.packed_size(), [&](int64_t t, int64_t, int64_t n) {
      lo = std::min(lo, t);
      hi = std::max(hi, t + n);
    });
    origin = -lo;
    bytes.resize(hi - lo);
    std::mt19937 rng(seed);
    for (auto &b : bytes) b = static_cast<unsigned char>(rng());
  }
  unsigned char *at0() { return bytes.data() + origin; }
};
}  // namespace

TEST_CASE("pack then unpack restores the covered bytes and nothing else", "[host_packer][property]") {
  test::RandomTypes gen(99, {4, 1 << 14, true});
  for (int i = 0; i < 2000; ++i) {
    const TypeDesc d = gen.next();
    const std::optional<Plan> base = plan_type(d);
    REQUIRE(base);
    const Plan p = base->for_count(gen.uniform(1, 3));
    INFO("type " << to_string(d));
    Arena src(p, i);
    std::vector<unsigned char> packed(p.packed_size());
    host_pack(p, src.at0(), packed.data(), 0, p.packed_size());

    Arena dst(p, i + 1);  // different contents: "poison"
    std::vector<unsigned char> poison = dst.bytes;
    host_unpack(p, packed.data(), dst.at0(), 0, p.packed_size());
    std::vector<bool> covered(dst.bytes.size(), false);
    for_each_segment(p, 0, p.packed_size(), [&](int64_t t, int64_t, int64_t n) {
      for (int64_t k = 0; k < n; ++k) covered[dst.origin + t + k] = true;
    });
    for (size_t k = 0; k < dst.bytes.size(); ++k) {
      if (!covered[k]) REQUIRE(dst.bytes[k] == poison[k]);
    }
    // repacking what was unpacked gives the same stream (also for overlapping types)
    std::vector<unsigned char> again(p.packed_size());
    host_pack(p, dst.at0(), again.data(), 0, p.packed_size());
    std::vector<unsigned char> twice(p.packed_size());
    host_pack(p, src.at0(), twice.data(), 0, p.packed_size());
    REQUIRE(twice == packed);

    // any byte range of the stream equals the slice of the whole
    if (p.packed_size() > 0) {
      const int64_t a = gen.uniform(0, p.packed_size() - 1), b = gen.uniform(a, p.packed_size());
      std::vector<unsigned char> part(b - a + 1, 0xAB);
      host_pack(p, src.at0(), part.data(), a, b);
      REQUIRE(std::equal(part.begin(), part.begin() + (b - a), packed.begin() + a));
      REQUIRE(part[b - a] == 0xAB);  // nothing past the range
    }
  }
}
