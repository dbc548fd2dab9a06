// TEMPI's type cache through the real MPI library: plans at commit, drops at free,
// and a handle reused by MPI gets the new type's plan.
#include <mpi.h>

#include <catch2/catch.hpp>
#include <cstdlib>

#include "mpi_types.hpp"
#include "random_type.hpp"
#include "base/describe.hpp"
#include "base/runtime.hpp"
#include "base/type_cache.hpp"
#include "type_plan.hpp"

using namespace tempi;

namespace {

// Whether the library gave every node of the type the bounds the description computes.
// Libraries pad extents for alignment by different rules (the standard's epsilon: MPICH
// pads structs only, Open MPI 4.1 an hindexed of 2-byte elements too), and a padded
// child moves everything built on it.
bool same_bounds(const TypeDesc &mpi, const TypeDesc &desc) {
  if (mpi.lb != desc.lb || mpi.extent != desc.extent || mpi.children.size() != desc.children.size()) return false;
  for (size_t i = 0; i < mpi.children.size(); ++i)
    if (!same_bounds(mpi.children[i], desc.children[i])) return false;
  return true;
}

}  // namespace

TEST_CASE("freed and reused handles get fresh plans", "[type_cache]") {
  if (std::getenv("TEMPI_DISABLE")) return;
  test::RandomTypes gen(5);
  MPI_Datatype previous = MPI_DATATYPE_NULL;
  int reused = 0;
  for (int i = 0; i < 300; ++i) {
    const TypeDesc d = gen.next();
    MPI_Datatype t = test::build_mpi_type(d);
    reused += t == previous;
    const std::shared_ptr<const TypeInfo> info = type_cache().find(t);
    const std::optional<Plan> expect = plan_type(d);
    INFO(to_string(d));
    REQUIRE(info->plan);
    REQUIRE(expect);
    CHECK(info->size == d.size);
    // The cached plan is the handle's current type's: what planning it afresh gives.
    const TypeDesc described = describe(t);
    const std::optional<Plan> fresh = plan_type(described);
    REQUIRE(fresh);
    CHECK(info->plan->pattern == fresh->pattern);
    CHECK(info->plan->dims == fresh->dims);
    CHECK(info->plan->start == fresh->start);
    // And the description's, where the library laid the type out as the description does.
    if (same_bounds(described, d)) {
      CHECK(info->plan->pattern == expect->pattern);
      CHECK(info->plan->dims == expect->dims);
      CHECK(info->plan->start == expect->start);
    }
    previous = t;
    MPI_Type_free(&t);
  }
  WARN("MPI reused a freed handle " << reused << " times");
}

TEST_CASE("first use plans, commit and free drop", "[type_cache]") {
  if (std::getenv("TEMPI_DISABLE")) return;
  const size_t before = type_cache().size();
  MPI_Datatype t;
  MPI_Type_vector(4, 2, 8, MPI_FLOAT, &t);
  MPI_Type_commit(&t);
  CHECK(type_cache().size() == before);  // commit costs no planning
  const auto info = type_cache().find(t);
  REQUIRE(info->plan);
  CHECK(to_string(*info->plan) == "StridedBlock{start=0 counts=[8,4] strides=[1,32]}");
  CHECK(type_cache().size() == before + 1);
  CHECK(type_cache().find(t) == info);  // cached
  MPI_Type_commit(&t);                  // a second commit drops the plan too
  CHECK(type_cache().size() == before);
  type_cache().find(t);
  MPI_Type_free(&t);
  CHECK(type_cache().size() == before);
}

TEST_CASE("a type freed past TEMPI's wrapper drops its plan", "[type_cache]") {
  if (std::getenv("TEMPI_DISABLE")) return;
  const size_t before = type_cache().size();
  MPI_Datatype t;
  MPI_Type_vector(4, 2, 8, MPI_FLOAT, &t);
  MPI_Type_commit(&t);
  type_cache().find(t);
  CHECK(type_cache().size() == before + 1);
  PMPI_Type_free(&t);  // as MPICH's mpi_f08 binding or another tool would
  CHECK(type_cache().size() == before);
  MPI_Datatype dup;  // a duplicate does not inherit the plan's lifetime attribute
  MPI_Type_contiguous(3, MPI_INT, &t);
  MPI_Type_commit(&t);
  type_cache().find(t);
  MPI_Type_dup(t, &dup);
  type_cache().find(dup);
  CHECK(type_cache().size() == before + 2);
  PMPI_Type_free(&dup);
  CHECK(type_cache().size() == before + 1);
  MPI_Type_free(&t);
  CHECK(type_cache().size() == before);
}

TEST_CASE("TEMPI_DISABLE makes every call pass through", "[disable]") {
  const bool disabled = std::getenv("TEMPI_DISABLE") != nullptr;
  CHECK(active() == !disabled);
  // A planned type stays planned across MPI_Type_commit only when TEMPI is off
  // (the wrapper then forwards without touching the cache).
  MPI_Datatype t;
  MPI_Type_contiguous(3, MPI_INT, &t);
  MPI_Type_commit(&t);
  type_cache().find(t);
  const size_t before = type_cache().size();
  MPI_Type_commit(&t);
  CHECK(type_cache().size() == before - (disabled ? 0 : 1));
  type_cache().drop(t);
  MPI_Type_free(&t);
}
