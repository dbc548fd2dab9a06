#include <catch2/catch.hpp>

#include "byte_map.hpp"
#include "canonicalize.hpp"
#include "random_type.hpp"
#include "translate.hpp"

using namespace tempi;
using tempi::test::byte_offsets;

TEST_CASE("dense folding merges a stream of abutting dense children", "[canonicalize]") {
  Type t = Type::stream(8, 4, 10, Type::dense(0, 4));
  REQUIRE(pass::dense_folding(t));
  CHECK(t == Type::dense(8, 40));
  CHECK_FALSE(pass::dense_folding(t));
}

TEST_CASE("dense folding leaves a gap alone", "[canonicalize]") {
  Type t = Type::stream(0, 8, 10, Type::dense(0, 4));
  CHECK_FALSE(pass::dense_folding(t));
}

TEST_CASE("stream elision removes count-1 streams and keeps the offset", "[canonicalize]") {
  Type t = Type::stream(0, 100, 3, Type::stream(12, 7, 1, Type::dense(4, 8)));
  REQUIRE(pass::stream_elision(t));
  CHECK(t == Type::stream(0, 100, 3, Type::dense(16, 8)));
}

TEST_CASE("stream flattening joins a stream whose stride is its child's span", "[canonicalize]") {
  Type t = Type::stream(0, 64, 5, Type::stream(0, 16, 4, Type::dense(0, 8)));
  REQUIRE(pass::stream_flattening(t));
  CHECK(t == Type::stream(0, 16, 20, Type::dense(0, 8)));
}

TEST_CASE("offsets are hoisted to the root", "[canonicalize]") {
  Type t = Type::stream(0, 64, 5, Type::stream(8, 16, 4, Type::dense(4, 8)));
  REQUIRE(pass::hoist_offsets(t));
  CHECK(t == Type::stream(12, 64, 5, Type::stream(0, 16, 4, Type::dense(0, 8))));
}

TEST_CASE("equal blocks at equal spacing become a stream", "[canonicalize]") {
  std::vector<Type> kids;
  for (int i = 0; i < 5; ++i) kids.push_back(Type::dense(i * 12, 4));
  Type t = canonicalize(Type::blocks(0, kids));
  CHECK(t == Type::stream(0, 12, 5, Type::dense(0, 4)));
}

TEST_CASE("a struct of one type laid end to end is dense", "[canonicalize]") {
  std::vector<Type> kids{Type::stream(0, 4, 3, Type::dense(0, 4)), Type::dense(12, 4),
                         Type::stream(16, 4, 2, Type::dense(0, 4))};
  CHECK(canonicalize(Type::blocks(0, kids)) == Type::dense(0, 24));
}

TEST_CASE("a million equal blocks stay compressed", "[canonicalize]") {
  std::vector<Type> kids;
  for (int i = 0; i < 1000000; ++i) kids.push_back(Type::dense(int64_t(i) * 16, 8));
  const Type t = canonicalize(Type::blocks(0, std::move(kids)));
  CHECK(t == Type::stream(0, 16, 1000000, Type::dense(0, 8)));
}

TEST_CASE("irregular blocks keep their order", "[canonicalize]") {
  // Out-of-order displacements must not be sorted: the packed order is the typemap's.
  std::vector<Type> kids{Type::dense(40, 4), Type::dense(0, 4), Type::dense(20, 8)};
  const Type in = Type::blocks(0, kids);
  const Type out = canonicalize(in);
  CHECK(byte_offsets(out) == byte_offsets(in));
  CHECK(out.kind == Type::Kind::Blocks);
}

TEST_CASE("empty types canonicalize to an empty dense", "[canonicalize]") {
  CHECK(canonicalize(Type::stream(4, 8, 0, Type::dense(0, 4))) == Type::dense(0, 0));
  CHECK(canonicalize(Type::blocks(0, {Type::dense(8, 0)})) == Type::dense(0, 0));
}

TEST_CASE("canonicalization keeps every byte in order (random types)", "[canonicalize][property]") {
  test::RandomTypes gen(20261122);
  for (int i = 0; i < 3000; ++i) {
    const TypeDesc d = gen.next();
    const std::optional<Type> ir = translate(d);
    REQUIRE(ir);
    const Type c = canonicalize(*ir);
    INFO("type " << to_string(d) << "\nIR " << to_string(*ir) << "\ncanonical " << to_string(c));
    REQUIRE(byte_offsets(c) == byte_offsets(*ir));
    REQUIRE(canonicalize(c) == c);  // a fixed point
  }
}
