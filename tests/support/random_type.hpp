// A seeded generator of random datatype descriptions built from every constructor,
// nested up to a depth. A description prints (to_string) as the builder calls that
// rebuild it, which is what a failing test reports.
#pragma once

#include <cstdint>
#include <random>
#include <string>

#include "type_desc.hpp"

namespace tempi::test {

struct RandomTypeOptions {
  int max_depth = 4;
  int64_t max_extent = 1 << 16;  // keeps buffers small: descriptions past this are redrawn
  bool allow_negative = true;    // negative strides, displacements and lower bounds
  // Empty types (size 0) inside other types. MPICH 4.0.2 (yaksa) dies with SIGFPE
  // packing a struct that holds an empty member, so tests against it turn this off.
  bool empty_children = true;
};

class RandomTypes {
 public:
  explicit RandomTypes(uint64_t seed, RandomTypeOptions opt = {}) : rng_(seed), opt_(opt) {}
  TypeDesc next();
  // A subarray of an n-D grid (2 to 4 dimensions, at most `max_elements` elements of
  // 1 to 16 bytes) whose packed order permutes the grid's dimensions, as transposes and
  // pencil reshapes do: one-element hvectors nested in a random order, displaced to the
  // subarray's start and resized to the whole grid (a count > 1 moves whole grids).
  TypeDesc permuted_subarray(int64_t max_side, int64_t max_elements);
  int64_t uniform(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); }

 private:
  TypeDesc gen(int depth);
  TypeDesc child(int depth);
  TypeDesc gen_named();
  std::mt19937_64 rng_;
  RandomTypeOptions opt_;
};

// The seed of a test run: argv's "--seed N", else TEMPI_TEST_SEED, else `fallback`.
uint64_t seed_from(int argc, char **argv, uint64_t fallback);

}  // namespace tempi::test
