// The peer of a point-to-point message (pmpi/base/peers.hpp), on the emulated GPU with a
// profile whose device-buffer curves differ by placement (synthetic_profile.hpp's
// placements_profile) and a library declared CUDA-aware:
//   - before any collective on MPI_COMM_WORLD every peer is Unknown, and point-to-point
//     calls (which must never communicate to learn more) leave it so;
//   - after one, each rank of MPI_COMM_WORLD, of communicators that reorder or subset it,
//     of MPI_COMM_SELF and of an intercommunicator's remote group has the class that is
//     true: the host name (MPI_Get_processor_name) and GPU of every rank, gathered here;
//   - a communicator's map goes with it (a new communicator on the same handle is mapped
//     anew), and threads that look up a new communicator at once agree;
//   - sends and receives choose the method the model gives for their peer's class (the
//     profile makes it differ between peers, and for messages to the rank itself), and
//     the bytes arrive exact either way.
// Ranks 0 and 1 share an emulated GPU; every other rank has one of its own, so both
// SameGpu and SameNode occur on one host. Runs with 3 ranks or more.
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "backend.hpp"
#include "config.hpp"
#include "p2p/messages.hpp"
#include "base/peers.hpp"
#include "base/runtime.hpp"
#include "synthetic_profile.hpp"

namespace tempi {
void emulated_set_device_id(const std::string &id);  // tests/support/emulated_backend.cpp
}

using namespace tempi;

