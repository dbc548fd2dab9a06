// Create + commit time of datatypes with and without TEMPI, in one run: "native"
// calls the PMPI_ entry points (TEMPI bypassed), "TEMPI" the MPI_ ones. TEMPI plans
// a type at its first use with a GPU buffer, not at commit; "first use" is that
// one-time cost (describe, translate, canonicalize, plan, cache), shown beside.
// Each sample creates, commits and frees one type; the median of many is shown.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "base/type_cache.hpp"
#include "help.hpp"

namespace {

using Ctor = std::function<void(MPI_Datatype *)>;

// The constructors, with a flag selecting the PMPI_ (native) or MPI_ (TEMPI) entry points.
struct Api {
  bool native;
  int vector(int c, int b, int s, MPI_Datatype o, MPI_Datatype *t) const {
    return native ? PMPI_Type_vector(c, b, s, o, t) : MPI_Type_vector(c, b, s, o, t);
  }
  int hvector(int c, int b, MPI_Aint s, MPI_Datatype o, MPI_Datatype *t) const {
    return native ? PMPI_Type_create_hvector(c, b, s, o, t) : MPI_Type_create_hvector(c, b, s, o, t);
  }
  int subarray(int n, const int *sz, const int *sub, const int *st, MPI_Datatype o, MPI_Datatype *t) const {
    return native ? PMPI_Type_create_subarray(n, sz, sub, st, MPI_ORDER_C, o, t)
                  : MPI_Type_create_subarray(n, sz, sub, st, MPI_ORDER_C, o, t);
  }
  int indexed(int n, const int *bl, const int *d, MPI_Datatype o, MPI_Datatype *t) const {
    return native ? PMPI_Type_indexed(n, bl, d, o, t) : MPI_Type_indexed(n, bl, d, o, t);
  }
  int structure(int n, const int *bl, const MPI_Aint *d, const MPI_Datatype *o, MPI_Datatype *t) const {
    return native ? PMPI_Type_create_struct(n, bl, d, o, t) : MPI_Type_create_struct(n, bl, d, o, t);
  }
  int commit(MPI_Datatype *t) const { return native ? PMPI_Type_commit(t) : MPI_Type_commit(t); }
  int release(MPI_Datatype *t) const { return native ? PMPI_Type_free(t) : MPI_Type_free(t); }
};

// The paper's 3-D object: 100 x 13 x 17 floats of a 256 x 512 x 1024 float array.
constexpr int X = 100, Y = 13, Z = 17, AX = 256, AY = 512, AZ = 1024;

void make(const std::string &name, const Api &api, MPI_Datatype *out) {
  MPI_Datatype a, b;
  if (name == "subarray") {
    const int sz[] = {AZ, AY, AX}, sub[] = {Z, Y, X}, st[] = {0, 0, 0};
    api.subarray(3, sz, sub, st, MPI_FLOAT, out);
  } else if (name == "hvector of vector") {
    api.vector(Y, X, AX, MPI_FLOAT, &a);
    api.hvector(Z, 1, MPI_Aint(AX) * AY * 4, a, out);
    api.release(&a);
  } else if (name == "hvector of hvector of vector") {
    api.vector(1, X, 1, MPI_FLOAT, &a);
    api.hvector(Y, 1, AX * 4, a, &b);
    api.hvector(Z, 1, MPI_Aint(AX) * AY * 4, b, out);
    api.release(&a);
    api.release(&b);
  } else if (name == "subarray of vector") {
    api.vector(1, X, 1, MPI_FLOAT, &a);
    MPI_Datatype row;
    if (api.native)
      PMPI_Type_create_resized(a, 0, AX * 4, &row);
    else
      MPI_Type_create_resized(a, 0, AX * 4, &row);
    const int sz[] = {AZ, AY}, sub[] = {Z, Y}, st[] = {0, 0};
    api.subarray(2, sz, sub, st, row, out);
    api.release(&a);
    api.release(&row);
  } else if (name == "indexed (16 blocks)") {
    int bl[16], d[16];
    for (int i = 0; i < 16; ++i) bl[i] = 1 + i % 3, d[i] = i * 7 + (i * i) % 5;
    api.indexed(16, bl, d, MPI_DOUBLE, out);
  } else {  // struct of mixed members
    const int bl[] = {1, 3, 2};
    const MPI_Aint d[] = {0, 8, 24};
    const MPI_Datatype t[] = {MPI_INT, MPI_FLOAT, MPI_DOUBLE};
    api.structure(3, bl, d, t, out);
  }
}

// Median create+commit time; with `plan`, the median time of the first plan lookup instead.
double median_us(const std::string &name, const Api &api, int reps, bool plan = false) {
  std::vector<double> t;
  for (int i = 0; i < reps + 50; ++i) {
    MPI_Datatype ty;
    auto a = std::chrono::steady_clock::now();
    make(name, api, &ty);
    api.commit(&ty);
    auto b = std::chrono::steady_clock::now();
    if (plan) {
      a = std::chrono::steady_clock::now();
      if (!tempi::type_cache().find(ty)->plan) std::printf("warning: %s not planned\n", name.c_str());
      b = std::chrono::steady_clock::now();
    }
    api.release(&ty);
    if (i >= 50) t.push_back(std::chrono::duration<double, std::micro>(b - a).count());
  }
  std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char **argv) {
  const char *usage =
    "usage: bench_commit   (one rank)\n"
    "\n"
    "Create + commit time of datatypes with and without TEMPI (native: the PMPI_ entry points),\n"
    "the median of 5000 samples each, and TEMPI's one-time planning cost at first use.\n";
  if (tempi::tools::print_help_if_asked(argc, argv, usage)) return 0;
  if (tempi::tools::reject_unknown(argc, argv, {}, {}, usage)) return 2;
  MPI_Init(&argc, &argv);
  const int reps = 5000;
  std::printf("create+commit, median of %d (microseconds)\n", reps);
  std::printf("%-30s %10s %10s %8s %12s\n", "type", "native", "TEMPI", "ratio", "first use");
  for (const char *name : {"subarray", "hvector of vector", "hvector of hvector of vector", "subarray of vector",
                           "indexed (16 blocks)", "struct (3 members)"}) {
    const double native = median_us(name, Api{true}, reps);
    const double tempi = median_us(name, Api{false}, reps);
    const double plan = median_us(name, Api{false}, reps, true);
    std::printf("%-30s %10.2f %10.2f %7.2fx %12.2f\n", name, native, tempi, tempi / native, plan);
  }
  MPI_Finalize();
  return 0;
}
