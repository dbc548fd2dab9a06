// Zero-copy collectives (pmpi/zero_copy/zero_copy.hpp): blocking MPI_Alltoallw, MPI_Alltoallv,
// MPI_Neighbor_alltoallw and the calls with one count for every peer (MPI_Alltoall,
// MPI_Allgather(v), MPI_Neighbor_alltoall, MPI_Neighbor_allgather(v)) on GPU buffers, byte
// for byte against the MPI library's own call
// on host copies of the same data (PMPI_ on host memory), and counted: blocks between
// GPU buffers of ranks on one node must be moved by zero-copy (unless TEMPI_IPC=off), the
// others by the pack path, in the same call. Covers repeated calls with new contents each
// time, a send buffer freed and allocated again between calls (a stale mapping would
// deliver the old bytes), host and GPU buffers mixed across ranks, duplicate graph edges
// and duplicate Cartesian neighbours, "nodes" smaller than the machine
// (TEMPI_IPC_RANKS_PER_NODE), so that zero-copy and other-node peers mix in one call, and
// send buffers that a receiver cannot map (the pack path for those pairs).
// Built on the emulated backend (mpi suite: shared memory files stand in for CUDA IPC) and
// with P2P_REAL_GPU on real GPUs (gpu suite; exit 77 without one).
#define CATCH_CONFIG_RUNNER
#include <mpi.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend.hpp"
#include "zero_copy_support.hpp"
#include "zero_copy/zero_copy.hpp"
#if defined(P2P_REAL_GPU)
#include "gpu_select.hpp"
#else
#include "emulated_faults.hpp"
#endif

namespace {

int g_rank = 0, g_size = 1;

using zero_copy_test::Buf;
using zero_copy_test::byte_at;

bool same_node(int r) { return zero_copy_test::same_node(r, g_rank); }
bool ipc_on() {
  const char *v = std::getenv("TEMPI_IPC");
  return !v || (std::strcmp(v, "off") && std::strcmp(v, "0"));
}

// Strided types of the same signature (n floats): a vector with a gap, and contiguous.
struct Types {
  MPI_Datatype strided, dense;
  Types(int n) {
    MPI_Type_vector(n, 1, 3, MPI_FLOAT, &strided);
    MPI_Type_commit(&strided);
    MPI_Type_contiguous(n, MPI_FLOAT, &dense);
    MPI_Type_commit(&dense);
  }
  ~Types() {
    MPI_Type_free(&strided);
    MPI_Type_free(&dense);
  }
};

constexpr int kFloats = 37;
constexpr size_t kStridedBytes = size_t(kFloats - 1) * 3 * 4 + 4;

// One MPI_Alltoallw: rank r sends its strided block for peer p at p * slot, receives each
// peer's block densely. `sgpu`/`rgpu` per rank; `unmapped`: the peer whose send buffer
// this rank cannot map (its block takes the pack path). Returns the number of peer blocks
// that must move by zero-copy at this rank (as receiver).
int alltoallw_round(uint64_t seed, bool sgpu, bool rgpu, bool peers_sgpu, Buf *reuse_send = nullptr,
                    int unmapped = -1) {
  Types t(kFloats);
  const size_t slot = kStridedBytes + 64;
  Buf own_send(sgpu, slot * size_t(g_size), seed * 131 + uint64_t(g_rank));
  Buf &send = reuse_send ? *reuse_send : own_send;
  Buf recv(rgpu, size_t(kFloats) * 4 * size_t(g_size) + 96, seed * 137 + uint64_t(g_rank));
  const size_t n = static_cast<size_t>(g_size);
  std::vector<int> counts(n, 1), sd(n), rd(n);
  std::vector<MPI_Datatype> st(size_t(g_size), t.strided), rt(size_t(g_size), t.dense);
  for (int p = 0; p < g_size; ++p) {
    sd[size_t(p)] = int(slot) * p;
    rd[size_t(p)] = 48 + kFloats * 4 * ((p + g_rank) % g_size);  // a shuffled order
  }
  std::vector<uint8_t> ref_recv = recv.host;
  REQUIRE(PMPI_Alltoallw(send.host.data(), counts.data(), sd.data(), st.data(), ref_recv.data(), counts.data(),
                         rd.data(), rt.data(), MPI_COMM_WORLD) == MPI_SUCCESS);
  const tempi::ZeroCopyCounts before = tempi::zero_copy_counts();
  REQUIRE(MPI_Alltoallw(send.ptr, counts.data(), sd.data(), st.data(), recv.ptr, counts.data(), rd.data(), rt.data(),
                        MPI_COMM_WORLD) == MPI_SUCCESS);
  const tempi::ZeroCopyCounts after = tempi::zero_copy_counts();
  CHECK(recv.contents() == ref_recv);
  CHECK(send.contents() == send.host);
  int expect_peers = 0, expect_self = 0;
  if (ipc_on() && rgpu) {
    expect_self = sgpu ? 1 : 0;
    for (int p = 0; p < g_size; ++p)
      if (p != g_rank && p != unmapped && same_node(p) && peers_sgpu) ++expect_peers;
  }
  CHECK(after.peer_blocks - before.peer_blocks == uint64_t(expect_peers));
  CHECK(after.self_blocks - before.self_blocks == uint64_t(expect_self));
  return expect_peers;
}

}  // namespace

