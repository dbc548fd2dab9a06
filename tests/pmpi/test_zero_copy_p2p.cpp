// Zero-copy point-to-point (pmpi/zero_copy/zero_copy_p2p.hpp) on a communicator where it was enabled
// (TEMPIX_Comm_enable_zero_copy): every received byte against the MPI library's own
// MPI_Pack/MPI_Unpack of host shadows of the same buffers, and counted: nonblocking GPU
// sends to ranks of the node must go by zero-copy (unless TEMPI_IPC=off, or below
// TEMPI_P2P_ZERO_COPY_MIN), the others by the pack path. Covers send and receive types that
// differ, blocking, nonblocking and persistent receives, MPI_Sendrecv, wildcards with their
// statuses, truncation (of a zero-copy message and of data that fits the enlarged staging),
// cancelled receives and sends, MPI's order between a zero-copy send and a later host send, a send waited for before the receive that reads it, host messages of
// exactly the control message's size (and one that starts with its magic number), send
// buffers freed and allocated again, "nodes" smaller than the machine
// (TEMPI_IPC_RANKS_PER_NODE), threads, and send buffers the receiver cannot map (pushed).
// Built on the emulated backend (mpi suite) and with P2P_REAL_GPU on real GPUs (gpu suite;
// exit 77 without one), where a send buffer's contents land on the legacy default stream
// after the call (default_stream_writer.cu).
#define CATCH_CONFIG_RUNNER
#include <dirent.h>
#include <mpi.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backend.hpp"
#include "p2p/messages.hpp"
#include "profile.hpp"
#include "base/runtime.hpp"
#include "zero_copy_support.hpp"
#include "tempi.h"
#include "zero_copy/zero_copy_p2p.hpp"
#if defined(P2P_REAL_GPU)
#include "gpu_select.hpp"
// tests/gpu/default_stream_writer.cu
bool copy_on_default_stream_after(void *dst, const void *src, size_t bytes, double ms);
#endif

