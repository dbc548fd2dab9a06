// Pieces shared by the long-run tests (tests/pmpi/test_soak.cpp, test_threads.cpp):
// device buffers of the backend (emulated or real), the bytes a receive must produce
// (the MPI library's own host engine), the completion calls in turn, and one exchange
// of many nonblocking GPU messages of one datatype with a peer, checked byte for byte.
// Written for plain programs (no test framework): failures are counted and the first
// few printed, from any thread.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "backend.hpp"

namespace soak {

inline std::atomic<int> g_failures{0};
inline int g_rank = 0;
inline const char *g_program = "test";

inline void fail(const std::string &what) {
  static std::mutex printing;
  if (g_failures.fetch_add(1) >= 10) return;
  std::lock_guard<std::mutex> lock(printing);
  std::fprintf(stderr, "%s: FAIL: rank %d: %s\n", g_program, g_rank, what.c_str());
}

#define SOAK_MPI_OK(call)                                                                          \
  do {                                                                                             \
    const int soak_err_ = (call);                                                                  \
    if (soak_err_ != MPI_SUCCESS) ::soak::fail(std::string(#call) + " returned " + std::to_string(soak_err_)); \
  } while (0)

constexpr char kPoison = char(0xEE);

// Device memory from the backend, reached only through its copy (emulated device memory
// faults on host access, as a GPU's does).
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes ? bytes : 1) {
    if (tempi::gpu_backend().allocate_device(bytes_, &ptr_) != tempi::Status::Ok) fail("cannot allocate device memory");
  }
  ~DeviceBuffer() { tempi::gpu_backend().free_device(ptr_); }
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  char *get() const { return static_cast<char *>(ptr_); }
  void upload(const std::vector<char> &v) {
    if (tempi::gpu_backend().copy(ptr_, v.data(), std::min(v.size(), bytes_)) != tempi::Status::Ok) fail("upload failed");
  }
  std::vector<char> download() const {
    std::vector<char> v(bytes_);
    if (tempi::gpu_backend().copy(v.data(), ptr_, bytes_) != tempi::Status::Ok) fail("download failed");
    return v;
  }

 private:
  size_t bytes_;
  void *ptr_ = nullptr;
};

inline std::vector<char> pattern(size_t n, uint64_t seed) {
  std::vector<char> v(n);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (char &c : v) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    c = char(x >> 24);
  }
  return v;
}

// Where `count` elements of `t` lie: a slot of `bytes` whose origin (the address MPI
// calls get) is `origin` bytes in, since types may reach below their address. The slot
// holds the origin byte too: TEMPI tells GPU memory by the address the call gets
// (docs/using.md, "Things to know").
struct Slot {
  int64_t origin = 0, bytes = 0;
};
inline Slot slot_for(MPI_Datatype t, int count) {
  MPI_Count lb, extent, tlb, textent;
  PMPI_Type_get_extent_x(t, &lb, &extent);
  PMPI_Type_get_true_extent_x(t, &tlb, &textent);
  int64_t lo = std::min<int64_t>(tlb, tlb + (count - 1) * extent);
  int64_t hi = std::max<int64_t>(tlb + textent, tlb + textent + (count - 1) * extent);
  lo = std::min<int64_t>(lo, 0);
  hi = std::max<int64_t>(hi, 1);
  return {-lo + 16, (hi - lo + 32 + 63) / 64 * 64};
}

// What a receive of `count` elements of `t` sent from the slot image `src` leaves in a
// poisoned slot: the library's own pack and unpack on host memory.
inline std::vector<char> expected(MPI_Datatype t, int count, const Slot &s, const std::vector<char> &src) {
  int size = 0;
  PMPI_Type_size(t, &size);
  std::vector<char> packed(size_t(size) * size_t(count) + 1), out(size_t(s.bytes), kPoison);
  int pos = 0;
  PMPI_Pack(src.data() + s.origin, count, t, packed.data(), int(packed.size()), &pos, MPI_COMM_WORLD);
  int upos = 0;
  PMPI_Unpack(packed.data(), pos, &upos, out.data() + s.origin, count, t, MPI_COMM_WORLD);
  return out;
}

// The completion calls, in turn.
enum Completion { WaitAll, WaitAny, TestAll, WaitSome, WaitEach, TestAny, TestSome, TestEach, kCompletions };
inline const char *to_string(Completion c) {
  static const char *names[] = {"MPI_Waitall", "MPI_Waitany", "MPI_Testall", "MPI_Waitsome",
                                "MPI_Wait",    "MPI_Testany", "MPI_Testsome", "MPI_Test"};
  return names[c];
}