// First in the file, before TEMPI maps anything in this process.
TEST_CASE("a peer's send buffer that this process cannot map (a CUDA-aware library's stale mapping) takes the pack path",
          "[zero-copy]") {
  // Where CUDA refuses TEMPI a mapping of the next rank's send buffer, that block must take
  // the pack path at both ends, exactly, call after call, and the others stay zero-copy.
  tempi::Backend &b = tempi::gpu_backend();
  const size_t slot = kStridedBytes + 64;
  std::unique_ptr<Buf> send;
  const int next = (g_rank + 1) % g_size;
  zero_copy_test::StaleLibraryMapping stale(g_rank, g_size, same_node(next), slot * size_t(g_size),
                                            900 + uint64_t(g_rank), send);
  if (stale.held && !stale.refused)
    WARN("the next rank's new buffer got another address: this rank's mapping of it is not refused");
  const int unmapped = stale.refused && ipc_on() ? next : -1;
  const uint64_t mapped = tempi::zero_copy_counts().mappings;
  for (int round = 0; round < 3; ++round) {  // the first refusal, then the remembered one
    for (size_t i = 0; i < send->bytes; ++i) send->host[i] = byte_at(uint64_t(910 + round * 7 + g_rank), i);
    REQUIRE(b.copy(send->ptr, send->host.data(), send->bytes) == tempi::Status::Ok);
    MPI_Barrier(MPI_COMM_WORLD);
    alltoallw_round(uint64_t(920 + round), true, true, true, send.get(), unmapped);
  }
  int peers_mapped = 0;
  for (int p = 0; p < g_size; ++p) peers_mapped += p != g_rank && p != unmapped && same_node(p) && ipc_on();
  CHECK(tempi::zero_copy_counts().mappings - mapped == uint64_t(peers_mapped));
#if MPI_VERSION >= 4
  // A persistent collective decides its pairs once, at init: the same pair takes the pack
  // path at every start.
  Types t(kFloats);
  const size_t n = static_cast<size_t>(g_size);
  Buf recv(true, size_t(kFloats) * 4 * n + 96, 930 + uint64_t(g_rank));
  std::vector<int> counts(n, 1), sd(n), rd(n);
  std::vector<MPI_Datatype> st(n, t.strided), rt(n, t.dense);
  for (int p = 0; p < g_size; ++p) {
    sd[size_t(p)] = int(slot) * p;
    rd[size_t(p)] = 48 + kFloats * 4 * p;
  }
  MPI_Request req = MPI_REQUEST_NULL;
  REQUIRE(MPI_Alltoallw_init(send->ptr, counts.data(), sd.data(), st.data(), recv.ptr, counts.data(), rd.data(),
                             rt.data(), MPI_COMM_WORLD, MPI_INFO_NULL, &req) == MPI_SUCCESS);
  for (int start = 0; start < 3; ++start) {
    for (size_t i = 0; i < send->bytes; ++i) send->host[i] = byte_at(uint64_t(940 + start * 5 + g_rank), i);
    REQUIRE(b.copy(send->ptr, send->host.data(), send->bytes) == tempi::Status::Ok);
    std::vector<uint8_t> ref = recv.host;
    REQUIRE(PMPI_Alltoallw(send->host.data(), counts.data(), sd.data(), st.data(), ref.data(), counts.data(),
                           rd.data(), rt.data(), MPI_COMM_WORLD) == MPI_SUCCESS);
    const tempi::ZeroCopyCounts before = tempi::zero_copy_counts();
    REQUIRE(MPI_Start(&req) == MPI_SUCCESS);
    REQUIRE(MPI_Wait(&req, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    CHECK(recv.contents() == ref);
    CHECK(tempi::zero_copy_counts().peer_blocks - before.peer_blocks == uint64_t(peers_mapped));
  }
  REQUIRE(MPI_Request_free(&req) == MPI_SUCCESS);
#endif
}

TEST_CASE("MPI_Alltoallw between GPU buffers: zero-copy on the node, the pack path elsewhere", "[zero-copy]") {
  for (int round = 0; round < 3; ++round) alltoallw_round(uint64_t(round), true, true, true);
}

TEST_CASE("100 calls with new contents each time, one send buffer", "[zero-copy]") {
  Types t(kFloats);
  const size_t slot = kStridedBytes + 64;
  Buf send(true, slot * size_t(g_size), 7);
  const uint64_t mapped = tempi::zero_copy_counts().mappings;
  for (int call = 0; call < 100; ++call) {
    for (size_t i = 0; i < send.bytes; ++i) send.host[i] = byte_at(uint64_t(1000 + call * 97 + g_rank), i);
    REQUIRE(tempi::gpu_backend().copy(send.ptr, send.host.data(), send.bytes) == tempi::Status::Ok);
    MPI_Barrier(MPI_COMM_WORLD);  // peers read the new contents: written before anyone's call
    alltoallw_round(uint64_t(call), true, true, true, &send);
  }
  // One mapping per peer's allocation, opened once (the peers' receive buffers are not read).
  int peers_on_node = 0;
  for (int p = 0; p < g_size; ++p) peers_on_node += p != g_rank && same_node(p) && ipc_on();
  CHECK(tempi::zero_copy_counts().mappings - mapped == uint64_t(peers_on_node));
}

#if defined(P2P_REAL_GPU)
// tests/gpu/default_stream_writer.cu
bool copy_on_default_stream_after(void *dst, const void *src, size_t bytes, double ms);

TEST_CASE("buffers filled on the legacy default stream just before the call are read as filled", "[zero-copy]") {
  // The application fills both buffers with copies it leaves on the legacy default stream,
  // behind a kernel that holds that stream for 20 ms, and calls MPI_Alltoallw without
  // synchronizing. TEMPI's streams follow that stream; peers that read the send buffer in
  // place from another process must wait for it too, or they read the old contents.
  Types t(kFloats);
  const size_t slot = kStridedBytes + 64, n = static_cast<size_t>(g_size);
  const size_t rbytes = size_t(kFloats) * 4 * n + 96;
  Buf send(true, slot * n, 31 + uint64_t(g_rank)), recv(true, rbytes, 33 + uint64_t(g_rank));
  Buf fresh_send(true, slot * n, 35 + uint64_t(g_rank)), fresh_recv(true, rbytes, 37 + uint64_t(g_rank));
  std::vector<int> counts(n, 1), sd(n), rd(n);
  std::vector<MPI_Datatype> st(n, t.strided), rt(n, t.dense);
  for (int p = 0; p < g_size; ++p) {
    sd[size_t(p)] = int(slot) * p;
    rd[size_t(p)] = 48 + kFloats * 4 * p;
  }
  std::vector<uint8_t> ref = fresh_recv.host;
  REQUIRE(PMPI_Alltoallw(fresh_send.host.data(), counts.data(), sd.data(), st.data(), ref.data(), counts.data(),
                         rd.data(), rt.data(), MPI_COMM_WORLD) == MPI_SUCCESS);
  const tempi::ZeroCopyCounts before = tempi::zero_copy_counts();
  REQUIRE(copy_on_default_stream_after(send.ptr, fresh_send.ptr, send.bytes, 20.0));
  REQUIRE(copy_on_default_stream_after(recv.ptr, fresh_recv.ptr, recv.bytes, 0.0));
  REQUIRE(MPI_Alltoallw(send.ptr, counts.data(), sd.data(), st.data(), recv.ptr, counts.data(), rd.data(), rt.data(),
                        MPI_COMM_WORLD) == MPI_SUCCESS);
  CHECK(recv.contents() == ref);
  int expect = 0;
  for (int p = 0; p < g_size; ++p) expect += p != g_rank && same_node(p) && ipc_on();
  CHECK(tempi::zero_copy_counts().peer_blocks - before.peer_blocks == uint64_t(expect));
}
#endif

TEST_CASE("a send buffer freed and allocated again between calls is never read through a stale mapping",
          "[zero-copy]") {
  for (int round = 0; round < 6; ++round) {
    // A new allocation each round, often at the address of the last one, with new contents.
    alltoallw_round(uint64_t(500 + round), true, true, true);
  }
}

TEST_CASE("host and GPU buffers mixed across ranks and sides", "[zero-copy]") {
  // Rank 0 sends from host memory: nobody reads it by zero-copy, everything stays exact.
  const bool sgpu = g_rank != 0;
  // Receivers get zero-copy blocks only from GPU senders: count them here.
  Types t(kFloats);
  const size_t slot = kStridedBytes + 64;
  Buf send(sgpu, slot * size_t(g_size), 11 + uint64_t(g_rank));
  Buf recv(g_rank != 1, size_t(kFloats) * 4 * size_t(g_size) + 96, 13 + uint64_t(g_rank));
  const size_t n = static_cast<size_t>(g_size);
  std::vector<int> counts(n, 1), sd(n), rd(n);
  std::vector<MPI_Datatype> st(size_t(g_size), t.strided), rt(size_t(g_size), t.dense);
  for (int p = 0; p < g_size; ++p) {
    sd[size_t(p)] = int(slot) * p;
    rd[size_t(p)] = 48 + kFloats * 4 * p;
  }
  std::vector<uint8_t> ref = recv.host;
  REQUIRE(PMPI_Alltoallw(send.host.data(), counts.data(), sd.data(), st.data(), ref.data(), counts.data(), rd.data(),
                         rt.data(), MPI_COMM_WORLD) == MPI_SUCCESS);
  const tempi::ZeroCopyCounts before = tempi::zero_copy_counts();
  REQUIRE(MPI_Alltoallw(send.ptr, counts.data(), sd.data(), st.data(), recv.ptr, counts.data(), rd.data(), rt.data(),
                        MPI_COMM_WORLD) == MPI_SUCCESS);
  CHECK(recv.contents() == ref);
  int expect = 0;
  if (ipc_on() && g_rank != 1)
    for (int p = 1; p < g_size; ++p) expect += p != g_rank && same_node(p);
  CHECK(tempi::zero_copy_counts().peer_blocks - before.peer_blocks == uint64_t(expect));
}

// The first exchange collective on a communicator makes its node share (collective) at every
// rank alike, whatever each rank's buffers: here an in-place MPI_Allgather, rank 0's receive
// buffer on the GPU and the others' in host memory, must stay one MPI_Allgather everywhere.
TEST_CASE("the first call on a communicator: in place, GPU memory at one rank only", "[zero-copy]") {
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  constexpr int kInts = 96;
  const size_t bytes = size_t(kInts) * 4 * size_t(g_size);
  Buf all(g_rank == 0, bytes, 17);
  std::vector<uint8_t> want = all.host;  // every rank's block holds that rank's own bytes
  for (int p = 0; p < g_size; ++p)
    for (size_t i = 0; i < size_t(kInts) * 4; ++i) want[size_t(p) * kInts * 4 + i] = byte_at(19 + uint64_t(p), i);
  std::vector<uint8_t> mine(want.begin() + std::ptrdiff_t(size_t(g_rank) * kInts * 4),
                            want.begin() + std::ptrdiff_t(size_t(g_rank + 1) * kInts * 4));
  // This rank's own block in place, uploaded whole where the buffer is on the GPU.
  std::vector<uint8_t> start = all.host;
  std::copy(mine.begin(), mine.end(), start.begin() + std::ptrdiff_t(size_t(g_rank) * kInts * 4));
  if (all.gpu) REQUIRE(tempi::gpu_backend().copy(all.ptr, start.data(), start.size()) == tempi::Status::Ok);
  else std::memcpy(all.ptr, start.data(), start.size());
  REQUIRE(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all.ptr, kInts, MPI_INT, comm) == MPI_SUCCESS);
  CHECK(all.contents() == want);
  MPI_Comm_free(&comm);
}

TEST_CASE("MPI_Alltoallv of a strided type between GPU buffers", "[zero-copy]") {
  Types t(kFloats);
  Buf send(true, kStridedBytes * size_t(g_size) * 2, 21 + uint64_t(g_rank));
  Buf recv(true, size_t(kFloats) * 4 * size_t(g_size) * 2, 23 + uint64_t(g_rank));
  const size_t n = static_cast<size_t>(g_size);
  std::vector<int> sc(n), rc(n), sd(n), rd(n);
  for (int p = 0; p < g_size; ++p) {
    sc[size_t(p)] = 1 + (g_rank + p) % 2;  // symmetric: what r sends p is what p expects from r
    rc[size_t(p)] = 1 + (g_rank + p) % 2;
    sd[size_t(p)] = 2 * p;  // in extents of the vector type
    rd[size_t(p)] = 2 * p;
  }
  std::vector<uint8_t> ref = recv.host;
  REQUIRE(PMPI_Alltoallv(send.host.data(), sc.data(), sd.data(), t.strided, ref.data(), rc.data(), rd.data(), t.dense,
                         MPI_COMM_WORLD) == MPI_SUCCESS);
  REQUIRE(MPI_Alltoallv(send.ptr, sc.data(), sd.data(), t.strided, recv.ptr, rc.data(), rd.data(), t.dense,
                        MPI_COMM_WORLD) == MPI_SUCCESS);
  CHECK(recv.contents() == ref);
}

TEST_CASE("MPI_Alltoallw with block-list and strided types on both sides", "[zero-copy]") {
  // Send blocks alternate an irregular indexed type (a block list: moved through device
  // scratch) and a vector received as an indexed type, so that every pairing of a strided
  // and a block-list plan moves, byte for byte as the library moves it.
  const int lens[4] = {3, 1, 7, 2}, disps[4] = {0, 5, 9, 21};  // 13 floats
  MPI_Datatype indexed, vec;
  MPI_Type_indexed(4, lens, disps, MPI_FLOAT, &indexed);
  MPI_Type_commit(&indexed);
  MPI_Type_vector(13, 1, 2, MPI_FLOAT, &vec);
  MPI_Type_commit(&vec);
  const size_t slot = 26 * 4 + 16, n = static_cast<size_t>(g_size);
  Buf send(true, slot * n, 71 + uint64_t(g_rank)), recv(true, slot * n, 73 + uint64_t(g_rank));
  std::vector<int> counts(n, 1), sd(n), rd(n);
  std::vector<MPI_Datatype> st(n), rt(n);
  for (int p = 0; p < g_size; ++p) {
    sd[size_t(p)] = int(slot) * p;
    rd[size_t(p)] = int(slot) * p + 4;
    // What rank r sends rank p is typed by (r + p): both ends agree on the signature (13 floats).
    st[size_t(p)] = (g_rank + p) % 2 ? indexed : vec;
    rt[size_t(p)] = (g_rank + p) % 2 ? vec : indexed;
  }
  std::vector<uint8_t> ref = recv.host;
  REQUIRE(PMPI_Alltoallw(send.host.data(), counts.data(), sd.data(), st.data(), ref.data(), counts.data(), rd.data(),
                         rt.data(), MPI_COMM_WORLD) == MPI_SUCCESS);
  int expect = 0;
  for (int p = 0; p < g_size; ++p) expect += p != g_rank && same_node(p) && ipc_on();
  auto exchange = [&] {
    const tempi::ZeroCopyCounts before = tempi::zero_copy_counts();
    REQUIRE(MPI_Alltoallw(send.ptr, counts.data(), sd.data(), st.data(), recv.ptr, counts.data(), rd.data(),
                          rt.data(), MPI_COMM_WORLD) == MPI_SUCCESS);
    CHECK(recv.contents() == ref);
    CHECK(tempi::zero_copy_counts().peer_blocks - before.peer_blocks == uint64_t(expect));
  };
  exchange();
#if !defined(P2P_REAL_GPU)
  SECTION("no device memory for the scratch of all pairs at once: the block-list pairs move one at a time") {
    REQUIRE(tempi::gpu_backend().copy(recv.ptr, recv.host.data(), recv.bytes) == tempi::Status::Ok);
    tempi::emulated_fail_nth(tempi::EmulatedFault::DeviceAlloc, 1);  // the call's first: that scratch
    exchange();
    tempi::emulated_fail_nth(tempi::EmulatedFault::DeviceAlloc, 0);
  }
#endif
  MPI_Type_free(&indexed);
  MPI_Type_free(&vec);
}

TEST_CASE("MPI_Alltoallw of types too large for the plan arena", "[zero-copy]") {
  // Irregular indexed send types of 3,000 blocks (96 KB of runs each; four of them pass the
  // communicator's 256 KiB arena): each is published in a shared-memory block of its own,
  // and every node block is still read by zero-copy, byte for byte as the library moves it.
  constexpr int kBlocks = 3000, kTypes = 4;
  for (int k = 0; k < kTypes; ++k) {
    std::vector<int> lens(kBlocks), disps(kBlocks);
    int ints = 0, at = 0;
    for (int i = 0; i < kBlocks; ++i) {
      lens[size_t(i)] = 1 + (i * 5 + k) % 4;
      disps[size_t(i)] = at;
      at += lens[size_t(i)] + 1 + (i + k) % 2;
      ints += lens[size_t(i)];
    }
    MPI_Datatype big;
    MPI_Type_indexed(kBlocks, lens.data(), disps.data(), MPI_INT, &big);
    MPI_Type_commit(&big);
    const size_t n = static_cast<size_t>(g_size), slot = size_t(at) * 4;
    Buf send(true, slot * n, 81 + uint64_t(k * 8 + g_rank)), recv(true, size_t(ints) * 4 * n, 83 + uint64_t(g_rank));
    std::vector<int> counts(n, 1), rcounts(n, ints), sd(n), rd(n);
    std::vector<MPI_Datatype> st(n, big), rt(n, MPI_INT);
    for (int p = 0; p < g_size; ++p) {
      sd[size_t(p)] = int(slot) * p;
      rd[size_t(p)] = ints * 4 * ((p + 1) % g_size);
    }
    std::vector<uint8_t> ref = recv.host;
    REQUIRE(PMPI_Alltoallw(send.host.data(), counts.data(), sd.data(), st.data(), ref.data(), rcounts.data(),
                           rd.data(), rt.data(), MPI_COMM_WORLD) == MPI_SUCCESS);
    const tempi::ZeroCopyCounts before = tempi::zero_copy_counts();
    REQUIRE(MPI_Alltoallw(send.ptr, counts.data(), sd.data(), st.data(), recv.ptr, rcounts.data(), rd.data(),
                          rt.data(), MPI_COMM_WORLD) == MPI_SUCCESS);
    INFO("type " << k);
    CHECK(recv.contents() == ref);
    int expect = 0;
    for (int p = 0; p < g_size; ++p) expect += p != g_rank && same_node(p) && ipc_on();
    CHECK(tempi::zero_copy_counts().peer_blocks - before.peer_blocks == uint64_t(expect));
    MPI_Type_free(&big);
  }
}

// A neighbourhood of `comm`: block i of the send buffer to dests[i], block j of the
// receive buffer from sources[j]; each block a different strided type.
void neighbor_round(MPI_Comm comm, const std::vector<int> &sources, const std::vector<int> &dests, uint64_t seed) {
  const int outs = int(dests.size()), ins = int(sources.size());
  Types t(kFloats);
  const size_t slot = kStridedBytes + 32;
  Buf send(true, slot * size_t(std::max(outs, 1)), seed * 3 + uint64_t(g_rank));
  Buf recv(true, size_t(kFloats) * 4 * size_t(std::max(ins, 1)) + 40, seed * 5 + uint64_t(g_rank));
  std::vector<int> sc(size_t(outs) + 1, 1), rc(size_t(ins) + 1, 1);
  std::vector<MPI_Aint> sd(size_t(outs) + 1), rd(size_t(ins) + 1);
  std::vector<MPI_Datatype> st(size_t(outs) + 1, t.strided), rt(size_t(ins) + 1, t.dense);
  for (int i = 0; i < outs; ++i) sd[size_t(i)] = MPI_Aint(slot) * i;
  for (int j = 0; j < ins; ++j) rd[size_t(j)] = 40 + MPI_Aint(kFloats) * 4 * j;
  std::vector<uint8_t> ref = recv.host;
  REQUIRE(PMPI_Neighbor_alltoallw(send.host.data(), sc.data(), sd.data(), st.data(), ref.data(), rc.data(),
                                  rd.data(), rt.data(), comm) == MPI_SUCCESS);
  REQUIRE(MPI_Neighbor_alltoallw(send.ptr, sc.data(), sd.data(), st.data(), recv.ptr, rc.data(), rd.data(),
                                 rt.data(), comm) == MPI_SUCCESS);
  CHECK(recv.contents() == ref);
}

TEST_CASE("repeated calls keep what they decided, and see any rank's change of arguments", "[zero-copy]") {
  // A time-stepping code: the same MPI_Alltoallw (buffers, types, counts) call after call,
  // new contents each time, and now and then one rank, or every rank, changes something.
  // Where neither end of a pair changed since the last call, both ends keep what they decided
  // then (ZeroCopyCounts::kept_pairs); the bytes must be right at every call. The changes
  // below are one rank's as seen by others: with one rank some of them are no change.
  if (g_size < 2) {
    SUCCEED("needs two ranks or more");
    return;
  }
  MPI_Comm comm;
  REQUIRE(MPI_Comm_dup(MPI_COMM_WORLD, &comm) == MPI_SUCCESS);
  const size_t n = static_cast<size_t>(g_size);
  const int last = g_size - 1;
  MPI_Datatype strided, dense;
  MPI_Type_vector(kFloats, 1, 3, MPI_FLOAT, &strided);
  MPI_Type_commit(&strided);
  MPI_Type_contiguous(kFloats, MPI_FLOAT, &dense);
  MPI_Type_commit(&dense);
  const size_t slot = kStridedBytes + 64;
  auto send = std::make_unique<Buf>(true, slot * n, 11 + uint64_t(g_rank));
  Buf recv(true, size_t(kFloats) * 4 * n + 96, 13 + uint64_t(g_rank));
  std::vector<uint8_t> expected = recv.host;
  std::vector<int> scounts(n, 1), rcounts(n, 1), sd(n), rd(n);
  std::vector<MPI_Datatype> st(n, strided), rt(n, dense);
  for (size_t p = 0; p < n; ++p) {
    sd[p] = int(slot * p);
    rd[p] = 48 + kFloats * 4 * int(p);
  }
  // Who changes at a call: everyone at the first, the last rank's receive places at 6,
  // everyone's send type at 10 (freed and made again: the handle may come back), rank 0's
  // send allocation at 14 (freed first: often the same address), rank 0's count to the last
  // rank and the last rank's from rank 0 at 18.
  auto changes = [&](int call, int r) {
    return call == 0 || call == 10 || (call == 6 && r == last) || (call == 14 && r == 0) ||
           (call == 18 && (r == 0 || r == last));
  };
  for (int call = 0; call < 24; ++call) {
    if (call == 6 && g_rank == last)
      for (size_t p = 0; p < n; ++p) rd[p] = 48 + kFloats * 4 * int((p + 1) % n);
    if (call == 10) {
      MPI_Type_free(&strided);
      MPI_Type_vector(kFloats, 1, 2, MPI_FLOAT, &strided);
      MPI_Type_commit(&strided);
      st.assign(n, strided);
    }
    if (call == 14 && g_rank == 0) {
      send.reset();
      send = std::make_unique<Buf>(true, slot * n, 17);
    }
    if (call == 18 && g_rank == 0) scounts[size_t(last)] = 0;
    if (call == 18 && g_rank == last) rcounts[0] = 0;
    for (size_t i = 0; i < send->bytes; ++i) send->host[i] = byte_at(uint64_t(2000 + call * 31 + g_rank), i);
    REQUIRE(tempi::gpu_backend().copy(send->ptr, send->host.data(), send->bytes) == tempi::Status::Ok);
    REQUIRE(PMPI_Alltoallw(send->host.data(), scounts.data(), sd.data(), st.data(), expected.data(), rcounts.data(),
                           rd.data(), rt.data(), comm) == MPI_SUCCESS);
    const tempi::ZeroCopyCounts before = tempi::zero_copy_counts();
    REQUIRE(MPI_Alltoallw(send->ptr, scounts.data(), sd.data(), st.data(), recv.ptr, rcounts.data(), rd.data(),
                          rt.data(), comm) == MPI_SUCCESS);
    const tempi::ZeroCopyCounts after = tempi::zero_copy_counts();
    INFO("call " << call << ", rank " << g_rank);
    CHECK(recv.contents() == expected);
    uint64_t peers = 0, kept = 0;
    bool as_before = ipc_on() && !changes(call, g_rank);
    for (int p = 0; p < g_size; ++p) {
      if (p == g_rank || !same_node(p) || !ipc_on()) continue;
      peers += rcounts[size_t(p)] > 0;
      kept += !changes(call, g_rank) && !changes(call, p);
      as_before = as_before && !changes(call, p);
    }
    CHECK(after.peer_blocks - before.peer_blocks == peers);
    CHECK(after.self_blocks - before.self_blocks == uint64_t(ipc_on() ? 1 : 0));
    CHECK(after.kept_pairs - before.kept_pairs == kept);
    // Every pair as at the last call: the moves as prepared then (two strided plans each).
    CHECK(after.prepared_calls - before.prepared_calls == uint64_t(as_before ? 1 : 0));
    // Every block of every rank moved by zero-copy: where the communicator lies on one node,
    // nobody calls the library.
    bool one_node = ipc_on();
    for (int p = 0; p < g_size; ++p) one_node = one_node && same_node(p);
    CHECK(after.library_skipped - before.library_skipped == uint64_t(one_node ? 1 : 0));
  }
  MPI_Type_free(&strided);
  MPI_Type_free(&dense);
  MPI_Comm_free(&comm);
}

#if !defined(P2P_REAL_GPU)
TEST_CASE("a rank whose zero-copy moves fail: every rank's call fails and none waits for it", "[zero-copy]") {
  // On a communicator that lies on one node, the ranks agree whether anyone calls the MPI
  // library; a rank that fails before it says so must still say it, or the others wait for
  // it for ever. Its peers' calls fail too (nobody calls the library), and the next call works.
  bool one_node = ipc_on() && g_size > 1;
  for (int p = 0; p < g_size; ++p) one_node = one_node && same_node(p);
  if (!one_node) {
    SUCCEED("needs two ranks or more on one node, zero-copy on");
    return;
  }
  MPI_Comm comm;
  REQUIRE(MPI_Comm_dup(MPI_COMM_WORLD, &comm) == MPI_SUCCESS);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  Types t(kFloats);
  const size_t slot = kStridedBytes + 64, n = static_cast<size_t>(g_size);
  Buf send(true, slot * n, 71 + uint64_t(g_rank));
  Buf recv(true, size_t(kFloats) * 4 * n + 96, 73 + uint64_t(g_rank));
  std::vector<int> counts(n, 1), sd(n), rd(n);
  std::vector<MPI_Datatype> st(n, t.strided), rt(n, t.dense);
  for (size_t p = 0; p < n; ++p) {
    sd[p] = int(slot * p);
    rd[p] = 48 + kFloats * 4 * int(p);
  }
  if (g_rank == 0) tempi::emulated_fail_nth(tempi::EmulatedFault::Launch, 1);
  const int failed = MPI_Alltoallw(send.ptr, counts.data(), sd.data(), st.data(), recv.ptr, counts.data(), rd.data(),
                                   rt.data(), comm);
  tempi::emulated_fail_nth(tempi::EmulatedFault::Launch, 0);
  CHECK(failed != MPI_SUCCESS);
  std::vector<uint8_t> expected = recv.host;
  REQUIRE(PMPI_Alltoallw(send.host.data(), counts.data(), sd.data(), st.data(), expected.data(), counts.data(),
                         rd.data(), rt.data(), comm) == MPI_SUCCESS);
  REQUIRE(MPI_Alltoallw(send.ptr, counts.data(), sd.data(), st.data(), recv.ptr, counts.data(), rd.data(), rt.data(),
                        comm) == MPI_SUCCESS);
  // The blocks the failed call did deliver are the same bytes as this call's.
  CHECK(recv.contents() == expected);
  MPI_Comm_free(&comm);
}
#endif

TEST_CASE("MPI_Neighbor_alltoallw on a graph with repeated edges and self edges", "[zero-copy]") {
  // Rank r sends twice to r+1, once to itself and once to r-1; it receives in the mirror
  // order. The k-th block between two ranks pairs with the k-th.
  const int next = (g_rank + 1) % g_size, prev = (g_rank + g_size - 1) % g_size;
  const std::vector<int> dests = {next, g_rank, next, prev};
  const std::vector<int> sources = {prev, g_rank, next, prev};
  MPI_Comm graph;
  REQUIRE(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, int(sources.size()), sources.data(), MPI_UNWEIGHTED,
                                         int(dests.size()), dests.data(), MPI_UNWEIGHTED, MPI_INFO_NULL, 0,
                                         &graph) == MPI_SUCCESS);
  const tempi::ZeroCopyCounts before = tempi::zero_copy_counts();
  for (int round = 0; round < 3; ++round) neighbor_round(graph, sources, dests, uint64_t(round));
  if (ipc_on() && same_node(next) && same_node(prev))
    CHECK(tempi::zero_copy_counts().peer_blocks + tempi::zero_copy_counts().self_blocks - before.peer_blocks -
              before.self_blocks ==
          3 * 4);
  MPI_Comm_free(&graph);
}

