#include "ir.hpp"

#include <sstream>

namespace tempi {

Type Type::dense(int64_t offset, int64_t extent) {
  Type t;
  t.kind = Kind::Dense;
  t.offset = offset;
  t.extent = extent;
  return t;
}

Type Type::stream(int64_t offset, int64_t stride, int64_t count, Type child) {
  Type t;
  t.kind = Kind::Stream;
  t.offset = offset;
  t.stride = stride;
  t.count = count;
  t.children.push_back(std::move(child));
  return t;
}

Type Type::blocks(int64_t offset, std::vector<Type> children) {
  Type t;
  t.kind = Kind::Blocks;
  t.offset = offset;
  t.children = std::move(children);
  return t;
}

int64_t Type::packed_size() const {
  switch (kind) {
    case Kind::Dense:
      return extent;
    case Kind::Stream:
      return count * child().packed_size();
    case Kind::Blocks: {
      int64_t n = 0;
      for (const Type &c : children) n += c.packed_size();
      return n;
    }
  }
  return 0;
}

bool same_layout(const Type &a, const Type &b, bool compare_offset) {
  if (a.kind != b.kind || (compare_offset && a.offset != b.offset)) return false;
  if (a.extent != b.extent || a.stride != b.stride || a.count != b.count) return false;
  if (a.children.size() != b.children.size()) return false;
  for (size_t i = 0; i < a.children.size(); ++i)
    if (!same_layout(a.children[i], b.children[i], true)) return false;
  return true;
}

static void print(std::ostream &os, const Type &t) {
  switch (t.kind) {
    case Type::Kind::Dense:
      os << "Dense{" << t.offset << "," << t.extent << "}";
      return;
    case Type::Kind::Stream:
      os << "Stream{" << t.offset << "," << t.stride << "," << t.count << ",";
      print(os, t.child());
      os << "}";
      return;
    case Type::Kind::Blocks:
      os << "Blocks{" << t.offset;
      for (const Type &c : t.children) {
        os << ",";
        print(os, c);
      }
      os << "}";
      return;
  }
}

std::string to_string(const Type &t) {
  std::ostringstream os;
  print(os, t);
  return os.str();
}

}  // namespace tempi
