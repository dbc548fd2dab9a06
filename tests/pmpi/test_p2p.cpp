// Point-to-point behaviour on two ranks (pmpi/api/wrap_p2p.cpp, wrap_completion.cpp).
// One source, built four ways (tests/meson.build):
//   P2P_HOST_BUFFERS, without TEMPI   what the MPI library itself does (the reference)
//   P2P_HOST_BUFFERS, with TEMPI      must behave identically: host buffers pass through
//   emulated GPU backend              "GPU" buffers in host memory: every TEMPI path on CI
//   P2P_REAL_GPU                      real GPU buffers (gpu suite; exit 77 without a GPU)
// Expected bytes come from the MPI library's own host engine (PMPI_Pack, PMPI_Unpack).
#define CATCH_CONFIG_RUNNER
#include <mpi.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "p2p_main.hpp"
#include "p2p_support.hpp"
#if !defined(P2P_HOST_BUFFERS)
#include "p2p/messages.hpp"
#include "tempi.h"
#endif

using namespace p2p;

namespace {

enum class Mode { Blocking, Nonblocking, Synchronous, SendrecvCall };

// Rank 0 sends `s` from memory `sw`; rank 1 receives `r` into `rw` and checks every byte.
void exchange(const Layout &s, Where sw, const Layout &r, Where rw, Mode mode, unsigned seed) {
  const int tag = int(seed % 1000);
  if (rank() == 0) {
    Buf b(sw, s.span());
    b.upload(pattern(s.span(), seed));
    if (mode == Mode::Blocking) REQUIRE(MPI_Send(b.get(), s.count, s.type, 1, tag, MPI_COMM_WORLD) == MPI_SUCCESS);
    if (mode == Mode::Synchronous) REQUIRE(MPI_Ssend(b.get(), s.count, s.type, 1, tag, MPI_COMM_WORLD) == MPI_SUCCESS);
    if (mode == Mode::Nonblocking) {
      MPI_Request req;
      REQUIRE(MPI_Isend(b.get(), s.count, s.type, 1, tag, MPI_COMM_WORLD, &req) == MPI_SUCCESS);
      REQUIRE(MPI_Wait(&req, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    }
    if (mode == Mode::SendrecvCall)
      REQUIRE(MPI_Sendrecv(b.get(), s.count, s.type, 1, tag, nullptr, 0, MPI_BYTE, MPI_PROC_NULL, 0, MPI_COMM_WORLD,
                           MPI_STATUS_IGNORE) == MPI_SUCCESS);
  } else if (rank() == 1) {
    Buf b(rw, r.span());
    b.upload(std::vector<char>(r.span(), kPoison));
    MPI_Status st;
    if (mode == Mode::Blocking || mode == Mode::Synchronous)
      REQUIRE(MPI_Recv(b.get(), r.count, r.type, 0, tag, MPI_COMM_WORLD, &st) == MPI_SUCCESS);
    if (mode == Mode::Nonblocking) {
      MPI_Request req;
      REQUIRE(MPI_Irecv(b.get(), r.count, r.type, 0, tag, MPI_COMM_WORLD, &req) == MPI_SUCCESS);
      REQUIRE(MPI_Wait(&req, &st) == MPI_SUCCESS);
    }
    if (mode == Mode::SendrecvCall)
      REQUIRE(MPI_Sendrecv(nullptr, 0, MPI_BYTE, MPI_PROC_NULL, 0, b.get(), r.count, r.type, 0, tag, MPI_COMM_WORLD,
                           &st) == MPI_SUCCESS);
    CHECK(st.MPI_SOURCE == 0);
    CHECK(st.MPI_TAG == tag);
    int n = -1;
    MPI_Get_count(&st, r.type, &n);
    CHECK(n == s.bytes() / (r.bytes() / r.count));
    CHECK(first_difference(b.download(), expected(s, r, seed)) == "");
  }
}

// The transpose of an n x n row-major matrix of doubles as a type: column j (a vector of
// n doubles, n apart) at byte j * 8, so that its packed bytes are the matrix's columns
// one after another (issue 19).
MPI_Datatype transpose_type(int n) {
  MPI_Datatype column, t;
  MPI_Type_vector(n, 1, n, MPI_DOUBLE, &column);
  MPI_Type_create_hvector(n, 1, sizeof(double), column, &t);
  MPI_Type_free(&column);
  return committed(t);
}

// The bytes of n x n doubles a[i] = i + 0.25.
std::vector<char> numbered_matrix(int n) {
  std::vector<double> a(size_t(n) * size_t(n));
  for (size_t i = 0; i < a.size(); ++i) a[i] = double(i) + 0.25;
  std::vector<char> raw(a.size() * sizeof(double));
  std::memcpy(raw.data(), a.data(), raw.size());
  return raw;
}

// Sends `bytes` from a GPU buffer as `l`, blocking or nonblocking (then waited for).
void send_from_gpu(const std::vector<char> &bytes, const Layout &l, int dest, Mode mode, int tag) {
  Buf b(Where::Gpu, bytes.size());
  b.upload(bytes);
  if (mode == Mode::Nonblocking) {
    MPI_Request req;
    REQUIRE(MPI_Isend(b.get(), l.count, l.type, dest, tag, MPI_COMM_WORLD, &req) == MPI_SUCCESS);
    REQUIRE(MPI_Wait(&req, MPI_STATUS_IGNORE) == MPI_SUCCESS);
  } else {
    REQUIRE(MPI_Send(b.get(), l.count, l.type, dest, tag, MPI_COMM_WORLD) == MPI_SUCCESS);
  }
}

// Receives as `l` into a GPU buffer of `size` poisoned bytes; returns its bytes afterwards.
std::vector<char> recv_into_gpu(size_t size, const Layout &l, int source, Mode mode, int tag) {
  Buf b(Where::Gpu, size);
  b.upload(std::vector<char>(size, kPoison));
  if (mode == Mode::Nonblocking) {
    MPI_Request req;
    REQUIRE(MPI_Irecv(b.get(), l.count, l.type, source, tag, MPI_COMM_WORLD, &req) == MPI_SUCCESS);
    REQUIRE(MPI_Wait(&req, MPI_STATUS_IGNORE) == MPI_SUCCESS);
  } else {
    REQUIRE(MPI_Recv(b.get(), l.count, l.type, source, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE) == MPI_SUCCESS);
  }
  return b.download();
}

// Rank 0 sends the n x n matrix a[r * n + c] = r * n + c + 0.25 from GPU memory as `s`;
// rank 1 receives it as `r` into GPU memory and checks, element by element, that it
// holds the transpose (one of the two layouts is transpose_type, the other contiguous).
void send_transposed(int n, const Layout &s, const Layout &r, Mode mode, int tag) {
  const size_t bytes = size_t(n) * size_t(n) * sizeof(double);
  if (rank() == 0) {
    send_from_gpu(numbered_matrix(n), s, 1, mode, tag);
  } else if (rank() == 1) {
    const std::vector<char> arrived = recv_into_gpu(bytes, r, 0, mode, tag);
    std::vector<double> got(size_t(n) * size_t(n));
    std::memcpy(got.data(), arrived.data(), bytes);
    int64_t wrong = 0;
    std::string first;
    for (int64_t row = 0; row < n; ++row)
      for (int64_t col = 0; col < n; ++col) {
        const double want = double(col * n + row) + 0.25;  // element (col, row) of the sent matrix
        if (got[size_t(row * n + col)] == want) continue;
        if (wrong++ == 0)
          first = "(" + std::to_string(row) + ", " + std::to_string(col) + "): got " +
                  std::to_string(got[size_t(row * n + col)]) + ", want " + std::to_string(want);
      }
    INFO("n " << n << ": " << wrong << " wrong elements, the first at " << first);
    CHECK(wrong == 0);
  }
}

// Two messages in flight at once (their packs and unpacks issued in one batch): an n x n
// matrix as `s` to `r` as in send_transposed, and a 16 x 16 one sent and received
// contiguous. Rank 1 checks both element by element.
void send_transposed_in_batch(int n, const Layout &s, const Layout &r, int tag) {
  const int small = 16;
  const size_t bytes = size_t(n) * size_t(n) * sizeof(double), small_bytes = small * small * sizeof(double);
  MPI_Request req[2];
  if (rank() == 0) {
    Buf big(Where::Gpu, bytes), little(Where::Gpu, small_bytes);
    big.upload(numbered_matrix(n));
    little.upload(numbered_matrix(small));
    REQUIRE(MPI_Isend(big.get(), s.count, s.type, 1, tag, MPI_COMM_WORLD, &req[0]) == MPI_SUCCESS);
    REQUIRE(MPI_Isend(little.get(), small * small, MPI_DOUBLE, 1, tag + 1, MPI_COMM_WORLD, &req[1]) == MPI_SUCCESS);
    REQUIRE(MPI_Waitall(2, req, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
  } else if (rank() == 1) {
    Buf big(Where::Gpu, bytes), little(Where::Gpu, small_bytes);
    big.upload(std::vector<char>(bytes, kPoison));
    little.upload(std::vector<char>(small_bytes, kPoison));
    REQUIRE(MPI_Irecv(big.get(), r.count, r.type, 0, tag, MPI_COMM_WORLD, &req[0]) == MPI_SUCCESS);
    REQUIRE(MPI_Irecv(little.get(), small * small, MPI_DOUBLE, 0, tag + 1, MPI_COMM_WORLD, &req[1]) == MPI_SUCCESS);
    REQUIRE(MPI_Waitall(2, req, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
    CHECK(little.download() == numbered_matrix(small));
    std::vector<double> got(size_t(n) * size_t(n));
    std::memcpy(got.data(), big.download().data(), bytes);
    int64_t wrong = 0;
    for (int64_t row = 0; row < n; ++row)
      for (int64_t col = 0; col < n; ++col) wrong += got[size_t(row * n + col)] != double(col * n + row) + 0.25;
    INFO("n " << n << ": " << wrong << " wrong elements");
    CHECK(wrong == 0);
  }
}

// The lower (or upper) triangle of an n x n column-major matrix of doubles: one block per
// column, column j holding rows j..n-1 (or 0..j). Both hold n(n+1)/2 doubles (issue 19).
MPI_Datatype triangle_type(int n, bool lower) {
  std::vector<int> lengths(static_cast<size_t>(n)), displs(static_cast<size_t>(n));
  for (int j = 0; j < n; ++j) {
    lengths[size_t(j)] = lower ? n - j : j + 1;
    displs[size_t(j)] = lower ? j * n + j : j * n;
  }
  MPI_Datatype t;
  MPI_Type_indexed(n, lengths.data(), displs.data(), MPI_DOUBLE, &t);
  return committed(t);
}

// Rank 0 sends the lower triangle of a[i] = i + 0.25 from GPU memory; rank 1 receives it
// as the upper triangle of a poisoned GPU matrix: the k-th element of the lower triangle
// (column by column) lands at the k-th place of the upper one, the rest stays poisoned.
void lower_to_upper(int n, Mode mode, int tag) {
  const size_t elements = size_t(n) * size_t(n), bytes = elements * sizeof(double);
  const Layout lower{triangle_type(n, true), 1}, upper{triangle_type(n, false), 1};
  if (rank() == 0) {
    send_from_gpu(numbered_matrix(n), lower, 1, mode, tag);
  } else if (rank() == 1) {
    const std::vector<char> arrived = recv_into_gpu(bytes, upper, 0, mode, tag);
    std::vector<char> want(bytes, kPoison);
    size_t lc = 0, lr = 0;  // the next element of the lower triangle: column lc, row lr
    for (size_t c = 0; c < size_t(n); ++c)
      for (size_t r = 0; r <= c; ++r) {
        const double v = double(lc * size_t(n) + lr) + 0.25;
        std::memcpy(&want[(c * size_t(n) + r) * sizeof(double)], &v, sizeof v);
        if (++lr == size_t(n)) lr = ++lc;
      }
    CHECK(first_difference(arrived, want) == "");
  }
  release(lower);
  release(upper);
}

struct Named {
  const char *name;
  MPI_Datatype (*make)();
  int count;
};

const Named kShapes[] = {{"2-D vector", vector2d, 3}, {"3-D subarray", subarray3d, 2}, {"irregular", irregular, 5}};

}  // namespace

TEST_CASE("strided and irregular objects arrive byte-exact", "[p2p]") {
  unsigned seed = 1;
  for (const Named &shape : kShapes) {
    const Layout l{shape.make(), shape.count};
    for (Mode mode : {Mode::Blocking, Mode::Nonblocking, Mode::Synchronous, Mode::SendrecvCall})
      for (Where sw : {Where::Gpu, Where::Host})
        for (Where rw : {Where::Gpu, Where::Host}) {
          INFO(shape.name << " mode " << int(mode) << " send in " << int(sw) << " recv in " << int(rw));
          exchange(l, sw, l, rw, mode, seed++);
        }
    MPI_Datatype t = l.type;
    MPI_Type_free(&t);
  }
}

TEST_CASE("a type TEMPI does not plan still arrives", "[p2p]") {
  // MPI_DOUBLE_INT: a double and an int with padding, a named type TEMPI leaves to MPI.
  // Without CUDA awareness its whole region goes through host memory.
  const Layout pairs{MPI_DOUBLE_INT, 10};
  exchange(pairs, Where::Gpu, pairs, Where::Gpu, Mode::Blocking, 61);
  exchange(pairs, Where::Gpu, pairs, Where::Host, Mode::Nonblocking, 62);
  exchange(pairs, Where::Host, pairs, Where::Gpu, Mode::Nonblocking, 63);
  MPI_Datatype strided;  // and a vector of them, so the region has gaps that must survive
  MPI_Type_vector(4, 1, 3, MPI_DOUBLE_INT, &strided);
  const Layout l{committed(strided), 2};
  exchange(l, Where::Gpu, l, Where::Gpu, Mode::Blocking, 64);
  exchange(l, Where::Gpu, l, Where::Gpu, Mode::Nonblocking, 65);
  release(l);
}

TEST_CASE("MPI_Pack and MPI_Unpack of a type TEMPI does not plan, on GPU memory", "[p2p][pack]") {
  // A vector of MPI_DOUBLE_INT with gaps: the library packs it, from host images of the
  // GPU buffers where it cannot read GPU memory.
  MPI_Datatype strided;
  MPI_Type_vector(4, 1, 3, MPI_DOUBLE_INT, &strided);
  const Layout l{committed(strided), 2};
  const std::vector<char> src = pattern(l.span(), 77);
  int size = 0;
  MPI_Pack_size(l.count, l.type, MPI_COMM_WORLD, &size);
  std::vector<char> want(size_t(size) + 8, kPoison);
  int wpos = 8;
  PMPI_Pack(src.data(), l.count, l.type, want.data(), int(want.size()), &wpos, MPI_COMM_WORLD);
  for (Where tw : {Where::Gpu, Where::Host})
    for (Where pw : {Where::Gpu, Where::Host}) {
      INFO("typed in " << int(tw) << ", packed in " << int(pw));
      Buf typed(tw, l.span()), packed(pw, want.size());
      typed.upload(src);
      packed.upload(std::vector<char>(want.size(), kPoison));
      int pos = 8;
      REQUIRE(MPI_Pack(typed.get(), l.count, l.type, packed.get(), int(want.size()), &pos, MPI_COMM_WORLD) ==
              MPI_SUCCESS);
      CHECK(pos == wpos);
      CHECK(first_difference(packed.download(), want) == "");
      // unpack over a poisoned typed buffer: the gaps keep the poison
      std::vector<char> image(l.span(), kPoison);
      int upos = 8;
      PMPI_Unpack(want.data(), int(want.size()), &upos, image.data(), l.count, l.type, MPI_COMM_WORLD);
      typed.upload(std::vector<char>(l.span(), kPoison));
      pos = 8;
      REQUIRE(MPI_Unpack(packed.get(), int(want.size()), &pos, typed.get(), l.count, l.type, MPI_COMM_WORLD) ==
              MPI_SUCCESS);
      CHECK(pos == wpos);
      CHECK(first_difference(typed.download(), image) == "");
    }
  release(l);
}

TEST_CASE("managed memory is GPU data", "[p2p]") {
  const Layout l{subarray3d(), 1};
  exchange(l, Where::Managed, l, Where::Managed, Mode::Blocking, 71);
  exchange(l, Where::Managed, l, Where::Gpu, Mode::Nonblocking, 72);
  release(l);
}

TEST_CASE("vector on one side, contiguous on the other", "[p2p]") {
  const Layout vec{vector2d(), 2};
  const Layout flat{contiguous_floats(300), 2};
  exchange(vec, Where::Gpu, flat, Where::Gpu, Mode::Blocking, 11);
  exchange(flat, Where::Gpu, vec, Where::Gpu, Mode::Nonblocking, 12);
  const Layout floats{MPI_FLOAT, 600};
  exchange(vec, Where::Gpu, floats, Where::Host, Mode::Blocking, 13);
  exchange(floats, Where::Host, vec, Where::Gpu, Mode::Blocking, 14);
  exchange(floats, Where::Gpu, floats, Where::Gpu, Mode::Blocking, 15);  // contiguous GPU data
  release(vec);
  release(flat);
}

TEST_CASE("a matrix sent contiguous arrives as its transpose, and back", "[p2p][transpose]") {
  // 1100 x 1100 doubles (9.7 MB) is above the default pipelining threshold
  int tag = 500;
  for (int n : {1, 7, 64, 333, 1100}) {
    const Layout transposed{transpose_type(n), 1}, matrix{MPI_DOUBLE, n * n};
    for (Mode mode : {Mode::Blocking, Mode::Nonblocking}) {
      INFO("n " << n << (mode == Mode::Blocking ? ", blocking" : ", nonblocking"));
      send_transposed(n, matrix, transposed, mode, tag++);
      send_transposed(n, transposed, matrix, mode, tag++);
    }
    release(transposed);
  }
}

TEST_CASE("a lower triangle sent arrives as an upper triangle", "[p2p][triangle]") {
  int tag = 700;
  for (int n : {1, 5, 64, 700}) {
    INFO("n " << n);
    lower_to_upper(n, Mode::Blocking, tag++);
    lower_to_upper(n, Mode::Nonblocking, tag++);
  }
}

TEST_CASE("a transpose sent or received beside another message", "[p2p][transpose]") {
  // 800 x 800 doubles (5.1 MB): large enough to leave a batch's fused launch for the tiled
  // kernels, below the default pipelining threshold
  int tag = 600;
  for (int n : {64, 800}) {
    const Layout transposed{transpose_type(n), 1}, matrix{MPI_DOUBLE, n * n};
    send_transposed_in_batch(n, matrix, transposed, tag);
    send_transposed_in_batch(n, transposed, matrix, tag + 2);
    tag += 4;
    release(transposed);
  }
}

TEST_CASE("large messages take the pipelined path", "[p2p][large]") {
  // 12 MiB of 12-byte blocks: above the default 8 MiB pipeline threshold
  MPI_Datatype t;
  MPI_Type_vector(1 << 20, 3, 5, MPI_FLOAT, &t);
  const Layout l{committed(t), 1};
  exchange(l, Where::Gpu, l, Where::Gpu, Mode::Blocking, 21);
  exchange(l, Where::Gpu, l, Where::Gpu, Mode::Nonblocking, 22);
  const Layout flat{MPI_FLOAT, 3 << 20};
  exchange(l, Where::Gpu, flat, Where::Gpu, Mode::Blocking, 23);
  MPI_Type_free(&t);
}

TEST_CASE("a receive posted for more elements than sent gets what was sent", "[p2p]") {
  const Layout big{vector2d(), 4};
  const Layout small{big.type, 3};
  exchange(small, Where::Gpu, big, Where::Gpu, Mode::Blocking, 31);
  if (rank() == 1) {
    // the fourth element of the receive buffer is untouched
    const std::vector<char> e = expected(small, big, 31, 3);
    CHECK(e.back() == kPoison);
  }
  release(big);
}

TEST_CASE("a receive posted for fewer elements than sent is a truncation error", "[p2p]") {
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  // MPICH 4.0 raises MPI_Wait's errors on MPI_COMM_WORLD, not on the request's communicator
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const Layout l{vector2d(), 3};
  if (rank() == 0) {
    Buf b(Where::Gpu, l.span());
    b.upload(pattern(l.span(), 41));
    REQUIRE(MPI_Send(b.get(), 3, l.type, 1, 5, comm) == MPI_SUCCESS);
    REQUIRE(MPI_Send(b.get(), 3, l.type, 1, 6, comm) == MPI_SUCCESS);
  } else if (rank() == 1) {
    Buf b(Where::Gpu, l.span());
    int cls = 0;
    MPI_Error_class(MPI_Recv(b.get(), 2, l.type, 0, 5, comm, MPI_STATUS_IGNORE), &cls);
    CHECK(cls == MPI_ERR_TRUNCATE);
    MPI_Request req;
    REQUIRE(MPI_Irecv(b.get(), 1, l.type, 0, 6, comm, &req) == MPI_SUCCESS);
    MPI_Status st;
    const int err = MPI_Wait(&req, &st);
    MPI_Error_class(err, &cls);
    CHECK(cls == MPI_ERR_TRUNCATE);
    CHECK(req == MPI_REQUEST_NULL);
  }
  release(l);
  MPI_Comm_free(&comm);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

TEST_CASE("wildcards, MPI_PROC_NULL, zero counts and ignored statuses", "[p2p]") {
  const Layout l{vector2d(), 1};
  Buf b(Where::Gpu, l.span());
  b.upload(std::vector<char>(l.span(), kPoison));
  MPI_Status st;
  // MPI_PROC_NULL: nothing moves, the status says so
  REQUIRE(MPI_Send(b.get(), 1, l.type, MPI_PROC_NULL, 0, MPI_COMM_WORLD) == MPI_SUCCESS);
  REQUIRE(MPI_Recv(b.get(), 1, l.type, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &st) == MPI_SUCCESS);
  CHECK(st.MPI_SOURCE == MPI_PROC_NULL);
  CHECK(st.MPI_TAG == MPI_ANY_TAG);
  int n = -1;
  MPI_Get_count(&st, l.type, &n);
  CHECK(n == 0);
  CHECK(first_difference(b.download(), std::vector<char>(l.span(), kPoison)) == "");

  if (rank() == 0) {
    Buf s(Where::Gpu, l.span());
    s.upload(pattern(l.span(), 51));
    REQUIRE(MPI_Send(s.get(), 0, l.type, 1, 50, MPI_COMM_WORLD) == MPI_SUCCESS);  // zero count
    REQUIRE(MPI_Send(s.get(), 1, l.type, 1, 51, MPI_COMM_WORLD) == MPI_SUCCESS);
  } else if (rank() == 1) {
    REQUIRE(MPI_Recv(b.get(), 1, l.type, MPI_ANY_SOURCE, 50, MPI_COMM_WORLD, &st) == MPI_SUCCESS);
    MPI_Get_count(&st, l.type, &n);
    CHECK(n == 0);
    CHECK(first_difference(b.download(), std::vector<char>(l.span(), kPoison)) == "");
    REQUIRE(MPI_Recv(b.get(), 1, l.type, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st) == MPI_SUCCESS);
    CHECK(st.MPI_SOURCE == 0);
    CHECK(st.MPI_TAG == 51);
    CHECK(first_difference(b.download(), expected(l, l, 51)) == "");
  }
  release(l);
}

TEST_CASE("probe, then receive with the count the probe gives", "[p2p]") {
  const Layout l{subarray3d(), 2};
  if (rank() == 0) {
    Buf s(Where::Gpu, l.span());
    s.upload(pattern(l.span(), 61));
    for (int tag = 60; tag < 64; ++tag) REQUIRE(MPI_Send(s.get(), 2, l.type, 1, tag, MPI_COMM_WORLD) == MPI_SUCCESS);
  } else if (rank() == 1) {
    const std::vector<char> want = expected(l, l, 61);
    MPI_Status st;
    int n = -1;
    {  // MPI_Probe, MPI_Get_count in the user's type, MPI_Recv
      REQUIRE(MPI_Probe(0, 60, MPI_COMM_WORLD, &st) == MPI_SUCCESS);
      MPI_Get_count(&st, l.type, &n);
      CHECK(n == 2);
      Buf b(Where::Gpu, l.span());
      b.upload(std::vector<char>(l.span(), kPoison));
      REQUIRE(MPI_Recv(b.get(), n, l.type, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, &st) == MPI_SUCCESS);
      CHECK(first_difference(b.download(), want) == "");
    }
    {  // MPI_Iprobe until the message is there
      int flag = 0;
      while (!flag) MPI_Iprobe(MPI_ANY_SOURCE, 61, MPI_COMM_WORLD, &flag, &st);
      MPI_Get_count(&st, l.type, &n);
      CHECK(n == 2);
      Buf b(Where::Gpu, l.span());
      b.upload(std::vector<char>(l.span(), kPoison));
      REQUIRE(MPI_Recv(b.get(), n, l.type, 0, 61, MPI_COMM_WORLD, MPI_STATUS_IGNORE) == MPI_SUCCESS);
      CHECK(first_difference(b.download(), want) == "");
    }
    {  // MPI_Mprobe and MPI_Mrecv
      MPI_Message msg;
      REQUIRE(MPI_Mprobe(0, 62, MPI_COMM_WORLD, &msg, &st) == MPI_SUCCESS);
      MPI_Get_count(&st, l.type, &n);
      CHECK(n == 2);
      Buf b(Where::Gpu, l.span());
      b.upload(std::vector<char>(l.span(), kPoison));
      REQUIRE(MPI_Mrecv(b.get(), n, l.type, &msg, &st) == MPI_SUCCESS);
      CHECK(msg == MPI_MESSAGE_NULL);
      CHECK(st.MPI_TAG == 62);
      CHECK(first_difference(b.download(), want) == "");
    }
    {  // MPI_Improbe and MPI_Imrecv
      MPI_Message msg;
      int flag = 0;
      while (!flag) MPI_Improbe(0, 63, MPI_COMM_WORLD, &flag, &msg, &st);
      Buf b(Where::Gpu, l.span());
      b.upload(std::vector<char>(l.span(), kPoison));
      MPI_Request req;
      REQUIRE(MPI_Imrecv(b.get(), 2, l.type, &msg, &req) == MPI_SUCCESS);
      REQUIRE(MPI_Wait(&req, &st) == MPI_SUCCESS);
      MPI_Get_count(&st, l.type, &n);
      CHECK(n == 2);
      CHECK(first_difference(b.download(), want) == "");
    }
  }
  release(l);
}

namespace {

enum class Completion { Wait, Waitall, Waitany, Waitsome, Test, Testall, Testany, Testsome };
const char *const kCompletionNames[] = {"Wait", "Waitall", "Waitany", "Waitsome",
                                        "Test", "Testall", "Testany", "Testsome"};

// Completes every request with one completion call, each in the style of that call;
// statuses[i] belongs to requests[i].
void complete_all(Completion how, std::vector<MPI_Request> &reqs, std::vector<MPI_Status> &statuses) {
  const int n = int(reqs.size());
  std::vector<int> indices(n);
  int done = 0, flag = 0, index = 0, outcount = 0;
  MPI_Status st;
  std::vector<MPI_Status> some(n);
  switch (how) {
    case Completion::Wait:
      for (int i = 0; i < n; ++i) REQUIRE(MPI_Wait(&reqs[i], &statuses[i]) == MPI_SUCCESS);
      break;
    case Completion::Waitall:
      REQUIRE(MPI_Waitall(n, reqs.data(), statuses.data()) == MPI_SUCCESS);
      break;
    case Completion::Waitany:
      for (int k = 0; k < n; ++k) {
        REQUIRE(MPI_Waitany(n, reqs.data(), &index, &st) == MPI_SUCCESS);
        REQUIRE(index != MPI_UNDEFINED);
        statuses[index] = st;
      }
      REQUIRE(MPI_Waitany(n, reqs.data(), &index, &st) == MPI_SUCCESS);
      CHECK(index == MPI_UNDEFINED);
      break;
    case Completion::Waitsome:
      while (done < n) {
        REQUIRE(MPI_Waitsome(n, reqs.data(), &outcount, indices.data(), some.data()) == MPI_SUCCESS);
        REQUIRE(outcount != MPI_UNDEFINED);
        for (int k = 0; k < outcount; ++k) statuses[indices[k]] = some[k];
        done += outcount;
      }
      break;
    case Completion::Test:
      for (int i = 0; i < n; ++i)
        for (flag = 0; !flag;) REQUIRE(MPI_Test(&reqs[i], &flag, &statuses[i]) == MPI_SUCCESS);
      break;
    case Completion::Testall:
      for (flag = 0; !flag;) REQUIRE(MPI_Testall(n, reqs.data(), &flag, statuses.data()) == MPI_SUCCESS);
      break;
    case Completion::Testany:
      while (done < n) {
        REQUIRE(MPI_Testany(n, reqs.data(), &index, &flag, &st) == MPI_SUCCESS);
        if (flag && index != MPI_UNDEFINED) statuses[index] = st, ++done;
      }
      break;
    case Completion::Testsome:
      while (done < n) {
        REQUIRE(MPI_Testsome(n, reqs.data(), &outcount, indices.data(), some.data()) == MPI_SUCCESS);
        for (int k = 0; k < outcount; ++k) statuses[indices[k]] = some[k];
        done += outcount;
      }
      break;
  }
  for (MPI_Request r : reqs) CHECK(r == MPI_REQUEST_NULL);
}

}  // namespace

TEST_CASE("many simultaneous requests, completed by each completion call", "[p2p][completion]") {
  const int me = rank(), peer = 1 - me;
  if (me > 1) return;
  const Layout l{irregular(), 3};
  constexpr int kEach = 12;
  for (int c = 0; c < 8; ++c) {
    const Completion how = Completion(c);
    INFO("completion by MPI_" << kCompletionNames[c]);
    std::vector<std::unique_ptr<Buf>> outs, ins;
    std::vector<MPI_Request> reqs;
    for (int i = 0; i < kEach; ++i) {
      // mixed memory: most in GPU memory, every fourth in host memory
      const Where w = i % 4 == 3 ? Where::Host : Where::Gpu;
      ins.push_back(std::make_unique<Buf>(w, l.span()));
      ins.back()->upload(std::vector<char>(l.span(), kPoison));
      reqs.emplace_back();
      REQUIRE(MPI_Irecv(ins.back()->get(), l.count, l.type, MPI_ANY_SOURCE, 100 + i, MPI_COMM_WORLD, &reqs.back()) ==
              MPI_SUCCESS);
    }
    for (int i = 0; i < kEach; ++i) {
      outs.push_back(std::make_unique<Buf>(i % 3 == 2 ? Where::Host : Where::Gpu, l.span()));
      outs.back()->upload(pattern(l.span(), 1000 * me + 10 * c + i));
      reqs.emplace_back();
      REQUIRE(MPI_Isend(outs.back()->get(), l.count, l.type, peer, 100 + i, MPI_COMM_WORLD, &reqs.back()) ==
              MPI_SUCCESS);
    }
    std::vector<MPI_Status> statuses(reqs.size());
    complete_all(how, reqs, statuses);
    for (int i = 0; i < kEach; ++i) {
      CHECK(statuses[i].MPI_SOURCE == peer);
      CHECK(statuses[i].MPI_TAG == 100 + i);
      int n = -1;
      MPI_Get_count(&statuses[i], l.type, &n);
      CHECK(n == l.count);
      CHECK(first_difference(ins[i]->download(), expected(l, l, 1000 * peer + 10 * c + i)) == "");
    }
  }
  release(l);
}

TEST_CASE("completion calls with ignored statuses", "[p2p][completion]") {
  const int me = rank(), peer = 1 - me;
  if (me > 1) return;
  const Layout l{vector2d(), 1};
  Buf in(Where::Gpu, l.span()), out(Where::Gpu, l.span());
  in.upload(std::vector<char>(l.span(), kPoison));
  out.upload(pattern(l.span(), 80 + me));
  MPI_Request reqs[2];
  MPI_Irecv(in.get(), 1, l.type, peer, 8, MPI_COMM_WORLD, &reqs[0]);
  MPI_Isend(out.get(), 1, l.type, peer, 8, MPI_COMM_WORLD, &reqs[1]);
  REQUIRE(MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
  CHECK(first_difference(in.download(), expected(l, l, 80 + peer)) == "");

  in.upload(std::vector<char>(l.span(), kPoison));
  MPI_Irecv(in.get(), 1, l.type, peer, 9, MPI_COMM_WORLD, &reqs[0]);
  MPI_Isend(out.get(), 1, l.type, peer, 9, MPI_COMM_WORLD, &reqs[1]);
  int outcount = 0, indices[2], done = 0;
  while (done < 2) {
    REQUIRE(MPI_Waitsome(2, reqs, &outcount, indices, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
    done += outcount;
  }
  CHECK(first_difference(in.download(), expected(l, l, 80 + peer)) == "");
  release(l);
}

TEST_CASE("every send mode carries GPU data", "[p2p]") {
  const Layout l{subarray3d(), 1};
  const int me = rank();
  if (me > 1) return;
  int bsize = 0;
  MPI_Pack_size(1, l.type, MPI_COMM_WORLD, &bsize);
  std::vector<char> attached(size_t(2 * (bsize + MPI_BSEND_OVERHEAD)));
  MPI_Buffer_attach(attached.data(), int(attached.size()));
  if (me == 1) {  // receives first, so that the ready sends find them posted
    std::vector<std::unique_ptr<Buf>> bufs;
    std::vector<MPI_Request> reqs(6);
    for (int i = 0; i < 6; ++i) {
      bufs.push_back(std::make_unique<Buf>(Where::Gpu, l.span()));
      bufs.back()->upload(std::vector<char>(l.span(), kPoison));
      MPI_Irecv(bufs.back()->get(), 1, l.type, 0, 200 + i, MPI_COMM_WORLD, &reqs[i]);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    REQUIRE(MPI_Waitall(6, reqs.data(), MPI_STATUSES_IGNORE) == MPI_SUCCESS);
    for (int i = 0; i < 6; ++i) CHECK(first_difference(bufs[i]->download(), expected(l, l, 200 + i)) == "");
  } else {
    MPI_Barrier(MPI_COMM_WORLD);
    std::vector<std::unique_ptr<Buf>> bufs;
    for (int i = 0; i < 6; ++i) {
      bufs.push_back(std::make_unique<Buf>(Where::Gpu, l.span()));
      bufs.back()->upload(pattern(l.span(), 200 + i));
    }
    MPI_Request reqs[3];
    REQUIRE(MPI_Bsend(bufs[0]->get(), 1, l.type, 1, 200, MPI_COMM_WORLD) == MPI_SUCCESS);
    REQUIRE(MPI_Rsend(bufs[1]->get(), 1, l.type, 1, 201, MPI_COMM_WORLD) == MPI_SUCCESS);
    REQUIRE(MPI_Ssend(bufs[2]->get(), 1, l.type, 1, 202, MPI_COMM_WORLD) == MPI_SUCCESS);
    REQUIRE(MPI_Issend(bufs[3]->get(), 1, l.type, 1, 203, MPI_COMM_WORLD, &reqs[0]) == MPI_SUCCESS);
    REQUIRE(MPI_Ibsend(bufs[4]->get(), 1, l.type, 1, 204, MPI_COMM_WORLD, &reqs[1]) == MPI_SUCCESS);
    REQUIRE(MPI_Irsend(bufs[5]->get(), 1, l.type, 1, 205, MPI_COMM_WORLD, &reqs[2]) == MPI_SUCCESS);
    REQUIRE(MPI_Waitall(3, reqs, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
  }
  void *detached;
  int dsize;
  MPI_Buffer_detach(&detached, &dsize);
  release(l);
}

TEST_CASE("MPI_Sendrecv_replace on a GPU buffer", "[p2p]") {
  const int me = rank(), peer = 1 - me;
  if (me > 1) return;
  const Layout l{irregular(), 2};
  Buf b(Where::Gpu, l.span());
  b.upload(pattern(l.span(), 90 + me));
  MPI_Status st;
  REQUIRE(MPI_Sendrecv_replace(b.get(), 2, l.type, peer, 9, peer, 9, MPI_COMM_WORLD, &st) == MPI_SUCCESS);
  CHECK(st.MPI_SOURCE == peer);
  // the type's bytes are the peer's; the gaps keep this rank's own
  const std::vector<char> mine = pattern(l.span(), 90 + me);
  CHECK(first_difference(b.download(), expected(l, l, 90 + peer, -1, &mine)) == "");
  release(l);
}

TEST_CASE("cancel, request free and request get status", "[p2p][completion]") {
  const int me = rank();
  if (me > 1) return;
  const Layout l{vector2d(), 1};
  {  // a cancelled receive leaves the buffer alone
    Buf b(Where::Gpu, l.span());
    b.upload(std::vector<char>(l.span(), kPoison));
    MPI_Request req;
    REQUIRE(MPI_Irecv(b.get(), 1, l.type, 1 - me, 999, MPI_COMM_WORLD, &req) == MPI_SUCCESS);
    REQUIRE(MPI_Cancel(&req) == MPI_SUCCESS);
    MPI_Status st;
    REQUIRE(MPI_Wait(&req, &st) == MPI_SUCCESS);
    int cancelled = 0;
    MPI_Test_cancelled(&st, &cancelled);
    CHECK(cancelled);
    CHECK(first_difference(b.download(), std::vector<char>(l.span(), kPoison)) == "");
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (me == 0) {
    Buf s1(Where::Gpu, l.span()), s2(Where::Gpu, l.span());
    s1.upload(pattern(l.span(), 301));
    s2.upload(pattern(l.span(), 302));
    MPI_Request req;
    REQUIRE(MPI_Isend(s1.get(), 1, l.type, 1, 301, MPI_COMM_WORLD, &req) == MPI_SUCCESS);
    REQUIRE(MPI_Request_free(&req) == MPI_SUCCESS);  // the packed copy lives until the send is done
    CHECK(req == MPI_REQUEST_NULL);
    MPI_Send(s2.get(), 1, l.type, 1, 302, MPI_COMM_WORLD);
    MPI_Send(s2.get(), 1, l.type, 1, 303, MPI_COMM_WORLD);  // the same data again
  } else {
    Buf r1(Where::Gpu, l.span());
    r1.upload(std::vector<char>(l.span(), kPoison));
    REQUIRE(MPI_Recv(r1.get(), 1, l.type, 0, 301, MPI_COMM_WORLD, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    CHECK(first_difference(r1.download(), expected(l, l, 301)) == "");

    // a freed receive: its data arrives by a later completion call
    Buf r2(Where::Gpu, l.span());
    r2.upload(std::vector<char>(l.span(), kPoison));
    MPI_Request req;
    REQUIRE(MPI_Irecv(r2.get(), 1, l.type, 0, 302, MPI_COMM_WORLD, &req) == MPI_SUCCESS);
    REQUIRE(MPI_Request_free(&req) == MPI_SUCCESS);
    CHECK(req == MPI_REQUEST_NULL);
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    int flag = 0;
    // MPI_Testall of no requests is a completion call (TEMPI finishes detached receives
    // there), but MPICH makes no progress in it: MPI_Iprobe does.
    while (r2.download() != expected(l, l, 302) && std::chrono::steady_clock::now() < give_up) {
      MPI_Testall(0, nullptr, &flag, MPI_STATUSES_IGNORE);
      MPI_Iprobe(0, 9999, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
    }
    CHECK(first_difference(r2.download(), expected(l, l, 302)) == "");

    // MPI_Request_get_status: the data is in place once it reports completion
    Buf r3(Where::Gpu, l.span());
    r3.upload(std::vector<char>(l.span(), kPoison));
    REQUIRE(MPI_Irecv(r3.get(), 1, l.type, 0, 303, MPI_COMM_WORLD, &req) == MPI_SUCCESS);
    MPI_Status st;
    for (flag = 0; !flag;) REQUIRE(MPI_Request_get_status(req, &flag, &st) == MPI_SUCCESS);
    CHECK(req != MPI_REQUEST_NULL);
    CHECK(st.MPI_TAG == 303);
    CHECK(first_difference(r3.download(), expected(l, l, 302)) == "");
    REQUIRE(MPI_Wait(&req, &st) == MPI_SUCCESS);
    CHECK(st.MPI_TAG == 303);
    CHECK(first_difference(r3.download(), expected(l, l, 302)) == "");
  }
  release(l);
}

#if !defined(P2P_HOST_BUFFERS)
// A nonblocking GPU send that TEMPI still holds (its message not posted: the next call that
// posts sends has not come) is cancelled for good: MPI_Wait returns at once, the status says
// cancelled, and the peer never sees the message. (Host sends are the library's to cancel,
// and with TEMPI_EAGER_SENDS a send is posted before MPI_Isend returns.)
TEST_CASE("MPI_Cancel of a GPU send TEMPI still holds", "[p2p][completion]") {
  const int me = rank();
  if (me > 1 || std::getenv("TEMPI_EAGER_SENDS")) return;
  const Layout l{vector2d(), 1};
  if (me == 0) {
    Buf s(Where::Gpu, l.span());
    s.upload(pattern(l.span(), 311));
    MPI_Request req;
    REQUIRE(MPI_Isend(s.get(), 1, l.type, 1, 311, MPI_COMM_WORLD, &req) == MPI_SUCCESS);
    REQUIRE(MPI_Cancel(&req) == MPI_SUCCESS);
    MPI_Status st;
    REQUIRE(MPI_Wait(&req, &st) == MPI_SUCCESS);
    int cancelled = 0;
    MPI_Test_cancelled(&st, &cancelled);
    CHECK(cancelled == 1);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (me == 1) {
    int pending = 1;
    MPI_Iprobe(0, 311, MPI_COMM_WORLD, &pending, MPI_STATUS_IGNORE);
    CHECK(pending == 0);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  release(l);
}
#endif

TEST_CASE("threads exchange at once under MPI_THREAD_MULTIPLE", "[p2p][threads]") {
  int provided = 0;
  MPI_Query_thread(&provided);
  if (provided < MPI_THREAD_MULTIPLE) {
    WARN("thread level " << provided << ", not MPI_THREAD_MULTIPLE (set TEMPI_TEST_THREADS=1): not tested here");
    return;
  }
  const int me = rank(), peer = 1 - me;
  if (me > 1) return;
  const Layout l{irregular(), 2};
  constexpr int kThreads = 4, kRounds = 25;
  std::vector<std::string> failures(kThreads);
  std::vector<std::unique_ptr<Buf>> ins, outs;  // allocated here: Catch's macros stay on this thread
  for (int t = 0; t < kThreads; ++t) {
    ins.push_back(std::make_unique<Buf>(Where::Gpu, l.span()));
    outs.push_back(std::make_unique<Buf>(Where::Gpu, l.span()));
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      Buf &in = *ins[t], &out = *outs[t];
      std::vector<char> got;
      for (int r = 0; r < kRounds && failures[t].empty(); ++r) {
        const int tag = 1000 + t * kRounds + r;
        if (!in.upload_quietly(std::vector<char>(l.span(), kPoison)) ||
            !out.upload_quietly(pattern(l.span(), unsigned(tag * 2 + me)))) {
          failures[t] = "a copy to the buffers failed";
          break;
        }
        MPI_Request reqs[2];
        MPI_Irecv(in.get(), l.count, l.type, peer, tag, MPI_COMM_WORLD, &reqs[0]);
        MPI_Isend(out.get(), l.count, l.type, peer, tag, MPI_COMM_WORLD, &reqs[1]);
        if (r % 2) {
          MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);
        } else {
          for (int flag = 0; !flag;) MPI_Testall(2, reqs, &flag, MPI_STATUSES_IGNORE);
        }
        const std::string diff = in.download_quietly(got)
                                     ? first_difference(got, expected(l, l, unsigned(tag * 2 + peer)))
                                     : "a copy from the buffer failed";
        if (!diff.empty()) failures[t] = "thread " + std::to_string(t) + " round " + std::to_string(r) + ": " + diff;
      }
    });
  for (std::thread &th : threads) th.join();
  for (const std::string &f : failures) CHECK(f == "");
  release(l);
}

// Hidden (run with "[.huge]"): 2 GiB and more on each rank, several times over.
TEST_CASE("a message of more than 2^31 bytes", "[.huge]") {
  const int me = rank();
  if (me > 1) return;
  MPI_Datatype gib;
  MPI_Type_contiguous(1 << 30, MPI_BYTE, &gib);
  MPI_Type_commit(&gib);
  const size_t bytes = (size_t(1) << 31) + 3 * 4096;  // two elements of gib and a tail of bytes
  MPI_Datatype shape;
  const int lengths[] = {2, 3 * 4096};
  const MPI_Aint displs[] = {0, MPI_Aint(1) << 31};
  const MPI_Datatype types[] = {gib, MPI_BYTE};
  MPI_Type_create_struct(2, lengths, displs, types, &shape);
  MPI_Type_commit(&shape);
  Buf b(Where::Gpu, bytes);
  if (me == 0) {
    b.upload(pattern(bytes, 7));
    REQUIRE(MPI_Send(b.get(), 1, shape, 1, 77, MPI_COMM_WORLD) == MPI_SUCCESS);
  } else {
    b.upload(std::vector<char>(bytes, kPoison));
    MPI_Status st;
    REQUIRE(MPI_Recv(b.get(), 1, shape, 0, 77, MPI_COMM_WORLD, &st) == MPI_SUCCESS);
    MPI_Count n = 0;
    MPI_Get_elements_x(&st, MPI_BYTE, &n);
    CHECK(n == MPI_Count(bytes));
    CHECK(first_difference(b.download(), pattern(bytes, 7)) == "");
  }
  MPI_Type_free(&shape);
  MPI_Type_free(&gib);
}

#if !defined(P2P_HOST_BUFFERS)
TEST_CASE("each method, chosen at run time, gives the same bytes", "[p2p][method]") {
  const Layout l{irregular(), 4};
  for (const char *m : {"oneshot", "staged", "auto"}) {
    INFO("method " << m);
    REQUIRE(TEMPIX_Set_method(m) == MPI_SUCCESS);
    exchange(l, Where::Gpu, l, Where::Gpu, Mode::Blocking, 400);
    exchange(l, Where::Gpu, l, Where::Gpu, Mode::Nonblocking, 401);
  }
  CHECK(TEMPIX_Set_method("carrier pigeon") == MPI_ERR_ARG);
  const char *env = std::getenv("TEMPI_METHOD");
  REQUIRE(TEMPIX_Set_method(env ? env : "auto") == MPI_SUCCESS);
  release(l);
}

// Many different calls in flight at once (a halo exchange's 52, here 80 a rank: 40 counts each
// way) all find their kept decisions the second time: the kept decisions are not a handful of
// slots that calls of one type evict from one another.
TEST_CASE("many different calls at once recall their decisions", "[p2p][memo]") {
  if (rank() > 1) return;
  const int other = 1 - rank();
  MPI_Datatype t;
  MPI_Type_vector(3, 2, 5, MPI_INT, &t);
  const Layout l{committed(t), 1};
  constexpr int kCounts = 40;
  std::vector<std::unique_ptr<Buf>> out, in;
  for (int c = 1; c <= kCounts; ++c) {
    const Layout lc{l.type, c};
    out.push_back(std::make_unique<Buf>(Where::Gpu, lc.span()));
    out.back()->upload(pattern(lc.span(), unsigned(c)));
    in.push_back(std::make_unique<Buf>(Where::Gpu, lc.span()));
  }
  auto round = [&] {
    std::vector<MPI_Request> reqs;
    for (int c = 1; c <= kCounts; ++c) in[size_t(c - 1)]->upload(std::vector<char>(Layout{l.type, c}.span(), kPoison));
    for (int c = 1; c <= kCounts; ++c) {
      reqs.emplace_back();
      REQUIRE(MPI_Irecv(in[size_t(c - 1)]->get(), c, l.type, other, c, MPI_COMM_WORLD, &reqs.back()) == MPI_SUCCESS);
    }
    for (int c = 1; c <= kCounts; ++c) {
      reqs.emplace_back();
      REQUIRE(MPI_Isend(out[size_t(c - 1)]->get(), c, l.type, other, c, MPI_COMM_WORLD, &reqs.back()) == MPI_SUCCESS);
    }
    REQUIRE(MPI_Waitall(int(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE) == MPI_SUCCESS);
    for (int c = 1; c <= kCounts; ++c) {
      const Layout lc{l.type, c};
      CHECK(first_difference(in[size_t(c - 1)]->download(), expected(lc, lc, unsigned(c))) == "");
    }
  };
  round();
  const tempi::DecisionCounts before = tempi::decision_counts();
  round();
  const tempi::DecisionCounts after = tempi::decision_counts();
  CHECK(after.made - before.made + after.recalled - before.recalled == 2 * kCounts);
  CHECK(after.recalled - before.recalled >= uint64_t(2 * kCounts * 9 / 10));  // a set may overflow, rarely
  release(l);
}

// A repeated call takes its decision from its thread's kept ones (pmpi/p2p/messages.cpp, "Repeated
// calls") until something the decision rests on changes: the type (freed, and made again with
// another layout, often under the same handle), the method, the communicator. Every message is
// checked byte for byte; each rank counts its own decisions (one per exchange: rank 0 sends,
// rank 1 receives).
TEST_CASE("repeated calls recall their decision until what it rests on changes", "[p2p][memo]") {
  if (rank() > 1) return;
  auto vector_of = [](int stride) {
    MPI_Datatype t;
    MPI_Type_vector(7, 3, stride, MPI_FLOAT, &t);
    return committed(t);
  };
  tempi::DecisionCounts before = tempi::decision_counts();
  // `made` new decisions and `recalled` kept ones since the last look.
  auto expect = [&](uint64_t made, uint64_t recalled, int step) {
    INFO("step " << step);
    const tempi::DecisionCounts now = tempi::decision_counts();
    CHECK(now.made - before.made == made);
    CHECK(now.recalled - before.recalled == recalled);
    before = now;
  };
  Layout a{vector_of(5), 3};
  exchange(a, Where::Gpu, a, Where::Gpu, Mode::Nonblocking, 500);
  expect(1, 0, 1);
  for (unsigned k = 0; k < 3; ++k) exchange(a, Where::Gpu, a, Where::Gpu, Mode::Nonblocking, 501 + k);
  expect(0, 3, 2);
  exchange(a, Where::Gpu, a, Where::Gpu, Mode::Blocking, 504);  // another call: its own decision
  expect(1, 0, 3);
  release(a);
  Layout b{vector_of(9), 3};  // the handle may be a's: the type cache's generation moved on
  exchange(b, Where::Gpu, b, Where::Gpu, Mode::Nonblocking, 505);
  expect(1, 0, 4);
  exchange(b, Where::Gpu, b, Where::Gpu, Mode::Nonblocking, 506);
  expect(0, 1, 5);
  const char *env = std::getenv("TEMPI_METHOD");
  REQUIRE(TEMPIX_Set_method(env && !std::strcmp(env, "staged") ? "oneshot" : "staged") == MPI_SUCCESS);
  exchange(b, Where::Gpu, b, Where::Gpu, Mode::Nonblocking, 507);
  expect(1, 0, 6);
  REQUIRE(TEMPIX_Set_method(env ? env : "auto") == MPI_SUCCESS);
  exchange(b, Where::Gpu, b, Where::Gpu, Mode::Nonblocking, 508);  // the first method's decision is kept beside
  expect(0, 1, 7);
  exchange(b, Where::Gpu, b, Where::Gpu, Mode::Nonblocking, 510);
  expect(0, 1, 8);
  // Another count is another decision.
  Layout b2{b.type, 2};
  exchange(b2, Where::Gpu, b2, Where::Gpu, Mode::Nonblocking, 509);
  expect(1, 0, 9);
  // One message each way on `c` (rank 0 sends, rank 1 receives and checks).
  auto exchange_on = [&](MPI_Comm c, unsigned seed) {
    Buf buf(Where::Gpu, b.span());
    MPI_Request req;
    if (rank() == 0) {
      buf.upload(pattern(b.span(), seed));
      REQUIRE(MPI_Isend(buf.get(), b.count, b.type, 1, 7, c, &req) == MPI_SUCCESS);
      REQUIRE(MPI_Wait(&req, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    } else {
      buf.upload(std::vector<char>(b.span(), kPoison));
      REQUIRE(MPI_Irecv(buf.get(), b.count, b.type, 0, 7, c, &req) == MPI_SUCCESS);
      REQUIRE(MPI_Wait(&req, MPI_STATUS_IGNORE) == MPI_SUCCESS);
      CHECK(first_difference(buf.download(), expected(b, b, seed)) == "");
    }
  };
  // A communicator freed: the next one may have its handle (MPICH gives it again), and its
  // first message is decided again.
  for (unsigned seed : {511u, 513u}) {
    MPI_Comm dup;
    REQUIRE(MPI_Comm_dup(MPI_COMM_WORLD, &dup) == MPI_SUCCESS);
    exchange_on(dup, seed);
    exchange_on(dup, seed + 1);
    REQUIRE(MPI_Comm_free(&dup) == MPI_SUCCESS);
    expect(1, 1, int(seed));
  }
  // Zero-copy point-to-point switched on: decided again (where it could be switched on), then
  // kept there too (the receive's guess of a control message aside: a CUDA-aware library's).
  MPI_Comm zc;
  REQUIRE(MPI_Comm_dup(MPI_COMM_WORLD, &zc) == MPI_SUCCESS);
  exchange_on(zc, 515);
  exchange_on(zc, 516);
  expect(1, 1, 12);
  int enabled = 0;
  REQUIRE(TEMPIX_Comm_enable_zero_copy(zc, 1, &enabled) == MPI_SUCCESS);
  exchange_on(zc, 517);
  expect(enabled ? 1 : 0, enabled ? 0 : 1, 13);
  exchange_on(zc, 518);
  {
    const tempi::DecisionCounts now = tempi::decision_counts();
    INFO("step 14");
    CHECK(now.made - before.made + now.recalled - before.recalled == 1);
    if (rank() == 0) CHECK(now.recalled - before.recalled == 1);
    before = now;
  }
  REQUIRE(TEMPIX_Comm_enable_zero_copy(zc, 0, &enabled) == MPI_SUCCESS);
  REQUIRE(MPI_Comm_free(&zc) == MPI_SUCCESS);
  release(b);
}
#endif

#if !defined(P2P_HOST_BUFFERS)
// TEMPI_PHASE_TIMES=1 (the phase_times configuration): an exchange of GPU messages counts
// each wrapper call, decision, staging and request once per call, and its completion's
// phases once per completion call, with time in each (docs/using.md, "Phase times"). Without
// it every phase counter stays 0.
TEST_CASE("phase times count each call of an exchange", "[p2p][phases]") {
  if (rank() > 1) return;
  const int other = 1 - rank();
  MPI_Datatype t;
  MPI_Type_vector(4, 3, 7, MPI_INT, &t);
  const Layout l{committed(t), 2};
  constexpr int kMessages = 5;
  std::vector<std::unique_ptr<Buf>> out, in;
  for (int m = 0; m < kMessages; ++m) {
    out.push_back(std::make_unique<Buf>(Where::Gpu, l.span()));
    out.back()->upload(pattern(l.span(), unsigned(m + 1)));
    in.push_back(std::make_unique<Buf>(Where::Gpu, l.span()));
    in.back()->upload(std::vector<char>(l.span(), kPoison));
  }
  auto read = [](const char *name) {
    unsigned long long v = 0;
    REQUIRE(TEMPIX_Counter(name, &v) == MPI_SUCCESS);
    return v;
  };
  const char *const names[] = {"phase.isend_calls", "phase.irecv_calls", "phase.decide_calls",
                               "phase.staging_calls", "phase.request_calls", "phase.completion_calls",
                               "phase.library_wait_calls", "phase.isend_ns", "phase.completion_ns"};
  std::vector<unsigned long long> before;
  for (const char *n : names) before.push_back(read(n));
  std::vector<MPI_Request> reqs;
  for (int m = 0; m < kMessages; ++m) {
    reqs.emplace_back();
    REQUIRE(MPI_Irecv(in[size_t(m)]->get(), l.count, l.type, other, m, MPI_COMM_WORLD, &reqs.back()) == MPI_SUCCESS);
  }
  for (int m = 0; m < kMessages; ++m) {
    reqs.emplace_back();
    REQUIRE(MPI_Isend(out[size_t(m)]->get(), l.count, l.type, other, m, MPI_COMM_WORLD, &reqs.back()) == MPI_SUCCESS);
  }
  REQUIRE(MPI_Waitall(int(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE) == MPI_SUCCESS);
  for (int m = 0; m < kMessages; ++m)
    CHECK(first_difference(in[size_t(m)]->download(), expected(l, l, unsigned(m + 1))) == "");
  std::vector<unsigned long long> delta;
  for (size_t k = 0; k < before.size(); ++k) delta.push_back(read(names[k]) - before[k]);
  const char *on = std::getenv("TEMPI_PHASE_TIMES");
  if (on && std::strcmp(on, "1") == 0) {
    CHECK(delta[0] == kMessages);      // isend
    CHECK(delta[1] == kMessages);      // irecv
    CHECK(delta[2] == 2 * kMessages);  // decide: every send and receive
    CHECK(delta[3] == 2 * kMessages);  // staging
    CHECK(delta[4] == 2 * kMessages);  // request
    CHECK(delta[5] == 1);              // completion: the one MPI_Waitall
    CHECK(delta[6] == 1);              // the library's wait inside it
    CHECK(delta[7] > 0);
    CHECK(delta[8] > 0);
  } else {
    for (unsigned long long d : delta) CHECK(d == 0);
  }
  release(l);
}
#endif

int main(int argc, char **argv) {
  select_test_gpu();
  init_mpi_threads_on_request(argc, argv);
  if (skipped_without_gpu()) return kSkipped;
  const int worst = run_catch_on_every_rank(argc, argv);
  MPI_Finalize();
  return worst;
}
