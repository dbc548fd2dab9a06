#include "canonicalize.hpp"

namespace tempi {

namespace {

using Kind = Type::Kind;

// Applies `at_node` to every node, children before parents.
template <typename F>
bool bottom_up(Type &t, F at_node) {
  bool changed = false;
  for (Type &c : t.children) changed |= bottom_up(c, at_node);
  return at_node(t) || changed;
}

// Replaces `t` with its only child, keeping the child's absolute position.
void replace_with_child(Type &t, size_t i = 0) {
  Type c = std::move(t.children[i]);
  c.offset += t.offset;
  t = std::move(c);
}

}  // namespace

namespace pass {

bool hoist_offsets(Type &t) {
  return bottom_up(t, [](Type &n) {
    if (n.kind == Kind::Stream && n.child().offset != 0) {
      n.offset += n.child().offset;
      n.child().offset = 0;
      return true;
    }
    if (n.kind == Kind::Blocks && !n.children.empty() && n.children[0].offset != 0) {
      const int64_t first = n.children[0].offset;
      n.offset += first;
      for (Type &c : n.children) c.offset -= first;
      return true;
    }
    return false;
  });
}

bool remove_empty(Type &t) {
  return bottom_up(t, [](Type &n) {
    if (n.kind == Kind::Dense) {
      if (n.extent == 0 && n.offset != 0) {
        n.offset = 0;
        return true;
      }
      return false;
    }
    bool changed = false;
    if (n.kind == Kind::Blocks) {
      const size_t before = n.children.size();
      std::vector<Type> kept;
      for (Type &c : n.children)
        if (c.packed_size() != 0) kept.push_back(std::move(c));
      n.children = std::move(kept);
      changed = n.children.size() != before;
    }
    if (n.packed_size() == 0) {
      n = Type::dense(0, 0);
      return true;
    }
    return changed;
  });
}

bool stream_elision(Type &t) {
  return bottom_up(t, [](Type &n) {
    if (n.kind != Kind::Stream || n.count != 1) return false;
    replace_with_child(n);
    return true;
  });
}

bool dense_folding(Type &t) {
  return bottom_up(t, [](Type &n) {
    if (n.kind != Kind::Stream) return false;
    const Type &c = n.child();
    if (c.kind != Kind::Dense || c.offset != 0 || n.stride != c.extent) return false;
    n = Type::dense(n.offset, n.count * c.extent);
    return true;
  });
}

bool stream_flattening(Type &t) {
  return bottom_up(t, [](Type &n) {
    if (n.kind != Kind::Stream) return false;
    Type &c = n.child();
    if (c.kind != Kind::Stream || c.offset != 0 || n.stride != c.count * c.stride) return false;
    n.count *= c.count;
    n.stride = c.stride;
    Type grandchild = std::move(c.child());
    n.children[0] = std::move(grandchild);
    return true;
  });
}

bool splice_blocks(Type &t) {
  return bottom_up(t, [](Type &n) {
    if (n.kind != Kind::Blocks) return false;
    bool changed = false;
    std::vector<Type> flat;
    for (Type &c : n.children) {
      if (c.kind != Kind::Blocks) {
        flat.push_back(std::move(c));
        continue;
      }
      for (Type &g : c.children) {
        g.offset += c.offset;
        flat.push_back(std::move(g));
      }
      changed = true;
    }
    n.children = std::move(flat);
    return changed;
  });
}

bool merge_dense_blocks(Type &t) {
  return bottom_up(t, [](Type &n) {
    if (n.kind != Kind::Blocks) return false;
    bool changed = false;
    std::vector<Type> out;
    for (Type &c : n.children) {
      if (!out.empty()) {
        Type &prev = out.back();
        if (prev.kind == Kind::Dense && c.kind == Kind::Dense && prev.offset + prev.extent == c.offset) {
          prev.extent += c.extent;
          changed = true;
          continue;
        }
      }
      out.push_back(std::move(c));
    }
    n.children = std::move(out);
    return changed;
  });
}

namespace {

// A Blocks child seen as `count` copies of `unit`, `stride` apart, from `offset`
// (a child that is not a Stream is one copy of itself).
struct RunView {
  int64_t offset, stride, count;
  Type unit;
  bool known_stride;
};

RunView view_of(Type c) {
  if (c.kind == Kind::Stream) return {c.offset, c.stride, c.count, std::move(c.child()), true};
  const int64_t off = c.offset;
  c.offset = 0;
  return {off, 0, 1, std::move(c), false};
}

// Appends `next` to `run` if the pair is one longer run of the same unit.
bool extend(RunView &run, const RunView &next) {
  if (!same_layout(run.unit, next.unit, false)) return false;
  const int64_t stride = run.known_stride ? run.stride : next.offset - run.offset;
  if (next.offset != run.offset + run.count * stride) return false;
  if (next.count > 1 && next.stride != stride) return false;
  run.stride = stride;
  run.known_stride = true;
  run.count += next.count;
  return true;
}

Type type_of(RunView r) {
  if (r.count == 1) {
    r.unit.offset = r.offset;
    return std::move(r.unit);
  }
  return Type::stream(r.offset, r.stride, r.count, std::move(r.unit));
}

}  // namespace

bool compress_runs(Type &t) {
  return bottom_up(t, [](Type &n) {
    if (n.kind != Kind::Blocks || n.children.size() < 2) return false;
    bool changed = false;
    std::vector<RunView> runs;
    for (Type &c : n.children) {
      RunView v = view_of(std::move(c));
      if (!runs.empty() && extend(runs.back(), v)) {
        changed = true;
        continue;
      }
      runs.push_back(std::move(v));
    }
    n.children.clear();
    for (RunView &r : runs) n.children.push_back(type_of(std::move(r)));
    return changed;
  });
}

bool elide_single_block(Type &t) {
  return bottom_up(t, [](Type &n) {
    if (n.kind != Kind::Blocks || n.children.size() != 1) return false;
    replace_with_child(n);
    return true;
  });
}

}  // namespace pass

Type canonicalize(Type t) {
  bool changed = true;
  while (changed) {
    changed = false;
    changed |= pass::remove_empty(t);
    changed |= pass::hoist_offsets(t);
    changed |= pass::stream_elision(t);
    changed |= pass::dense_folding(t);
    changed |= pass::stream_flattening(t);
    changed |= pass::splice_blocks(t);
    changed |= pass::merge_dense_blocks(t);
    changed |= pass::compress_runs(t);
    changed |= pass::elide_single_block(t);
  }
  return t;
}

}  // namespace tempi
