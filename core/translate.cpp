#include "translate.hpp"

#include <algorithm>

namespace tempi {

namespace {

struct Range {
  int64_t start, length;  // in elements of one array dimension
};

// `blocklength` consecutive copies of `child` (extent `extent`) at byte `offset`.
Type block(int64_t offset, int64_t blocklength, int64_t extent, const Type &child) {
  return Type::stream(offset, extent, blocklength, child);
}

// The index ranges of one darray dimension owned by process coordinate `coord`.
std::vector<Range> darray_ranges(int64_t gsize, Distribution d, int64_t darg, int64_t psize, int64_t coord) {
  if (d == Distribution::None) return {{0, gsize}};
  if (d == Distribution::Block) {
    const int64_t blk = darg == kDefaultDistArg ? (gsize + psize - 1) / psize : darg;
    const int64_t len = std::max<int64_t>(0, std::min(blk, gsize - coord * blk));
    return {{coord * blk, len}};
  }
  const int64_t blk = darg == kDefaultDistArg ? 1 : darg;
  std::vector<Range> r;
  for (int64_t start = coord * blk; start < gsize; start += psize * blk) r.push_back({start, std::min(blk, gsize - start)});
  return r;
}

Type ranges_of(const std::vector<Range> &ranges, int64_t stride, const Type &inner) {
  std::vector<Type> parts;
  for (const Range &r : ranges) parts.push_back(Type::stream(r.start * stride, stride, r.length, inner));
  return Type::blocks(0, std::move(parts));
}

std::optional<Type> translate_darray(const TypeDesc &d, const Type &old) {
  const auto &I = d.ints;
  const int64_t rank = I[1], n = I[2];
  const int64_t *gsizes = &I[3], *distribs = &I[3 + n], *dargs = &I[3 + 2 * n], *psizes = &I[3 + 3 * n];
  const bool c_order = I[3 + 4 * n] == int64_t(ArrayOrder::C);
  const int64_t ext = d.children[0].extent;

  std::vector<int64_t> coords(n);
  for (int64_t i = n - 1, r = rank; i >= 0; --i) {  // the process grid is row-major
    coords[i] = r % psizes[i];
    r /= psizes[i];
  }
  Type node = old;
  int64_t stride = ext;
  for (int64_t k = 0; k < n; ++k) {  // fastest-varying dimension first
    const int64_t i = c_order ? n - 1 - k : k;
    node = ranges_of(darray_ranges(gsizes[i], Distribution(distribs[i]), dargs[i], psizes[i], coords[i]), stride, node);
    stride *= gsizes[i];
  }
  return node;
}

}  // namespace

std::optional<Type> translate(const TypeDesc &d) {
  const auto &I = d.ints;
  const auto &A = d.addrs;
  if (d.combiner == Combiner::Named) {
    if (d.lb != 0 || d.size != d.extent) return std::nullopt;
    return Type::dense(0, d.size);
  }
  if (d.combiner == Combiner::Unsupported || d.children.empty()) return std::nullopt;

  std::vector<Type> kids;
  for (const TypeDesc &c : d.children) {
    std::optional<Type> k = translate(c);
    if (!k) return std::nullopt;
    kids.push_back(std::move(*k));
  }
  const Type &old = kids[0];
  const int64_t ext = d.children[0].extent;

  switch (d.combiner) {
    case Combiner::Dup:
    case Combiner::Resized:  // a new extent changes how copies are spaced, not the typemap
      return old;
    case Combiner::Contiguous:
      return Type::stream(0, ext, I[0], old);
    case Combiner::Vector:
      return Type::stream(0, I[2] * ext, I[0], block(0, I[1], ext, old));
    case Combiner::Hvector:
      return Type::stream(0, A[0], I[0], block(0, I[1], ext, old));
    case Combiner::Indexed:
    case Combiner::Hindexed: {
      const int64_t n = I[0];
      std::vector<Type> parts;
      for (int64_t i = 0; i < n; ++i) {
        const int64_t disp = d.combiner == Combiner::Indexed ? I[1 + n + i] * ext : A[i];
        parts.push_back(block(disp, I[1 + i], ext, old));
      }
      return Type::blocks(0, std::move(parts));
    }
    case Combiner::IndexedBlock:
    case Combiner::HindexedBlock: {
      const int64_t n = I[0];
      std::vector<Type> parts;
      for (int64_t i = 0; i < n; ++i) {
        const int64_t disp = d.combiner == Combiner::IndexedBlock ? I[2 + i] * ext : A[i];
        parts.push_back(block(disp, I[1], ext, old));
      }
      return Type::blocks(0, std::move(parts));
    }
    case Combiner::Struct: {
      const int64_t n = I[0];
      std::vector<Type> parts;
      for (int64_t i = 0; i < n; ++i) parts.push_back(block(A[i], I[1 + i], d.children[i].extent, kids[i]));
      return Type::blocks(0, std::move(parts));
    }
    case Combiner::Subarray: {
      const int64_t n = I[0];
      const int64_t *sizes = &I[1], *subsizes = &I[1 + n], *starts = &I[1 + 2 * n];
      const bool c_order = I[1 + 3 * n] == int64_t(ArrayOrder::C);
      Type node = old;
      int64_t stride = ext;
      for (int64_t k = 0; k < n; ++k) {  // fastest-varying dimension first
        const int64_t i = c_order ? n - 1 - k : k;
        node = Type::stream(starts[i] * stride, stride, subsizes[i], node);
        stride *= sizes[i];
      }
      return node;
    }
    case Combiner::Darray:
      return translate_darray(d, old);
    default:
      return std::nullopt;
  }
}

}  // namespace tempi