// Completes every request of `reqs` with `how`; each call must return MPI_SUCCESS.
inline void complete(std::vector<MPI_Request> &reqs, Completion how) {
  const int n = int(reqs.size());
  std::vector<int> indices(reqs.size());
  auto all_null = [&] {
    return std::all_of(reqs.begin(), reqs.end(), [](MPI_Request r) { return r == MPI_REQUEST_NULL; });
  };
  switch (how) {
    case WaitAll:
      SOAK_MPI_OK(MPI_Waitall(n, reqs.data(), MPI_STATUSES_IGNORE));
      break;
    case WaitAny:
      for (int index = 0; index != MPI_UNDEFINED;) SOAK_MPI_OK(MPI_Waitany(n, reqs.data(), &index, MPI_STATUS_IGNORE));
      break;
    case TestAll:
      for (int flag = 0; !flag;) SOAK_MPI_OK(MPI_Testall(n, reqs.data(), &flag, MPI_STATUSES_IGNORE));
      break;
    case WaitSome:
      for (int out = 0; out != MPI_UNDEFINED;)
        SOAK_MPI_OK(MPI_Waitsome(n, reqs.data(), &out, indices.data(), MPI_STATUSES_IGNORE));
      break;
    case WaitEach:
      for (int i = n - 1; i >= 0; --i) SOAK_MPI_OK(MPI_Wait(&reqs[size_t(i)], MPI_STATUS_IGNORE));
      break;
    case TestAny:
      while (!all_null()) {
        int index = 0, flag = 0;
        SOAK_MPI_OK(MPI_Testany(n, reqs.data(), &index, &flag, MPI_STATUS_IGNORE));
      }
      break;
    case TestSome:
      while (!all_null()) {
        int out = 0;
        SOAK_MPI_OK(MPI_Testsome(n, reqs.data(), &out, indices.data(), MPI_STATUSES_IGNORE));
      }
      break;
    default:
      while (!all_null())
        for (MPI_Request &r : reqs) {
          int flag = 0;
          SOAK_MPI_OK(MPI_Test(&r, &flag, MPI_STATUS_IGNORE));
        }
  }
  if (!all_null()) fail(std::string(to_string(how)) + " left a request active");
}

// One datatype's traffic with `peer` on `comm`: `messages` nonblocking sends of `count`
// elements of `t` from a GPU buffer (data from `seed` and this rank), as many receives
// into one GPU arena of slots (tags tag0, tag0 + 1, ...), all completed with `how`, and
// every slot checked. Returns the payload bytes sent, or -1 when something differed.
inline int64_t exchange(MPI_Datatype t, int count, int messages, uint64_t seed, Completion how, int peer,
                        int tag0, MPI_Comm comm) {
  int me = 0;
  MPI_Comm_rank(comm, &me);
  const Slot s = slot_for(t, count);
  const std::vector<char> mine = pattern(size_t(s.bytes), seed * 2 + uint64_t(me));
  const std::vector<char> want = expected(t, count, s, pattern(size_t(s.bytes), seed * 2 + uint64_t(peer)));
  DeviceBuffer src(size_t(s.bytes)), arena(size_t(s.bytes) * size_t(messages));
  src.upload(mine);
  arena.upload(std::vector<char>(size_t(s.bytes) * size_t(messages), kPoison));
  std::vector<MPI_Request> reqs;
  for (int m = 0; m < messages; ++m) {
    MPI_Request r;
    char *into = arena.get() + m * s.bytes + s.origin;
    // Receives and sends interleave differently from one message to the next.
    if ((m + me) % 2 == 0) {
      SOAK_MPI_OK(MPI_Irecv(into, count, t, peer, tag0 + m, comm, &r));
      reqs.push_back(r);
      SOAK_MPI_OK(MPI_Isend(src.get() + s.origin, count, t, peer, tag0 + m, comm, &r));
    } else {
      SOAK_MPI_OK(MPI_Isend(src.get() + s.origin, count, t, peer, tag0 + m, comm, &r));
      reqs.push_back(r);
      SOAK_MPI_OK(MPI_Irecv(into, count, t, peer, tag0 + m, comm, &r));
    }
    reqs.push_back(r);
  }
  complete(reqs, how);
  const std::vector<char> got = arena.download();
  for (int m = 0; m < messages; ++m)
    if (!std::equal(want.begin(), want.end(), got.begin() + m * s.bytes)) {
      fail("message " + std::to_string(m) + " received with " + to_string(how) + " differs");
      return -1;
    }
  int size = 0;
  PMPI_Type_size(t, &size);
  return int64_t(messages) * size * count;
}

}  // namespace soak
