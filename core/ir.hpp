// The type IR of the TEMPI paper (section 3.1), extended with an irregular node.
//   Dense   {offset, extent}                 `extent` contiguous bytes at `offset`
//   Stream  {offset, stride, count, child}   `count` copies of child, `stride` bytes apart
//   Blocks  {offset, children}               children in packed order, each at its own offset
// Offsets are relative to the parent's origin. The packed byte order of a tree is
// the depth-first order of its Dense leaves, which is the MPI typemap order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tempi {

struct Type {
  enum class Kind { Dense, Stream, Blocks };
  Kind kind = Kind::Dense;
  int64_t offset = 0;
  int64_t extent = 0;  // Dense only
  int64_t stride = 0;  // Stream only
  int64_t count = 0;   // Stream only
  std::vector<Type> children;

  static Type dense(int64_t offset, int64_t extent);
  static Type stream(int64_t offset, int64_t stride, int64_t count, Type child);
  static Type blocks(int64_t offset, std::vector<Type> children);

  const Type &child() const { return children.front(); }
  Type &child() { return children.front(); }

  int64_t packed_size() const;  // bytes in the packed stream
};

// Structural equality; `compare_offset` false ignores the two roots' own offsets.
bool same_layout(const Type &a, const Type &b, bool compare_offset = true);
inline bool operator==(const Type &a, const Type &b) { return same_layout(a, b); }
std::string to_string(const Type &t);

}  // namespace tempi
