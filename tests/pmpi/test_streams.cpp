// Stream-ordered communication (tempi.h's TEMPIX_ stream and enqueue calls): operations
// enqueued on a stream of the application's own, between work that stream runs before and
// after them (a fill of the send buffer, a copy of the received buffer to the host), many
// cycles with no host synchronization in the loop; every received byte against TEMPI's
// host reference packer. Covers nonblocking and blocking forms, send and receive types
// that differ, MPI's order and wildcards with their statuses, a receive shorter than its
// buffer, host buffers, MPI_PROC_NULL, a communicator freed while its stream still has
// operations to reach, and the errors. Built on the emulated backend (mpi suite; its
// streams are threads, emulated_streams.hpp) and with STREAMS_REAL_GPU on real GPUs
// (gpu suite; exit 77 without one), where the stream is a CUDA stream (app_stream_ops.cu).
#define CATCH_CONFIG_RUNNER
#include <mpi.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "backend.hpp"
#include "base/type_cache.hpp"
#include "host_packer.hpp"
#include "tempi.h"
#include "tempi_mpix.h"
#if defined(STREAMS_REAL_GPU)
#include "gpu_select.hpp"
void *app_stream_create();
void app_stream_destroy(void *s);
void app_stream_fill(void *s, void *dev, size_t bytes, uint32_t seed);
void app_stream_copy(void *s, void *dst, const void *src, size_t bytes);
void app_stream_synchronize(void *s);
void *app_host_alloc(size_t bytes);
void app_host_free(void *p);
bool app_stream_begin_capture(void *s);
void app_stream_end_capture(void *s);
#else
#include "emulated_streams.hpp"
#endif

namespace {

int g_rank = 0, g_size = 1;

unsigned char pattern(size_t i, uint32_t seed) {
  return static_cast<unsigned char>((i * 131u + seed * 7919u + (i >> 8)) & 0xff);
}

// The application's stream and what it queues there.
class AppStream {
 public:
#if defined(STREAMS_REAL_GPU)
  AppStream() : handle(app_stream_create()) {}
  ~AppStream() { app_stream_destroy(handle); }
  void fill(void *dev, size_t bytes, uint32_t seed) { app_stream_fill(handle, dev, bytes, seed); }
  void copy(void *dst, const void *src, size_t bytes) { app_stream_copy(handle, dst, src, bytes); }
  void sync() { app_stream_synchronize(handle); }
#else
  AppStream() : handle(tempi::emulated_stream_create()) {}
  ~AppStream() { tempi::emulated_stream_destroy(handle); }
  void fill(void *dev, size_t bytes, uint32_t seed) {
    tempi::emulated_stream_run(handle, [dev, bytes, seed] {
      std::vector<unsigned char> v(bytes);
      for (size_t i = 0; i < bytes; ++i) v[i] = pattern(i, seed);
      tempi::gpu_backend().copy(dev, v.data(), bytes);
    });
  }
  void copy(void *dst, const void *src, size_t bytes) {
    tempi::emulated_stream_run(handle, [dst, src, bytes] { tempi::gpu_backend().copy(dst, src, bytes); });
  }
  void sync() { tempi::emulated_stream_synchronize(handle); }
#endif
  AppStream(const AppStream &) = delete;
  AppStream &operator=(const AppStream &) = delete;
  void *handle;
};

// Host memory the stream copies into (pinned on a GPU, so that the copy does not wait).
struct HostBuf {
  explicit HostBuf(size_t n) : bytes(n) {
#if defined(STREAMS_REAL_GPU)
    p = static_cast<unsigned char *>(app_host_alloc(n));
#else
    p = static_cast<unsigned char *>(std::malloc(n));
#endif
    std::memset(p, 0, n);
  }
  ~HostBuf() {
#if defined(STREAMS_REAL_GPU)
    app_host_free(p);
#else
    std::free(p);
#endif
  }
  HostBuf(const HostBuf &) = delete;
  HostBuf &operator=(const HostBuf &) = delete;
  unsigned char *p;
  size_t bytes;
};

struct DevBuf {
  explicit DevBuf(size_t n) : bytes(n) { REQUIRE(tempi::gpu_backend().allocate_device(n, &p) == tempi::Status::Ok); }
  ~DevBuf() { tempi::gpu_backend().free_device(p); }
  DevBuf(const DevBuf &) = delete;
  DevBuf &operator=(const DevBuf &) = delete;
  void *p = nullptr;
  size_t bytes;
};

// A stream object and a communicator bound to it.
struct Bound {
  AppStream stream;
  TEMPIX_Stream ts = TEMPIX_STREAM_NULL;
  MPI_Comm comm = MPI_COMM_NULL;
  Bound() {
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "type", "cudaStream_t");
    REQUIRE(TEMPIX_Info_set_hex(info, "value", &stream.handle, sizeof stream.handle) == MPI_SUCCESS);
    REQUIRE(TEMPIX_Stream_create(info, &ts) == MPI_SUCCESS);
    MPI_Info_free(&info);
    REQUIRE(TEMPIX_Stream_comm_create(MPI_COMM_WORLD, ts, &comm) == MPI_SUCCESS);
  }
  ~Bound() {
    stream.sync();
    if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
    TEMPIX_Stream_free(&ts);
  }
};

