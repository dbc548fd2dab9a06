// The library's arguments for one side of a collective (wire.hpp).
#include "coll/wire.hpp"

#include <algorithm>
#include <climits>
#include <numeric>
#include <type_traits>

#include "base/errors.hpp"

namespace tempi {
namespace coll {

namespace {

// A datatype of `bytes` contiguous bytes: the unit of wire counts where an int cannot
// count bytes.
int make_unit(int64_t bytes, MPI_Comm comm, const char *call, MPI_Datatype &unit, OwnedType &owned) {
  unit = MPI_BYTE;
  if (bytes <= 1) return MPI_SUCCESS;
  MPI_Datatype t = MPI_DATATYPE_NULL;
  int err;
  if (bytes <= INT_MAX) {
    err = PMPI_Type_contiguous(int(bytes), MPI_BYTE, &t);
  } else {
    constexpr int kGiB = 1 << 30;
    MPI_Datatype gib = MPI_DATATYPE_NULL;
    err = PMPI_Type_contiguous(kGiB, MPI_BYTE, &gib);
    const int lengths[2] = {int(bytes / kGiB), int(bytes % kGiB)};
    const MPI_Aint displs[2] = {0, MPI_Aint(bytes / kGiB) * kGiB};
    MPI_Datatype types[2] = {gib, MPI_BYTE};
    if (err == MPI_SUCCESS) err = PMPI_Type_create_struct(2, lengths, displs, types, &t);
    if (gib != MPI_DATATYPE_NULL) PMPI_Type_free(&gib);
  }
  if (err == MPI_SUCCESS) err = PMPI_Type_commit(&t);
  if (err != MPI_SUCCESS)
    return raise_error(comm, MPI_ERR_INTERN, "%s: cannot describe %lld packed bytes to MPI", call, (long long)bytes);
  unit = t;
  owned = OwnedType(t);
  return MPI_SUCCESS;
}

// The unit in which every byte count (and, with `displs_too`, every offset) of a packed
// side fits an int: one byte where it can, else their greatest common divisor.
int wire_unit(const Side &s, bool displs_too, MPI_Comm comm, const char *call, Wire &w, int64_t &unit) {
  int64_t top = 0, g = 0;
  for (size_t i = 0; i < s.blocks(); ++i) {
    top = std::max(top, s.bytes(i));
    g = std::gcd(g, s.bytes(i));
    if (displs_too) {
      top = std::max(top, s.offset(i));
      g = std::gcd(g, s.offset(i));
    }
  }
  unit = 1;
  if (top > INT_MAX) {
    unit = g;
    if (top / g > INT_MAX)
      return raise_error(comm, MPI_ERR_COUNT, "%s: %lld packed bytes cannot be counted in ints", call,
                         (long long)top);
  }
  return make_unit(unit, comm, call, w.unit, w.owned);
}

}  // namespace

// Uniform blocks: one count and type for all of them.
int wire_uniform(const Side &s, int user_count, MPI_Datatype user_type, MPI_Comm comm, const char *call, Wire &w) {
  // Direct blocks qualify only where they lie as packed blocks would: block i at i bytes(0).
  bool packed_layout = s.mode() == Side::Mode::Pack;
  if (s.mode() == Side::Mode::Direct) {
    packed_layout = true;
    for (size_t i = 0; i < s.blocks(); ++i)
      packed_layout = packed_layout && s.bytes(i) == s.bytes(0) && s.offset(i) == int64_t(i) * s.bytes(0);
  }
  if (!packed_layout) {
    w.count = user_count;
    w.unit = user_type;
    return MPI_SUCCESS;
  }
  const int64_t bytes = s.blocks() ? s.bytes(0) : 0;
  if (bytes <= INT_MAX) {
    w.count = int(bytes);
    w.unit = MPI_BYTE;
    return MPI_SUCCESS;
  }
  w.count = 1;
  return make_unit(bytes, comm, call, w.unit, w.owned);
}

// Per-block counts and displacements in units of one type (the v-variants).
int wire_varying(const Side &s, const int *user_counts, const int *user_displs, MPI_Datatype user_type,
                 MPI_Comm comm, const char *call, Wire &w, VArgs &out) {
  out = {user_counts, user_displs, user_type};
  if (!s.rewired()) return MPI_SUCCESS;
  int64_t unit = 1;
  if (const int err = wire_unit(s, true, comm, call, w, unit)) return err;
  const size_t n = s.blocks();
  w.counts.resize(std::max<size_t>(n, 1));
  w.displs.resize(std::max<size_t>(n, 1));
  for (size_t i = 0; i < n; ++i) {
    w.counts[i] = int(s.bytes(i) / unit);
    w.displs[i] = int(s.offset(i) / unit);
  }
  out = {w.counts.data(), w.displs.data(), w.unit};
  return MPI_SUCCESS;
}

// Per-block counts, byte displacements and types (the w-variants), in arrays of at least
// `room` entries.
template <class Disp>
int wire_typed(const Side &s, const int *user_counts, const Disp *user_displs, const MPI_Datatype *user_types,
               MPI_Comm comm, const char *call, Wire &w, std::vector<Disp> &displs, WArgs<Disp> &out, size_t room) {
  out = {user_counts, user_displs, user_types};
  if (!s.rewired()) return MPI_SUCCESS;
  if (s.mode() == Side::Mode::Direct && std::is_same<Disp, int>::value)
    for (size_t i = 0; i < s.blocks(); ++i)
      if (s.offset(i) > INT_MAX) return MPI_SUCCESS;  // beyond int displacements: the user's types
  int64_t unit = 1;
  if (const int err = wire_unit(s, false, comm, call, w, unit)) return err;
  const size_t n = s.blocks();
  w.counts.assign(std::max(n, room), 0);
  displs.assign(std::max(n, room), 0);
  w.types.assign(std::max(n, room), w.unit);
  w.placed.clear();
  for (size_t i = 0; i < n; ++i) {
    w.counts[i] = int(s.bytes(i) / unit);
    if (!std::is_same<Disp, int>::value || s.offset(i) <= INT_MAX) {
      displs[i] = Disp(s.offset(i));
      continue;
    }
    // Staging offsets add up over the blocks, so they pass 2 GiB where every displacement
    // the application gave was small (an FFT transpose's blocks at displacement 0): such a
    // block goes as one element of a type that carries its offset, at displacement 0.
    if (w.counts[i] == 0) continue;
    const MPI_Aint at = MPI_Aint(s.offset(i));
    MPI_Datatype placed = MPI_DATATYPE_NULL;
    if (PMPI_Type_create_hindexed(1, &w.counts[i], &at, w.unit, &placed) != MPI_SUCCESS ||
        PMPI_Type_commit(&placed) != MPI_SUCCESS)
      return raise_error(comm, MPI_ERR_INTERN, "%s: cannot make a type for a block past 2 GiB of staging", call);
    w.placed.emplace_back(placed);
    w.types[i] = placed;
    w.counts[i] = 1;
  }
  out = {w.counts.data(), displs.data(), w.types.data()};
  return MPI_SUCCESS;
}

template int wire_typed<int>(const Side &, const int *, const int *, const MPI_Datatype *, MPI_Comm, const char *,
                             Wire &, std::vector<int> &, WArgs<int> &, size_t);
template int wire_typed<MPI_Aint>(const Side &, const int *, const MPI_Aint *, const MPI_Datatype *, MPI_Comm,
                                  const char *, Wire &, std::vector<MPI_Aint> &, WArgs<MPI_Aint> &, size_t);

}  // namespace coll
}  // namespace tempi