TEST_CASE("MPI_Neighbor_alltoallw on a periodic Cartesian grid (duplicate neighbours where a dimension is 1 or 2)",
          "[zero-copy]") {
  int dims[2] = {0, 0}, periods[2] = {1, 1};
  MPI_Dims_create(g_size, 2, dims);
  MPI_Comm cart;
  REQUIRE(MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart) == MPI_SUCCESS);
  std::vector<int> nb;
  for (int d = 0; d < 2; ++d) {
    int lo, hi;
    MPI_Cart_shift(cart, d, 1, &lo, &hi);
    nb.push_back(lo);
    nb.push_back(hi);
  }
  for (int round = 0; round < 3; ++round) neighbor_round(cart, nb, nb, uint64_t(40 + round));
  MPI_Comm_free(&cart);
}

namespace {

// Blocks moved by zero-copy at this rank since `b`.
struct Moved {
  uint64_t peer, self;
};
Moved since(const tempi::ZeroCopyCounts &b) {
  const tempi::ZeroCopyCounts a = tempi::zero_copy_counts();
  return {a.peer_blocks - b.peer_blocks, a.self_blocks - b.self_blocks};
}

// How many of `ranks` (comm ranks of MPI_COMM_WORLD or of a communicator with the same
// ranks) this rank reads by zero-copy: the others on its node, and itself.
Moved expected(const std::vector<int> &ranks) {
  Moved m{0, 0};
  if (!ipc_on()) return m;
  for (int r : ranks) {
    if (r == g_rank) ++m.self;
    else if (same_node(r)) ++m.peer;
  }
  return m;
}

// One call on `send` and `recv`, run twice: by the MPI library on their host copies (the
// reference), then through TEMPI on their buffers. `recv` must then hold what the
// reference wrote, and `want` blocks must have moved by zero-copy.
using Call = std::function<int(const void *send, void *recv)>;
void check_against_library(Buf &send, Buf &recv, Moved want, const Call &reference, const Call &tested) {
  std::vector<uint8_t> ref = recv.host;
  REQUIRE(reference(send.host.data(), ref.data()) == MPI_SUCCESS);
  const tempi::ZeroCopyCounts before = tempi::zero_copy_counts();
  REQUIRE(tested(send.ptr, recv.ptr) == MPI_SUCCESS);
  const Moved m = since(before);
  CHECK(recv.contents() == ref);
  CHECK(m.peer == want.peer);
  CHECK(m.self == want.self);
}

int64_t extent_of(MPI_Datatype t) {
  MPI_Aint lb = 0, extent = 0;
  MPI_Type_get_extent(t, &lb, &extent);
  return int64_t(extent);
}

}  // namespace