// The plan of `count` elements of `type` (TEMPI's own, for the host reference packer).
tempi::Plan plan_of(MPI_Datatype type, int count) {
  const auto info = tempi::type_cache().find(type);
  REQUIRE(info->plan);
  return info->plan->for_count(count);
}

// What a receive buffer holds after `count` elements of `send` from a buffer filled with
// `send_seed` were received as `recv` into one filled with `recv_seed`.
std::vector<unsigned char> expected(MPI_Datatype send, MPI_Datatype recv, int count, size_t send_bytes,
                                    uint32_t send_seed, size_t recv_bytes, uint32_t recv_seed, int recv_count) {
  std::vector<unsigned char> s(send_bytes), r(recv_bytes);
  for (size_t i = 0; i < send_bytes; ++i) s[i] = pattern(i, send_seed);
  for (size_t i = 0; i < recv_bytes; ++i) r[i] = pattern(i, recv_seed);
  const tempi::Plan sp = plan_of(send, count), rp = plan_of(recv, recv_count);
  std::vector<unsigned char> packed(size_t(sp.packed_size()));
  tempi::host_pack(sp, s.data(), packed.data(), 0, sp.packed_size());
  tempi::host_unpack(rp, packed.data(), r.data(), 0, sp.packed_size());
  return r;
}

// Two vector types of the same packed size and different layouts.
struct Types {
  MPI_Datatype send, recv;
  size_t send_extent, recv_extent;
  Types() {
    MPI_Type_vector(4, 6, 10, MPI_INT, &send);  // 96 packed bytes, extent 36 ints
    MPI_Type_vector(6, 4, 7, MPI_INT, &recv);   // 96 packed bytes, extent 39 ints
    MPI_Type_commit(&send);
    MPI_Type_commit(&recv);
    send_extent = 36 * sizeof(int);
    recv_extent = 39 * sizeof(int);
  }
  ~Types() {
    MPI_Type_free(&send);
    MPI_Type_free(&recv);
  }
};

uint32_t seed_of(int cycle, int rank, int peer) { return uint32_t(cycle * 1000 + rank * 31 + peer + 1); }

}  // namespace

