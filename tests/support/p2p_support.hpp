// Helpers shared by the point-to-point tests that are built several ways (see the head
// of tests/pmpi/test_p2p.cpp): test buffers in host, GPU or managed memory, the shapes
// they hold, and the bytes a receive must produce, computed by the MPI library's own
// host engine (PMPI_Pack, PMPI_Unpack).
//
// Define before including, as the test programs do:
//   P2P_HOST_BUFFERS  every buffer is host memory (the builds with and without TEMPI)
//   P2P_REAL_GPU      real GPU buffers (CUDA); otherwise, without P2P_HOST_BUFFERS, the
//                     emulated backend's "device" memory
// In the GPU builds a test buffer is filled and read only through the backend's copy,
// never by the host directly: emulated device memory faults on host access, as real
// device memory does.
#pragma once

#include <mpi.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#if !defined(P2P_HOST_BUFFERS)
#include "backend.hpp"
#endif
#if defined(P2P_REAL_GPU)
#include <cuda_runtime_api.h>
#endif

// An MPI call's result, failing the test case with the call and its error code, without
// counting an assertion per call (polling loops call it thousands of times).
#define MPI_OK(call)                                                         \
  do {                                                                       \
    const int mpi_ok_err_ = (call);                                          \
    if (mpi_ok_err_ != MPI_SUCCESS) FAIL(#call " returned " << mpi_ok_err_); \
  } while (0)

namespace p2p {

inline int rank() {
  int r;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

enum class Where { Host, Gpu, Managed };

inline const char *to_string(Where w) { return w == Where::Host ? "host" : w == Where::Gpu ? "GPU" : "managed"; }

// A test buffer in host, GPU or managed memory (all host memory in the host builds).
class Buf {
 public:
  Buf(Where w, size_t bytes) : where_(w), bytes_(bytes ? bytes : 1) {
#if defined(P2P_HOST_BUFFERS)
    where_ = Where::Host;
#endif
    if (where_ == Where::Host) {
      host_.resize(bytes_);
      ptr_ = host_.data();
      return;
    }
#if defined(P2P_REAL_GPU)
    if (where_ == Where::Managed) {
      REQUIRE(cudaMallocManaged(&ptr_, bytes_) == cudaSuccess);
      return;
    }
#endif
#if !defined(P2P_HOST_BUFFERS)
    REQUIRE(tempi::gpu_backend().allocate_device(bytes_, &ptr_) == tempi::Status::Ok);
#endif
  }
  ~Buf() {
    if (where_ == Where::Host) return;
#if defined(P2P_REAL_GPU)
    if (where_ == Where::Managed) {
      cudaFree(ptr_);
      return;
    }
#endif
#if !defined(P2P_HOST_BUFFERS)
    tempi::gpu_backend().free_device(ptr_);
#endif
  }
  Buf(const Buf &) = delete;
  Buf &operator=(const Buf &) = delete;

  void *get() const { return ptr_; }
  size_t size() const { return bytes_; }
  Where where() const { return where_; }

  // Writes v at the start of the buffer. A v longer than the buffer is the test's own
  // mistake: it fails, where copying all of it would overrun the buffer and copying what
  // fits would hide it.
  void upload(const std::vector<char> &v) {
    REQUIRE(v.size() <= bytes_);
    REQUIRE(copy(ptr_, v.data(), v.size()));
  }
  void fill(char c) { upload(std::vector<char>(bytes_, c)); }
  std::vector<char> download() const {
    std::vector<char> v(bytes_);
    REQUIRE(copy(v.data(), ptr_, bytes_));
    return v;
  }
  // For threads other than Catch's, whose assertion macros are not thread-safe.
  bool upload_quietly(const std::vector<char> &v) { return v.size() <= bytes_ && copy(ptr_, v.data(), v.size()); }
  bool download_quietly(std::vector<char> &v) const {
    v.resize(bytes_);
    return copy(v.data(), ptr_, bytes_);
  }

 private:
  bool copy(void *dst, const void *src, size_t n) const {
#if defined(P2P_HOST_BUFFERS)
    std::memcpy(dst, src, n);
    return true;
#else
    return tempi::gpu_backend().copy(dst, src, n) == tempi::Status::Ok;
#endif
  }
  Where where_;
  size_t bytes_;
  void *ptr_ = nullptr;
  std::vector<char> host_;
};

// A committed datatype and how many bytes `count` elements of it span (lb >= 0 here).
struct Layout {
  MPI_Datatype type;
  int count;
  size_t span() const {
    MPI_Aint lb, extent, tlb, textent;
    MPI_Type_get_extent(type, &lb, &extent);
    MPI_Type_get_true_extent(type, &tlb, &textent);
    return size_t(tlb + textent + (count - 1) * extent);
  }
  int bytes() const {
    int s;
    MPI_Type_size(type, &s);
    return s * count;
  }
  int type_size() const {
    int s;
    MPI_Type_size(type, &s);
    return s;
  }
};

// Derived types made for one test case, freed at its end.
class Types {
 public:
  MPI_Datatype add(MPI_Datatype t) {
    owned_.push_back(t);
    return t;
  }
  ~Types() {
    for (MPI_Datatype &t : owned_) MPI_Type_free(&t);
  }

 private:
  std::vector<MPI_Datatype> owned_;
};

// How many elements of `type` a receive's status says arrived (MPI_Get_count).
inline int count_of(const MPI_Status &st, MPI_Datatype type) {
  int n = -1;
  MPI_Get_count(&st, type, &n);
  return n;
}

// Frees a derived layout's type (named types are left alone).
inline void release(const Layout &l) {
  int n, a, d, combiner;
  MPI_Type_get_envelope(l.type, &n, &a, &d, &combiner);
  if (combiner == MPI_COMBINER_NAMED) return;
  MPI_Datatype t = l.type;
  MPI_Type_free(&t);
}

inline MPI_Datatype committed(MPI_Datatype t) {
  MPI_Type_commit(&t);
  return t;
}

inline MPI_Datatype vector2d() {  // 100 rows of 3 floats, pitch 7 floats
  MPI_Datatype t;
  MPI_Type_vector(100, 3, 7, MPI_FLOAT, &t);
  return committed(t);
}

inline MPI_Datatype subarray3d() {  // a 5x7x9 box of doubles inside 16x24x40
  const int sizes[] = {16, 24, 40}, sub[] = {5, 7, 9}, starts[] = {2, 3, 4};
  MPI_Datatype t;
  MPI_Type_create_subarray(3, sizes, sub, starts, MPI_ORDER_C, MPI_DOUBLE, &t);
  return committed(t);
}

inline MPI_Datatype irregular() {  // an indexed type of structs {int, double}
  const int bl[] = {1, 1};
  const MPI_Aint disp[] = {0, 8};
  const MPI_Datatype types[] = {MPI_INT, MPI_DOUBLE};
  MPI_Datatype s, t;
  MPI_Type_create_struct(2, bl, disp, types, &s);
  const int ibl[] = {2, 1, 3, 1};
  const int idisp[] = {5, 0, 9, 14};
  MPI_Type_indexed(4, ibl, idisp, s, &t);
  MPI_Type_free(&s);
  return committed(t);
}

inline MPI_Datatype contiguous_floats(int n) {
  MPI_Datatype t;
  MPI_Type_contiguous(n, MPI_FLOAT, &t);
  return committed(t);
}

// 4 rows of 2 floats, pitch 5 floats (68 bytes of true extent), resized to an extent of
// 76 bytes: consecutive elements interleave at a pitch that is no multiple of 8.
inline MPI_Datatype resized_vector() {
  MPI_Datatype v, t;
  MPI_Type_vector(4, 2, 5, MPI_FLOAT, &v);
  MPI_Type_create_resized(v, 0, 76, &t);
  MPI_Type_free(&v);
  return committed(t);
}

inline std::vector<char> pattern(size_t n, unsigned seed) {
  std::vector<char> v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (char &c : v) {
    x = x * 1664525u + 1013904223u;
    c = char(x >> 24);
  }
  return v;
}

constexpr char kPoison = char(0xEE);

// What the receiver's buffer must hold: the sender's data packed with its layout and
// unpacked with the receiver's over `base` (poison by default), by the MPI library's
// host engine.
inline std::vector<char> expected(const Layout &s, const Layout &r, unsigned seed, int sent_count = -1,
                                  const std::vector<char> *base = nullptr) {
  const int scount = sent_count < 0 ? s.count : sent_count;
  const std::vector<char> src = pattern(s.span(), seed);
  int ssize;
  MPI_Type_size(s.type, &ssize);
  std::vector<char> packed(size_t(ssize) * scount + 1);
  int pos = 0;
  PMPI_Pack(src.data(), scount, s.type, packed.data(), int(packed.size()), &pos, MPI_COMM_WORLD);
  std::vector<char> out = base ? *base : std::vector<char>(r.span(), kPoison);
  int rsize;
  MPI_Type_size(r.type, &rsize);
  const int elements = rsize ? pos / rsize : 0;
  int upos = 0;
  PMPI_Unpack(packed.data(), pos, &upos, out.data(), elements, r.type, MPI_COMM_WORLD);
  return out;
}

// "" when equal, else where the first differing byte is (a readable failure message).
inline std::string first_difference(const std::vector<char> &got, const std::vector<char> &want) {
  if (got.size() != want.size()) return "size " + std::to_string(got.size()) + " != " + std::to_string(want.size());
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i])
      return "byte " + std::to_string(i) + " of " + std::to_string(got.size()) + ": got " +
             std::to_string(int(uint8_t(got[i]))) + ", want " + std::to_string(int(uint8_t(want[i])));
  return "";
}

}  // namespace p2p