TEST_CASE("calls with one count for every peer move their node blocks by zero-copy", "[zero-copy]") {
  Types t(kFloats);
  const size_t n = size_t(g_size), ext = size_t(extent_of(t.strided)), dense = size_t(kFloats) * 4;
  std::vector<int> world(n);
  for (int p = 0; p < g_size; ++p) world[size_t(p)] = p;
  const uint64_t seed = uint64_t(100 + g_rank);
  SECTION("MPI_Alltoall") {
    Buf send(true, ext * n, seed + 1), recv(true, dense * n, seed + 2);
    check_against_library(
        send, recv, expected(world),
        [&](const void *s, void *r) { return PMPI_Alltoall(s, 1, t.strided, r, 1, t.dense, MPI_COMM_WORLD); },
        [&](const void *s, void *r) { return MPI_Alltoall(s, 1, t.strided, r, 1, t.dense, MPI_COMM_WORLD); });
    CHECK(send.contents() == send.host);
  }
  SECTION("MPI_Allgather") {
    Buf send(true, ext, seed + 3), recv(true, dense * n, seed + 4);
    check_against_library(
        send, recv, expected(world),
        [&](const void *s, void *r) { return PMPI_Allgather(s, 1, t.strided, r, 1, t.dense, MPI_COMM_WORLD); },
        [&](const void *s, void *r) { return MPI_Allgather(s, 1, t.strided, r, 1, t.dense, MPI_COMM_WORLD); });
  }
  SECTION("MPI_Allgatherv, blocks in a shuffled order") {
    Buf send(true, ext, seed + 5), recv(true, dense * n + 64, seed + 6);
    std::vector<int> counts(n, 1), displs(n);
    for (int p = 0; p < g_size; ++p) displs[size_t(p)] = (p + 1) % g_size;  // in dense extents: a rotation
    check_against_library(
        send, recv, expected(world),
        [&](const void *s, void *r) {
          return PMPI_Allgatherv(s, 1, t.strided, r, counts.data(), displs.data(), t.dense, MPI_COMM_WORLD);
        },
        [&](const void *s, void *r) {
          return MPI_Allgatherv(s, 1, t.strided, r, counts.data(), displs.data(), t.dense, MPI_COMM_WORLD);
        });
  }
  SECTION("MPI_Allgather from host memory on rank 0: the others' blocks still move by zero-copy") {
    Buf send(g_rank != 0, ext, seed + 7), recv(true, dense * n, seed + 8);
    std::vector<int> gpu_senders;
    for (int p = 1; p < g_size; ++p) gpu_senders.push_back(p);
    check_against_library(
        send, recv, expected(gpu_senders),
        [&](const void *s, void *r) { return PMPI_Allgather(s, 1, t.strided, r, 1, t.dense, MPI_COMM_WORLD); },
        [&](const void *s, void *r) { return MPI_Allgather(s, 1, t.strided, r, 1, t.dense, MPI_COMM_WORLD); });
  }
}

