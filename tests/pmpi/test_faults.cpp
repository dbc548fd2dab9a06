// Faults are survived, not crashed on (docs/using.md, "Errors"): allocations, kernel
// launches and copies of the GPU runtime that fail (the emulated backend's fault
// injection, tests/support/emulated_faults.hpp), and errors the MPI library returns from
// a call TEMPI made on the application's behalf. Each case checks that the call falls
// back and works, or returns the MPI error through the communicator's error handler
// without writing the user's buffers; that the next call works; and that TEMPI's staging
// went back and its request table is empty. One rank, messages to itself; the library is
// declared CUDA-aware (tests/meson.build) so that the device method runs too.
#include <mpi.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <vector>

#include "backend.hpp"
#include "emulated_faults.hpp"
#include "p2p_support.hpp"
#include "p2p/requests.hpp"
#include "tempi.h"

using namespace p2p;
using tempi::EmulatedFault;

namespace {

int g_handled = 0;  // error handler calls on the test communicator
bool g_handler_calls_mpi = false;  // the handler makes an MPI call of its own, as applications' do
void on_error(MPI_Comm *, int *, ...) {
  ++g_handled;
  if (g_handler_calls_mpi) MPI_Barrier(MPI_COMM_SELF);
}

int error_class(int err) {
  int cls = MPI_SUCCESS;
  if (err != MPI_SUCCESS) MPI_Error_class(err, &cls);
  return cls;
}

// A communicator whose errors are counted and returned.
struct Comm {
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Errhandler handler;
  Comm() {
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_create_errhandler(on_error, &handler);
    MPI_Comm_set_errhandler(comm, handler);
    g_handled = 0;
  }
  ~Comm() {
    MPI_Errhandler_free(&handler);
    MPI_Comm_free(&comm);
  }
};

// TEMPI's staging in use: must be back where it was once nothing is in flight.
struct Staging {
  uint64_t device, pinned;
  static Staging now() {
    const tempi::Backend::MemoryUse u = tempi::gpu_backend().memory_use();
    return {u.device_bytes, u.pinned_bytes};
  }
  bool operator==(const Staging &o) const { return device == o.device && pinned == o.pinned; }
};

// A GPU object of `l`, its data, and a GPU buffer to receive it into (poisoned).
struct Message {
  Layout l;
  Buf src, dst;
  unsigned seed;
  Message(Layout layout, unsigned s) : l(layout), src(Where::Gpu, l.span()), dst(Where::Gpu, l.span()), seed(s) {
    src.upload(pattern(l.span(), seed));
    dst.fill(kPoison);
  }
  std::string check() const { return first_difference(dst.download(), expected(l, l, seed)); }
  bool untouched() const { return dst.download() == std::vector<char>(l.span(), kPoison); }
};

// Sends `m` to this rank with MPI_Isend and receives it with MPI_Irecv, one MPI_Waitall.
int self_exchange(Message &m, MPI_Comm comm, int tag = 0) {
  MPI_Request reqs[2];
  if (int err = MPI_Irecv(m.dst.get(), m.l.count, m.l.type, 0, tag, comm, &reqs[0])) return err;
  if (int err = MPI_Isend(m.src.get(), m.l.count, m.l.type, 0, tag, comm, &reqs[1])) return err;
  return MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);
}

// The MPI library's error class for `m` sent by MPI_Ibsend with no buffer attached: a
// deferred send of `m` by MPI_Ibsend fails with it when TEMPI posts its message.
int ibsend_failure_class(const Message &m, MPI_Comm comm) {
  std::vector<char> host(m.l.span());
  MPI_Request lib = MPI_REQUEST_NULL;
  return error_class(PMPI_Ibsend(host.data(), m.l.count, m.l.type, 0, 4, comm, &lib));
}

// A status full of garbage, so that a field the call leaves unwritten shows (0xa5: MPICH
// keeps the cancelled flag in the lowest bit of a count word).
MPI_Status garbage_status() {
  MPI_Status st;
  std::memset(&st, 0xa5, sizeof st);
  return st;
}

