// Simplification of an IR tree to a canonical form (TEMPI paper section 3.2, extended).
// Each pass rewrites bottom-up, reports whether it changed anything, and never
// changes the sequence of bytes the tree describes, so packed data stays equal to
// MPI_Pack's. The passes repeat until none changes the tree.
//
// In the canonical form: every Stream's child and every Dense below a Stream sits at
// offset 0 (offsets are hoisted to the root), a Blocks' first child sits at offset 0,
// no Stream has count 1, no Stream of Dense has stride == extent, no Stream of Stream
// has an outer stride equal to the inner span, no Blocks holds a Blocks, one child,
// empty children, abutting Dense children, or a run of equal children at equal spacing.
#pragma once

#include "ir.hpp"

namespace tempi {

namespace pass {
bool hoist_offsets(Type &t);
bool remove_empty(Type &t);
bool stream_elision(Type &t);
bool dense_folding(Type &t);
bool stream_flattening(Type &t);
bool splice_blocks(Type &t);
bool merge_dense_blocks(Type &t);
bool compress_runs(Type &t);
bool elide_single_block(Type &t);
}  // namespace pass

Type canonicalize(Type t);

}  // namespace tempi
