// Naive enumerations of the bytes a type touches, in packed order: the reference
// against which canonicalization and planning are checked by property.
#pragma once

#include <cstdint>
#include <vector>

#include "host_packer.hpp"
#include "ir.hpp"
#include "plan.hpp"

namespace tempi::test {

inline void byte_offsets(const Type &t, int64_t base, std::vector<int64_t> &out) {
  const int64_t at = base + t.offset;
  switch (t.kind) {
    case Type::Kind::Dense:
      for (int64_t i = 0; i < t.extent; ++i) out.push_back(at + i);
      return;
    case Type::Kind::Stream:
      for (int64_t i = 0; i < t.count; ++i) byte_offsets(t.child(), at + i * t.stride, out);
      return;
    case Type::Kind::Blocks:
      for (const Type &c : t.children) byte_offsets(c, at, out);
      return;
  }
}

inline std::vector<int64_t> byte_offsets(const Type &t) {
  std::vector<int64_t> out;
  byte_offsets(t, 0, out);
  return out;
}

inline std::vector<int64_t> byte_offsets(const Plan &p) {
  std::vector<int64_t> out;
  for_each_segment(p, 0, p.packed_size(), [&](int64_t typed, int64_t, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out.push_back(typed + i);
  });
  return out;
}

}  // namespace tempi::test
