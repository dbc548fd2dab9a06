// The executable form of a canonical type (TEMPI paper section 3.3, generalized):
// a pattern of contiguous runs repeated over any number of strided dimensions.
// When the pattern is a single contiguous block the plan is a StridedBlock; else
// the pattern is a compact block list whose regular runs stay compressed.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ir.hpp"

namespace tempi {

// `count` blocks of `length` bytes, block k at `offset + k * stride`.
struct Run {
  int64_t offset, length, stride, count;
  bool operator==(const Run &o) const {
    return offset == o.offset && length == o.length && stride == o.stride && count == o.count;
  }
};

// The runs of a pattern, shared by the copies of a plan and never changed in place: a
// plan is copied at every call (Plan::for_count), and copying a pattern of a million runs
// cost more than moving its bytes (issue 11). A plan with other runs gets a new list.
class RunList {
 public:
  RunList() = default;
  RunList(std::vector<Run> runs) : runs_(std::make_shared<const std::vector<Run>>(std::move(runs))) {}
  RunList(std::initializer_list<Run> runs) : RunList(std::vector<Run>(runs)) {}
  const std::vector<Run> &runs() const { return runs_ ? *runs_ : none(); }
  size_t size() const { return runs().size(); }
  bool empty() const { return runs().empty(); }
  const Run &operator[](size_t i) const { return runs()[i]; }
  const Run *data() const { return runs().data(); }
  std::vector<Run>::const_iterator begin() const { return runs().begin(); }
  std::vector<Run>::const_iterator end() const { return runs().end(); }
  bool operator==(const RunList &o) const { return runs_ == o.runs_ || runs() == o.runs(); }
  bool operator==(const std::vector<Run> &o) const { return runs() == o; }

 private:
  static const std::vector<Run> &none() {
    static const std::vector<Run> empty;
    return empty;
  }
  std::shared_ptr<const std::vector<Run>> runs_;
};

struct Dim {
  int64_t count, stride;
  bool operator==(const Dim &o) const { return count == o.count && stride == o.stride; }
};

// {start, counts[], strides[]}: dimension 0 is counts[0] contiguous bytes (stride 1).
struct StridedBlock {
  int64_t start = 0;
  std::vector<int64_t> counts, strides;
  bool operator==(const StridedBlock &o) const {
    return start == o.start && counts == o.counts && strides == o.strides;
  }
};

struct Plan {
  int64_t start = 0;         // typed-buffer offset of the first pattern instance
  RunList pattern;           // one instance, in packed order, offsets relative to it
  std::vector<Dim> dims;     // repetitions of the pattern, innermost first
  int64_t pattern_size = 0;  // packed bytes of one pattern instance
  int64_t extent = 0;        // the datatype's extent: spacing of consecutive elements
  uint64_t id = 0;           // identifies the datatype's plan in backend caches (not compared)

  bool strided() const { return pattern.size() == 1 && pattern[0].count == 1; }
  // One run of packed_size() bytes starting at `start + pattern[0].offset`: packing is a copy.
  bool contiguous() const;
  int64_t instances() const;  // product of dims' counts
  int64_t packed_size() const { return pattern_size * instances(); }
  StridedBlock strided_block() const;  // requires strided()
  // The plan of `count` consecutive elements (the `count` argument of MPI calls).
  Plan for_count(int64_t count) const;
  // The typed bytes' bounds [lo, hi) relative to the buffer: MPI's true lower bound, and
  // true lower bound + true extent. Requires packed_size() > 0.
  std::pair<int64_t, int64_t> typed_bounds() const;

  bool operator==(const Plan &o) const {
    return start == o.start && pattern == o.pattern && dims == o.dims && pattern_size == o.pattern_size &&
           extent == o.extent;
  }
};

// Patterns above this many runs are not planned (their calls fall through to MPI).
constexpr size_t kMaxPatternRuns = size_t(1) << 20;

// `canonical` must come from canonicalize(); `extent` is the datatype's MPI extent.
std::optional<Plan> make_plan(const Type &canonical, int64_t extent);

std::string to_string(const Plan &p);

}  // namespace tempi
