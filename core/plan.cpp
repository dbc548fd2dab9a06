#include "plan.hpp"

#include <algorithm>
#include <cstdint>
#include <sstream>

namespace tempi {

namespace {

using Kind = Type::Kind;

void append_run(std::vector<Run> &out, Run r) {
  if (!out.empty()) {
    Run &prev = out.back();
    if (prev.count == 1 && r.count == 1 && prev.offset + prev.length == r.offset) {
      prev.length += r.length;  // abutting single blocks are one block
      return;
    }
  }
  out.push_back(r);
}

bool flatten(const Type &t, int64_t base, std::vector<Run> &out) {
  if (out.size() > kMaxPatternRuns) return false;
  const int64_t at = base + t.offset;
  switch (t.kind) {
    case Kind::Dense:
      if (t.extent > 0) append_run(out, {at, t.extent, 0, 1});
      return true;
    case Kind::Stream:
      if (t.child().kind == Kind::Dense) {
        const Type &d = t.child();
        if (d.extent > 0) append_run(out, {at + d.offset, d.extent, t.stride, t.count});
        return true;
      }
      for (int64_t i = 0; i < t.count; ++i)
        if (!flatten(t.child(), at + i * t.stride, out)) return false;
      return true;
    case Kind::Blocks:
      for (const Type &c : t.children)
        if (!flatten(c, at, out)) return false;
      return true;
  }
  return false;
}

// Folds dimensions that continue the one below them; keeps plans of equal bytes equal.
void normalize(Plan &p) {
  if (p.pattern_size == 0 || std::any_of(p.dims.begin(), p.dims.end(), [](const Dim &d) { return d.count == 0; })) {
    p.start = 0;
    p.pattern = {};
    p.dims.clear();
    p.pattern_size = 0;
    return;
  }
  if (p.pattern.size() == 1 && p.pattern[0].count > 1) {  // a single strided run is a dimension
    const Run r = p.pattern[0];
    p.dims.insert(p.dims.begin(), Dim{r.count, r.stride});
    p.pattern = {{0, r.length, 0, 1}};
  }
  if (p.pattern.size() == 1 && p.pattern[0].offset != 0) {
    const Run r = p.pattern[0];
    p.start += r.offset;
    p.pattern = {{0, r.length, r.stride, r.count}};
  }
  p.dims.erase(std::remove_if(p.dims.begin(), p.dims.end(), [](const Dim &d) { return d.count == 1; }),
               p.dims.end());
  bool changed = true;
  while (changed) {
    changed = false;
    if (p.strided() && !p.dims.empty() && p.dims[0].stride == p.pattern[0].length) {
      const Run r = p.pattern[0];
      p.pattern_size = r.length * p.dims[0].count;
      p.pattern = {{r.offset, p.pattern_size, r.stride, r.count}};
      p.dims.erase(p.dims.begin());
      changed = true;
    }
    for (size_t i = 0; i + 1 < p.dims.size(); ++i) {
      if (p.dims[i + 1].stride == p.dims[i].count * p.dims[i].stride) {
        p.dims[i].count *= p.dims[i + 1].count;
        p.dims.erase(p.dims.begin() + i + 1);
        changed = true;
        break;
      }
    }
  }
}

}  // namespace

int64_t Plan::instances() const {
  int64_t n = pattern_size ? 1 : 0;
  for (const Dim &d : dims) n *= d.count;
  return n;
}

StridedBlock Plan::strided_block() const {
  StridedBlock sb;
  sb.start = start;
  sb.counts.push_back(pattern_size);
  sb.strides.push_back(1);
  for (const Dim &d : dims) {
    sb.counts.push_back(d.count);
    sb.strides.push_back(d.stride);
  }
  return sb;
}

bool Plan::contiguous() const {
  if (!strided()) return false;
  int64_t dense = pattern_size;  // a dimension continues the run when its stride is the run so far
  for (const Dim &d : dims) {
    if (d.count > 1 && d.stride != dense) return false;
    dense *= d.count;
  }
  return true;
}

Plan Plan::for_count(int64_t count) const {
  Plan p = *this;
  p.dims.push_back({count, extent});
  normalize(p);
  return p;
}

std::pair<int64_t, int64_t> Plan::typed_bounds() const {
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (const Run &r : pattern) {
    const int64_t last = r.offset + (r.count - 1) * r.stride;
    lo = std::min({lo, r.offset, last});
    hi = std::max({hi, r.offset + r.length, last + r.length});
  }
  for (const Dim &d : dims) {
    const int64_t reach = (d.count - 1) * d.stride;
    lo += std::min<int64_t>(0, reach);
    hi += std::max<int64_t>(0, reach);
  }
  return {start + lo, start + hi};
}

std::optional<Plan> make_plan(const Type &canonical, int64_t extent) {
  Plan p;
  p.extent = extent;
  const Type *n = &canonical;
  std::vector<Dim> outer_first;
  while (n->kind == Kind::Stream) {
    p.start += n->offset;
    outer_first.push_back({n->count, n->stride});
    n = &n->child();
  }
  p.start += n->offset;
  std::vector<Run> runs;
  if (!flatten(*n, -n->offset, runs)) return std::nullopt;
  p.pattern = std::move(runs);
  p.dims.assign(outer_first.rbegin(), outer_first.rend());
  for (const Run &r : p.pattern) p.pattern_size += r.length * r.count;
  normalize(p);
  return p;
}

std::string to_string(const Plan &p) {
  std::ostringstream os;
  if (p.pattern_size == 0) return "Empty";
  if (p.strided()) {
    const StridedBlock sb = p.strided_block();
    os << "StridedBlock{start=" << sb.start << " counts=[";
    for (size_t i = 0; i < sb.counts.size(); ++i) os << (i ? "," : "") << sb.counts[i];
    os << "] strides=[";
    for (size_t i = 0; i < sb.strides.size(); ++i) os << (i ? "," : "") << sb.strides[i];
    os << "]}";
    return os.str();
  }
  os << "BlockList{start=" << p.start << " runs=" << p.pattern.size() << " bytes=" << p.pattern_size << " dims=[";
  for (size_t i = 0; i < p.dims.size(); ++i) os << (i ? "," : "") << p.dims[i].count << "x" << p.dims[i].stride;
  os << "]}";
  return os.str();
}

}  // namespace tempi