TEST_CASE("a ring exchange of typed GPU buffers, many cycles, no host synchronization in the loop") {
  Bound b;
  Types t;
  constexpr int kCycles = 40, kCount = 3;
  const int right = (g_rank + 1) % g_size, left = (g_rank + g_size - 1) % g_size;
  const size_t sbytes = t.send_extent * kCount, rbytes = t.recv_extent * kCount;
  DevBuf to_right(sbytes), to_left(sbytes), from_left(rbytes), from_right(rbytes);
  HostBuf seen(2 * rbytes * kCycles);
  // Written when the stream completes each operation: they must live until then.
  std::vector<MPI_Status> statuses(4 * kCycles);
  b.stream.fill(from_left.p, rbytes, 7);
  b.stream.fill(from_right.p, rbytes, 9);
  for (int c = 0; c < kCycles; ++c) {
    b.stream.fill(to_right.p, sbytes, seed_of(c, g_rank, right));
    b.stream.fill(to_left.p, sbytes, seed_of(c, g_rank, left) + 500);
    MPI_Request r[4];
    REQUIRE(TEMPIX_Irecv_enqueue(from_left.p, kCount, t.recv, left, 1, b.comm, &r[0]) == MPI_SUCCESS);
    REQUIRE(TEMPIX_Irecv_enqueue(from_right.p, kCount, t.recv, right, 2, b.comm, &r[1]) == MPI_SUCCESS);
    REQUIRE(TEMPIX_Isend_enqueue(to_right.p, kCount, t.send, right, 1, b.comm, &r[2]) == MPI_SUCCESS);
    REQUIRE(TEMPIX_Isend_enqueue(to_left.p, kCount, t.send, left, 2, b.comm, &r[3]) == MPI_SUCCESS);
    REQUIRE(TEMPIX_Waitall_enqueue(4, r, &statuses[size_t(4 * c)]) == MPI_SUCCESS);
    for (MPI_Request q : r) REQUIRE(q == MPI_REQUEST_NULL);
    b.stream.copy(seen.p + 2 * rbytes * c, from_left.p, rbytes);
    b.stream.copy(seen.p + 2 * rbytes * c + rbytes, from_right.p, rbytes);
  }
  b.stream.sync();
  for (int c = 0; c < kCycles; ++c) {
    const auto want_left = expected(t.send, t.recv, kCount, sbytes, seed_of(c, left, g_rank), rbytes, 7, kCount);
    const auto want_right =
        expected(t.send, t.recv, kCount, sbytes, seed_of(c, right, g_rank) + 500, rbytes, 9, kCount);
    INFO("cycle " << c);
    REQUIRE(std::memcmp(seen.p + 2 * rbytes * c, want_left.data(), rbytes) == 0);
    REQUIRE(std::memcmp(seen.p + 2 * rbytes * c + rbytes, want_right.data(), rbytes) == 0);
    for (int k = 0; k < 2; ++k) {
      const MPI_Status &st = statuses[size_t(4 * c + k)];
      REQUIRE(st.MPI_SOURCE == (k == 0 ? left : right));
      REQUIRE(st.MPI_TAG == k + 1);
      int n = -1;
      MPI_Get_count(&st, t.recv, &n);
      REQUIRE(n == kCount);
    }
  }
}

TEST_CASE("blocking enqueues keep MPI's order, and wildcards get their statuses") {
  Bound b;  // collective: every rank
  if (g_size < 2 || g_rank > 1) return;
  Types t;
  constexpr int kMessages = 5;
  const size_t sbytes = t.send_extent, rbytes = t.recv_extent;
  if (g_rank == 0) {
    DevBuf buf(sbytes);
    for (int m = 0; m < kMessages; ++m) {
      b.stream.fill(buf.p, sbytes, uint32_t(100 + m));
      REQUIRE(TEMPIX_Send_enqueue(buf.p, 1, t.send, 1, 40 + (m % 2), b.comm) == MPI_SUCCESS);
    }
    b.stream.sync();
  } else {
    std::vector<std::unique_ptr<DevBuf>> bufs;
    HostBuf seen(rbytes * kMessages);
    std::vector<MPI_Status> st(kMessages);
    for (int m = 0; m < kMessages; ++m) {
      bufs.push_back(std::make_unique<DevBuf>(rbytes));
      b.stream.fill(bufs.back()->p, rbytes, 3);
      REQUIRE(TEMPIX_Recv_enqueue(bufs.back()->p, 1, t.recv, MPI_ANY_SOURCE, MPI_ANY_TAG, b.comm, &st[size_t(m)]) ==
              MPI_SUCCESS);
      b.stream.copy(seen.p + rbytes * m, bufs.back()->p, rbytes);
    }
    b.stream.sync();
    for (int m = 0; m < kMessages; ++m) {
      INFO("message " << m);
      const auto want = expected(t.send, t.recv, 1, sbytes, uint32_t(100 + m), rbytes, 3, 1);
      REQUIRE(std::memcmp(seen.p + rbytes * m, want.data(), rbytes) == 0);
      REQUIRE(st[size_t(m)].MPI_SOURCE == 0);
      REQUIRE(st[size_t(m)].MPI_TAG == 40 + (m % 2));
      int n = -1;
      MPI_Get_count(&st[size_t(m)], t.recv, &n);
      REQUIRE(n == 1);
    }
  }
}