TEST_CASE("neighbourhood calls with one count for every neighbour move their node blocks by zero-copy",
          "[zero-copy]") {
  Types t(kFloats);
  const size_t ext = size_t(extent_of(t.strided)), dense = size_t(kFloats) * 4;
  // A ring: rank r sends to r+1 and r-1 and receives from r-1 and r+1 (with 2 ranks both
  // are the other rank: the k-th block between two ranks pairs with the k-th).
  const int next = (g_rank + 1) % g_size, prev = (g_rank + g_size - 1) % g_size;
  const std::vector<int> dests = {next, prev}, sources = {prev, next};
  MPI_Comm ring;
  REQUIRE(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 2, sources.data(), MPI_UNWEIGHTED, 2, dests.data(),
                                         MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &ring) == MPI_SUCCESS);
  const uint64_t seed = uint64_t(300 + g_rank);
  SECTION("MPI_Neighbor_alltoall") {
    Buf send(true, ext * 2, seed + 1), recv(true, dense * 2, seed + 2);
    // A ring of 2 repeats its neighbour: MPICH pairs repeated neighbours' blocks in this
    // call unlike in its v-variant, so TEMPI leaves the call to the library (no zero-copy).
    check_against_library(
        send, recv, g_size > 2 ? expected(sources) : Moved{0, 0},
        [&](const void *s, void *r) { return PMPI_Neighbor_alltoall(s, 1, t.strided, r, 1, t.dense, ring); },
        [&](const void *s, void *r) { return MPI_Neighbor_alltoall(s, 1, t.strided, r, 1, t.dense, ring); });
  }
  SECTION("MPI_Neighbor_allgather") {
    Buf send(true, ext, seed + 3), recv(true, dense * 2, seed + 4);
    check_against_library(
        send, recv, expected(sources),
        [&](const void *s, void *r) { return PMPI_Neighbor_allgather(s, 1, t.strided, r, 1, t.dense, ring); },
        [&](const void *s, void *r) { return MPI_Neighbor_allgather(s, 1, t.strided, r, 1, t.dense, ring); });
  }
  SECTION("MPI_Neighbor_allgatherv, blocks swapped") {
    Buf send(true, ext, seed + 5), recv(true, dense * 3, seed + 6);
    const int counts[2] = {1, 1}, displs[2] = {2, 0};  // in dense extents
    check_against_library(
        send, recv, expected(sources),
        [&](const void *s, void *r) {
          return PMPI_Neighbor_allgatherv(s, 1, t.strided, r, counts, displs, t.dense, ring);
        },
        [&](const void *s, void *r) {
          return MPI_Neighbor_allgatherv(s, 1, t.strided, r, counts, displs, t.dense, ring);
        });
  }
  MPI_Comm_free(&ring);
}