// MPI's empty status (a request that carried no message), with error class `cls`.
void check_empty_status(const MPI_Status &st, int cls) {
  int count = -1, cancelled = -1;
  CHECK(MPI_Get_count(&st, MPI_BYTE, &count) == MPI_SUCCESS);
  CHECK(count == 0);
  CHECK(MPI_Test_cancelled(&st, &cancelled) == MPI_SUCCESS);
  CHECK(cancelled == 0);
  CHECK(st.MPI_SOURCE == MPI_ANY_SOURCE);
  CHECK(st.MPI_TAG == MPI_ANY_TAG);
  CHECK(error_class(st.MPI_ERROR) == cls);
}

}  // namespace

TEST_CASE("no device memory for the device method: the one-shot method moves the message", "[faults]") {
  Comm c;
  Message m({vector2d(), 3}, 1);
  const Staging before = Staging::now();
  REQUIRE(TEMPIX_Set_method("device") == MPI_SUCCESS);
  for (int nth = 1; nth <= 2; ++nth) {  // the receive's staging (posted first), then the send's
    INFO("allocation " << nth);
    m.dst.fill(kPoison);
    tempi::emulated_fail_nth(EmulatedFault::DeviceAlloc, nth);
    CHECK(self_exchange(m, c.comm) == MPI_SUCCESS);
    CHECK(m.check() == "");
  }
  REQUIRE(TEMPIX_Set_method("auto") == MPI_SUCCESS);
  CHECK(g_handled == 0);
  CHECK(Staging::now() == before);
  CHECK(tempi::requests().empty());
  release(m.l);
}

TEST_CASE("no pinned host memory: the message is staged through pageable memory", "[faults]") {
  Comm c;
  for (const char *method : {"oneshot", "staged", "device"}) {
    INFO(method);
    REQUIRE(TEMPIX_Set_method(method) == MPI_SUCCESS);
    for (int nth = 1; nth <= 2; ++nth) {  // the receive's staging, then the send's
      Message m({subarray3d(), 1}, unsigned(nth));
      const Staging before = Staging::now();
      tempi::emulated_fail_nth(EmulatedFault::DeviceAlloc, 1);  // the device method falls back twice
      tempi::emulated_fail_nth(EmulatedFault::PinnedAlloc, nth);
      CHECK(self_exchange(m, c.comm) == MPI_SUCCESS);
      CHECK(m.check() == "");
      // A blocking send and receive (one staging each) take the same way.
      m.dst.fill(kPoison);
      tempi::emulated_fail_nth(EmulatedFault::DeviceAlloc, 0);
      tempi::emulated_fail_nth(EmulatedFault::PinnedAlloc, nth);
      CHECK(MPI_Sendrecv(m.src.get(), 1, m.l.type, 0, 5, m.dst.get(), 1, m.l.type, 0, 5, c.comm, MPI_STATUS_IGNORE) ==
            MPI_SUCCESS);
      CHECK(m.check() == "");
      CHECK(Staging::now() == before);
      release(m.l);
    }
  }
  tempi::emulated_fail_nth(EmulatedFault::DeviceAlloc, 0);
  tempi::emulated_fail_nth(EmulatedFault::PinnedAlloc, 0);
  REQUIRE(TEMPIX_Set_method("auto") == MPI_SUCCESS);
  CHECK(g_handled == 0);
  CHECK(tempi::requests().empty());
}

TEST_CASE("a kernel launch that fails: MPI_Pack and MPI_Unpack return the error, and the next call works",
          "[faults]") {
  Comm c;
  Message m({irregular(), 2}, 7);
  const int bytes = m.l.bytes();
  Buf packed(Where::Gpu, size_t(bytes));
  packed.fill(kPoison);
  int pos = 0;
  tempi::emulated_fail_nth(EmulatedFault::Launch, 1);
  CHECK(error_class(MPI_Pack(m.src.get(), m.l.count, m.l.type, packed.get(), bytes, &pos, c.comm)) == MPI_ERR_INTERN);
  CHECK(g_handled == 1);
  CHECK(pos == 0);
  CHECK(packed.download() == std::vector<char>(size_t(bytes), kPoison));
  REQUIRE(MPI_Pack(m.src.get(), m.l.count, m.l.type, packed.get(), bytes, &pos, c.comm) == MPI_SUCCESS);
  CHECK(pos == bytes);

  pos = 0;
  tempi::emulated_fail_nth(EmulatedFault::Launch, 1);
  CHECK(error_class(MPI_Unpack(packed.get(), bytes, &pos, m.dst.get(), m.l.count, m.l.type, c.comm)) ==
        MPI_ERR_INTERN);
  CHECK(g_handled == 2);
  CHECK(pos == 0);
  CHECK(m.untouched());
  REQUIRE(MPI_Unpack(packed.get(), bytes, &pos, m.dst.get(), m.l.count, m.l.type, c.comm) == MPI_SUCCESS);
  CHECK(m.check() == "");
  release(m.l);
}

