// Sequences of MPI_Pack / MPI_Unpack on GPU buffers whose results are read by later
// calls (docs/using.md, "Sequences of MPI_Pack and MPI_Unpack"). Run with and without
// TEMPI_DEFER_PACK=1: with it, the packs and unpacks return before the GPU is done and
// each reader below must still see complete data. Built against the emulated backend
// (whose GPU work runs only when waited for) and, in the gpu suite, on a real GPU.
#define CATCH_CONFIG_RUNNER
#include <mpi.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

#include "backend.hpp"
#include "p2p/local_work.hpp"
#if !defined(P2P_REAL_GPU)
#include "emulated_faults.hpp"
#endif
#include "p2p_main.hpp"
#include "p2p_support.hpp"
#if defined(P2P_REAL_GPU)
#include <cuda_runtime_api.h>

#include "gpu_select.hpp"
#endif

namespace tempi {
void emulated_device_synchronize();
void emulated_blocking_stream_sync();
}
#if defined(P2P_REAL_GPU)
bool copy_on_default_stream_after(void *dst, const void *src, size_t bytes, double ms);  // default_stream_writer.cu
struct BlockingReader;  // blocking_stream_reader.cu
BlockingReader *blocking_reader_new(const void *want, size_t bytes);
bool blocking_reader_check(BlockingReader *r, const void *object);
unsigned long long blocking_reader_wrong(BlockingReader *r);
void blocking_reader_delete(BlockingReader *r);
#endif

using namespace p2p;

namespace {

// The application's own synchronization of the GPU.
void device_synchronize() {
#if defined(P2P_REAL_GPU)
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
#else
  tempi::emulated_device_synchronize();
#endif
}

std::vector<Layout> layouts() {
  return {{subarray3d(), 1}, {vector2d(), 2}, {irregular(), 3}, {resized_vector(), 2}};
}

// The bytes MPI_Pack must produce for every layout, one after the other.
std::vector<char> packed_reference(const std::vector<Layout> &ls, unsigned seed, int &bytes) {
  int total = 0;
  for (const Layout &l : ls) total += l.bytes();
  std::vector<char> out(size_t(total) + 1);
  int pos = 0;
  for (size_t i = 0; i < ls.size(); ++i) {
    const std::vector<char> src = pattern(ls[i].span(), seed + unsigned(i));
    PMPI_Pack(src.data(), ls[i].count, ls[i].type, out.data(), int(out.size()), &pos, MPI_COMM_WORLD);
  }
  bytes = pos;
  out.resize(size_t(pos));
  return out;
}

// Packs every layout's GPU object into one device buffer, in sequence.
std::unique_ptr<Buf> pack_all(const std::vector<Layout> &ls, std::vector<std::unique_ptr<Buf>> &objects,
                              unsigned seed, int bytes) {
  auto packed = std::make_unique<Buf>(Where::Gpu, size_t(bytes));
  packed->fill(char(kPoison));
  int pos = 0;
  for (size_t i = 0; i < ls.size(); ++i) {
    objects.push_back(std::make_unique<Buf>(Where::Gpu, ls[i].span()));
    objects.back()->upload(pattern(ls[i].span(), seed + unsigned(i)));
    REQUIRE(MPI_Pack(objects.back()->get(), ls[i].count, ls[i].type, packed->get(), bytes, &pos, MPI_COMM_WORLD) ==
            MPI_SUCCESS);
  }
  REQUIRE(pos == bytes);
  return packed;
}

}  // namespace