TEST_CASE("a message shorter than its receive buffer changes only the bytes it brings") {
  Bound b;  // collective: every rank
  if (g_size < 2 || g_rank > 1) return;
  Types t;
  const size_t sbytes = t.send_extent, rbytes = t.recv_extent * 2;
  if (g_rank == 0) {
    DevBuf buf(sbytes);
    b.stream.fill(buf.p, sbytes, 77);
    REQUIRE(TEMPIX_Send_enqueue(buf.p, 1, t.send, 1, 5, b.comm) == MPI_SUCCESS);
    b.stream.sync();
  } else {
    DevBuf buf(rbytes);
    HostBuf seen(rbytes);
    b.stream.fill(buf.p, rbytes, 11);
    MPI_Request r;
    REQUIRE(TEMPIX_Irecv_enqueue(buf.p, 2, t.recv, 0, 5, b.comm, &r) == MPI_SUCCESS);
    MPI_Status st;
    REQUIRE(TEMPIX_Wait_enqueue(&r, &st) == MPI_SUCCESS);
    b.stream.copy(seen.p, buf.p, rbytes);
    b.stream.sync();
    const auto want = expected(t.send, t.recv, 1, sbytes, 77, rbytes, 11, 2);
    REQUIRE(std::memcmp(seen.p, want.data(), rbytes) == 0);
    int n = -1;
    MPI_Get_count(&st, t.recv, &n);
    REQUIRE(n == 1);
  }
}