TEST_CASE("a copy that fails: MPI_Pack of a type TEMPI does not plan returns the error", "[faults]") {
  Comm c;
  const Layout l{MPI_SHORT_INT, 10};  // a pair type with a gap: moved as a host image
  Buf src(Where::Gpu, l.span());
  src.upload(pattern(l.span(), 3));
  std::vector<char> out(size_t(l.bytes()), kPoison);
  int pos = 0;
  tempi::emulated_fail_nth(EmulatedFault::Copy, 1);
  CHECK(error_class(MPI_Pack(src.get(), l.count, l.type, out.data(), int(out.size()), &pos, c.comm)) ==
        MPI_ERR_INTERN);
  CHECK(g_handled == 1);
  CHECK(pos == 0);
  CHECK(out == std::vector<char>(out.size(), kPoison));
  CHECK(MPI_Pack(src.get(), l.count, l.type, out.data(), int(out.size()), &pos, c.comm) == MPI_SUCCESS);
  CHECK(pos == l.bytes());
}

TEST_CASE("a copy back to the GPU that fails: the position stays where it was", "[faults]") {
  Comm c;
  const Layout l{MPI_SHORT_INT, 10};  // moved as host images: the packed bytes are copied back
  const std::vector<char> src = pattern(l.span(), 4);
  Buf packed(Where::Gpu, size_t(l.bytes())), typed(Where::Gpu, l.span());
  int pos = 0;
  tempi::emulated_fail_nth(EmulatedFault::Copy, 1);  // the pack's only copy: its output back to the GPU
  CHECK(error_class(MPI_Pack(src.data(), l.count, l.type, packed.get(), l.bytes(), &pos, c.comm)) == MPI_ERR_INTERN);
  CHECK(pos == 0);
  REQUIRE(MPI_Pack(src.data(), l.count, l.type, packed.get(), l.bytes(), &pos, c.comm) == MPI_SUCCESS);
  pos = 0;
  tempi::emulated_fail_nth(EmulatedFault::Copy, 2);  // the object read to the host, then (this one) written back
  std::vector<char> packed_host(size_t(l.bytes()));
  CHECK(error_class(MPI_Unpack(packed_host.data(), l.bytes(), &pos, typed.get(), l.count, l.type, c.comm)) ==
        MPI_ERR_INTERN);
  CHECK(pos == 0);
  CHECK(g_handled == 2);
}

TEST_CASE("a batched pack that fails: the send's completion returns the error, and the next send works",
          "[faults]") {
  Comm c;
  Message m({vector2d(), 2}, 11);
  const Staging before = Staging::now();
  for (const char *method : {"oneshot", "staged"}) {
    INFO(method);
    REQUIRE(TEMPIX_Set_method(method) == MPI_SUCCESS);
    g_handled = 0;
    MPI_Request send = MPI_REQUEST_NULL;
    tempi::emulated_fail_nth(EmulatedFault::Launch, 1);  // the engine's batch
    REQUIRE(MPI_Isend(m.src.get(), m.l.count, m.l.type, 0, 1, c.comm, &send) == MPI_SUCCESS);
    MPI_Status st;
    CHECK(error_class(MPI_Wait(&send, &st)) == MPI_ERR_INTERN);
    CHECK(send == MPI_REQUEST_NULL);
    CHECK(g_handled == 1);
    CHECK(tempi::requests().empty());
    CHECK(Staging::now() == before);
    // Nothing reached the library: the next message is the one that arrives.
    m.dst.fill(kPoison);
    CHECK(self_exchange(m, c.comm, 1) == MPI_SUCCESS);
    CHECK(m.check() == "");
  }
  REQUIRE(TEMPIX_Set_method("auto") == MPI_SUCCESS);
  release(m.l);
}