TEST_CASE("a pack read by a send of MPI_PACKED, then unpacked by the receiver", "[sequence]") {
  const std::vector<Layout> ls = layouts();
  int bytes = 0;
  const std::vector<char> want = packed_reference(ls, 10, bytes);
  if (rank() == 0) {
    std::vector<std::unique_ptr<Buf>> objects;
    std::unique_ptr<Buf> packed = pack_all(ls, objects, 10, bytes);
    MPI_Request req;
    REQUIRE(MPI_Isend(packed->get(), bytes, MPI_PACKED, 1, 1, MPI_COMM_WORLD, &req) == MPI_SUCCESS);
    REQUIRE(MPI_Wait(&req, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    // the same packed bytes again, with a blocking send right after the packs
    std::vector<std::unique_ptr<Buf>> again;
    std::unique_ptr<Buf> packed2 = pack_all(ls, again, 10, bytes);
    REQUIRE(MPI_Send(packed2->get(), bytes, MPI_PACKED, 1, 2, MPI_COMM_WORLD) == MPI_SUCCESS);
  } else if (rank() == 1) {
    for (int tag : {1, 2}) {
      // received into device memory and unpacked there; the unpacks are read by sends back
      Buf packed(Where::Gpu, size_t(bytes));
      REQUIRE(MPI_Recv(packed.get(), bytes, MPI_PACKED, 0, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE) == MPI_SUCCESS);
      int pos = 0;
      std::vector<std::unique_ptr<Buf>> objects;
      for (const Layout &l : ls) {
        objects.push_back(std::make_unique<Buf>(Where::Gpu, l.span()));
        objects.back()->fill(char(kPoison));
        REQUIRE(MPI_Unpack(packed.get(), bytes, &pos, objects.back()->get(), l.count, l.type, MPI_COMM_WORLD) ==
                MPI_SUCCESS);
      }
      REQUIRE(pos == bytes);
      for (size_t i = 0; i < ls.size(); ++i) {
        // read by a send of the typed object, received on the host
        std::vector<char> host(ls[i].span(), kPoison);
        REQUIRE(MPI_Sendrecv(objects[i]->get(), ls[i].count, ls[i].type, 1, 7, host.data(), ls[i].count,
                             ls[i].type, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE) == MPI_SUCCESS);
        INFO("layout " << i << " message " << tag);
        CHECK(first_difference(host, expected(ls[i], ls[i], 10 + unsigned(i))) == "");
      }
      (void)want;
    }
  }
  for (const Layout &l : ls) release(l);
}

TEST_CASE("a pack read by the very next call (an unpack), and by the application after a synchronization",
          "[sequence]") {
  const std::vector<Layout> ls = layouts();
  int bytes = 0;
  const std::vector<char> want = packed_reference(ls, 20, bytes);
  std::vector<std::unique_ptr<Buf>> objects;
  std::unique_ptr<Buf> packed = pack_all(ls, objects, 20, bytes);
  // the very next calls read the packed bytes: unpack each object into a second buffer
  int pos = 0;
  std::vector<std::unique_ptr<Buf>> copies;
  for (const Layout &l : ls) {
    copies.push_back(std::make_unique<Buf>(Where::Gpu, l.span()));
    copies.back()->fill(char(kPoison));
    REQUIRE(MPI_Unpack(packed->get(), bytes, &pos, copies.back()->get(), l.count, l.type, MPI_COMM_WORLD) ==
            MPI_SUCCESS);
  }
  // the application makes an MPI call (TEMPI_DEFER_PACK=2 launches the queued moves at the
  // next MPI call), synchronizes the GPU, then reads both
  MPI_Barrier(MPI_COMM_WORLD);
  device_synchronize();
  CHECK(first_difference(packed->download(), want) == "");
  for (size_t i = 0; i < ls.size(); ++i) {
    INFO("layout " << i);
    CHECK(first_difference(copies[i]->download(), expected(ls[i], ls[i], 20 + unsigned(i))) == "");
  }
  // a pack into host memory is complete when it returns, whatever the mode
  std::vector<char> host(size_t(bytes), kPoison);
  pos = 0;
  for (size_t i = 0; i < ls.size(); ++i)
    REQUIRE(MPI_Pack(objects[i]->get(), ls[i].count, ls[i].type, host.data(), bytes, &pos, MPI_COMM_WORLD) ==
            MPI_SUCCESS);
  CHECK(first_difference(host, want) == "");
  for (const Layout &l : ls) release(l);
}

TEST_CASE("the application's synchronization counter sees fewer waits when packs are deferred", "[sequence]") {
  const std::vector<Layout> ls = layouts();
  int bytes = 0;
  packed_reference(ls, 30, bytes);
  std::vector<std::unique_ptr<Buf>> objects;
  const uint64_t before = tempi::gpu_backend().synchronizations();
  std::unique_ptr<Buf> packed = pack_all(ls, objects, 30, bytes);
  const uint64_t waits = tempi::gpu_backend().synchronizations() - before;
  const char *mode = std::getenv("TEMPI_DEFER_PACK");
  // pack_all's uploads are one synchronizing copy each; the packs add one each unless deferred
  const uint64_t uploads = 1 + ls.size();
  if (mode && std::atoi(mode) >= 1 && std::atoi(mode) <= 3)
    CHECK(waits == uploads);
  else
    CHECK(waits == uploads + ls.size());
  MPI_Barrier(MPI_COMM_WORLD);
  device_synchronize();
  CHECK(first_difference(packed->download(), packed_reference(ls, 30, bytes)) == "");
  for (const Layout &l : ls) release(l);
}

TEST_CASE("a pack whose source an earlier unpack writes, and an unpack over an earlier pack's source",
          "[sequence]") {
  // Moves that depend on each other must not run side by side in one launch.
  const Layout l{subarray3d(), 1};
  int size = 0;
  MPI_Pack_size(1, l.type, MPI_COMM_WORLD, &size);
  Buf object(Where::Gpu, l.span()), a(Where::Gpu, size_t(size)), b(Where::Gpu, size_t(size));
  object.upload(pattern(l.span(), 40));
  int pos = 0;
  REQUIRE(MPI_Pack(object.get(), 1, l.type, a.get(), size, &pos, MPI_COMM_WORLD) == MPI_SUCCESS);  // a = pack(object)
  Buf other(Where::Gpu, l.span());
  other.upload(pattern(l.span(), 41));
  pos = 0;
  REQUIRE(MPI_Unpack(a.get(), size, &pos, other.get(), 1, l.type, MPI_COMM_WORLD) == MPI_SUCCESS);  // other <- a
  pos = 0;
  REQUIRE(MPI_Pack(other.get(), 1, l.type, b.get(), size, &pos, MPI_COMM_WORLD) == MPI_SUCCESS);  // b = pack(other)
  MPI_Barrier(MPI_COMM_WORLD);
  device_synchronize();
  std::vector<char> want(static_cast<size_t>(size));
  const std::vector<char> src = pattern(l.span(), 40);
  pos = 0;
  PMPI_Pack(src.data(), 1, l.type, want.data(), size, &pos, MPI_COMM_WORLD);
  CHECK(first_difference(a.download(), want) == "");
  CHECK(first_difference(b.download(), want) == "");
  release(l);
}

namespace {

// `data` packed by the MPI library's host engine with layout `l`.
std::vector<char> host_packed(const Layout &l, const std::vector<char> &data) {
  std::vector<char> out(size_t(l.bytes()) + 1);
  int pos = 0;
  PMPI_Pack(data.data(), l.count, l.type, out.data(), int(out.size()), &pos, MPI_COMM_WORLD);
  out.resize(size_t(pos));
  return out;
}

// Unpacks `packed` (device memory) into `object` with layout `l`.
void unpack(const Buf &packed, const Layout &l, Buf &object) {
  int pos = 0;
  REQUIRE(MPI_Unpack(packed.get(), l.bytes(), &pos, object.get(), l.count, l.type, MPI_COMM_WORLD) == MPI_SUCCESS);
  REQUIRE(pos == l.bytes());
}

std::unique_ptr<Buf> on_gpu(const std::vector<char> &bytes) {
  auto b = std::make_unique<Buf>(Where::Gpu, bytes.size());
  b->upload(bytes);
  return b;
}

// The 26 ghost regions of an (n + 2)^3 Fortran-order array of doubles with one ghost
// layer, as subarray types.
std::vector<Layout> ghost_regions(int n) {
  std::vector<Layout> out;
  const int size = n + 2, sizes[] = {size, size, size};
  for (int dz = -1; dz <= 1; ++dz)
    for (int dy = -1; dy <= 1; ++dy)
      for (int dx = -1; dx <= 1; ++dx) {
        if (!dx && !dy && !dz) continue;
        int sub[3], start[3], k = 0;
        for (int d : {dx, dy, dz}) {
          sub[k] = d ? 1 : n;
          start[k++] = d < 0 ? 0 : d > 0 ? n + 1 : 1;
        }
        MPI_Datatype t;
        MPI_Type_create_subarray(3, sizes, sub, start, MPI_ORDER_FORTRAN, MPI_DOUBLE, &t);
        out.push_back({committed(t), 1});
      }
  return out;
}

}  // namespace

TEST_CASE("unpacks are complete for the application's synchronization with no MPI call after them", "[sequence]") {
  const int n = 6;
  const std::vector<Layout> ghosts = ghost_regions(n);
  const size_t span = size_t(n + 2) * (n + 2) * (n + 2) * 8;
  const std::vector<char> source = pattern(span, 50);
  for (int round = 0; round < 3; ++round) {
    std::vector<std::unique_ptr<Buf>> packed;
    for (const Layout &g : ghosts) packed.push_back(on_gpu(host_packed(g, source)));
    Buf grid(Where::Gpu, span);
    grid.fill(kPoison);
    std::vector<char> want(span, kPoison);
    for (size_t i = 0; i < ghosts.size(); ++i) {
      unpack(*packed[i], ghosts[i], grid);
      int pos = 0;
      const std::vector<char> p = host_packed(ghosts[i], source);
      PMPI_Unpack(p.data(), int(p.size()), &pos, want.data(), 1, ghosts[i].type, MPI_COMM_WORLD);
    }
    device_synchronize();  // no MPI call between the unpacks and this
    INFO("round " << round);
    CHECK(first_difference(grid.download(), want) == "");
  }
  for (const Layout &g : ghosts) release(g);
}

TEST_CASE("unpacks that write the same bytes, or bytes another reads, keep their order", "[sequence]") {
  const Layout l{subarray3d(), 1};
  const Layout raw{MPI_BYTE, l.bytes()};  // the packed bytes as a typed object of their own
  const std::vector<char> first = pattern(l.span(), 60), second = pattern(l.span(), 61), third = pattern(l.span(), 62);
  const auto p1 = on_gpu(host_packed(l, first)), p2 = on_gpu(host_packed(l, second));
  const auto p3 = on_gpu(host_packed(l, third));
  Buf object(Where::Gpu, l.span()), middle(Where::Gpu, size_t(l.bytes())), late(Where::Gpu, l.span());
  object.fill(kPoison);
  late.fill(kPoison);
  unpack(*p1, l, object);    // written twice: the second unpack's bytes stay
  unpack(*p2, l, object);
  unpack(*p3, raw, middle);  // middle <- the third object's packed bytes ...
  unpack(middle, l, late);   // ... read by the next unpack
  unpack(*p1, raw, middle);  // and overwritten only after that read
  device_synchronize();
  CHECK(first_difference(object.download(), expected(l, l, 61)) == "");
  CHECK(first_difference(late.download(), expected(l, l, 62)) == "");
  CHECK(first_difference(middle.download(), host_packed(l, first)) == "");
  release(l);
}

TEST_CASE("a pack into the gaps of an object packed just before, and one over its bytes", "[sequence]") {
  // Rows of 64 bytes at a pitch of 128 in one allocation; a 16-byte object packed into the
  // gap after row 0 may share the earlier pack's launch, one packed over row 0 may not.
  MPI_Datatype rows;
  MPI_Type_vector(64, 64, 128, MPI_BYTE, &rows);
  const Layout a{committed(rows), 1};
  const std::vector<char> data = pattern(a.span() + 64, 80), small = pattern(16, 81);
  for (const int at : {64, 0}) {
    Buf all(Where::Gpu, data.size()), packed(Where::Gpu, size_t(a.bytes())), source(Where::Gpu, 16);
    all.upload(data);
    source.upload(small);
    int pos = 0;
    REQUIRE(MPI_Pack(all.get(), 1, a.type, packed.get(), a.bytes(), &pos, MPI_COMM_WORLD) == MPI_SUCCESS);
    pos = at;
    REQUIRE(MPI_Pack(source.get(), 16, MPI_BYTE, all.get(), int(data.size()), &pos, MPI_COMM_WORLD) == MPI_SUCCESS);
    MPI_Barrier(MPI_COMM_WORLD);
    device_synchronize();
    INFO("second pack at byte " << at);
    CHECK(first_difference(packed.download(), host_packed(a, data)) == "");  // the rows as they were
    std::vector<char> want = data;
    std::copy(small.begin(), small.end(), want.begin() + at);
    CHECK(first_difference(all.download(), want) == "");
  }
  release(a);
}

TEST_CASE("a run of unpacks longer than one open launch takes, interleaved in one array", "[sequence]") {
  // 300 objects of 4 doubles at a stride of 300 doubles, object k at double k: together
  // they cover the array once, each one's bounds meet every other's, no two share a byte.
  constexpr int kObjects = 300, kBlocks = 4;
  MPI_Datatype column;
  MPI_Type_vector(kBlocks, 1, kObjects, MPI_DOUBLE, &column);
  const Layout l{committed(column), 1};
  const size_t span = size_t(kObjects) * kBlocks * 8;
  const std::vector<char> packed_host = pattern(size_t(kObjects) * size_t(l.bytes()), 90);
  const auto packed = on_gpu(packed_host);
  for (int round = 0; round < 2; ++round) {
    Buf grid(Where::Gpu, span);
    grid.fill(kPoison);
    std::vector<char> want(span, kPoison);
    int pos = 0, host_pos = 0;
    for (int k = 0; k < kObjects; ++k) {
      char *at = static_cast<char *>(grid.get()) + size_t(k) * 8;
      REQUIRE(MPI_Unpack(packed->get(), int(packed_host.size()), &pos, at, 1, l.type, MPI_COMM_WORLD) == MPI_SUCCESS);
      PMPI_Unpack(packed_host.data(), int(packed_host.size()), &host_pos, want.data() + size_t(k) * 8, 1, l.type,
                  MPI_COMM_WORLD);
    }
    device_synchronize();  // no MPI call between the unpacks and this
    INFO("round " << round);
    CHECK(first_difference(grid.download(), want) == "");
  }
  release(l);
}

namespace {

// What the application's kernel on a blocking stream of its own sees of `object`, queued
// right after the MPI call that wrote it returned, with no synchronization between: a
// count of wrong bytes that the GPU accumulates (real GPU), or, on the emulated GPU, the
// work such a stream waits for run and the object compared at once.
class BlockingStreamReader {
 public:
  explicit BlockingStreamReader(const std::vector<char> &want) : want_(want) {
#if defined(P2P_REAL_GPU)
    reader_ = blocking_reader_new(want.data(), want.size());
    REQUIRE(reader_);
#endif
  }
  ~BlockingStreamReader() {
#if defined(P2P_REAL_GPU)
    blocking_reader_delete(reader_);
#endif
  }
  BlockingStreamReader(const BlockingStreamReader &) = delete;
  BlockingStreamReader &operator=(const BlockingStreamReader &) = delete;

  void read(const Buf &object) {
#if defined(P2P_REAL_GPU)
    REQUIRE(blocking_reader_check(reader_, object.get()));
#else
    tempi::emulated_blocking_stream_sync();
    const std::vector<char> got = object.download();
    for (size_t i = 0; i < got.size(); ++i) wrong_ += got[i] != want_[i];
#endif
  }
  // Bytes found wrong so far (waits for the application's stream).
  unsigned long long wrong() {
#if defined(P2P_REAL_GPU)
    return blocking_reader_wrong(reader_);
#else
    return wrong_;
#endif
  }

 private:
  std::vector<char> want_;
#if defined(P2P_REAL_GPU)
  BlockingReader *reader_ = nullptr;
#else
  unsigned long long wrong_ = 0;
#endif
};

}  // namespace

// A halo code's check kernels run on its own streams, made with cudaStreamDefault, right
// after MPI_Unpack returns. In every mode (TEMPI_DEFER_PACK 0 to 3) they must see the whole
// unpacked object, cycle after cycle: TEMPI's stream is one blocking stream and the
// application's another, which does not wait for it by itself. On a GPU the object is large
// (an unpack of tens of microseconds, still running when the application's kernel starts
// unless that kernel is ordered after it); on the emulated GPU deferred work runs only when
// something waits for it, so a reader not ordered after the unpack sees the poison.
TEST_CASE("the application's own blocking stream reads what MPI_Unpack wrote, cycle after cycle",
          "[sequence][streams]") {
#if defined(P2P_REAL_GPU)
  const int blocks = 1 << 21, cycles = 200;  // 32 MiB packed, 64 MiB object
#else
  const int blocks = 1 << 10, cycles = 200;
#endif
  MPI_Datatype type;
  MPI_Type_vector(blocks, 4, 8, MPI_FLOAT, &type);  // 16-byte blocks, 16-byte gaps
  MPI_Type_commit(&type);
  const Layout l{type, 1};
  const std::vector<char> data = pattern(l.span(), 90);
  const std::vector<char> packed_bytes = host_packed(l, data);
  const auto packed = on_gpu(packed_bytes);
  std::vector<char> want(l.span(), kPoison);
  int pos = 0;
  PMPI_Unpack(packed_bytes.data(), int(packed_bytes.size()), &pos, want.data(), 1, type, MPI_COMM_WORLD);
  Buf object(Where::Gpu, l.span());
  BlockingStreamReader reader(want);
  unsigned long long wrong = 0;
  for (int c = 0; c < cycles && wrong == 0; ++c) {
    wrong = reader.wrong();  // the last cycle's reader is done before the object is poisoned again
    object.fill(kPoison);
    unpack(*packed, l, object);
    reader.read(object);
  }
  wrong = reader.wrong();
  INFO("bytes the application's blocking stream found wrong, TEMPI_DEFER_PACK="
       << (std::getenv("TEMPI_DEFER_PACK") ? std::getenv("TEMPI_DEFER_PACK") : "unset"));
  CHECK(wrong == 0);
  device_synchronize();
  release(l);
}

#if defined(P2P_REAL_GPU)
TEST_CASE("unpacks between the application's own work on the legacy default stream", "[sequence]") {
  // Before: the packed bytes land by a copy the application left on the legacy default
  // stream behind a 20 ms kernel. After: the application copies the unpacked object on that
  // stream at once, with no MPI call and no synchronization between.
  const Layout l{subarray3d(), 1};
  const std::vector<char> data = pattern(l.span(), 70);
  const auto staged = on_gpu(host_packed(l, data));
  Buf packed(Where::Gpu, size_t(l.bytes())), object(Where::Gpu, l.span()), seen(Where::Gpu, l.span());
  packed.fill(kPoison);
  object.fill(kPoison);
  seen.fill(kPoison);
  REQUIRE(copy_on_default_stream_after(packed.get(), staged->get(), size_t(l.bytes()), 20.0));
  unpack(packed, l, object);
  REQUIRE(cudaMemcpyAsync(seen.get(), object.get(), l.span(), cudaMemcpyDeviceToDevice, cudaStreamLegacy) ==
          cudaSuccess);
  REQUIRE(cudaStreamSynchronize(cudaStreamLegacy) == cudaSuccess);
  CHECK(first_difference(seen.download(), expected(l, l, 70)) == "");
  release(l);
}

TEST_CASE("an unpack after the application queued work on the legacy default stream runs after that work",
          "[sequence]") {
  // Between two unpacks the application queues, on the legacy default stream, a slow kernel
  // and a copy that writes the second unpack's packed bytes. The second unpack must read
  // what that copy wrote: in modes 0-2 by itself; TEMPI_DEFER_PACK=3 runs consecutive
  // unpacks in one open launch, whose rule (docs/using.md) asks the application to
  // synchronize such work first.
  const Layout l{subarray3d(), 1};
  const std::vector<char> first = pattern(l.span(), 71), second = pattern(l.span(), 72);
  const auto p1 = on_gpu(host_packed(l, first)), staged = on_gpu(host_packed(l, second));
  Buf packed(Where::Gpu, size_t(l.bytes())), a(Where::Gpu, l.span()), b(Where::Gpu, l.span());
  packed.fill(kPoison);
  a.fill(kPoison);
  b.fill(kPoison);
  unpack(*p1, l, a);
  REQUIRE(copy_on_default_stream_after(packed.get(), staged->get(), size_t(l.bytes()), 20.0));
  const char *mode = std::getenv("TEMPI_DEFER_PACK");
  if (mode && std::atoi(mode) == 3) REQUIRE(cudaStreamSynchronize(cudaStreamLegacy) == cudaSuccess);
  unpack(packed, l, b);
  device_synchronize();
  CHECK(first_difference(a.download(), expected(l, l, 71)) == "");
  CHECK(first_difference(b.download(), expected(l, l, 72)) == "");
  release(l);
}
#endif

TEST_CASE("a type TEMPI does not plan reads and writes after the queued packs", "[sequence]") {
  // MPI_DOUBLE_INT has a gap: the library moves it between host images of the buffers,
  // which must see what this thread's queued packs (TEMPI_DEFER_PACK=2, 3) write and read.
  const int n = 16, bytes = 12 * n;
  const std::vector<char> x = pattern(size_t(bytes), 80), p = pattern(size_t(bytes), 81);
  std::vector<char> want(16 * n, 0);
  int pos = 0;
  PMPI_Unpack(x.data(), bytes, &pos, want.data(), n, MPI_DOUBLE_INT, MPI_COMM_WORLD);
  tempi::local_work().settle();  // work left by earlier cases would make the calls below settle anyway
  SECTION("read after write: an unpack of a queued pack's output") {
    const auto object = on_gpu(x), packed = on_gpu(std::vector<char>(size_t(bytes), kPoison));
    const auto y = on_gpu(std::vector<char>(16 * n, 0));
    pos = 0;
    REQUIRE(MPI_Pack(object->get(), bytes, MPI_BYTE, packed->get(), bytes, &pos, MPI_COMM_WORLD) == MPI_SUCCESS);
    pos = 0;
    REQUIRE(MPI_Unpack(packed->get(), bytes, &pos, y->get(), n, MPI_DOUBLE_INT, MPI_COMM_WORLD) == MPI_SUCCESS);
    device_synchronize();
    CHECK(first_difference(y->download(), want) == "");
  }
  SECTION("write after read: an unpack over a queued pack's input") {
    const std::vector<char> before = pattern(16 * n, 82);  // the object's bytes, packed whole
    const auto object = on_gpu(before), packed = on_gpu(std::vector<char>(16 * n, kPoison)), other = on_gpu(p);
    pos = 0;
    REQUIRE(MPI_Pack(object->get(), 16 * n, MPI_BYTE, packed->get(), 16 * n, &pos, MPI_COMM_WORLD) == MPI_SUCCESS);
    pos = 0;
    REQUIRE(MPI_Unpack(other->get(), bytes, &pos, object->get(), n, MPI_DOUBLE_INT, MPI_COMM_WORLD) == MPI_SUCCESS);
    MPI_Barrier(MPI_COMM_WORLD);
    device_synchronize();
    CHECK(first_difference(packed->download(), before) == "");
  }
}

TEST_CASE("a pack is complete after any later completion or point-to-point call of the thread", "[sequence]") {
  // Calls on no GPU data and on requests TEMPI does not track still launch the thread's
  // queued packs (TEMPI_DEFER_PACK=2, 3): the application may synchronize the GPU after them.
  const int bytes = 4096;
  const std::vector<char> x = pattern(size_t(bytes), 84);
  const auto object = on_gpu(x), packed = on_gpu(std::vector<char>(size_t(bytes), kPoison));
  const auto pack = [&] {
    packed->fill(kPoison);
    int pos = 0;
    REQUIRE(MPI_Pack(object->get(), bytes, MPI_BYTE, packed->get(), bytes, &pos, MPI_COMM_WORLD) == MPI_SUCCESS);
  };
  int sent = 1, got = 0;
  MPI_Request send = MPI_REQUEST_NULL, recv = MPI_REQUEST_NULL;
  SECTION("MPI_Wait of MPI_REQUEST_NULL") {
    pack();
    REQUIRE(MPI_Wait(&recv, MPI_STATUS_IGNORE) == MPI_SUCCESS);
  }
  SECTION("MPI_Irecv of host memory") {
    pack();
    REQUIRE(MPI_Irecv(&got, 1, MPI_INT, rank(), 9, MPI_COMM_WORLD, &recv) == MPI_SUCCESS);
  }
  SECTION("MPI_Isend of host memory") {
    REQUIRE(MPI_Irecv(&got, 1, MPI_INT, rank(), 9, MPI_COMM_WORLD, &recv) == MPI_SUCCESS);
    pack();
    REQUIRE(MPI_Isend(&sent, 1, MPI_INT, rank(), 9, MPI_COMM_WORLD, &send) == MPI_SUCCESS);
  }
  device_synchronize();
  CHECK(first_difference(packed->download(), x) == "");
  if (recv != MPI_REQUEST_NULL && send == MPI_REQUEST_NULL)
    REQUIRE(MPI_Send(&sent, 1, MPI_INT, rank(), 9, MPI_COMM_WORLD) == MPI_SUCCESS);
  REQUIRE(MPI_Wait(&send, MPI_STATUS_IGNORE) == MPI_SUCCESS);
  REQUIRE(MPI_Wait(&recv, MPI_STATUS_IGNORE) == MPI_SUCCESS);
}

TEST_CASE("a pack another thread is waiting for still holds back a third thread's read", "[sequence][threads]") {
  // Thread A packs a large object and makes one more MPI call (which launches a queued
  // pack); thread B's GPU call then waits for A's work; thread C, ordered after A, reads
  // the packed bytes while B waits: A's work must still count as pending for C.
  const size_t n = size_t(16) << 20;  // packed bytes: 4-byte blocks at a pitch of 8
  MPI_Datatype v;
  MPI_Type_vector(int(n / 4), 1, 2, MPI_FLOAT, &v);
  MPI_Type_commit(&v);
  const std::vector<char> x = pattern(2 * n, 83);
  std::vector<char> want(n);
  int pos = 0;
  PMPI_Pack(x.data(), 1, v, want.data(), int(n), &pos, MPI_COMM_WORLD);
  const auto object = on_gpu(x), packed = on_gpu(std::vector<char>(n, kPoison)), small = on_gpu(std::vector<char>(64, 1));
  std::atomic<bool> a_done{false}, b_done{false};
  std::vector<char> seen(n, kPoison), small_out(64);
  std::thread a([&] {
    int p = 0, flag = 0;
    MPI_Pack(object->get(), 1, v, packed->get(), int(n), &p, MPI_COMM_WORLD);
    MPI_Iprobe(MPI_ANY_SOURCE, 12345, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
    a_done = true;
  });
  std::thread b([&] {
    while (!a_done) std::this_thread::yield();
    int p = 0;
    MPI_Pack(small->get(), 64, MPI_BYTE, small_out.data(), 64, &p, MPI_COMM_WORLD);  // waits for A's pack
    b_done = true;
  });
  std::thread c([&] {
    while (!a_done) std::this_thread::yield();
    // Until B takes A's work or is done with it: a buggy list that dropped the work
    // while B waits lets C through early.
    while (tempi::local_work().pending() && !b_done) std::this_thread::yield();
    int p = 0;
    MPI_Pack(packed->get(), int(n), MPI_BYTE, seen.data(), int(n), &p, MPI_COMM_WORLD);
  });
  a.join();
  b.join();
  c.join();
  CHECK(first_difference(seen, want) == "");
  MPI_Type_free(&v);
}

#if !defined(P2P_REAL_GPU)
TEST_CASE("a queued pack that fails to launch is raised by the thread's next MPI_Pack", "[sequence][faults]") {
  const char *mode = std::getenv("TEMPI_DEFER_PACK");
  if (!mode || std::atoi(mode) < 2) return;  // packs are launched by their own call
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  const int bytes = 256;
  const auto object = on_gpu(pattern(size_t(bytes), 85)), packed = on_gpu(std::vector<char>(size_t(bytes), kPoison));
  int pos = 0, flag = 0;
  REQUIRE(MPI_Pack(object->get(), bytes, MPI_BYTE, packed->get(), bytes, &pos, comm) == MPI_SUCCESS);
  tempi::emulated_fail_nth(tempi::EmulatedFault::Launch, 1);
  REQUIRE(MPI_Iprobe(MPI_ANY_SOURCE, 12345, comm, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS);  // launches, fails
  pos = 0;
  const int err = MPI_Pack(object->get(), bytes, MPI_BYTE, packed->get(), bytes, &pos, comm);
  int cls = MPI_SUCCESS;
  MPI_Error_class(err, &cls);
  CHECK(cls == MPI_ERR_INTERN);
  CHECK(pos == 0);
  CHECK(MPI_Pack(object->get(), bytes, MPI_BYTE, packed->get(), bytes, &pos, comm) == MPI_SUCCESS);  // raised once
  MPI_Comm_free(&comm);
  device_synchronize();
  CHECK(first_difference(packed->download(), pattern(size_t(bytes), 85)) == "");
}
#endif

int main(int argc, char **argv) {
#if defined(P2P_REAL_GPU)
  tempi::tools::select_gpu_before_mpi_init();
#endif
  int provided = 0;  // one test case runs MPI calls on three threads
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  if (skipped_without_gpu()) return kSkipped;
  const int worst = run_catch_on_every_rank(argc, argv);
  MPI_Finalize();
  return worst;
}