#if MPI_VERSION >= 4
// Persistent collectives: the pairs are decided at init, every start moves them.

// How one persistent start is completed by the application.
enum class Completion { Wait, TestLoop, WaitallWithOthers, Waitany };

void complete(MPI_Request *req, Completion how) {
  switch (how) {
    case Completion::Wait:
      REQUIRE(MPI_Wait(req, MPI_STATUS_IGNORE) == MPI_SUCCESS);
      break;
    case Completion::TestLoop: {
      int flag = 0;
      while (!flag) REQUIRE(MPI_Test(req, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS);
      break;
    }
    case Completion::WaitallWithOthers: {
      // Beside a host message to the next rank: both complete in one call.
      const int next = (g_rank + 1) % g_size, prev = (g_rank + g_size - 1) % g_size;
      int out = g_rank, in = -1;
      MPI_Request r[3] = {*req, MPI_REQUEST_NULL, MPI_REQUEST_NULL};
      REQUIRE(MPI_Irecv(&in, 1, MPI_INT, prev, 77, MPI_COMM_WORLD, &r[1]) == MPI_SUCCESS);
      REQUIRE(MPI_Isend(&out, 1, MPI_INT, next, 77, MPI_COMM_WORLD, &r[2]) == MPI_SUCCESS);
      REQUIRE(MPI_Waitall(3, r, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
      CHECK(in == prev);
      CHECK(r[0] == *req);  // a persistent request stays, inactive
      break;
    }
    case Completion::Waitany: {
      MPI_Request r[2] = {MPI_REQUEST_NULL, *req};
      int index = -1;
      REQUIRE(MPI_Waitany(2, r, &index, MPI_STATUS_IGNORE) == MPI_SUCCESS);
      CHECK(index == 1);
      break;
    }
  }
}

TEST_CASE("MPI_Alltoallw_init: zero-copy pairs decided once, 40 starts with new contents", "[zero-copy][persistent]") {
  Types t(kFloats);
  const size_t slot = kStridedBytes + 64, n = static_cast<size_t>(g_size);
  Buf send(true, slot * n, 41 + uint64_t(g_rank));
  Buf recv(true, size_t(kFloats) * 4 * n + 96, 43 + uint64_t(g_rank));
  std::vector<int> counts(n, 1), sd(n), rd(n);
  std::vector<MPI_Datatype> st(n, t.strided), rt(n, t.dense);
  for (int p = 0; p < g_size; ++p) {
    sd[size_t(p)] = int(slot) * p;
    rd[size_t(p)] = 48 + kFloats * 4 * ((p + g_rank) % g_size);
  }
  MPI_Request req = MPI_REQUEST_NULL;
  REQUIRE(MPI_Alltoallw_init(send.ptr, counts.data(), sd.data(), st.data(), recv.ptr, counts.data(), rd.data(),
                             rt.data(), MPI_COMM_WORLD, MPI_INFO_NULL, &req) == MPI_SUCCESS);
  int expect = 0;
  for (int p = 0; p < g_size; ++p) expect += p != g_rank && same_node(p) && ipc_on();
  const Completion ways[] = {Completion::Wait, Completion::TestLoop, Completion::WaitallWithOthers,
                             Completion::Waitany};
  for (int start = 0; start < 40; ++start) {
    // New contents in both buffers before each start (MPI allows it between starts).
    for (size_t i = 0; i < send.bytes; ++i) send.host[i] = byte_at(uint64_t(2000 + start * 31 + g_rank), i);
    for (size_t i = 0; i < recv.bytes; ++i) recv.host[i] = byte_at(uint64_t(3000 + start * 17 + g_rank), i);
    REQUIRE(tempi::gpu_backend().copy(send.ptr, send.host.data(), send.bytes) == tempi::Status::Ok);
    REQUIRE(tempi::gpu_backend().copy(recv.ptr, recv.host.data(), recv.bytes) == tempi::Status::Ok);
    std::vector<uint8_t> ref = recv.host;
    REQUIRE(PMPI_Alltoallw(send.host.data(), counts.data(), sd.data(), st.data(), ref.data(), counts.data(),
                           rd.data(), rt.data(), MPI_COMM_WORLD) == MPI_SUCCESS);
    const tempi::ZeroCopyCounts before = tempi::zero_copy_counts();
    REQUIRE(MPI_Start(&req) == MPI_SUCCESS);
    complete(&req, ways[start % 4]);
    CHECK(recv.contents() == ref);
    CHECK(send.contents() == send.host);
    const tempi::ZeroCopyCounts after = tempi::zero_copy_counts();
    CHECK(after.peer_blocks - before.peer_blocks == uint64_t(expect));
    CHECK(after.self_blocks - before.self_blocks == uint64_t(ipc_on() ? 1 : 0));
    // Two strided plans each: every start's moves as described for the device at the first.
    CHECK(after.prepared_calls - before.prepared_calls == uint64_t(ipc_on() ? 1 : 0));
  }
  REQUIRE(MPI_Request_free(&req) == MPI_SUCCESS);
}

TEST_CASE("MPI_Alltoallw_init whose send buffer is freed and allocated again at its address between starts",
          "[zero-copy][persistent]") {
  // MPI binds the address at init; between starts the application may free the memory and
  // allocate it again. Peers mapped the old allocation at init, and a freed allocation stays
  // alive while mapped: each start must read the allocation that is there now.
  Types t(kFloats);
  const size_t slot = kStridedBytes + 64, n = static_cast<size_t>(g_size);
  auto send = std::make_unique<Buf>(true, slot * n, 51 + uint64_t(g_rank));
  Buf recv(true, size_t(kFloats) * 4 * n + 96, 53 + uint64_t(g_rank));
  std::vector<int> counts(n, 1), sd(n), rd(n);
  std::vector<MPI_Datatype> st(n, t.strided), rt(n, t.dense);
  for (int p = 0; p < g_size; ++p) {
    sd[size_t(p)] = int(slot) * p;
    rd[size_t(p)] = 48 + kFloats * 4 * ((p + g_rank) % g_size);
  }
  void *const bound = send->ptr;
  MPI_Request req = MPI_REQUEST_NULL;
  REQUIRE(MPI_Alltoallw_init(bound, counts.data(), sd.data(), st.data(), recv.ptr, counts.data(), rd.data(),
                             rt.data(), MPI_COMM_WORLD, MPI_INFO_NULL, &req) == MPI_SUCCESS);
  int expect = 0;
  for (int p = 0; p < g_size; ++p) expect += p != g_rank && same_node(p) && ipc_on();
  for (int start = 0; start < 4; ++start) {
    INFO("start " << start);
    if (start > 0) {
      send.reset();
      send = std::make_unique<Buf>(true, slot * n, uint64_t(5000 + start * 31 + g_rank));
      // The allocator usually gives the freed address back; where it did not at some rank,
      // the program may not start the request again.
      int here = send->ptr == bound, everywhere = 0;
      MPI_Allreduce(&here, &everywhere, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
      if (!everywhere) {
        WARN("a new allocation got another address: the rest of this test cannot run");
        break;
      }
    }
    std::vector<uint8_t> ref = recv.host;
    REQUIRE(PMPI_Alltoallw(send->host.data(), counts.data(), sd.data(), st.data(), ref.data(), counts.data(),
                           rd.data(), rt.data(), MPI_COMM_WORLD) == MPI_SUCCESS);
    const tempi::ZeroCopyCounts before = tempi::zero_copy_counts();
    REQUIRE(MPI_Start(&req) == MPI_SUCCESS);
    complete(&req, start % 2 ? Completion::TestLoop : Completion::Wait);
    CHECK(recv.contents() == ref);
    const tempi::ZeroCopyCounts after = tempi::zero_copy_counts();
    CHECK(after.peer_blocks - before.peer_blocks == uint64_t(expect));
    recv.host = ref;
  }
  REQUIRE(MPI_Request_free(&req) == MPI_SUCCESS);
}

TEST_CASE("MPI_Neighbor_alltoallw_init and MPI_Alltoallv_init started together, a host rank among them",
          "[zero-copy][persistent]") {
  // Rank 0's buffers are host memory: its pairs take the pack path, the others' do not.
  const bool gpu = g_rank != 0;
  const int next = (g_rank + 1) % g_size, prev = (g_rank + g_size - 1) % g_size;
  const std::vector<int> dests = {next, prev}, sources = {prev, next};
  MPI_Comm ring;
  REQUIRE(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 2, sources.data(), MPI_UNWEIGHTED, 2, dests.data(),
                                         MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &ring) == MPI_SUCCESS);
  Types t(kFloats);
  const size_t slot = kStridedBytes + 32, n = static_cast<size_t>(g_size);
  const size_t dense = size_t(kFloats) * 4;
  Buf nsend(gpu, slot * 2, 51 + uint64_t(g_rank)), nrecv(gpu, dense * 2 + 40, 53 + uint64_t(g_rank));
  Buf vsend(gpu, kStridedBytes * n * 2, 55 + uint64_t(g_rank)), vrecv(gpu, dense * n * 2, 57 + uint64_t(g_rank));
  const int nc[2] = {1, 1};
  const MPI_Aint nsd[2] = {0, MPI_Aint(slot)}, nrd[2] = {40, MPI_Aint(40 + dense)};
  const MPI_Datatype nst[2] = {t.strided, t.strided}, nrt[2] = {t.dense, t.dense};
  std::vector<int> vc(n, 1), vsd(n), vrd(n);
  for (int p = 0; p < g_size; ++p) {
    vsd[size_t(p)] = 2 * p;  // in extents of the strided type
    vrd[size_t(p)] = 2 * p;  // in extents of the dense type
  }
  MPI_Request reqs[2];
  REQUIRE(MPI_Neighbor_alltoallw_init(nsend.ptr, nc, nsd, nst, nrecv.ptr, nc, nrd, nrt, ring, MPI_INFO_NULL,
                                      &reqs[0]) == MPI_SUCCESS);
  REQUIRE(MPI_Alltoallv_init(vsend.ptr, vc.data(), vsd.data(), t.strided, vrecv.ptr, vc.data(), vrd.data(), t.dense,
                             MPI_COMM_WORLD, MPI_INFO_NULL, &reqs[1]) == MPI_SUCCESS);
  for (int start = 0; start < 12; ++start) {
    for (Buf *b : {&nsend, &vsend}) {
      for (size_t i = 0; i < b->bytes; ++i) b->host[i] = byte_at(uint64_t(4000 + start * 13 + g_rank), i);
      if (b->gpu) REQUIRE(tempi::gpu_backend().copy(b->ptr, b->host.data(), b->bytes) == tempi::Status::Ok);
      else std::memcpy(b->ptr, b->host.data(), b->bytes);
    }
    std::vector<uint8_t> nref = nrecv.contents(), vref = vrecv.contents();
    REQUIRE(PMPI_Neighbor_alltoallw(nsend.host.data(), nc, nsd, nst, nref.data(), nc, nrd, nrt, ring) ==
            MPI_SUCCESS);
    REQUIRE(PMPI_Alltoallv(vsend.host.data(), vc.data(), vsd.data(), t.strided, vref.data(), vc.data(), vrd.data(),
                           t.dense, MPI_COMM_WORLD) == MPI_SUCCESS);
    REQUIRE(MPI_Startall(2, reqs) == MPI_SUCCESS);
    REQUIRE(MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
    CHECK(nrecv.contents() == nref);
    CHECK(vrecv.contents() == vref);
  }
  REQUIRE(MPI_Request_free(&reqs[0]) == MPI_SUCCESS);
  REQUIRE(MPI_Request_free(&reqs[1]) == MPI_SUCCESS);
  MPI_Comm_free(&ring);
}

// Refills `b` (host copy and buffer) with contents of `seed`.
void refill(Buf &b, uint64_t seed) {
  for (size_t i = 0; i < b.bytes; ++i) b.host[i] = byte_at(seed, i);
  if (b.gpu)
    REQUIRE(tempi::gpu_backend().copy(b.ptr, b.host.data(), b.bytes) == tempi::Status::Ok);
  else
    std::memcpy(b.ptr, b.host.data(), b.bytes);
}

TEST_CASE("persistent calls with one count for every peer move their node blocks by zero-copy",
          "[zero-copy][persistent]") {
  Types t(kFloats);
  const size_t n = size_t(g_size), ext = size_t(extent_of(t.strided)), dense = size_t(kFloats) * 4;
  std::vector<int> world(n);
  for (int p = 0; p < g_size; ++p) world[size_t(p)] = p;
  const int next = (g_rank + 1) % g_size, prev = (g_rank + g_size - 1) % g_size;
  const std::vector<int> dests = {next, prev}, sources = {prev, next};
  MPI_Comm ring;
  REQUIRE(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 2, sources.data(), MPI_UNWEIGHTED, 2, dests.data(),
                                         MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &ring) == MPI_SUCCESS);
  Buf a2a_send(true, ext * n, 0), a2a_recv(true, dense * n, 0);
  Buf ag_send(true, ext, 0), ag_recv(true, dense * n, 0);
  Buf agv_send(true, ext, 0), agv_recv(true, dense * n + 64, 0);
  Buf na_send(true, ext * 2, 0), na_recv(true, dense * 2, 0);
  Buf nag_send(true, ext, 0), nag_recv(true, dense * 2, 0);
  std::vector<int> counts(n, 1), displs(n);
  for (int p = 0; p < g_size; ++p) displs[size_t(p)] = (p + 1) % g_size;  // a rotation, in dense extents
  MPI_Request reqs[5];
  REQUIRE(MPI_Alltoall_init(a2a_send.ptr, 1, t.strided, a2a_recv.ptr, 1, t.dense, MPI_COMM_WORLD, MPI_INFO_NULL,
                            &reqs[0]) == MPI_SUCCESS);
  REQUIRE(MPI_Allgather_init(ag_send.ptr, 1, t.strided, ag_recv.ptr, 1, t.dense, MPI_COMM_WORLD, MPI_INFO_NULL,
                             &reqs[1]) == MPI_SUCCESS);
  REQUIRE(MPI_Allgatherv_init(agv_send.ptr, 1, t.strided, agv_recv.ptr, counts.data(), displs.data(), t.dense,
                              MPI_COMM_WORLD, MPI_INFO_NULL, &reqs[2]) == MPI_SUCCESS);
  REQUIRE(MPI_Neighbor_alltoall_init(na_send.ptr, 1, t.strided, na_recv.ptr, 1, t.dense, ring, MPI_INFO_NULL,
                                     &reqs[3]) == MPI_SUCCESS);
  REQUIRE(MPI_Neighbor_allgather_init(nag_send.ptr, 1, t.strided, nag_recv.ptr, 1, t.dense, ring, MPI_INFO_NULL,
                                      &reqs[4]) == MPI_SUCCESS);
  // Expected zero-copy blocks a start: each call's world or ring peers on the node; a ring of
  // 2 repeats its neighbour, and MPICH pairs such blocks in MPI_Neighbor_alltoall unlike in
  // its v-variant, so that call keeps the pack path there.
  const Moved all = expected(world), ringed = expected(sources);
  const Moved per_start{3 * all.peer + (g_size > 2 ? ringed.peer : 0) + ringed.peer,
                        3 * all.self + (g_size > 2 ? ringed.self : 0) + ringed.self};
  for (int start = 0; start < 6; ++start) {
    const uint64_t seed = uint64_t(5000 + 97 * start + 10 * g_rank);
    Buf *bufs[] = {&a2a_send, &a2a_recv, &ag_send, &ag_recv, &agv_send, &agv_recv, &na_send, &na_recv, &nag_send,
                   &nag_recv};
    for (size_t k = 0; k < 10; ++k) refill(*bufs[k], seed + k);
    std::vector<uint8_t> a2a = a2a_recv.host, ag = ag_recv.host, agv = agv_recv.host, na = na_recv.host,
                         nag = nag_recv.host;
    REQUIRE(PMPI_Alltoall(a2a_send.host.data(), 1, t.strided, a2a.data(), 1, t.dense, MPI_COMM_WORLD) ==
            MPI_SUCCESS);
    REQUIRE(PMPI_Allgather(ag_send.host.data(), 1, t.strided, ag.data(), 1, t.dense, MPI_COMM_WORLD) == MPI_SUCCESS);
    REQUIRE(PMPI_Allgatherv(agv_send.host.data(), 1, t.strided, agv.data(), counts.data(), displs.data(), t.dense,
                            MPI_COMM_WORLD) == MPI_SUCCESS);
    REQUIRE(PMPI_Neighbor_alltoall(na_send.host.data(), 1, t.strided, na.data(), 1, t.dense, ring) == MPI_SUCCESS);
    REQUIRE(PMPI_Neighbor_allgather(nag_send.host.data(), 1, t.strided, nag.data(), 1, t.dense, ring) ==
            MPI_SUCCESS);
    const tempi::ZeroCopyCounts before = tempi::zero_copy_counts();
    REQUIRE(MPI_Startall(5, reqs) == MPI_SUCCESS);
    REQUIRE(MPI_Waitall(5, reqs, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
    const Moved m = since(before);
    CHECK(a2a_recv.contents() == a2a);
    CHECK(ag_recv.contents() == ag);
    CHECK(agv_recv.contents() == agv);
    CHECK(na_recv.contents() == na);
    CHECK(nag_recv.contents() == nag);
    CHECK(a2a_send.contents() == a2a_send.host);
    CHECK(m.peer == per_start.peer);
    CHECK(m.self == per_start.self);
  }
  for (MPI_Request &r : reqs) REQUIRE(MPI_Request_free(&r) == MPI_SUCCESS);
  MPI_Comm_free(&ring);
}

TEST_CASE("a persistent zero-copy collective freed while active still finishes", "[zero-copy][persistent]") {
  Types t(kFloats);
  const size_t slot = kStridedBytes + 64, n = static_cast<size_t>(g_size);
  Buf send(true, slot * n, 61 + uint64_t(g_rank));
  Buf recv(true, size_t(kFloats) * 4 * n, 63 + uint64_t(g_rank));
  std::vector<int> counts(n, 1), sd(n), rd(n);
  std::vector<MPI_Datatype> st(n, t.strided), rt(n, t.dense);
  for (int p = 0; p < g_size; ++p) {
    sd[size_t(p)] = int(slot) * p;
    rd[size_t(p)] = kFloats * 4 * p;
  }
  std::vector<uint8_t> ref = recv.host;
  REQUIRE(PMPI_Alltoallw(send.host.data(), counts.data(), sd.data(), st.data(), ref.data(), counts.data(), rd.data(),
                         rt.data(), MPI_COMM_WORLD) == MPI_SUCCESS);
  MPI_Request req = MPI_REQUEST_NULL;
  REQUIRE(MPI_Alltoallw_init(send.ptr, counts.data(), sd.data(), st.data(), recv.ptr, counts.data(), rd.data(),
                             rt.data(), MPI_COMM_WORLD, MPI_INFO_NULL, &req) == MPI_SUCCESS);
  REQUIRE(MPI_Start(&req) == MPI_SUCCESS);
  REQUIRE(MPI_Request_free(&req) == MPI_SUCCESS);
  CHECK(req == MPI_REQUEST_NULL);
  // The start finishes in later completion calls, and the data arrives. Every rank sees its
  // data before the barrier, so no rank frees a send buffer a peer still reads. The
  // zero-copy moves end first (TEMPI's thread writes the receive buffer until then: reading
  // it meanwhile would race), then the library's part, which completion calls unpack.
  const double deadline = MPI_Wtime() + 60;
  auto poke = [] {
    int flag = 0;
    MPI_Request none = MPI_REQUEST_NULL;
    MPI_Test(&none, &flag, MPI_STATUS_IGNORE);
  };
  while (tempi::zero_copy_in_flight() && MPI_Wtime() < deadline) poke();
  while (recv.contents() != ref && MPI_Wtime() < deadline) poke();
  CHECK(recv.contents() == ref);
  MPI_Barrier(MPI_COMM_WORLD);
}
#endif

int main(int argc, char **argv) {
#if defined(P2P_REAL_GPU)
  tempi::tools::select_gpu_before_mpi_init();
#endif
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  int result = 0;
#if defined(P2P_REAL_GPU)
  if (!tempi::gpu_backend().has_gpu()) {
    if (g_rank == 0) std::printf("SKIP: no usable GPU\n");
    MPI_Finalize();
    return 77;
  }
#endif
  result = Catch::Session().run(argc, argv);
  int worst = 0;
  MPI_Allreduce(&result, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}