TEST_CASE("a batched unpack that fails: each receive's status carries the error", "[faults]") {
  Comm c;
  Message a({vector2d(), 1}, 21), b({subarray3d(), 1}, 22);
  MPI_Request reqs[4];
  REQUIRE(MPI_Irecv(a.dst.get(), 1, a.l.type, 0, 2, c.comm, &reqs[0]) == MPI_SUCCESS);
  REQUIRE(MPI_Irecv(b.dst.get(), 1, b.l.type, 0, 3, c.comm, &reqs[1]) == MPI_SUCCESS);
  REQUIRE(MPI_Isend(a.src.get(), 1, a.l.type, 0, 2, c.comm, &reqs[2]) == MPI_SUCCESS);
  REQUIRE(MPI_Isend(b.src.get(), 1, b.l.type, 0, 3, c.comm, &reqs[3]) == MPI_SUCCESS);
  MPI_Request sends[2] = {reqs[2], reqs[3]};
  REQUIRE(MPI_Waitall(2, sends, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
  tempi::emulated_fail_nth(EmulatedFault::Launch, 1);  // the unpack of both receives, issued together
  MPI_Status st[2];
  CHECK(MPI_Waitall(2, reqs, st) == MPI_ERR_IN_STATUS);
  CHECK(error_class(st[0].MPI_ERROR) == MPI_ERR_INTERN);
  CHECK(error_class(st[1].MPI_ERROR) == MPI_ERR_INTERN);
  CHECK(reqs[0] == MPI_REQUEST_NULL);
  CHECK(reqs[1] == MPI_REQUEST_NULL);
  CHECK(a.untouched());
  CHECK(b.untouched());
  CHECK(tempi::requests().empty());
  CHECK(self_exchange(a, c.comm, 2) == MPI_SUCCESS);
  CHECK(a.check() == "");
  release(a.l);
  release(b.l);
}

TEST_CASE("the MPI library's error from a send TEMPI posts reaches the application", "[faults]") {
  // No buffer is attached, so the library's MPI_Ibsend fails: TEMPI posts it at progress,
  // after MPI_Ibsend returned; the completion call reports the library's error.
  Comm c;
  Message m({vector2d(), 2}, 31);
  std::vector<char> host(m.l.span());
  MPI_Request lib = MPI_REQUEST_NULL;
  const int library_class = error_class(PMPI_Ibsend(host.data(), m.l.count, m.l.type, 0, 4, c.comm, &lib));
  REQUIRE(library_class != MPI_SUCCESS);
  g_handled = 0;
  const Staging before = Staging::now();

  MPI_Request send = MPI_REQUEST_NULL;
  REQUIRE(MPI_Ibsend(m.src.get(), m.l.count, m.l.type, 0, 4, c.comm, &send) == MPI_SUCCESS);
  CHECK(error_class(MPI_Wait(&send, MPI_STATUS_IGNORE)) == library_class);
  CHECK(send == MPI_REQUEST_NULL);
  CHECK(g_handled == 1);  // the library raised it when TEMPI posted the message
  CHECK(tempi::requests().empty());
  CHECK(Staging::now() == before);

  // The blocking form: the library's error, TEMPI's staging released.
  g_handled = 0;
  CHECK(error_class(MPI_Bsend(m.src.get(), m.l.count, m.l.type, 0, 4, c.comm)) == library_class);
  CHECK(g_handled == 1);
  CHECK(Staging::now() == before);
  CHECK(self_exchange(m, c.comm, 4) == MPI_SUCCESS);
  CHECK(m.check() == "");
  release(m.l);
}

TEST_CASE("an error handler that makes MPI calls while TEMPI posts a send", "[faults]") {
  // The library's error for a send TEMPI posts runs the communicator's handler inside
  // TEMPI's posting; the handler's own MPI call comes back into TEMPI on the same thread.
  Comm c;
  Message m({vector2d(), 2}, 33);
  g_handler_calls_mpi = true;
  MPI_Request send = MPI_REQUEST_NULL;
  REQUIRE(MPI_Ibsend(m.src.get(), m.l.count, m.l.type, 0, 4, c.comm, &send) == MPI_SUCCESS);
  CHECK(MPI_Wait(&send, MPI_STATUS_IGNORE) != MPI_SUCCESS);
  g_handler_calls_mpi = false;
  CHECK(g_handled == 1);
  CHECK(tempi::requests().empty());
  CHECK(self_exchange(m, c.comm, 4) == MPI_SUCCESS);
  CHECK(m.check() == "");
  release(m.l);
}

TEST_CASE("a send TEMPI could not post completes with an empty status and the library's error", "[faults]") {
  // The calls that report a failed send alone (the library never saw its request): its
  // status is MPI's empty one, not what the memory held, with the library's error in it.
  Comm c;
  Message m({vector2d(), 2}, 32);
  const int library_class = ibsend_failure_class(m, c.comm);
  REQUIRE(library_class != MPI_SUCCESS);
  const Staging before = Staging::now();
  const char *calls[] = {"MPI_Waitany", "MPI_Testany", "MPI_Waitsome", "MPI_Testsome"};
  for (const std::string call : calls) {
    INFO(call);
    g_handled = 0;
    MPI_Request reqs[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    REQUIRE(MPI_Ibsend(m.src.get(), m.l.count, m.l.type, 0, 4, c.comm, &reqs[1]) == MPI_SUCCESS);
    MPI_Status st[2] = {garbage_status(), garbage_status()};
    int index = -1, flag = 0, outcount = -1;
    if (call == "MPI_Waitany") {
      CHECK(error_class(MPI_Waitany(2, reqs, &index, &st[0])) == library_class);
    } else if (call == "MPI_Testany") {
      CHECK(error_class(MPI_Testany(2, reqs, &index, &flag, &st[0])) == library_class);
      CHECK(flag == 1);
    } else {
      const int err = call == "MPI_Waitsome" ? MPI_Waitsome(2, reqs, &outcount, &index, st)
                                             : MPI_Testsome(2, reqs, &outcount, &index, st);
      CHECK(err == MPI_ERR_IN_STATUS);
      CHECK(outcount == 1);
    }
    CHECK(index == 1);
    check_empty_status(st[0], library_class);
    CHECK(reqs[1] == MPI_REQUEST_NULL);
    CHECK(g_handled == 1);  // the library raised it when TEMPI posted the message
  }
  // Statuses ignored: MPI_Waitsome and MPI_Testsome return the request's own error, as they
  // do for TEMPI's errors, not MPI_ERR_IN_STATUS with no status to look in.
  for (const bool wait : {true, false}) {
    INFO((wait ? "MPI_Waitsome" : "MPI_Testsome") << ", statuses ignored");
    MPI_Request send = MPI_REQUEST_NULL;
    REQUIRE(MPI_Ibsend(m.src.get(), m.l.count, m.l.type, 0, 4, c.comm, &send) == MPI_SUCCESS);
    int outcount = -1, index = -1;
    const int err = wait ? MPI_Waitsome(1, &send, &outcount, &index, MPI_STATUSES_IGNORE)
                         : MPI_Testsome(1, &send, &outcount, &index, MPI_STATUSES_IGNORE);
    CHECK(error_class(err) == library_class);
    CHECK(outcount == 1);
    CHECK(index == 0);
    CHECK(send == MPI_REQUEST_NULL);
  }
  CHECK(tempi::requests().empty());
  CHECK(Staging::now() == before);
  release(m.l);
}

TEST_CASE("MPI_Request_get_status of a send TEMPI could not post: complete, with an empty status", "[faults]") {
  // The request lives on (MPI_Request_get_status frees nothing), so its error comes with the
  // completion call that frees it; the status says complete, empty, without error.
  Comm c;
  Message m({vector2d(), 2}, 33);
  const int library_class = ibsend_failure_class(m, c.comm);
  REQUIRE(library_class != MPI_SUCCESS);
  g_handled = 0;
  const Staging before = Staging::now();
  MPI_Request send = MPI_REQUEST_NULL;
  REQUIRE(MPI_Ibsend(m.src.get(), m.l.count, m.l.type, 0, 4, c.comm, &send) == MPI_SUCCESS);
  MPI_Status st = garbage_status();
  int flag = 0;
  CHECK(MPI_Request_get_status(send, &flag, &st) == MPI_SUCCESS);
  CHECK(flag == 1);
  check_empty_status(st, MPI_SUCCESS);
  CHECK(g_handled == 1);
  st = garbage_status();
  CHECK(error_class(MPI_Wait(&send, &st)) == library_class);
  check_empty_status(st, library_class);
  CHECK(send == MPI_REQUEST_NULL);
  CHECK(tempi::requests().empty());
  CHECK(Staging::now() == before);
  release(m.l);
}