TEST_CASE("host buffers, and GPU to host") {
  Bound b;  // collective: every rank
  if (g_size < 2 || g_rank > 1) return;
  Types t;
  const size_t sbytes = t.send_extent, rbytes = t.recv_extent;
  if (g_rank == 0) {
    std::vector<unsigned char> host(sbytes);
    for (size_t i = 0; i < sbytes; ++i) host[i] = pattern(i, 21);
    DevBuf dev(sbytes);
    b.stream.fill(dev.p, sbytes, 22);
    REQUIRE(TEMPIX_Send_enqueue(host.data(), 1, t.send, 1, 1, b.comm) == MPI_SUCCESS);
    REQUIRE(TEMPIX_Send_enqueue(dev.p, 1, t.send, 1, 2, b.comm) == MPI_SUCCESS);
    b.stream.sync();
  } else {
    std::vector<unsigned char> a(rbytes), c(rbytes);
    for (size_t i = 0; i < rbytes; ++i) a[i] = c[i] = pattern(i, 5);
    REQUIRE(TEMPIX_Recv_enqueue(a.data(), 1, t.recv, 0, 1, b.comm, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    REQUIRE(TEMPIX_Recv_enqueue(c.data(), 1, t.recv, 0, 2, b.comm, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    b.stream.sync();
    REQUIRE(std::memcmp(a.data(), expected(t.send, t.recv, 1, sbytes, 21, rbytes, 5, 1).data(), rbytes) == 0);
    REQUIRE(std::memcmp(c.data(), expected(t.send, t.recv, 1, sbytes, 22, rbytes, 5, 1).data(), rbytes) == 0);
  }
}

TEST_CASE("a communicator freed while its stream has operations to reach") {
  Types t;
  const int right = (g_rank + 1) % g_size, left = (g_rank + g_size - 1) % g_size;
  const size_t sbytes = t.send_extent, rbytes = t.recv_extent;
  DevBuf out(sbytes), in(rbytes);
  HostBuf seen(rbytes);
  {
    Bound b;
    b.stream.fill(in.p, rbytes, 4);
    b.stream.fill(out.p, sbytes, uint32_t(60 + g_rank));
    MPI_Request r[2];
    REQUIRE(TEMPIX_Irecv_enqueue(in.p, 1, t.recv, left, 0, b.comm, &r[0]) == MPI_SUCCESS);
    REQUIRE(TEMPIX_Isend_enqueue(out.p, 1, t.send, right, 0, b.comm, &r[1]) == MPI_SUCCESS);
    REQUIRE(TEMPIX_Waitall_enqueue(2, r, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
    b.stream.copy(seen.p, in.p, rbytes);
    REQUIRE(MPI_Comm_free(&b.comm) == MPI_SUCCESS);
  }  // the stream is synchronized here
  REQUIRE(std::memcmp(seen.p, expected(t.send, t.recv, 1, sbytes, uint32_t(60 + left), rbytes, 4, 1).data(), rbytes) ==
          0);
}

TEST_CASE("a program written for MPICH's MPIX_ stream calls builds and runs through tempi_mpix.h") {
#if TEMPI_MPIX_FROM_LIBRARY
  SUCCEED("the MPI library has its own MPIX_ stream calls; tempi_mpix.h leaves them to it");
#else
  AppStream stream;
  MPI_Info info;
  MPI_Info_create(&info);
  MPI_Info_set(info, "type", "cudaStream_t");
  REQUIRE(MPIX_Info_set_hex(info, "value", &stream.handle, sizeof stream.handle) == MPI_SUCCESS);
  MPIX_Stream ms = MPIX_STREAM_NULL;
  REQUIRE(MPIX_Stream_create(info, &ms) == MPI_SUCCESS);
  MPI_Info_free(&info);
  MPI_Comm comm;
  REQUIRE(MPIX_Stream_comm_create(MPI_COMM_WORLD, ms, &comm) == MPI_SUCCESS);
  Types t;
  const int right = (g_rank + 1) % g_size, left = (g_rank + g_size - 1) % g_size;
  DevBuf out(t.send_extent), in(t.recv_extent);
  HostBuf seen(t.recv_extent);
  stream.fill(out.p, t.send_extent, uint32_t(90 + g_rank));
  stream.fill(in.p, t.recv_extent, 8);
  MPI_Request r[2];
  REQUIRE(MPIX_Irecv_enqueue(in.p, 1, t.recv, left, 3, comm, &r[0]) == MPI_SUCCESS);
  REQUIRE(MPIX_Isend_enqueue(out.p, 1, t.send, right, 3, comm, &r[1]) == MPI_SUCCESS);
  REQUIRE(MPIX_Waitall_enqueue(2, r, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
  stream.copy(seen.p, in.p, t.recv_extent);
  stream.sync();
  REQUIRE(std::memcmp(seen.p,
                      expected(t.send, t.recv, 1, t.send_extent, uint32_t(90 + left), t.recv_extent, 8, 1).data(),
                      t.recv_extent) == 0);
  MPI_Comm_free(&comm);
  REQUIRE(MPIX_Stream_free(&ms) == MPI_SUCCESS);
#endif
}

TEST_CASE("MPI_PROC_NULL, and the errors") {
  Bound b;
  Types t;
  DevBuf buf(t.recv_extent);
  MPI_Status st;
  st.MPI_SOURCE = 12345;
  REQUIRE(TEMPIX_Recv_enqueue(buf.p, 1, t.recv, MPI_PROC_NULL, 0, b.comm, &st) == MPI_SUCCESS);
  REQUIRE(st.MPI_SOURCE == MPI_PROC_NULL);
  MPI_Request r;
  REQUIRE(TEMPIX_Isend_enqueue(buf.p, 1, t.recv, MPI_PROC_NULL, 0, b.comm, &r) == MPI_SUCCESS);
  REQUIRE(TEMPIX_Wait_enqueue(&r, &st) == MPI_SUCCESS);
  REQUIRE(r == MPI_REQUEST_NULL);
  REQUIRE(st.MPI_SOURCE == MPI_PROC_NULL);
  REQUIRE(TEMPIX_Wait_enqueue(&r, MPI_STATUS_IGNORE) == MPI_SUCCESS);  // MPI_REQUEST_NULL

  REQUIRE(TEMPIX_Send_enqueue(buf.p, 1, t.recv, 0, 0, MPI_COMM_WORLD) == MPI_ERR_COMM);
  REQUIRE(TEMPIX_Send_enqueue(buf.p, -1, t.recv, 0, 0, b.comm) == MPI_ERR_COUNT);
  REQUIRE(TEMPIX_Send_enqueue(buf.p, 1, t.recv, g_size, 0, b.comm) == MPI_ERR_RANK);
  REQUIRE(TEMPIX_Send_enqueue(buf.p, 1, t.recv, 0, -5, b.comm) == MPI_ERR_TAG);
  REQUIRE(TEMPIX_Send_enqueue(buf.p, 1, MPI_DATATYPE_NULL, 0, 0, b.comm) == MPI_ERR_TYPE);
  MPI_Request plain;
  MPI_Isend(nullptr, 0, MPI_BYTE, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &plain);
  REQUIRE(TEMPIX_Wait_enqueue(&plain, MPI_STATUS_IGNORE) == MPI_ERR_REQUEST);
  MPI_Wait(&plain, MPI_STATUS_IGNORE);
  REQUIRE(TEMPIX_Stream_free(&b.ts) == MPI_ERR_ARG);  // a communicator is bound to it

  MPI_Info info;
  MPI_Info_create(&info);
  TEMPIX_Stream s = TEMPIX_STREAM_NULL;
  REQUIRE(TEMPIX_Stream_create(info, &s) == MPI_ERR_ARG);  // no "type"
  MPI_Info_set(info, "type", "cudaStream_t");
  MPI_Info_set(info, "value", "12");
  REQUIRE(TEMPIX_Stream_create(info, &s) == MPI_ERR_ARG);  // not a handle's bytes
#if !defined(STREAMS_REAL_GPU)  // (an arbitrary pointer as a cudaStream_t is undefined behaviour in CUDA)
  void *unknown = &s;
  TEMPIX_Info_set_hex(info, "value", &unknown, sizeof unknown);
  REQUIRE(TEMPIX_Stream_create(info, &s) == MPI_ERR_ARG);  // not a stream the GPU runtime knows
#endif
  MPI_Info_free(&info);
  REQUIRE(s == TEMPIX_STREAM_NULL);
}

#if defined(STREAMS_REAL_GPU)
TEST_CASE("an enqueue call on a stream being captured into a graph is refused, and changes nothing") {
  Bound b;
  Types t;
  DevBuf buf(t.send_extent);
  MPI_Request r;
  const int right = (g_rank + 1) % g_size, left = (g_rank + g_size - 1) % g_size;
  REQUIRE(TEMPIX_Irecv_enqueue(buf.p, 1, t.send, left, 9, b.comm, &r) == MPI_SUCCESS);
  REQUIRE(app_stream_begin_capture(b.stream.handle));
  REQUIRE(TEMPIX_Send_enqueue(buf.p, 1, t.send, right, 9, b.comm) == MPI_ERR_OTHER);
  REQUIRE(TEMPIX_Wait_enqueue(&r, MPI_STATUS_IGNORE) == MPI_ERR_OTHER);
  REQUIRE(r != MPI_REQUEST_NULL);
  app_stream_end_capture(b.stream.handle);
  DevBuf out(t.send_extent);
  REQUIRE(TEMPIX_Send_enqueue(out.p, 1, t.send, right, 9, b.comm) == MPI_SUCCESS);
  REQUIRE(TEMPIX_Wait_enqueue(&r, MPI_STATUS_IGNORE) == MPI_SUCCESS);
  b.stream.sync();
}
#endif

int main(int argc, char **argv) {
#if defined(STREAMS_REAL_GPU)
  tempi::tools::select_gpu_before_mpi_init();
#endif
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
#if defined(STREAMS_REAL_GPU)
  if (!tempi::gpu_backend().has_gpu()) {
    if (g_rank == 0) std::printf("SKIP: no usable GPU\n");
    MPI_Finalize();
    return 77;
  }
#endif
  const int result = Catch::Session().run(argc, argv);
  int worst = 0;
  MPI_Allreduce(&result, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}