namespace {

int g_rank = 0, g_size = 0, g_failures = 0;

void expect(bool ok, const std::string &what) {
  if (ok) return;
  ++g_failures;
  std::fprintf(stderr, "rank %d: FAILED: %s\n", g_rank, what.c_str());
}

std::string named(const char *what, int rank) { return std::string(what) + " " + std::to_string(rank); }

// 1 MiB in 2048 rows of 512 bytes at a pitch of 1024: the profile's choice differs by peer.
constexpr int kRows = 2048, kRowDoubles = 64, kPitchDoubles = 128;
constexpr size_t kExtent = size_t((kRows - 1) * kPitchDoubles + kRowDoubles) * sizeof(double);

// The host image of a buffer: every byte from `seed`.
std::vector<char> pattern(int seed) {
  std::vector<char> v(kExtent);
  for (size_t i = 0; i < v.size(); ++i) v[i] = char((i * 131 + size_t(seed) * 7919 + 17) & 0xff);
  return v;
}

// What a receive buffer that held `before` holds after the rows of `sent` arrived.
std::vector<char> after_rows(std::vector<char> before, const std::vector<char> &sent) {
  const size_t row = kRowDoubles * sizeof(double), pitch = kPitchDoubles * sizeof(double);
  for (size_t r = 0; r < size_t(kRows); ++r) std::memcpy(&before[r * pitch], &sent[r * pitch], row);
  return before;
}

struct DeviceBuffer {
  void *ptr = nullptr;
  DeviceBuffer() {
    if (gpu_backend().allocate_device(kExtent, &ptr) != Status::Ok) {
      expect(false, "allocating emulated device memory");
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  ~DeviceBuffer() { gpu_backend().free_device(ptr); }
  void upload(const std::vector<char> &v) { expect(gpu_backend().copy(ptr, v.data(), v.size()) == Status::Ok, "upload"); }
  std::vector<char> download() const {
    std::vector<char> v(kExtent);
    expect(gpu_backend().copy(v.data(), ptr, v.size()) == Status::Ok, "download");
    return v;
  }
};

// The method the model gives a message of `type` (one element) to a peer of class `peer`.
Method model_method(const Plan &plan, PeerClass peer, bool batched = false) {
  return choose_transfer(Method::Auto, mpi_is_cuda_aware(), describe_message(plan, batched, peer), config(),
                         active_profile())
      .method;
}

// The method a send to `dest` (a receive from `source`) of `comm` chooses, checked
// against the model's for `expected`.
void check_send_method(void *buf, MPI_Datatype type, int dest, MPI_Comm comm, PeerClass expected,
                       const std::string &what) {
  SendPlan sp;
  Outgoing out;
  expect(plan_send(buf, 1, type, dest, comm, "MPI_Send", sp, out) == MPI_SUCCESS, what + ": plan_send");
  expect(sp.kind == SendPlan::Kind::Pack, what + ": the send is packed");
  expect(sp.transfer.method == model_method(sp.plan, expected),
         what + ": the send's method is " + to_string(sp.transfer.method) + ", the model's for a " +
             to_string(expected) + " peer " + to_string(model_method(sp.plan, expected)));
}

void check_recv_method(void *buf, MPI_Datatype type, int source, MPI_Comm comm, PeerClass expected,
                       const std::string &what) {
  Incoming in;
  expect(prepare_recv(buf, 1, type, source, comm, "MPI_Recv", in) == MPI_SUCCESS, what + ": prepare_recv");
  expect(in.after == Incoming::After::Unpack, what + ": the receive is unpacked");
  expect(in.transfer.method == model_method(in.plan, expected),
         what + ": the receive's method is " + to_string(in.transfer.method) + ", the model's for a " +
             to_string(expected) + " peer " + to_string(model_method(in.plan, expected)));
}

// Each rank of `comm` sends its rows to the next and receives the previous one's, blocking
// or not; the bytes must arrive exact.
void ring(MPI_Comm comm, MPI_Datatype type, bool nonblocking, const std::string &what) {
  int rank = 0, size = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  DeviceBuffer send, recv;
  send.upload(pattern(rank));
  const std::vector<char> before = pattern(1000 + rank);
  recv.upload(before);
  if (nonblocking) {
    MPI_Request r[2];
    MPI_Irecv(recv.ptr, 1, type, prev, 5, comm, &r[0]);
    MPI_Isend(send.ptr, 1, type, next, 5, comm, &r[1]);
    MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
  } else {
    MPI_Sendrecv(send.ptr, 1, type, next, 5, recv.ptr, 1, type, prev, 5, comm, MPI_STATUS_IGNORE);
  }
  expect(recv.download() == after_rows(before, pattern(prev)), what + ": the rows arrive exact");
}

// The truth, gathered here without TEMPI's help: each rank's host name and GPU. (This
// MPI_Allgather is also TEMPI's first collective on MPI_COMM_WORLD, where it learns.)
std::vector<PeerClass> gathered_truth() {
  struct Where {
    char host[MPI_MAX_PROCESSOR_NAME + 1];
    char gpu[64];
  };
  Where mine{};
  int length = 0;
  MPI_Get_processor_name(mine.host, &length);
  std::snprintf(mine.gpu, sizeof mine.gpu, "%s", gpu_backend().device_id().c_str());
  std::vector<Where> all(static_cast<size_t>(g_size));
  MPI_Allgather(&mine, int(sizeof mine), MPI_BYTE, all.data(), int(sizeof mine), MPI_BYTE, MPI_COMM_WORLD);
  std::vector<PeerClass> truth;
  for (int r = 0; r < g_size; ++r) {
    const Where &w = all[size_t(r)];
    truth.push_back(r == g_rank ? PeerClass::Self : classify_peer(!std::strcmp(w.host, mine.host), mine.gpu, w.gpu));
  }
  return truth;
}

// Every rank of `comm`, whose rank i is world rank world_of[i], has its true class.
void check_map(MPI_Comm comm, const std::vector<int> &world_of, const std::vector<PeerClass> &truth,
               const std::string &what) {
  for (size_t i = 0; i < world_of.size(); ++i) {
    const PeerClass c = peer_class(comm, int(i));
    expect(c == truth[size_t(world_of[i])], what + ": rank " + std::to_string(i) + " (world rank " +
                                                std::to_string(world_of[i]) + ") is " + to_string(c) + ", not " +
                                                to_string(truth[size_t(world_of[i])]));
  }
}

}  // namespace

int main(int argc, char **argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  if (g_size < 3 || provided < MPI_THREAD_MULTIPLE) {
    if (g_rank == 0) std::fprintf(stderr, "test_peers: needs 3 ranks or more and MPI_THREAD_MULTIPLE\n");
    MPI_Finalize();
    return 1;
  }
  emulated_set_device_id("emulated:" + std::to_string(g_rank < 2 ? 0 : g_rank));
  ProfileChoice choice;
  choice.profile = tempi::testing::placements_profile();
  choice.path = "(test_peers)";
  expect(install_profile(choice) != nullptr, "installing the profile");
  MPI_Datatype rows;
  MPI_Type_vector(kRows, kRowDoubles, kPitchDoubles, MPI_DOUBLE, &rows);
  MPI_Type_commit(&rows);
  expect(mpi_is_cuda_aware(), "TEMPI_CUDA_AWARE=yes: the device method is available");
  const int next = (g_rank + 1) % g_size;
  DeviceBuffer probe;

  // Before any collective on MPI_COMM_WORLD: nothing is known, and point-to-point calls
  // do not learn.
  for (int r = 0; r < g_size; ++r)
    expect(peer_class(MPI_COMM_WORLD, r) == PeerClass::Unknown, named("before learning: Unknown for rank", r));
  check_send_method(probe.ptr, rows, next, MPI_COMM_WORLD, PeerClass::Unknown, "before learning");
  ring(MPI_COMM_WORLD, rows, false, "before learning, MPI_Sendrecv");
  ring(MPI_COMM_WORLD, rows, true, "before learning, MPI_Isend/MPI_Irecv");
  expect(peer_class(MPI_COMM_WORLD, next) == PeerClass::Unknown, "point-to-point calls learn nothing");

  const std::vector<PeerClass> truth = gathered_truth();
  // The test's own premise: both placements of one host occur, and the profile makes
  // the method differ between them (else nothing here could fail).
  bool same_gpu = false, same_node = false;
  for (int r = 0; r < g_size; ++r) {
    same_gpu |= r != g_rank && truth[size_t(r)] == PeerClass::SameGpu;
    same_node |= truth[size_t(r)] == PeerClass::SameNode;
  }
  if (g_rank < 2) expect(same_gpu && same_node, "ranks 0 and 1 have a peer on their GPU and one on another GPU");
  {
    SendPlan sp;
    Outgoing out;
    plan_send(probe.ptr, 1, rows, next, MPI_COMM_WORLD, "MPI_Send", sp, out);
    expect(model_method(sp.plan, PeerClass::SameGpu) != model_method(sp.plan, PeerClass::SameNode),
           "the profile's choice differs between a peer on this GPU and one on another GPU");
    expect(model_method(sp.plan, PeerClass::SameGpu) != model_method(sp.plan, PeerClass::Self),
           "the profile's choice differs between a peer on this GPU and this process itself");
  }

  // MPI_COMM_WORLD, and what no peer names.
  std::vector<int> identity(static_cast<size_t>(g_size));
  for (int r = 0; r < g_size; ++r) identity[size_t(r)] = r;
  check_map(MPI_COMM_WORLD, identity, truth, "MPI_COMM_WORLD");
  expect(peer_class(MPI_COMM_WORLD, MPI_ANY_SOURCE) == PeerClass::Unknown, "MPI_ANY_SOURCE is Unknown");
  expect(peer_class(MPI_COMM_WORLD, MPI_PROC_NULL) == PeerClass::Unknown, "MPI_PROC_NULL is Unknown");
  expect(peer_class(MPI_COMM_WORLD, g_size) == PeerClass::Unknown, "a rank beyond the group is Unknown");
  check_map(MPI_COMM_SELF, {g_rank}, truth, "MPI_COMM_SELF");

  // The call sites: each send and receive with its peer's class, and the bytes.
  for (int r = 0; r < g_size; ++r) {
    if (r == g_rank) continue;
    check_send_method(probe.ptr, rows, r, MPI_COMM_WORLD, truth[size_t(r)], named("a send to rank", r));
    check_recv_method(probe.ptr, rows, r, MPI_COMM_WORLD, truth[size_t(r)], named("a receive from rank", r));
  }
  check_send_method(probe.ptr, rows, g_rank, MPI_COMM_WORLD, PeerClass::Self, "a send to this rank");
  check_recv_method(probe.ptr, rows, g_rank, MPI_COMM_WORLD, PeerClass::Self, "a receive from this rank");
  check_recv_method(probe.ptr, rows, MPI_ANY_SOURCE, MPI_COMM_WORLD, PeerClass::Unknown, "MPI_ANY_SOURCE");
  ring(MPI_COMM_WORLD, rows, false, "learned, MPI_Sendrecv");
  ring(MPI_COMM_WORLD, rows, true, "learned, MPI_Isend/MPI_Irecv");

  // A communicator in reverse order, and one of every other rank.
  MPI_Comm reversed, parity;
  MPI_Comm_split(MPI_COMM_WORLD, 0, g_size - g_rank, &reversed);
  std::vector<int> reversed_world;
  for (int r = g_size - 1; r >= 0; --r) reversed_world.push_back(r);
  check_map(reversed, reversed_world, truth, "reversed");
  check_send_method(probe.ptr, rows, g_size - 1 - next, reversed, truth[size_t(next)], "a send on the reversed one");
  ring(reversed, rows, true, "reversed, MPI_Isend/MPI_Irecv");
  MPI_Comm_split(MPI_COMM_WORLD, g_rank % 2, g_rank, &parity);
  std::vector<int> parity_world, other_world;
  for (int r = 0; r < g_size; ++r) (r % 2 == g_rank % 2 ? parity_world : other_world).push_back(r);
  check_map(parity, parity_world, truth, "every other rank");
  // An intercommunicator between them: its ranks are the other group's.
  MPI_Comm inter;
  MPI_Intercomm_create(parity, 0, MPI_COMM_WORLD, g_rank % 2 ? 0 : 1, 9, &inter);
  check_map(inter, other_world, truth, "the intercommunicator's remote group");
  MPI_Comm_free(&inter);
  MPI_Comm_free(&parity);

  // A map goes with its communicator: the next one, often on the same handle, is new.
  const MPI_Comm old_handle = reversed;
  MPI_Comm_free(&reversed);
  MPI_Comm again;
  MPI_Comm_split(MPI_COMM_WORLD, 0, g_rank, &again);
  check_map(again, identity, truth, std::string("a new communicator") +
                                        (again == old_handle ? " on the freed one's handle" : ""));

  // Threads that meet a new communicator at once.
  MPI_Comm shared;
  MPI_Comm_split(MPI_COMM_WORLD, 0, g_size - g_rank, &shared);
  std::vector<std::thread> threads;
  std::vector<int> wrong(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 1000; ++i)
        for (int r = 0; r < g_size; ++r) wrong[size_t(t)] += peer_class(shared, r) != truth[size_t(g_size - 1 - r)];
    });
  for (std::thread &th : threads) th.join();
  for (int t = 0; t < 4; ++t) expect(wrong[size_t(t)] == 0, named("lookups from several threads: wrong in thread", t));
  MPI_Comm_free(&shared);
  MPI_Comm_free(&again);

  MPI_Type_free(&rows);
  int failures = 0;
  MPI_Allreduce(&g_failures, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (g_rank == 0)
    std::printf("test_peers: %d ranks, %s: %d failures\n", g_size, failures ? "FAILED" : "passed", failures);
  MPI_Finalize();
  return failures ? 1 : 0;
}