namespace {

int g_rank = 0, g_size = 1;
MPI_Comm g_zc = MPI_COMM_NULL;  // zero-copy point-to-point enabled
int g_on = 0;

using zero_copy_test::Buf;
using zero_copy_test::byte_at;

bool same_node(int r) { return zero_copy_test::same_node(r, g_rank); }
int64_t zero_copy_min() {
  const char *v = std::getenv("TEMPI_P2P_ZERO_COPY_MIN");
  return v ? std::atoll(v) : 0;
}
// Whether a nonblocking GPU send of `bytes` packed bytes to `peer` goes by zero-copy.
bool zero_copy_expected(int peer, int64_t bytes) {
  return g_on && same_node(peer) && bytes >= zero_copy_min();  // to itself too: a local move
}

struct Types {
  MPI_Datatype send = MPI_DATATYPE_NULL, recv = MPI_DATATYPE_NULL;
  ~Types() {
    if (send != MPI_DATATYPE_NULL) MPI_Type_free(&send);
    if (recv != MPI_DATATYPE_NULL) MPI_Type_free(&recv);
  }
};

// A strided send type and a receive type of the same signature laid out otherwise: `n`
// blocks of 3 ints, every 5 ints, sent; received as blocks of 2 ints every 7.
void make_types(int n, Types &t) {
  MPI_Type_vector(n, 3, 5, MPI_INT, &t.send);
  MPI_Type_commit(&t.send);
  MPI_Type_vector(n * 3 / 2, 2, 7, MPI_INT, &t.recv);
  MPI_Type_commit(&t.recv);
}

size_t span(MPI_Datatype t, int count) {
  MPI_Aint lb = 0, extent = 0, tlb = 0, textent = 0;
  MPI_Type_get_extent(t, &lb, &extent);
  MPI_Type_get_true_extent(t, &tlb, &textent);
  return size_t(tlb + textent + (count - 1) * extent);
}

// The receive buffer's expected bytes: `recv_shadow` with `send_shadow` packed by the send
// type and unpacked by the receive type (the MPI library's own, on host memory).
std::vector<uint8_t> expected(const std::vector<uint8_t> &send_shadow, MPI_Datatype st, int sc,
                              std::vector<uint8_t> recv_shadow, MPI_Datatype rt, int rc) {
  int packed = 0;
  MPI_Pack_size(sc, st, MPI_COMM_SELF, &packed);
  std::vector<char> tmp(size_t(packed) + 1);
  int pos = 0;
  MPI_Pack(send_shadow.data(), sc, st, tmp.data(), packed, &pos, MPI_COMM_SELF);
  int at = 0;
  MPI_Unpack(tmp.data(), pos, &at, recv_shadow.data(), rc, rt, MPI_COMM_SELF);
  return recv_shadow;
}

// What receive buffer `r` (one of t.recv) must hold after one message of t.send from a peer
// whose send buffer of `bytes` bytes was filled from `seed`.
std::vector<uint8_t> received(const Types &t, size_t bytes, uint64_t seed, const Buf &r) {
  Buf ref(false, bytes, seed);
  return expected(ref.host, t.send, 1, r.host, t.recv, 1);
}

int type_size(MPI_Datatype t) {
  int s = 0;
  MPI_Type_size(t, &s);
  return s;
}

// Every rank sends one message to every rank (itself included) with Isend from GPU memory
// and receives with `recv_kind` ("irecv", "recv", "persistent") into GPU memory.
void exchange_all(const std::string &recv_kind, int blocks, uint64_t seed) {
  Types t;
  make_types(blocks, t);
  const int rcount = 1, scount = 1;
  const size_t ssize = span(t.send, scount), rsize = span(t.recv, rcount);
  std::vector<std::unique_ptr<Buf>> sends, recvs;
  for (int p = 0; p < g_size; ++p) {
    sends.emplace_back(new Buf(true, ssize, seed * 1000 + uint64_t(g_rank * 31 + p)));
    recvs.emplace_back(new Buf(true, rsize, seed * 7777 + uint64_t(p * 17 + g_rank)));
  }
  const tempi::P2pCounts before = tempi::p2p_counts();
  std::vector<MPI_Request> rreq(size_t(g_size), MPI_REQUEST_NULL), sreq(size_t(g_size), MPI_REQUEST_NULL);
  if (recv_kind != "recv")
    for (int p = 0; p < g_size; ++p) {
      if (recv_kind == "persistent") {
        MPI_Recv_init(recvs[size_t(p)]->ptr, rcount, t.recv, p, 40 + p, g_zc, &rreq[size_t(p)]);
        MPI_Start(&rreq[size_t(p)]);
      } else {
        MPI_Irecv(recvs[size_t(p)]->ptr, rcount, t.recv, p, 40 + p, g_zc, &rreq[size_t(p)]);
      }
    }
  for (int p = 0; p < g_size; ++p)
    REQUIRE(MPI_Isend(sends[size_t(p)]->ptr, scount, t.send, p, 40 + g_rank, g_zc, &sreq[size_t(p)]) == MPI_SUCCESS);
  std::vector<MPI_Status> st(static_cast<size_t>(g_size));
  if (recv_kind == "recv") {
    for (int p = 0; p < g_size; ++p)
      REQUIRE(MPI_Recv(recvs[size_t(p)]->ptr, rcount, t.recv, p, 40 + p, g_zc, &st[size_t(p)]) == MPI_SUCCESS);
  } else {
    REQUIRE(MPI_Waitall(g_size, rreq.data(), st.data()) == MPI_SUCCESS);
  }
  REQUIRE(MPI_Waitall(g_size, sreq.data(), MPI_STATUSES_IGNORE) == MPI_SUCCESS);
  const int64_t packed = int64_t(type_size(t.send)) * scount;
  for (int p = 0; p < g_size; ++p) {
    INFO("from rank " << p << ", receive " << recv_kind);
    CHECK(st[size_t(p)].MPI_SOURCE == p);
    CHECK(st[size_t(p)].MPI_TAG == 40 + p);
    int elements = 0;
    MPI_Get_count(&st[size_t(p)], MPI_INT, &elements);
    CHECK(elements == packed / 4);
    // The sender's shadow: what rank p's buffer to this rank held.
    Buf ref(false, ssize, seed * 1000 + uint64_t(p * 31 + g_rank));
    CHECK(recvs[size_t(p)]->contents() == expected(ref.host, t.send, scount, recvs[size_t(p)]->host, t.recv, rcount));
  }
  if (recv_kind == "persistent")
    for (auto &r : rreq) MPI_Request_free(&r);
  int expected_reads = 0, expected_sends = 0;
  for (int p = 0; p < g_size; ++p) {
    expected_reads += zero_copy_expected(p, packed);
    expected_sends += zero_copy_expected(p, packed);
  }
  const tempi::P2pCounts after = tempi::p2p_counts();
  CHECK(after.reads - before.reads == uint64_t(expected_reads));
  CHECK(after.sends - before.sends == uint64_t(expected_sends));
}

// First in the file, before TEMPI maps anything in this process.
TEST_CASE("messages from a send buffer the receiver cannot map (a CUDA-aware library's stale mapping) are pushed") {
  // Where CUDA refuses the receiver a mapping of the sender's buffer, the sender packs the
  // message into a landing buffer of the receiver's (the push), exactly, whatever the
  // receive call, with no MPI call of the sender's needed meanwhile.
  Types t;
  make_types(300, t);
  const int next = (g_rank + 1) % g_size, prev = (g_rank + g_size - 1) % g_size;
  std::unique_ptr<Buf> send;
  zero_copy_test::StaleLibraryMapping stale(g_rank, g_size, same_node(next), span(t.send, 1), 600 + uint64_t(g_rank),
                                            send);
  if (stale.held && !stale.refused)
    WARN("the next rank's new buffer got another address: this rank's mapping of it is not refused");
  const int64_t packed = type_size(t.send);
  const bool zero_copy = zero_copy_expected(next, packed);
  const bool pushed = stale.refused && zero_copy;
  Buf ref(false, send->bytes, 600 + uint64_t(next) + 1);  // the next rank's send buffer
  for (const std::string kind : {"irecv", "recv", "persistent", "irecv"}) {
    INFO("receive " << kind);
    Buf recv(true, span(t.recv, 1), 610 + uint64_t(g_rank));
    const tempi::P2pCounts before = tempi::p2p_counts();
    MPI_Request sreq = MPI_REQUEST_NULL, rreq = MPI_REQUEST_NULL;
    if (kind == "irecv") REQUIRE(MPI_Irecv(recv.ptr, 1, t.recv, next, 6, g_zc, &rreq) == MPI_SUCCESS);
    if (kind == "persistent") {
      REQUIRE(MPI_Recv_init(recv.ptr, 1, t.recv, next, 6, g_zc, &rreq) == MPI_SUCCESS);
      REQUIRE(MPI_Start(&rreq) == MPI_SUCCESS);
    }
    REQUIRE(MPI_Isend(send->ptr, 1, t.send, prev, 6, g_zc, &sreq) == MPI_SUCCESS);
    MPI_Status st;
    if (kind == "recv") REQUIRE(MPI_Recv(recv.ptr, 1, t.recv, next, 6, g_zc, &st) == MPI_SUCCESS);
    else REQUIRE(MPI_Wait(&rreq, &st) == MPI_SUCCESS);
    REQUIRE(MPI_Wait(&sreq, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    if (kind == "persistent") MPI_Request_free(&rreq);
    int elements = 0;
    MPI_Get_count(&st, MPI_INT, &elements);
    CHECK(elements == packed / 4);
    CHECK(recv.contents() == expected(ref.host, t.send, 1, recv.host, t.recv, 1));
    const tempi::P2pCounts after = tempi::p2p_counts();
    CHECK(after.pushed - before.pushed == uint64_t(pushed ? 1 : 0));
    CHECK(after.reads - before.reads == uint64_t(zero_copy && !pushed ? 1 : 0));
  }
}

TEST_CASE("zero-copy is on where it should be") {
  const char *ipc = std::getenv("TEMPI_IPC");
  const bool off = ipc && (!std::strcmp(ipc, "off") || !std::strcmp(ipc, "0"));
  CHECK(g_on == (off ? 0 : 1));
}

TEST_CASE("Isend to every rank, received by MPI_Irecv, MPI_Recv and persistent receives") {
  for (int blocks : {2, 64, 4096}) {
    exchange_all("irecv", blocks, uint64_t(blocks));
    exchange_all("recv", blocks, uint64_t(blocks) + 1);
    exchange_all("persistent", blocks, uint64_t(blocks) + 2);
  }
}

TEST_CASE("a send waited for before the receive that reads it, and MPI_Sendrecv receiving it") {
  if (g_size < 2) return;
  const int peer = g_rank ^ 1;
  if (peer >= g_size) return;
  Types t;
  make_types(256, t);
  Buf s(true, span(t.send, 1), 5 + uint64_t(g_rank)), r(true, span(t.recv, 1), 9 + uint64_t(g_rank));
  Buf ref(false, s.bytes, 5 + uint64_t(peer));
  MPI_Request sreq, rreq;
  MPI_Irecv(r.ptr, 1, t.recv, peer, 3, g_zc, &rreq);
  MPI_Isend(s.ptr, 1, t.send, peer, 3, g_zc, &sreq);
  REQUIRE(MPI_Wait(&sreq, MPI_STATUS_IGNORE) == MPI_SUCCESS);  // the peer reads it in its own wait
  REQUIRE(MPI_Wait(&rreq, MPI_STATUS_IGNORE) == MPI_SUCCESS);
  CHECK(r.contents() == expected(ref.host, t.send, 1, r.host, t.recv, 1));

  // MPI_Sendrecv: its receive gets the peer's zero-copy Isend; its send is packed.
  Buf r2(true, r.bytes, 11 + uint64_t(g_rank));
  int token = g_rank, got = -1;
  MPI_Isend(s.ptr, 1, t.send, peer, 4, g_zc, &sreq);
  MPI_Status st;
  REQUIRE(MPI_Sendrecv(&token, 1, MPI_INT, peer, 5, r2.ptr, 1, t.recv, peer, 4, g_zc, &st) == MPI_SUCCESS);
  MPI_Recv(&got, 1, MPI_INT, peer, 5, g_zc, MPI_STATUS_IGNORE);
  REQUIRE(MPI_Wait(&sreq, MPI_STATUS_IGNORE) == MPI_SUCCESS);
  int elements = 0;
  MPI_Get_count(&st, t.recv, &elements);
  CHECK(elements == 1);
  CHECK(got == peer);
  CHECK(r2.contents() == expected(ref.host, t.send, 1, r2.host, t.recv, 1));
}

TEST_CASE("wildcards: any source, any tag, and the statuses they report") {
  if (g_size < 2) return;
  Types t;
  make_types(100, t);
  const int64_t packed = type_size(t.send);
  // Rank 0 receives one message from every other rank with MPI_ANY_SOURCE and MPI_ANY_TAG,
  // nonblocking, then another each with blocking MPI_Recv.
  for (int round = 0; round < 2; ++round) {
    const int tag0 = round == 0 ? 100 : 200;
    if (g_rank == 0) {
      std::vector<std::unique_ptr<Buf>> r;
      std::vector<MPI_Request> req(size_t(g_size - 1), MPI_REQUEST_NULL);
      std::vector<MPI_Status> st(req.size());
      for (int k = 0; k < g_size - 1; ++k) {
        r.emplace_back(new Buf(true, span(t.recv, 1), 70 + uint64_t(k)));
        if (round == 0) MPI_Irecv(r.back()->ptr, 1, t.recv, MPI_ANY_SOURCE, MPI_ANY_TAG, g_zc, &req[size_t(k)]);
      }
      if (round == 0) {
        REQUIRE(MPI_Waitall(int(req.size()), req.data(), st.data()) == MPI_SUCCESS);
      } else {
        for (size_t k = 0; k < req.size(); ++k)
          REQUIRE(MPI_Recv(r[k]->ptr, 1, t.recv, MPI_ANY_SOURCE, MPI_ANY_TAG, g_zc, &st[k]) == MPI_SUCCESS);
      }
      std::vector<int> seen(size_t(g_size), 0);
      for (size_t k = 0; k < req.size(); ++k) {
        const int src = st[k].MPI_SOURCE;
        REQUIRE(src > 0);
        REQUIRE(src < g_size);
        ++seen[size_t(src)];
        CHECK(st[k].MPI_TAG == tag0 + src);
        MPI_Count n = 0;
        MPI_Get_elements_x(&st[k], MPI_BYTE, &n);
        CHECK(n == packed);
        int count = 0;
        MPI_Get_count(&st[k], t.recv, &count);
        CHECK(count == 1);
        Buf ref(false, span(t.send, 1), 60 + uint64_t(src) + uint64_t(round));
        CHECK(r[k]->contents() == expected(ref.host, t.send, 1, r[k]->host, t.recv, 1));
      }
      for (int p = 1; p < g_size; ++p) CHECK(seen[size_t(p)] == 1);
    } else {
      Buf s(true, span(t.send, 1), 60 + uint64_t(g_rank) + uint64_t(round));
      MPI_Request req;
      MPI_Isend(s.ptr, 1, t.send, 0, tag0 + g_rank, g_zc, &req);
      REQUIRE(MPI_Wait(&req, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    }
    MPI_Barrier(g_zc);
  }
}

TEST_CASE("truncation: a zero-copy message, and data larger than the receive but not its staging") {
  if (g_size < 2 || g_rank > 1) {
    MPI_Barrier(g_zc);
    return;
  }
  const int peer = 1 - g_rank;
  // MPICH raises the errors of completion calls on MPI_COMM_WORLD, TEMPI on the request's
  // communicator.
  MPI_Comm_set_errhandler(g_zc, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  Types t;
  make_types(64, t);
  if (g_rank == 0) {
    Buf s(true, span(t.send, 1), 21);
    MPI_Request req;
    MPI_Isend(s.ptr, 1, t.send, peer, 8, g_zc, &req);
    CHECK(MPI_Wait(&req, MPI_STATUS_IGNORE) == MPI_SUCCESS);  // the sender completes normally
    // Eight bytes, blocking (the pack path), into a receive of four: its staging holds 48.
    Buf s8(true, 8, 22);
    CHECK(MPI_Send(s8.ptr, 8, MPI_BYTE, peer, 9, g_zc) == MPI_SUCCESS);
  } else {
    Buf r(true, 4 * 10, 23);  // ten ints: fewer than the message's 192
    MPI_Request req;
    MPI_Irecv(r.ptr, 10, MPI_INT, peer, 8, g_zc, &req);
    MPI_Status st;
    int err = MPI_Wait(&req, &st);
    int cls = 0;
    MPI_Error_class(err, &cls);
    CHECK(cls == MPI_ERR_TRUNCATE);
    Buf r4(true, 4, 24);
    err = MPI_Recv(r4.ptr, 4, MPI_BYTE, peer, 9, g_zc, &st);
    MPI_Error_class(err, &cls);
    CHECK(cls == MPI_ERR_TRUNCATE);
  }
  MPI_Comm_set_errhandler(g_zc, MPI_ERRORS_ARE_FATAL);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
  MPI_Barrier(g_zc);
}

TEST_CASE("a cancelled receive, and host messages of the control message's size") {
  Types t;
  make_types(32, t);
  {
    Buf r(true, span(t.recv, 1), 31);
    MPI_Request req;
    MPI_Irecv(r.ptr, 1, t.recv, MPI_ANY_SOURCE, 999, g_zc, &req);
    MPI_Cancel(&req);
    MPI_Status st;
    REQUIRE(MPI_Wait(&req, &st) == MPI_SUCCESS);
    int cancelled = 0;
    MPI_Test_cancelled(&st, &cancelled);
    CHECK(cancelled == 1);
    CHECK(r.contents() == r.host);
  }
  if (g_size < 2) return;
  const int peer = g_rank ^ 1;
  if (peer >= g_size) return;
  // 48 bytes from host memory into a GPU receive: data, not a control message, even when
  // it starts with TEMPI's magic number.
  for (int variant = 0; variant < 2; ++variant) {
    std::vector<uint8_t> host(tempi::kControlBytes);
    for (size_t i = 0; i < host.size(); ++i) host[i] = byte_at(41 + uint64_t(g_rank), i);
    if (variant == 1) {
      const uint64_t magic = 0x3143'5a49'504d'4554ull;
      std::memcpy(host.data(), &magic, sizeof magic);
    }
    Buf r(true, 64, 42);
    MPI_Request req;
    MPI_Irecv(r.ptr, 64, MPI_BYTE, peer, 12, g_zc, &req);
    MPI_Send(host.data(), int(host.size()), MPI_BYTE, peer, 12, g_zc);
    MPI_Status st;
    REQUIRE(MPI_Wait(&req, &st) == MPI_SUCCESS);
    int n = 0;
    MPI_Get_count(&st, MPI_BYTE, &n);
    CHECK(n == tempi::kControlBytes);
    std::vector<uint8_t> want = r.host;
    for (size_t i = 0; i < size_t(tempi::kControlBytes); ++i) want[i] = byte_at(41 + uint64_t(peer), i);
    if (variant == 1) {
      const uint64_t magic = 0x3143'5a49'504d'4554ull;
      std::memcpy(want.data(), &magic, sizeof magic);
    }
    CHECK(r.contents() == want);
  }
}

TEST_CASE("a zero-copy send, then a host send with the same tag to the same rank: in order") {
  if (g_size < 2) return;
  const int peer = g_rank ^ 1;
  if (peer >= g_size) return;
  Types t;
  make_types(700, t);
  const int packed = type_size(t.send);
  Buf s(true, span(t.send, 1), 600 + uint64_t(g_rank)), r(true, span(t.recv, 1), 610);
  Buf r16(true, 16, 620);
  MPI_Request req[3];
  MPI_Irecv(r.ptr, 1, t.recv, peer, 61, g_zc, &req[0]);
  MPI_Irecv(r16.ptr, 16, MPI_BYTE, peer, 61, g_zc, &req[1]);
  MPI_Isend(s.ptr, 1, t.send, peer, 61, g_zc, &req[2]);
  std::vector<uint8_t> host(16);
  for (size_t i = 0; i < host.size(); ++i) host[i] = byte_at(630 + uint64_t(g_rank), i);
  MPI_Request hreq;
  MPI_Isend(host.data(), 16, MPI_BYTE, peer, 61, g_zc, &hreq);  // posted after the zero-copy send
  MPI_Status st[3];
  REQUIRE(MPI_Waitall(3, req, st) == MPI_SUCCESS);
  MPI_Wait(&hreq, MPI_STATUS_IGNORE);
  MPI_Count n0 = 0, n1 = 0;
  MPI_Get_elements_x(&st[0], MPI_BYTE, &n0);
  MPI_Get_elements_x(&st[1], MPI_BYTE, &n1);
  CHECK(n0 == packed);
  CHECK(n1 == 16);
  CHECK(r.contents() == received(t, s.bytes, 600 + uint64_t(peer), r));
  std::vector<uint8_t> want(16);
  for (size_t i = 0; i < want.size(); ++i) want[i] = byte_at(630 + uint64_t(peer), i);
  CHECK(r16.contents() == want);
}

TEST_CASE("a zero-copy send cancelled before its control message left") {
  if (g_size < 2) return;
  const int peer = g_rank ^ 1;
  Types t;
  make_types(64, t);
  // Only where the send is zero-copy: the pack path may post a message at once.
  const bool here = peer < g_size && zero_copy_expected(peer, type_size(t.send));
  if (here) {
    Buf s(true, span(t.send, 1), 640);
    MPI_Request req;
    MPI_Isend(s.ptr, 1, t.send, peer, 62, g_zc, &req);
    REQUIRE(MPI_Cancel(&req) == MPI_SUCCESS);
    MPI_Status st;
    REQUIRE(MPI_Wait(&req, &st) == MPI_SUCCESS);
    int cancelled = 0;
    MPI_Test_cancelled(&st, &cancelled);
    CHECK(cancelled == 1);
  }
  MPI_Barrier(g_zc);
  if (here) {
    int pending = 1;
    MPI_Iprobe(peer, 62, g_zc, &pending, MPI_STATUS_IGNORE);  // nothing reached the peer
    CHECK(pending == 0);
  }
  MPI_Barrier(g_zc);
}

TEST_CASE("a probe that finds a zero-copy message is said and counted (the contract)") {
  if (g_size < 2) return;
  const int peer = g_rank ^ 1;
  if (peer >= g_size) return;
  Types t;
  make_types(128, t);
  const bool zc = zero_copy_expected(peer, type_size(t.send));
  Buf s(true, span(t.send, 1), 650 + uint64_t(g_rank)), r(true, span(t.recv, 1), 660);
  MPI_Request req;
  MPI_Isend(s.ptr, 1, t.send, peer, 71, g_zc, &req);
  const uint64_t before = tempi::p2p_counts().probed_controls;
  MPI_Status st;
  REQUIRE(MPI_Probe(peer, 71, g_zc, &st) == MPI_SUCCESS);
  MPI_Count n = 0;
  MPI_Get_elements_x(&st, MPI_BYTE, &n);
  CHECK(n == (zc ? tempi::kControlBytes : type_size(t.send)));
  CHECK(tempi::p2p_counts().probed_controls - before == (zc ? 1u : 0u));
  REQUIRE(MPI_Recv(r.ptr, 1, t.recv, peer, 71, g_zc, MPI_STATUS_IGNORE) == MPI_SUCCESS);
  REQUIRE(MPI_Wait(&req, MPI_STATUS_IGNORE) == MPI_SUCCESS);
  CHECK(r.contents() == received(t, s.bytes, 650 + uint64_t(peer), r));
}

TEST_CASE("send buffers freed and allocated again between messages") {
  if (g_size < 2) return;
  const int peer = g_rank ^ 1;
  if (peer >= g_size) return;
  Types t;
  make_types(512, t);
  for (uint64_t round = 0; round < 4; ++round) {
    Buf s(true, span(t.send, 1), 300 + round * 10 + uint64_t(g_rank));
    Buf r(true, span(t.recv, 1), 500 + round);
    MPI_Request req[2];
    MPI_Irecv(r.ptr, 1, t.recv, peer, 20, g_zc, &req[0]);
    MPI_Isend(s.ptr, 1, t.send, peer, 20, g_zc, &req[1]);
    REQUIRE(MPI_Waitall(2, req, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
    CHECK(r.contents() == received(t, s.bytes, 300 + round * 10 + uint64_t(peer), r));
  }
}

TEST_CASE("more send buffers in one completion than TEMPI keeps mapped: none unmapped while read") {
  // The even rank of a pair sends 80 messages, each from a send buffer of its own; the odd
  // one receives them all in one round (their control messages are there before its
  // MPI_Waitall): one batch of 80 reads, more than the 64 mappings the cache keeps, so it
  // must not unmap the first ones before the batch's GPU work has read them.
  if (g_size < 2) return;
  const int peer = g_rank ^ 1;
  if (peer >= g_size) return;
  const bool sender = g_rank % 2 == 0;
  constexpr int kMessages = 80;
  Types t;
  make_types(100, t);
  std::vector<std::unique_ptr<Buf>> bufs;
  std::vector<MPI_Request> req(kMessages);
  for (int i = 0; i < kMessages; ++i) {
    if (sender) {
      bufs.emplace_back(new Buf(true, span(t.send, 1), 1700 + uint64_t(i)));
      REQUIRE(MPI_Isend(bufs.back()->ptr, 1, t.send, peer, 80, g_zc, &req[size_t(i)]) == MPI_SUCCESS);
    } else {
      bufs.emplace_back(new Buf(true, span(t.recv, 1), 1900 + uint64_t(i)));
      REQUIRE(MPI_Irecv(bufs.back()->ptr, 1, t.recv, peer, 80, g_zc, &req[size_t(i)]) == MPI_SUCCESS);
    }
  }
  int flag = 0;
  if (sender) {
    MPI_Testall(kMessages, req.data(), &flag, MPI_STATUSES_IGNORE);  // posts the control messages
    MPI_Send(nullptr, 0, MPI_BYTE, peer, 81, g_zc);                   // after them
  } else {
    MPI_Recv(nullptr, 0, MPI_BYTE, peer, 81, g_zc, MPI_STATUS_IGNORE);
  }
  REQUIRE(MPI_Waitall(kMessages, req.data(), MPI_STATUSES_IGNORE) == MPI_SUCCESS);
  if (sender) return;
  for (int i = 0; i < kMessages; ++i) {
    INFO("message " << i);
    CHECK(bufs[size_t(i)]->contents() == received(t, span(t.send, 1), 1700 + uint64_t(i), *bufs[size_t(i)]));
  }
}

TEST_CASE("contiguous sends are read by zero-copy too, on a CUDA-aware library as on any other") {
  // A CUDA-aware library would move a contiguous GPU buffer itself, and the receiver then
  // unpack it: on a communicator with zero-copy on, the receiver's kernel writes its typed
  // object from the sender's buffer instead.
  if (g_size < 2) return;
  const int peer = g_rank ^ 1;
  if (peer >= g_size) return;
  Types t;
  make_types(4096, t);  // the receive type: blocks of 2 ints every 7
  const int ints = type_size(t.recv) / 4;
  const tempi::P2pCounts before = tempi::p2p_counts();
  Buf s(true, size_t(ints) * 4, 3000 + uint64_t(g_rank)), r(true, span(t.recv, 1), 3100);
  MPI_Request req[2];
  MPI_Irecv(r.ptr, 1, t.recv, peer, 70, g_zc, &req[0]);
  MPI_Isend(s.ptr, ints, MPI_INT, peer, 70, g_zc, &req[1]);
  REQUIRE(MPI_Waitall(2, req, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
  Buf ref(false, s.bytes, 3000 + uint64_t(peer));
  CHECK(r.contents() == expected(ref.host, MPI_INT, ints, r.host, t.recv, 1));
  CHECK(tempi::p2p_counts().reads - before.reads == uint64_t(zero_copy_expected(peer, int64_t(ints) * 4)));
}

// This process's plan blocks in shared memory (core/shared_blob.hpp names them
// /tempi-plan-<pid>-...).
int plan_blocks() {
  const std::string prefix = "tempi-plan-" + std::to_string(getpid()) + "-";
  int n = 0;
  if (DIR *d = opendir("/dev/shm")) {
    while (const dirent *e = readdir(d)) n += std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0;
    closedir(d);
  }
  return n;
}

TEST_CASE("types too large for the plan arena travel in shared-memory blocks, each published once") {
  // Six irregular indexed types of 2,500 blocks: 80 KB of runs each, 480 KB in all, where
  // the communicator's arena holds 256 KiB. Each goes to a block of its own the first time
  // it is sent, and every message is still read by zero-copy.
  if (g_size < 2) return;
  const int peer = g_rank ^ 1;
  if (peer >= g_size) return;
  constexpr int kTypes = 6, kBlocks = 2500;
  std::vector<MPI_Datatype> types(kTypes);
  std::vector<int> ints(kTypes, 0);
  for (int k = 0; k < kTypes; ++k) {
    std::vector<int> lens(kBlocks), disps(kBlocks);
    for (int i = 0, at = 0; i < kBlocks; ++i) {
      lens[size_t(i)] = 1 + (i * 7 + k) % 5;
      disps[size_t(i)] = at;
      at += lens[size_t(i)] + 1 + i % 3;
      ints[size_t(k)] += lens[size_t(i)];
    }
    MPI_Type_indexed(kBlocks, lens.data(), disps.data(), MPI_INT, &types[size_t(k)]);
    MPI_Type_commit(&types[size_t(k)]);
  }
  const int blocks_before = plan_blocks();
  const tempi::P2pCounts before = tempi::p2p_counts();
  int expected_reads = 0;
  for (uint64_t round = 0; round < 2; ++round)
    for (int k = 0; k < kTypes; ++k) {
      const MPI_Datatype t = types[size_t(k)];
      Buf s(true, span(t, 1), 1000 + round * 100 + uint64_t(k * 2 + g_rank));
      Buf r(true, size_t(ints[size_t(k)]) * 4, 2000 + round);
      MPI_Request req[2];
      MPI_Irecv(r.ptr, ints[size_t(k)], MPI_INT, peer, 60 + k, g_zc, &req[0]);
      MPI_Isend(s.ptr, 1, t, peer, 60 + k, g_zc, &req[1]);
      REQUIRE(MPI_Waitall(2, req, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
      Buf ref(false, s.bytes, 1000 + round * 100 + uint64_t(k * 2 + peer));
      INFO("type " << k << ", round " << round);
      CHECK(r.contents() == expected(ref.host, t, 1, r.host, MPI_INT, ints[size_t(k)]));
      expected_reads += zero_copy_expected(peer, int64_t(ints[size_t(k)]) * 4);
    }
  CHECK(tempi::p2p_counts().reads - before.reads == uint64_t(expected_reads));
  CHECK(plan_blocks() - blocks_before == (expected_reads > 0 ? kTypes : 0));
  for (MPI_Datatype &t : types) MPI_Type_free(&t);
}

// On a CUDA-aware library a receive whose message is large enough for the library to move
// in device memory (the device method) stages in host memory where it expects a control
// message, which the library then writes with a plain copy; it expects one where the last
// large message from that rank (from any rank, for MPI_ANY_SOURCE) was one, or none came yet.
// Data that arrives instead (the send of MPI_Sendrecv is packed) is moved from there.
TEST_CASE("receives stage where the message they expect lands: a control message in host memory") {
  if (g_size < 2) return;
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);  // a communicator whose guesses start fresh
  int on = 0;
  REQUIRE(TEMPIX_Comm_enable_zero_copy(comm, 1, &on) == MPI_SUCCESS);
  const int peer = g_rank ^ 1;
  if (peer >= g_size) {
    MPI_Comm_free(&comm);
    return;
  }
  Types t;
  make_types(16384, t);  // 196,608 packed bytes: the device method on a CUDA-aware library
  const int64_t packed = type_size(t.send);
  // Where the guess decides the staging: TEMPI chooses the method (no TEMPI_METHOD, no profile).
  const bool guesses = on && tempi::mpi_is_cuda_aware() && tempi::requested_method() == tempi::Method::Auto &&
                       !tempi::active_profile() && packed >= zero_copy_min();
  Buf s(true, span(t.send, 1), 700 + uint64_t(g_rank));
  int step = 0;
  // One message each way with `partner`, by Isend (zero-copy to a rank of the node, else
  // packed) or by MPI_Sendrecv (packed: data), received by MPI_Recv / MPI_Sendrecv from
  // `partner` or MPI_ANY_SOURCE; checks the receives the guess staged in host memory and
  // the messages read by zero-copy.
  auto exchange = [&](int partner, bool by_isend, bool any, bool staged_for_control) {
    ++step;
    Buf r(true, span(t.recv, 1), 710 + uint64_t(step * 2 + g_rank));
    const tempi::P2pCounts before = tempi::p2p_counts();
    const int source = any ? MPI_ANY_SOURCE : partner;
    MPI_Status st;
    if (by_isend) {
      MPI_Request req;
      MPI_Isend(s.ptr, 1, t.send, partner, 80 + step, comm, &req);
      REQUIRE(MPI_Recv(r.ptr, 1, t.recv, source, 80 + step, comm, &st) == MPI_SUCCESS);
      REQUIRE(MPI_Wait(&req, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    } else {
      REQUIRE(MPI_Sendrecv(s.ptr, 1, t.send, partner, 80 + step, r.ptr, 1, t.recv, source, 80 + step, comm, &st) ==
              MPI_SUCCESS);
    }
    const tempi::P2pCounts after = tempi::p2p_counts();
    INFO("step " << step << (by_isend ? ": Isend" : ": Sendrecv") << " with rank " << partner);
    CHECK(st.MPI_SOURCE == partner);
    CHECK(after.staged_for_control - before.staged_for_control == uint64_t(guesses && staged_for_control));
    CHECK(after.reads - before.reads == uint64_t(on && by_isend && zero_copy_expected(partner, packed)));
    CHECK(r.contents() == received(t, s.bytes, 700 + uint64_t(partner), r));
  };
  exchange(peer, true, false, true);    // no message yet: a control message expected, and right
  exchange(peer, false, false, true);   // expected, but data came (into host staging)
  exchange(peer, false, false, false);  // data expected: device staging
  exchange(peer, true, false, false);   // a control message into device staging, read from there
  exchange(peer, true, false, true);    // expected again
  exchange(peer, true, true, true);     // any source: the last from any rank was one
  exchange(peer, false, true, true);    // data again
  exchange(peer, true, true, false);
  // From a rank on another node: data only, expected from it by name; from any rank, as the
  // last message from any rank says.
  const int far = g_rank ^ 2;
  if (g_size >= 4 && !same_node(far)) {
    exchange(far, true, false, false);
    exchange(far, true, true, true);   // the last from any rank (the node peer's) was a control message
    exchange(far, true, true, false);  // ... and now data, from the other node
    exchange(peer, true, true, false);
    exchange(far, true, true, true);
  }
  MPI_Comm_free(&comm);
}

// Switching zero-copy on one communicator leaves the messages of others alone: a receive in
// flight on g_zc, whose message is sent only after the switch, must not hold the switch up.
TEST_CASE("switching zero-copy on a communicator while a message on another one is in flight") {
  MPI_Comm other;
  MPI_Comm_dup(MPI_COMM_WORLD, &other);
  const int peer = g_rank ^ 1;
  const bool paired = peer < g_size;
  Types t;
  make_types(700, t);
  Buf s(true, span(t.send, 1), 1100 + uint64_t(g_rank)), r(true, span(t.recv, 1), 1110);
  MPI_Request req = MPI_REQUEST_NULL;
  if (paired && g_rank % 2 == 0) MPI_Irecv(r.ptr, 1, t.recv, peer, 71, g_zc, &req);
  int on = 0;
  REQUIRE(TEMPIX_Comm_enable_zero_copy(other, 1, &on) == MPI_SUCCESS);
  CHECK(on == g_on);
  if (paired && g_rank % 2 == 1) MPI_Isend(s.ptr, 1, t.send, peer, 71, g_zc, &req);
  REQUIRE(MPI_Wait(&req, MPI_STATUS_IGNORE) == MPI_SUCCESS);
  REQUIRE(TEMPIX_Comm_enable_zero_copy(other, 0, &on) == MPI_SUCCESS);
  CHECK(on == 0);
  if (paired && g_rank % 2 == 0) {
    CHECK(r.contents() == received(t, s.bytes, 1100 + uint64_t(peer), r));
  }
  MPI_Comm_free(&other);
}

// A GPU receive posted, or a persistent one made, before zero-copy went on could not tell a
// control message from data: the switch is refused on every rank (the contract's item 5),
// the receive completes as before, and the switch succeeds once none is left.
TEST_CASE("switching zero-copy on is refused while a receive from before it is pending") {
  if (g_size < 2) return;
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  const int peer = g_rank ^ 1;
  const bool paired = peer < g_size;
  Types t;
  make_types(700, t);
  Buf s(true, span(t.send, 1), 1200 + uint64_t(g_rank)), r(true, span(t.recv, 1), 1210);
  // g_on: whether zero-copy can go on at all here (TEMPI_IPC=off: the call succeeds, off).
  auto enable_class = [&]() {
    int on = -1;
    const int err = TEMPIX_Comm_enable_zero_copy(comm, 1, &on);
    int cls = MPI_SUCCESS;
    MPI_Error_class(err, &cls);
    CHECK(on == (err == MPI_SUCCESS ? g_on : 0));
    return cls;
  };
  MPI_Request req = MPI_REQUEST_NULL;
  if (paired && g_rank % 2 == 0) MPI_Irecv(r.ptr, 1, t.recv, peer, 72, comm, &req);
  CHECK(enable_class() == (g_on ? MPI_ERR_PENDING : MPI_SUCCESS));
  if (g_on) {
    if (paired && g_rank % 2 == 1) MPI_Isend(s.ptr, 1, t.send, peer, 72, comm, &req);  // the pack path
    REQUIRE(MPI_Wait(&req, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    if (paired && g_rank % 2 == 0) {
      CHECK(r.contents() == received(t, s.bytes, 1200 + uint64_t(peer), r));
    }
    MPI_Request persistent = MPI_REQUEST_NULL;
    if (paired && g_rank % 2 == 0) MPI_Recv_init(r.ptr, 1, t.recv, peer, 73, comm, &persistent);
    CHECK(enable_class() == MPI_ERR_PENDING);
    if (persistent != MPI_REQUEST_NULL) MPI_Request_free(&persistent);
    CHECK(enable_class() == MPI_SUCCESS);
  } else if (paired) {
    if (g_rank % 2 == 1) MPI_Isend(s.ptr, 1, t.send, peer, 72, comm, &req);
    REQUIRE(MPI_Wait(&req, MPI_STATUS_IGNORE) == MPI_SUCCESS);
  }
  MPI_Comm_free(&comm);
}

// MPI_Request_get_status finishes a completed receive early (its data must be in place);
// the size it reports, and that of the wait that ends the request, are the application's,
// not the control message's.
TEST_CASE("MPI_Request_get_status of a persistent receive that got a zero-copy message") {
  if (g_size < 2) return;
  const int peer = g_rank ^ 1;
  if (peer >= g_size) return;
  Types t;
  make_types(700, t);
  const int packed = type_size(t.send);
  Buf s(true, span(t.send, 1), 1300 + uint64_t(g_rank)), r(true, span(t.recv, 1), 1310);
  MPI_Request rreq, sreq;
  MPI_Recv_init(r.ptr, 1, t.recv, peer, 74, g_zc, &rreq);
  for (int round = 0; round < 2; ++round) {
    INFO("start " << round);
    MPI_Start(&rreq);
    MPI_Isend(s.ptr, 1, t.send, peer, 74, g_zc, &sreq);
    MPI_Status early, late;
    for (int flag = 0; !flag;) REQUIRE(MPI_Request_get_status(rreq, &flag, &early) == MPI_SUCCESS);
    int count = -1;
    MPI_Get_count(&early, MPI_INT, &count);
    CHECK(count == packed / 4);
    for (int flag = 0; !flag;) REQUIRE(MPI_Request_get_status(rreq, &flag, &early) == MPI_SUCCESS);  // asked again
    MPI_Get_count(&early, MPI_INT, &count);
    CHECK(count == packed / 4);
    REQUIRE(MPI_Wait(&rreq, &late) == MPI_SUCCESS);
    MPI_Get_count(&late, MPI_INT, &count);
    CHECK(count == packed / 4);
    CHECK(late.MPI_SOURCE == peer);
    REQUIRE(MPI_Wait(&sreq, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    CHECK(r.contents() == received(t, s.bytes, 1300 + uint64_t(peer), r));
  }
  MPI_Request_free(&rreq);
}

#if defined(P2P_REAL_GPU)
TEST_CASE("the send buffer's contents land on the legacy default stream after the call") {
  if (g_size < 2) return;
  const int peer = g_rank ^ 1;
  if (peer >= g_size) return;
  Types t;
  make_types(1 << 16, t);
  Buf s(true, span(t.send, 1), 700 + uint64_t(g_rank)), fresh(true, s.bytes, 800 + uint64_t(g_rank));
  Buf r(true, span(t.recv, 1), 900);
  MPI_Request req[2];
  MPI_Irecv(r.ptr, 1, t.recv, peer, 30, g_zc, &req[0]);
  REQUIRE(copy_on_default_stream_after(s.ptr, fresh.ptr, s.bytes, 20.0));
  MPI_Isend(s.ptr, 1, t.send, peer, 30, g_zc, &req[1]);
  REQUIRE(MPI_Waitall(2, req, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
  CHECK(r.contents() == received(t, s.bytes, 800 + uint64_t(peer), r));
}
#endif

TEST_CASE("threads exchanging on their own tags") {
  int provided = 0;
  MPI_Query_thread(&provided);
  if (provided < MPI_THREAD_MULTIPLE || g_size < 2) return;
  const int peer = g_rank ^ 1;
  if (peer >= g_size) return;
  Types t;
  make_types(300, t);
  constexpr int kThreads = 4, kRounds = 8;
  std::vector<int> wrong(kThreads, 0);
  std::vector<std::thread> threads;
  for (int k = 0; k < kThreads; ++k)
    threads.emplace_back([&, k] {
      for (int round = 0; round < kRounds; ++round) {
        const uint64_t seed = 1000 + uint64_t(k * 100 + round * 2);
        Buf s(true, span(t.send, 1), seed + uint64_t(g_rank)), r(true, span(t.recv, 1), seed + 7);
        MPI_Request req[2];
        MPI_Irecv(r.ptr, 1, t.recv, peer, 50 + k, g_zc, &req[0]);
        MPI_Isend(s.ptr, 1, t.send, peer, 50 + k, g_zc, &req[1]);
        MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
        Buf ref(false, s.bytes, seed + uint64_t(peer));
        if (r.contents() != expected(ref.host, t.send, 1, r.host, t.recv, 1)) ++wrong[size_t(k)];
      }
    });
  for (auto &th : threads) th.join();
  for (int k = 0; k < kThreads; ++k) CHECK(wrong[size_t(k)] == 0);
}

// MPI's order between one thread's sends to one rank and tag, while another thread's
// completion calls post queued control messages (whichever thread posts, in order).
TEST_CASE("one thread's zero-copy sends keep their order while another thread posts them") {
  int provided = 0;
  MPI_Query_thread(&provided);
  if (provided < MPI_THREAD_MULTIPLE || g_size < 2) return;
  const int peer = g_rank ^ 1;
  if (peer >= g_size) return;
  Types t;
  make_types(300, t);
  constexpr int kSends = 32;
  std::vector<std::unique_ptr<Buf>> bufs;
  std::vector<MPI_Request> req(kSends, MPI_REQUEST_NULL);
  const bool sender = g_rank % 2 == 0;
  for (int i = 0; i < kSends; ++i)
    bufs.emplace_back(sender ? new Buf(true, span(t.send, 1), 1400 + uint64_t(i))
                             : new Buf(true, span(t.recv, 1), 1500 + uint64_t(i)));
  if (sender) {
    std::atomic<bool> stop{false};
    std::thread poster([&] {  // completion calls post every queued control message
      MPI_Request idle;
      int dummy = 0;
      MPI_Irecv(&dummy, 1, MPI_INT, peer, 76, g_zc, &idle);
      while (!stop.load()) {
        int flag = 0;
        MPI_Test(&idle, &flag, MPI_STATUS_IGNORE);
      }
      MPI_Cancel(&idle);
      MPI_Wait(&idle, MPI_STATUS_IGNORE);
    });
    for (int i = 0; i < kSends; ++i) MPI_Isend(bufs[size_t(i)]->ptr, 1, t.send, peer, 75, g_zc, &req[size_t(i)]);
    REQUIRE(MPI_Waitall(kSends, req.data(), MPI_STATUSES_IGNORE) == MPI_SUCCESS);
    stop = true;
    poster.join();
  } else {
    for (int i = 0; i < kSends; ++i) MPI_Irecv(bufs[size_t(i)]->ptr, 1, t.recv, peer, 75, g_zc, &req[size_t(i)]);
    REQUIRE(MPI_Waitall(kSends, req.data(), MPI_STATUSES_IGNORE) == MPI_SUCCESS);
    for (int i = 0; i < kSends; ++i) {
      INFO("receive " << i);
      Buf ref(false, span(t.send, 1), 1400 + uint64_t(i));
      CHECK(bufs[size_t(i)]->contents() == expected(ref.host, t.send, 1, bufs[size_t(i)]->host, t.recv, 1));
    }
  }
}

// The last act before MPI_Finalize: rank pairs send one zero-copy message, and the sender
// frees its request at once (MPI_Request_free), so only MPI_Finalize is left to post its
// control message and wait for the receiver's read. Returns 1 where the bytes came wrong.
// The sender's buffer outlives MPI_Finalize, as MPI asks of a freed send (g_freed_send).
void *g_freed_send = nullptr;
int freed_send_before_finalize(MPI_Comm comm) {
  const int peer = g_rank ^ 1;
  if (peer >= g_size) return 0;
  constexpr int kInts = 4096;
  std::vector<uint8_t> want(kInts * sizeof(int));
  for (size_t i = 0; i < want.size(); ++i) want[i] = byte_at(1600 + uint64_t(std::min(g_rank, peer)), i);
  tempi::Backend &b = tempi::gpu_backend();
  void *dev = nullptr;
  if (b.allocate_device(want.size(), &dev) != tempi::Status::Ok) return 1;
  if (g_rank % 2 == 0) {
    g_freed_send = dev;
    if (b.copy(dev, want.data(), want.size()) != tempi::Status::Ok) return 1;
    MPI_Request req;
    if (MPI_Isend(dev, kInts, MPI_INT, peer, 77, comm, &req) != MPI_SUCCESS) return 1;
    return MPI_Request_free(&req) == MPI_SUCCESS ? 0 : 1;
  }
  std::vector<uint8_t> got(want.size());
  const bool ok = MPI_Recv(dev, kInts, MPI_INT, peer, 77, comm, MPI_STATUS_IGNORE) == MPI_SUCCESS &&
                  b.copy(got.data(), dev, got.size()) == tempi::Status::Ok && got == want;
  b.free_device(dev);
  if (!ok) std::printf("rank %d: the message of a send freed before MPI_Finalize came wrong\n", g_rank);
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char **argv) {
#if defined(P2P_REAL_GPU)
  tempi::tools::select_gpu_before_mpi_init();
#endif
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
#if defined(P2P_REAL_GPU)
  if (!tempi::gpu_backend().has_gpu()) {
    if (g_rank == 0) std::printf("SKIP: no usable GPU\n");
    MPI_Finalize();
    return 77;
  }
#endif
  MPI_Comm_dup(MPI_COMM_WORLD, &g_zc);
  MPI_Comm last;  // for the last act: not freed, since MPI_Comm_free would post the freed send
  MPI_Comm_dup(MPI_COMM_WORLD, &last);
  int last_on = 0;
  if (TEMPIX_Comm_enable_zero_copy(g_zc, 1, &g_on) != MPI_SUCCESS ||
      TEMPIX_Comm_enable_zero_copy(last, 1, &last_on) != MPI_SUCCESS) {
    std::printf("TEMPIX_Comm_enable_zero_copy failed\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  int result = Catch::Session().run(argc, argv);
  MPI_Comm_free(&g_zc);
  int worst = 0;
  MPI_Allreduce(&result, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  worst = std::max(worst, freed_send_before_finalize(last));
  MPI_Finalize();
  if (const int left = plan_blocks()) {  // MPI_Finalize removes them
    std::printf("rank %d: %d plan blocks left in /dev/shm after MPI_Finalize\n", g_rank, left);
    worst = 1;
  }
  return worst;
}
