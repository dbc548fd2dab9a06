#include "type_desc.hpp"

#include <algorithm>
#include <sstream>
#include <stdexcept>

namespace tempi {

namespace {

// Lower and upper bound of a typemap assembled from copies of child types.
struct Bounds {
  bool empty = true;
  int64_t lb = 0, ub = 0;
  void add(int64_t displacement, const TypeDesc &child) {
    const int64_t l = displacement + child.lb, u = l + child.extent;
    lb = empty ? l : std::min(lb, l);
    ub = empty ? u : std::max(ub, u);
    empty = false;
  }
  // `count` consecutive copies of child starting at `displacement` (an MPI block).
  void add_block(int64_t displacement, int64_t count, const TypeDesc &child) {
    if (count <= 0) return;
    add(displacement, child);
    add(displacement + (count - 1) * child.extent, child);
  }
  void finish(TypeDesc &t) const {
    t.lb = empty ? 0 : lb;
    t.extent = empty ? 0 : ub - lb;
  }
};

TypeDesc make(Combiner c, std::vector<int64_t> ints, std::vector<int64_t> addrs, std::vector<TypeDesc> children) {
  TypeDesc t;
  t.combiner = c;
  t.ints = std::move(ints);
  t.addrs = std::move(addrs);
  t.children = std::move(children);
  return t;
}

int64_t product(const std::vector<int64_t> &v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

// Elements of one darray dimension that process coordinate `coord` owns.
int64_t darray_local_count(int64_t gsize, Distribution d, int64_t darg, int64_t psize, int64_t coord) {
  if (d == Distribution::None) return gsize;
  if (d == Distribution::Block) {
    const int64_t blk = darg == kDefaultDistArg ? (gsize + psize - 1) / psize : darg;
    return std::max<int64_t>(0, std::min(blk, gsize - coord * blk));
  }
  const int64_t blk = darg == kDefaultDistArg ? 1 : darg;
  int64_t n = 0;
  for (int64_t start = coord * blk; start < gsize; start += psize * blk) n += std::min(blk, gsize - start);
  return n;
}

void print_list(std::ostream &os, const std::vector<int64_t> &v, size_t first, size_t n) {
  os << "[";
  for (size_t i = 0; i < n; ++i) os << (i ? "," : "") << v[first + i];
  os << "]";
}

void print(std::ostream &os, const TypeDesc &t) {
  const auto &I = t.ints;
  const auto &A = t.addrs;
  switch (t.combiner) {
    case Combiner::Named:
      os << "named(" << t.size << ")";
      return;
    case Combiner::Dup:
      os << "dup(";
      break;
    case Combiner::Contiguous:
      os << "contiguous(" << I[0] << ",";
      break;
    case Combiner::Vector:
      os << "vector(" << I[0] << "," << I[1] << "," << I[2] << ",";
      break;
    case Combiner::Hvector:
      os << "hvector(" << I[0] << "," << I[1] << "," << A[0] << ",";
      break;
    case Combiner::Indexed:
      os << "indexed(";
      print_list(os, I, 1, I[0]);
      os << ",";
      print_list(os, I, 1 + I[0], I[0]);
      os << ",";
      break;
    case Combiner::Hindexed:
      os << "hindexed(";
      print_list(os, I, 1, I[0]);
      os << ",";
      print_list(os, A, 0, I[0]);
      os << ",";
      break;
    case Combiner::IndexedBlock:
      os << "indexed_block(" << I[1] << ",";
      print_list(os, I, 2, I[0]);
      os << ",";
      break;
    case Combiner::HindexedBlock:
      os << "hindexed_block(" << I[1] << ",";
      print_list(os, A, 0, I[0]);
      os << ",";
      break;
    case Combiner::Struct: {
      os << "structure(";
      print_list(os, I, 1, I[0]);
      os << ",";
      print_list(os, A, 0, I[0]);
      os << ",{";
      for (size_t i = 0; i < t.children.size(); ++i) {
        if (i) os << ",";
        print(os, t.children[i]);
      }
      os << "})";
      return;
    }
    case Combiner::Subarray: {
      const size_t n = I[0];
      os << "subarray(";
      print_list(os, I, 1, n);
      os << ",";
      print_list(os, I, 1 + n, n);
      os << ",";
      print_list(os, I, 1 + 2 * n, n);
      os << "," << (I[1 + 3 * n] == int64_t(ArrayOrder::C) ? "C" : "Fortran") << ",";
      break;
    }
    case Combiner::Darray: {
      const size_t n = I[2];
      os << "darray(" << I[0] << "," << I[1] << ",";
      print_list(os, I, 3, n);
      os << ",";
      print_list(os, I, 3 + n, n);
      os << ",";
      print_list(os, I, 3 + 2 * n, n);
      os << ",";
      print_list(os, I, 3 + 3 * n, n);
      os << "," << (I[3 + 4 * n] == int64_t(ArrayOrder::C) ? "C" : "Fortran") << ",";
      break;
    }
    case Combiner::Resized:
      os << "resized(" << A[0] << "," << A[1] << ",";
      break;
    case Combiner::Unsupported:
      os << "unsupported";
      return;
  }
  print(os, t.children.at(0));
  os << ")";
}

}  // namespace

std::string to_string(const TypeDesc &t) {
  std::ostringstream os;
  print(os, t);
  return os.str();
}

namespace desc {

TypeDesc named(int64_t size) {
  TypeDesc t = make(Combiner::Named, {}, {}, {});
  t.size = size;
  t.extent = size;
  return t;
}

TypeDesc dup(const TypeDesc &old) {
  TypeDesc t = make(Combiner::Dup, {}, {}, {old});
  t.size = old.size;
  t.lb = old.lb;
  t.extent = old.extent;
  return t;
}

TypeDesc contiguous(int64_t count, const TypeDesc &old) {
  TypeDesc t = make(Combiner::Contiguous, {count}, {}, {old});
  Bounds b;
  b.add_block(0, count, old);
  b.finish(t);
  t.size = count * old.size;
  return t;
}

static TypeDesc strided(Combiner c, int64_t count, int64_t blocklength, int64_t stride_bytes,
                        std::vector<int64_t> ints, std::vector<int64_t> addrs, const TypeDesc &old) {
  TypeDesc t = make(c, std::move(ints), std::move(addrs), {old});
  Bounds b;
  if (blocklength > 0)
    for (int64_t i : {int64_t(0), count - 1})
      if (count > 0) b.add_block(i * stride_bytes, blocklength, old);
  b.finish(t);
  t.size = count * blocklength * old.size;
  return t;
}

TypeDesc vector(int64_t count, int64_t blocklength, int64_t stride, const TypeDesc &old) {
  return strided(Combiner::Vector, count, blocklength, stride * old.extent, {count, blocklength, stride}, {}, old);
}

TypeDesc hvector(int64_t count, int64_t blocklength, int64_t stride_bytes, const TypeDesc &old) {
  return strided(Combiner::Hvector, count, blocklength, stride_bytes, {count, blocklength}, {stride_bytes}, old);
}

static TypeDesc blocks_of(TypeDesc t, const std::vector<int64_t> &blocklengths,
                          const std::vector<int64_t> &byte_displacements, const std::vector<TypeDesc> &types) {
  Bounds b;
  t.size = 0;
  for (size_t i = 0; i < blocklengths.size(); ++i) {
    const TypeDesc &ty = types.size() == 1 ? types[0] : types[i];
    b.add_block(byte_displacements[i], blocklengths[i], ty);
    t.size += blocklengths[i] * ty.size;
  }
  b.finish(t);
  return t;
}

TypeDesc indexed(const std::vector<int64_t> &bl, const std::vector<int64_t> &displacements, const TypeDesc &old) {
  std::vector<int64_t> ints{int64_t(bl.size())};
  ints.insert(ints.end(), bl.begin(), bl.end());
  ints.insert(ints.end(), displacements.begin(), displacements.end());
  std::vector<int64_t> bytes;
  for (int64_t d : displacements) bytes.push_back(d * old.extent);
  return blocks_of(make(Combiner::Indexed, ints, {}, {old}), bl, bytes, {old});
}

TypeDesc hindexed(const std::vector<int64_t> &bl, const std::vector<int64_t> &byte_displacements,
                  const TypeDesc &old) {
  std::vector<int64_t> ints{int64_t(bl.size())};
  ints.insert(ints.end(), bl.begin(), bl.end());
  return blocks_of(make(Combiner::Hindexed, ints, byte_displacements, {old}), bl, byte_displacements, {old});
}

TypeDesc indexed_block(int64_t blocklength, const std::vector<int64_t> &displacements, const TypeDesc &old) {
  std::vector<int64_t> ints{int64_t(displacements.size()), blocklength};
  ints.insert(ints.end(), displacements.begin(), displacements.end());
  std::vector<int64_t> bytes;
  for (int64_t d : displacements) bytes.push_back(d * old.extent);
  return blocks_of(make(Combiner::IndexedBlock, ints, {}, {old}),
                   std::vector<int64_t>(displacements.size(), blocklength), bytes, {old});
}

TypeDesc hindexed_block(int64_t blocklength, const std::vector<int64_t> &byte_displacements, const TypeDesc &old) {
  return blocks_of(make(Combiner::HindexedBlock, {int64_t(byte_displacements.size()), blocklength},
                        byte_displacements, {old}),
                   std::vector<int64_t>(byte_displacements.size(), blocklength), byte_displacements, {old});
}

TypeDesc structure(const std::vector<int64_t> &bl, const std::vector<int64_t> &byte_displacements,
                   const std::vector<TypeDesc> &types) {
  std::vector<int64_t> ints{int64_t(bl.size())};
  ints.insert(ints.end(), bl.begin(), bl.end());
  return blocks_of(make(Combiner::Struct, ints, byte_displacements, types), bl, byte_displacements, types);
}

TypeDesc subarray(const std::vector<int64_t> &sizes, const std::vector<int64_t> &subsizes,
                  const std::vector<int64_t> &starts, ArrayOrder order, const TypeDesc &old) {
  std::vector<int64_t> ints{int64_t(sizes.size())};
  for (const auto *v : {&sizes, &subsizes, &starts}) ints.insert(ints.end(), v->begin(), v->end());
  ints.push_back(int64_t(order));
  TypeDesc t = make(Combiner::Subarray, ints, {}, {old});
  t.lb = 0;
  t.extent = product(sizes) * old.extent;
  t.size = product(subsizes) * old.size;
  return t;
}

TypeDesc darray(int64_t size, int64_t rank, const std::vector<int64_t> &gsizes,
                const std::vector<Distribution> &distribs, const std::vector<int64_t> &dargs,
                const std::vector<int64_t> &psizes, ArrayOrder order, const TypeDesc &old) {
  std::vector<int64_t> ints{size, rank, int64_t(gsizes.size())};
  ints.insert(ints.end(), gsizes.begin(), gsizes.end());
  for (Distribution d : distribs) ints.push_back(int64_t(d));
  ints.insert(ints.end(), dargs.begin(), dargs.end());
  ints.insert(ints.end(), psizes.begin(), psizes.end());
  ints.push_back(int64_t(order));
  TypeDesc t = make(Combiner::Darray, ints, {}, {old});
  t.lb = 0;
  t.extent = product(gsizes) * old.extent;
  // Process coordinates are row-major whatever the array order (MPI 4.0 section 5.1.4).
  int64_t r = rank, local = 1;
  for (size_t i = gsizes.size(); i-- > 0;) {
    const int64_t coord = r % psizes[i];
    r /= psizes[i];
    local *= darray_local_count(gsizes[i], distribs[i], dargs[i], psizes[i], coord);
  }
  t.size = local * old.size;
  return t;
}

TypeDesc resized(int64_t lb, int64_t extent, const TypeDesc &old) {
  TypeDesc t = make(Combiner::Resized, {}, {lb, extent}, {old});
  t.size = old.size;
  t.lb = lb;
  t.extent = extent;
  return t;
}

}  // namespace desc
}  // namespace tempi
