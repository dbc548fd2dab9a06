#include "overlap.hpp"

#include <algorithm>
#include <vector>

namespace tempi {

namespace {

// One run of a plan over all of the plan's dimensions: `base` + sum of i_k * stride_k
// (0 <= i_k < count_k) + [0, length). The sum does not depend on the order of its terms,
// so levels are kept by decreasing stride (coarsest first) and the coarser level of two
// objects is the one split first.
struct Level {
  int64_t count, stride;
};

struct Lattice {
  int64_t base = 0, length = 0;
  std::vector<Level> levels;
  std::vector<int64_t> reach;  // reach[k]: bytes from the start of a level-k sub-object to its end

  void add(int64_t count, int64_t stride) {
    if (count <= 1 || stride == 0) return;  // a stride of 0 repeats the same bytes
    if (stride < 0) {
      base += (count - 1) * stride;
      stride = -stride;
    }
    levels.push_back({count, stride});
  }
  void finish() {
    std::sort(levels.begin(), levels.end(), [](const Level &x, const Level &y) { return x.stride > y.stride; });
    reach.assign(levels.size() + 1, length);
    for (size_t k = levels.size(); k-- > 0;) reach[k] = reach[k + 1] + (levels[k].count - 1) * levels[k].stride;
  }
};

int64_t floor_div(int64_t n, int64_t d) { return n / d - ((n % d != 0) && (n < 0)); }
int64_t ceil_div(int64_t n, int64_t d) { return -floor_div(-n, d); }

class Search {
 public:
  Search(const Lattice &a, const Lattice &b, int64_t &budget) : a_(a), b_(b), budget_(budget) {}

  // Whether sub-object `ka` of a at `a0` and sub-object `kb` of b at `b0` share a byte.
  bool meet(size_t ka, int64_t a0, size_t kb, int64_t b0) {
    if (--budget_ < 0) return true;
    const int64_t a1 = a0 + a_.reach[ka], b1 = b0 + b_.reach[kb];
    if (a1 <= b0 || b1 <= a0) return false;
    const bool a_leaf = ka == a_.levels.size(), b_leaf = kb == b_.levels.size();
    if (a_leaf && b_leaf) return true;  // two intervals whose bounds meet
    const int64_t sa = a_leaf ? 0 : a_.levels[ka].stride, sb = b_leaf ? 0 : b_.levels[kb].stride;
    if (sa == sb) {
      // Equal strides: copy i of a's sub-object meets copy j of b's exactly when copy 0
      // of a's meets copy j - i of b's, so only the differences d = j - i matter, and
      // only the few whose bounds meet.
      const int64_t na = a_.levels[ka].count, nb = b_.levels[kb].count;
      const int64_t lo = std::max(-(na - 1), floor_div(a0 - b0 - b_.reach[kb + 1], sa) + 1);
      const int64_t hi = std::min(nb - 1, ceil_div(a0 - b0 + a_.reach[ka + 1], sa) - 1);
      for (int64_t d = lo; d <= hi; ++d)
        if (meet(ka + 1, a0, kb + 1, b0 + d * sa)) return true;
      return false;
    }
    // Otherwise the coarser level is split into its copies that meet the other's bounds.
    if (sa > sb) {
      const int64_t n = a_.levels[ka].count, inner = a_.reach[ka + 1];
      const int64_t lo = std::max<int64_t>(0, floor_div(b0 - inner - a0, sa) + 1);
      const int64_t hi = std::min(n - 1, ceil_div(b1 - a0, sa) - 1);
      for (int64_t i = lo; i <= hi; ++i)
        if (meet(ka + 1, a0 + i * sa, kb, b0)) return true;
      return false;
    }
    const int64_t n = b_.levels[kb].count, inner = b_.reach[kb + 1];
    const int64_t lo = std::max<int64_t>(0, floor_div(a0 - inner - b0, sb) + 1);
    const int64_t hi = std::min(n - 1, ceil_div(a1 - b0, sb) - 1);
    for (int64_t j = lo; j <= hi; ++j)
      if (meet(ka, a0, kb + 1, b0 + j * sb)) return true;
    return false;
  }

 private:
  const Lattice &a_, &b_;
  int64_t &budget_;
};

// The runs of `p` at `at`, each over the plan's dimensions.
std::vector<Lattice> lattices(const Plan &p, int64_t at) {
  std::vector<Lattice> out;
  out.reserve(p.pattern.size());
  for (const Run &r : p.pattern) {
    if (r.length <= 0 || r.count <= 0) continue;
    Lattice l;
    l.base = at + p.start + r.offset;
    l.length = r.length;
    for (const Dim &d : p.dims) l.add(d.count, d.stride);
    l.add(r.count, r.stride);
    l.finish();
    out.push_back(std::move(l));
  }
  return out;
}

bool any_meet(const std::vector<Lattice> &as, const std::vector<Lattice> &bs, int64_t budget) {
  for (const Lattice &a : as)
    for (const Lattice &b : bs) {
      Search s(a, b, budget);
      if (s.meet(0, a.base, 0, b.base)) return true;
    }
  return false;
}

}  // namespace

bool may_share_bytes(const Plan &a, int64_t a_at, const Plan &b, int64_t b_at, int64_t budget) {
  if (a.packed_size() <= 0 || b.packed_size() <= 0) return false;
  if (int64_t(a.pattern.size()) * int64_t(b.pattern.size()) > budget) return true;  // each pair costs a step
  return any_meet(lattices(a, a_at), lattices(b, b_at), budget);
}

bool may_share_bytes(const Plan &a, int64_t a_at, int64_t lo, int64_t hi, int64_t budget) {
  if (a.packed_size() <= 0 || hi <= lo) return false;
  if (int64_t(a.pattern.size()) > budget) return true;
  Lattice range;
  range.base = lo;
  range.length = hi - lo;
  range.finish();
  return any_meet(lattices(a, a_at), {range}, budget);
}

}  // namespace tempi
