// Many nonblocking point-to-point requests at once (docs/design.md, "Many messages in flight (the engine)"):
// storms of requests on mixed datatypes and memory completed by one completion call,
// buffer reuse after completion, the non-overtaking rule, progress of a send while its
// sender blocks in another call, MPI_Request_free, MPI_Cancel, MPI_Request_get_status,
// and threads. Written against the MPI API only, so that it holds for any correct
// implementation. One source, built like test_p2p.cpp (tests/meson.build):
//   P2P_HOST_BUFFERS, without TEMPI   what the MPI library itself does (the reference)
//   P2P_HOST_BUFFERS, with TEMPI      must behave identically: host buffers pass through
//   emulated GPU backend              "GPU" buffers in emulated device memory
//   P2P_REAL_GPU                      real GPU buffers (gpu suite; exit 77 without a GPU)
// Rank r talks to rank 1 - r; ranks above 1 take no part. A test that would hang
// instead stops the job with a message saying where (see Watchdog and abort_job).
#define CATCH_CONFIG_RUNNER
#include <mpi.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "p2p_main.hpp"
#include "p2p_support.hpp"

using namespace p2p;

namespace {

int g_rank = -1;                   // this process's rank in MPI_COMM_WORLD
MPI_Comm g_pair = MPI_COMM_NULL;  // ranks 0 and 1 (barriers that ranks above 1 skip)

using Clock = std::chrono::steady_clock;
constexpr std::chrono::seconds kDeadline{30};

// Ends the job when something that must happen did not happen in time: the peer is
// then blocked in a call that cannot return, so failing this rank alone would hang.
[[noreturn]] void abort_job(const std::string &what) {
  std::fprintf(stderr,
               "test_storm: FAIL: rank %d: %s did not happen within %d s: a nonblocking send made no progress "
               "while its sender was blocked in another MPI call. Aborting the job.\n",
               g_rank, what.c_str(), int(kDeadline.count()));
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 3);
  std::_Exit(3);
}

// Polls `req` with MPI_Test until it completes (abort_job after the deadline).
void test_until_done(MPI_Request &req, MPI_Status *status, const std::string &what) {
  const auto give_up = Clock::now() + kDeadline;
  for (int flag = 0; !flag;) {
    MPI_OK(MPI_Test(&req, &flag, status));
    if (!flag && Clock::now() > give_up) abort_job(what);
  }
}

// A whole test case that takes far longer than it should stops the job, saying which
// (a request that never completes would otherwise hang until the test harness's timeout).
class Watchdog {
 public:
  explicit Watchdog(std::string what, int seconds = 120)
      : what_(std::move(what)), thread_([this, seconds] {
          std::unique_lock<std::mutex> lock(mutex_);
          if (!cv_.wait_for(lock, std::chrono::seconds(seconds), [this] { return done_; })) {
            std::fprintf(stderr, "test_storm: FAIL: rank %d spent more than %d s in \"%s\" (a request that never "
                                 "completes?); stopping\n", g_rank, seconds, what_.c_str());
            std::fflush(stderr);
            std::_Exit(4);
          }
        }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Watchdog(const Watchdog &) = delete;
  Watchdog &operator=(const Watchdog &) = delete;

 private:
  std::string what_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

// A status no call wrote: its fields match no real message.
MPI_Status unwritten_status() {
  MPI_Status st{};
  st.MPI_SOURCE = -77;
  st.MPI_TAG = -77;
  st.MPI_ERROR = -77;
  return st;
}

bool cancelled(const MPI_Status &st) {
  int c = -1;
  MPI_Test_cancelled(&st, &c);
  return c != 0;
}

std::vector<int> ints(size_t n, int seed) {
  std::vector<int> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = seed * 1000 + int(i);
  return v;
}

enum class Completion { Wait, Waitall, Waitany, Waitsome, Test, Testall, Testany, Testsome };
const char *const kCompletionNames[] = {"Wait", "Waitall", "Waitany", "Waitsome",
                                        "Test", "Testall", "Testany", "Testsome"};
constexpr Completion kCompletions[] = {Completion::Wait, Completion::Waitall, Completion::Waitany,
                                       Completion::Waitsome, Completion::Test, Completion::Testall,
                                       Completion::Testany, Completion::Testsome};

// Completes every request in the style of one completion call; statuses[i] belongs to
// reqs[i]. With `statuses` null, every status is ignored (MPI_STATUS(ES)_IGNORE).
// Afterwards every handle must be MPI_REQUEST_NULL and the call must say nothing is left.
void complete_all(Completion how, std::vector<MPI_Request> &reqs, std::vector<MPI_Status> *statuses) {
  const int n = int(reqs.size());
  const bool keep = statuses != nullptr;
  if (keep) statuses->assign(reqs.size(), unwritten_status());
  MPI_Status *all = keep ? statuses->data() : MPI_STATUSES_IGNORE;
  std::vector<int> indices(reqs.size());
  std::vector<MPI_Status> some(reqs.size());
  MPI_Status one_status;
  MPI_Status *one = keep ? &one_status : MPI_STATUS_IGNORE;
  int done = 0, flag = 0, index = 0, outcount = 0;
  switch (how) {
    case Completion::Wait:
      for (int i = 0; i < n; ++i) MPI_OK(MPI_Wait(&reqs[i], keep ? &(*statuses)[i] : MPI_STATUS_IGNORE));
      break;
    case Completion::Waitall:
      MPI_OK(MPI_Waitall(n, reqs.data(), all));
      break;
    case Completion::Waitany:
      for (int k = 0; k < n; ++k) {
        MPI_OK(MPI_Waitany(n, reqs.data(), &index, one));
        if (index == MPI_UNDEFINED) FAIL("MPI_Waitany found no active request with " << n - k << " left");
        if (keep) (*statuses)[index] = one_status;
      }
      MPI_OK(MPI_Waitany(n, reqs.data(), &index, one));
      CHECK(index == MPI_UNDEFINED);
      break;
    case Completion::Waitsome:
      while (done < n) {
        MPI_OK(MPI_Waitsome(n, reqs.data(), &outcount, indices.data(), keep ? some.data() : MPI_STATUSES_IGNORE));
        if (outcount == MPI_UNDEFINED || outcount <= 0) FAIL("MPI_Waitsome completed " << outcount << " requests");
        for (int k = 0; k < outcount && keep; ++k) (*statuses)[indices[k]] = some[k];
        done += outcount;
      }
      MPI_OK(MPI_Waitsome(n, reqs.data(), &outcount, indices.data(), MPI_STATUSES_IGNORE));
      CHECK(outcount == MPI_UNDEFINED);
      break;
    case Completion::Test:
      for (int i = 0; i < n; ++i)
        for (flag = 0; !flag;) MPI_OK(MPI_Test(&reqs[i], &flag, keep ? &(*statuses)[i] : MPI_STATUS_IGNORE));
      break;
    case Completion::Testall:
      for (flag = 0; !flag;) MPI_OK(MPI_Testall(n, reqs.data(), &flag, all));
      break;
    case Completion::Testany:
      while (done < n) {
        MPI_OK(MPI_Testany(n, reqs.data(), &index, &flag, one));
        if (!flag) continue;
        if (index == MPI_UNDEFINED) FAIL("MPI_Testany found no active request with " << n - done << " left");
        if (keep) (*statuses)[index] = one_status;
        ++done;
      }
      MPI_OK(MPI_Testany(n, reqs.data(), &index, &flag, one));
      CHECK(flag);
      CHECK(index == MPI_UNDEFINED);
      break;
    case Completion::Testsome:
      while (done < n) {
        MPI_OK(MPI_Testsome(n, reqs.data(), &outcount, indices.data(), keep ? some.data() : MPI_STATUSES_IGNORE));
        if (outcount == MPI_UNDEFINED) FAIL("MPI_Testsome found no active request with " << n - done << " left");
        for (int k = 0; k < outcount && keep; ++k) (*statuses)[indices[k]] = some[k];
        done += outcount;
      }
      MPI_OK(MPI_Testsome(n, reqs.data(), &outcount, indices.data(), MPI_STATUSES_IGNORE));
      CHECK(outcount == MPI_UNDEFINED);
      break;
  }
  int live = 0;
  for (MPI_Request r : reqs) live += r != MPI_REQUEST_NULL;
  CHECK(live == 0);
}

// ---- storms ----------------------------------------------------------------------------

// What one message of a storm is: the sender's layout and the receiver's (the same type
// signature; the receive may be larger than what is sent).
struct Shape {
  const char *name;
  Layout send, recv;
};

std::vector<Shape> storm_shapes(Types &types) {
  const MPI_Datatype sub = types.add(subarray3d()), vec = types.add(vector2d()),
                     flat = types.add(contiguous_floats(300)), irr = types.add(irregular()),
                     rv = types.add(resized_vector());
  return {{"3-D subarray", {sub, 1}, {sub, 1}},
          {"2-D vector into contiguous floats", {vec, 3}, {flat, 3}},
          {"indexed of struct", {irr, 5}, {irr, 5}},
          {"contiguous floats into 2-D vector", {flat, 2}, {vec, 2}},
          {"MPI_DOUBLE into a larger receive", {MPI_DOUBLE, 100}, {MPI_DOUBLE, 120}},
          {"resized vector, count 4", {rv, 4}, {rv, 4}}};
}

// 30 receives, 30 sends, a host MPI_INT message each way and an MPI_Ibarrier: 63
// requests. Not more than 64: MPICH 4.0.2's MPI_Testall with MPI_STATUSES_IGNORE on more
// than 64 requests (MPIR_CVAR_REQUEST_BATCH_SIZE) fails an assertion when a request
// other than a send or receive is outside the last batch of 64.
constexpr int kStormMessages = 30;
constexpr int kIntMessages = 1;  // host MPI_INT messages TEMPI never tracks
const size_t kIntLengths[kIntMessages] = {1000};

unsigned storm_seed(int round, int sender, int i) { return unsigned(round * 1000 + i * 2 + sender); }

struct Storm {
  int round = 0;
  std::vector<std::unique_ptr<Buf>> ins, outs;
  std::vector<std::vector<int>> int_ins, int_outs;
  std::vector<MPI_Request> reqs;
  std::vector<int> recv_slot, int_recv_slot;  // where each receive's request is in reqs
};

// Message i's properties: mostly GPU memory with some host memory on either side,
// some wildcard receives (MPI_ANY_TAG takes message i only if order is kept), some
// synchronous sends.
const Shape &shape_of(const std::vector<Shape> &shapes, int i) { return shapes[size_t(i) % shapes.size()]; }
Where send_memory(int i) { return i % 5 == 4 ? Where::Host : Where::Gpu; }
Where recv_memory(int i) { return i % 7 == 3 ? Where::Host : Where::Gpu; }
int recv_source(int i, int peer) { return i % 9 == 0 ? MPI_ANY_SOURCE : peer; }
int recv_tag(int i) { return i % 11 == 5 ? MPI_ANY_TAG : 100 + i; }
bool synchronous(int i) { return i % 10 == 7; }

// Posts a storm: per message an MPI_Irecv and an MPI_Isend (all receives first, or
// interleaved per message as a halo exchange does per neighbour), plus host MPI_INT
// messages and an MPI_Ibarrier in the same array.
void post_storm(const std::vector<Shape> &shapes, bool interleaved, Storm &s) {
  const int me = g_rank, peer = 1 - me;
  s.recv_slot.assign(kStormMessages, -1);
  s.int_recv_slot.assign(kIntMessages, -1);
  for (int i = 0; i < kStormMessages; ++i) {
    const Shape &sh = shape_of(shapes, i);
    s.ins.push_back(std::make_unique<Buf>(recv_memory(i), sh.recv.span()));
    s.ins.back()->fill(kPoison);
    s.outs.push_back(std::make_unique<Buf>(send_memory(i), sh.send.span()));
    s.outs.back()->upload(pattern(sh.send.span(), storm_seed(s.round, me, i)));
  }
  auto post_recv = [&](int i) {
    const Shape &sh = shape_of(shapes, i);
    s.recv_slot[i] = int(s.reqs.size());
    s.reqs.emplace_back();
    MPI_OK(MPI_Irecv(s.ins[i]->get(), sh.recv.count, sh.recv.type, recv_source(i, peer), recv_tag(i), MPI_COMM_WORLD,
                     &s.reqs.back()));
  };
  auto post_send = [&](int i) {
    const Shape &sh = shape_of(shapes, i);
    s.reqs.emplace_back();
    if (synchronous(i))
      MPI_OK(MPI_Issend(s.outs[i]->get(), sh.send.count, sh.send.type, peer, 100 + i, MPI_COMM_WORLD, &s.reqs.back()));
    else
      MPI_OK(MPI_Isend(s.outs[i]->get(), sh.send.count, sh.send.type, peer, 100 + i, MPI_COMM_WORLD, &s.reqs.back()));
  };
  auto post_barrier = [&] {
    s.reqs.emplace_back();
    MPI_OK(MPI_Ibarrier(g_pair, &s.reqs.back()));
  };
  if (interleaved) {
    for (int i = 0; i < kStormMessages; ++i) {
      post_recv(i);
      post_send(i);
      if (i == 10) post_barrier();
    }
  } else {
    for (int i = 0; i < kStormMessages; ++i) post_recv(i);
    post_barrier();
    for (int i = 0; i < kStormMessages; ++i) post_send(i);
  }
  // Host messages after the typed ones: a wildcard receive above must not get them.
  for (int k = 0; k < kIntMessages; ++k) {
    s.int_ins.push_back(std::vector<int>(kIntLengths[k] + 5, -1));
    s.int_recv_slot[k] = int(s.reqs.size());
    s.reqs.emplace_back();
    MPI_OK(MPI_Irecv(s.int_ins[k].data(), int(kIntLengths[k] + 5), MPI_INT, k ? peer : MPI_ANY_SOURCE, 500 + k,
                     MPI_COMM_WORLD, &s.reqs.back()));
  }
  for (int k = 0; k < kIntMessages; ++k) {
    s.int_outs.push_back(ints(kIntLengths[k], int(storm_seed(s.round, me, k))));
    s.reqs.emplace_back();
    MPI_OK(MPI_Isend(s.int_outs[k].data(), int(kIntLengths[k]), MPI_INT, peer, 500 + k, MPI_COMM_WORLD,
                     &s.reqs.back()));
  }
}

// Every received byte, and (with statuses) each receive's source, tag and count.
void check_storm(const std::vector<Shape> &shapes, const Storm &s, const std::vector<MPI_Status> *statuses) {
  const int peer = 1 - g_rank;
  for (int i = 0; i < kStormMessages; ++i) {
    const Shape &sh = shape_of(shapes, i);
    INFO("message " << i << " (" << sh.name << ", sent from " << to_string(send_memory(i)) << " memory into "
                    << to_string(recv_memory(i)) << " memory)");
    if (statuses) {
      const MPI_Status &st = (*statuses)[size_t(s.recv_slot[i])];
      CHECK(st.MPI_SOURCE == peer);
      CHECK(st.MPI_TAG == 100 + i);
      CHECK(count_of(st, sh.recv.type) == sh.send.bytes() / sh.recv.type_size());
    }
    CHECK(first_difference(s.ins[i]->download(), expected(sh.send, sh.recv, storm_seed(s.round, peer, i))) == "");
  }
  for (int k = 0; k < kIntMessages; ++k) {
    INFO("host MPI_INT message " << k);
    if (statuses) {
      const MPI_Status &st = (*statuses)[size_t(s.int_recv_slot[k])];
      CHECK(st.MPI_SOURCE == peer);
      CHECK(st.MPI_TAG == 500 + k);
      CHECK(count_of(st, MPI_INT) == int(kIntLengths[k]));
    }
    std::vector<int> want = ints(kIntLengths[k], int(storm_seed(s.round, peer, k)));
    want.resize(kIntLengths[k] + 5, -1);
    CHECK(s.int_ins[k] == want);
  }
}

// ---- shapes of single messages -----------------------------------------------------------

Layout small_irregular(Types &types) { return {types.add(irregular()), 5}; }

// 2^15 rows of 3 floats at a pitch of 5: 384 KiB packed, above any eager limit.
Layout large_vector(Types &types) {
  MPI_Datatype t;
  MPI_Type_vector(1 << 15, 3, 5, MPI_FLOAT, &t);
  return {types.add(committed(t)), 1};
}

}  // namespace

// ---- 1 ---------------------------------------------------------------------------------

TEST_CASE("storms of 26+ requests on mixed datatypes", "[storm]") {
  if (g_rank > 1) return;
  Watchdog dog("storms of 26+ requests on mixed datatypes");
  Types types;
  const std::vector<Shape> shapes = storm_shapes(types);
  int round = 0;
  for (bool interleaved : {false, true})
    for (Completion how : kCompletions) {
      INFO("round " << round << ": " << (interleaved ? "Irecv and Isend interleaved per message" : "receives first")
                    << ", completed by MPI_" << kCompletionNames[int(how)]);
      Storm s;
      s.round = round++;
      post_storm(shapes, interleaved, s);
      REQUIRE(s.reqs.size() >= 26);
      std::vector<MPI_Status> statuses;
      complete_all(how, s.reqs, &statuses);
      check_storm(shapes, s, &statuses);
    }
  for (Completion how : kCompletions) {
    INFO("round " << round << ": statuses ignored, completed by MPI_" << kCompletionNames[int(how)]);
    Storm s;
    s.round = round++;
    post_storm(shapes, round % 2 == 0, s);
    complete_all(how, s.reqs, nullptr);
    check_storm(shapes, s, nullptr);
  }
}

// ---- 2 ---------------------------------------------------------------------------------

TEST_CASE("a send buffer may be reused after completion", "[storm][reuse]") {
  // Rank 0 sends three messages from one GPU buffer, overwriting it after each send
  // completes (and poisoning it after the last): data packed after completion shows.
  if (g_rank > 1) return;
  Watchdog dog("a send buffer may be reused after completion");
  Types types;
  const MPI_Datatype sub = types.add(subarray3d()), rv = types.add(resized_vector());
  const Layout layouts[] = {{sub, 1}, small_irregular(types), {rv, 4}, large_vector(types)};
  constexpr int kMessages = 3;
  const Completion hows[] = {Completion::Wait, Completion::Test, Completion::Waitall, Completion::Testsome};
  int tag = 300;
  for (const Layout &l : layouts)
    for (Completion how : hows) {
      INFO("layout of " << l.bytes() << " bytes, completed by MPI_" << kCompletionNames[int(how)]);
      const int first_tag = tag;
      tag += kMessages;
      if (g_rank == 0) {
        Buf b(Where::Gpu, l.span());
        std::vector<int> token{first_tag};
        for (int k = 0; k < kMessages; ++k) {
          b.upload(pattern(l.span(), unsigned(first_tag + k)));
          std::vector<MPI_Request> reqs(1);
          MPI_OK(MPI_Isend(b.get(), l.count, l.type, 1, first_tag + k, MPI_COMM_WORLD, &reqs[0]));
          if (how == Completion::Waitall) {  // with a host request beside it
            reqs.emplace_back();
            MPI_OK(MPI_Isend(token.data(), 1, MPI_INT, 1, 299, MPI_COMM_WORLD, &reqs.back()));
          }
          std::vector<MPI_Status> statuses;
          complete_all(how, reqs, &statuses);
        }
        b.fill(kPoison);
      } else {
        for (int k = 0; k < kMessages; ++k) {
          Buf r(Where::Gpu, l.span());
          r.fill(kPoison);
          MPI_Status st;
          MPI_OK(MPI_Recv(r.get(), l.count, l.type, 0, first_tag + k, MPI_COMM_WORLD, &st));
          CHECK(count_of(st, l.type) == l.count);
          INFO("message " << k << " of " << kMessages);
          CHECK(first_difference(r.download(), expected(l, l, unsigned(first_tag + k))) == "");
          if (how == Completion::Waitall) {
            int token = -1;
            MPI_OK(MPI_Recv(&token, 1, MPI_INT, 0, 299, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            CHECK(token == first_tag);
          }
        }
      }
    }
}

// ---- 3 ---------------------------------------------------------------------------------

TEST_CASE("ordering is kept", "[storm][order]") {
  // One sender, one tag, messages from GPU and host buffers interleaved (and blocking
  // sends among them); the receiver takes them with MPI_ANY_SOURCE and MPI_ANY_TAG. Each
  // message's bytes say which it is, so a message that overtook another shows.
  if (g_rank > 1) return;
  Watchdog dog("ordering is kept");
  Types types;
  const MPI_Datatype vec = types.add(vector2d()), flat = types.add(contiguous_floats(300));
  constexpr int kMessages = 41, kTag = 7, kBig = 150;  // elements of 300 floats
  struct Message {
    Layout layout;
    Where where;
    enum { Isend, Issend, Send } call;
  };
  std::vector<Message> messages;
  for (int k = 0; k < kMessages; ++k) {
    const int n = 1 + k % 3;
    Message m{{vec, n}, Where::Gpu, k % 7 == 4 ? Message::Issend : Message::Isend};
    if (k % 4 == 1) m = {{MPI_FLOAT, 300 * n}, Where::Host, Message::Isend};
    if (k % 4 == 2) m.layout = {flat, n};
    if (k % 4 == 3) m.where = Where::Host;  // a derived type on host memory
    if (k == 9) m = {{vec, kBig}, Where::Gpu, Message::Isend};  // a large GPU message, then a small host one
    if (k == 10) m = {{MPI_FLOAT, 300}, Where::Host, Message::Isend};
    if (k == 20) m.call = Message::Send;    // a blocking send from GPU memory
    if (k == 31) m = {{MPI_FLOAT, 600}, Where::Host, Message::Send};
    messages.push_back(m);
  }
  // The receiver alternates a GPU vector and a host array of floats, each large enough for any message.
  const Layout gpu_in{vec, kBig}, host_in{MPI_FLOAT, 300 * kBig};
  auto receive_layout = [&](int k) { return k % 2 ? host_in : gpu_in; };
  auto receive_memory = [&](int k) { return k % 2 ? Where::Host : Where::Gpu; };

  for (int round = 0; round < 2; ++round) {
    const bool preposted = round == 0;
    const int sender = round, receiver = 1 - round;
    INFO((preposted ? "receives posted before the sends" : "receives after the sends") << ", rank " << sender
                                                                                          << " sends");
    auto seed = [&](int k) { return unsigned(7000 + 100 * round + k); };
    if (g_rank == sender) {
      std::vector<std::unique_ptr<Buf>> outs;
      for (int k = 0; k < kMessages; ++k) {
        outs.push_back(std::make_unique<Buf>(messages[k].where, messages[k].layout.span()));
        outs.back()->upload(pattern(messages[k].layout.span(), seed(k)));
      }
      if (preposted) MPI_OK(MPI_Barrier(g_pair));
      std::vector<MPI_Request> reqs;
      for (int k = 0; k < kMessages; ++k) {
        const Message &m = messages[k];
        void *b = outs[k]->get();
        if (m.call == Message::Send) {
          MPI_OK(MPI_Send(b, m.layout.count, m.layout.type, receiver, kTag, MPI_COMM_WORLD));
          continue;
        }
        reqs.emplace_back();
        if (m.call == Message::Issend)
          MPI_OK(MPI_Issend(b, m.layout.count, m.layout.type, receiver, kTag, MPI_COMM_WORLD, &reqs.back()));
        else
          MPI_OK(MPI_Isend(b, m.layout.count, m.layout.type, receiver, kTag, MPI_COMM_WORLD, &reqs.back()));
      }
      std::vector<MPI_Status> statuses;
      complete_all(preposted ? Completion::Waitall : Completion::Testall, reqs, &statuses);
    } else {
      std::vector<std::unique_ptr<Buf>> ins;
      for (int k = 0; k < kMessages; ++k) {
        ins.push_back(std::make_unique<Buf>(receive_memory(k), receive_layout(k).span()));
        ins.back()->fill(kPoison);
      }
      std::vector<MPI_Status> statuses(kMessages, unwritten_status());
      if (preposted) {
        std::vector<MPI_Request> reqs(kMessages);
        for (int k = 0; k < kMessages; ++k)
          MPI_OK(MPI_Irecv(ins[k]->get(), receive_layout(k).count, receive_layout(k).type, MPI_ANY_SOURCE,
                           MPI_ANY_TAG, MPI_COMM_WORLD, &reqs[k]));
        MPI_OK(MPI_Barrier(g_pair));
        complete_all(Completion::Waitall, reqs, &statuses);
      } else {
        for (int k = 0; k < kMessages; ++k)
          MPI_OK(MPI_Recv(ins[k]->get(), receive_layout(k).count, receive_layout(k).type, MPI_ANY_SOURCE,
                          MPI_ANY_TAG, MPI_COMM_WORLD, &statuses[k]));
      }
      for (int k = 0; k < kMessages; ++k) {
        const Layout r = receive_layout(k), &s = messages[k].layout;
        INFO("message " << k << " of " << kMessages << " (" << s.bytes() << " bytes from "
                        << to_string(messages[k].where) << " memory)");
        CHECK(statuses[k].MPI_SOURCE == sender);
        CHECK(statuses[k].MPI_TAG == kTag);
        CHECK(count_of(statuses[k], r.type) == s.bytes() / r.type_size());
        CHECK(first_difference(ins[k]->download(), expected(s, r, seed(k))) == "");
      }
    }
  }
}

// ---- 4 ---------------------------------------------------------------------------------

namespace {

enum class Blocker { Barrier, Probe, Recv, WaitOther };
const char *const kBlockerNames[] = {"rank 0 in MPI_Barrier", "rank 0 in MPI_Barrier, rank 1 probing first",
                                     "rank 0 in MPI_Recv of a GPU reply", "rank 0 in MPI_Wait on another request"};

// Rank 0 posts a GPU send and then blocks in a call that returns only after rank 1
// received that message; rank 1 gives it 30 s.
void sender_blocks_elsewhere(const Layout &l, Blocker blocker, int tag) {
  const std::string what = std::string("the receipt of rank 0's MPI_Isend (") + kBlockerNames[int(blocker)] + ")";
  const Layout reply{MPI_INT, 3};
  if (g_rank == 0) {
    Buf out(Where::Gpu, l.span());
    out.upload(pattern(l.span(), unsigned(tag)));
    MPI_Request req;
    MPI_OK(MPI_Isend(out.get(), l.count, l.type, 1, tag, MPI_COMM_WORLD, &req));
    std::vector<int> answer(3, -1);
    switch (blocker) {
      case Blocker::Barrier:
      case Blocker::Probe:
        MPI_OK(MPI_Barrier(g_pair));
        break;
      case Blocker::Recv: {
        Buf in(Where::Gpu, sizeof(int) * 3);
        in.fill(kPoison);
        MPI_OK(MPI_Recv(in.get(), reply.count, reply.type, 1, tag + 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        const std::vector<char> got = in.download();
        std::memcpy(answer.data(), got.data(), sizeof(int) * 3);
        CHECK(answer == ints(3, tag));
        break;
      }
      case Blocker::WaitOther: {
        MPI_Request other;
        MPI_OK(MPI_Irecv(answer.data(), reply.count, reply.type, 1, tag + 1, MPI_COMM_WORLD, &other));
        MPI_OK(MPI_Wait(&other, MPI_STATUS_IGNORE));
        CHECK(other == MPI_REQUEST_NULL);
        CHECK(answer == ints(3, tag));
        break;
      }
    }
    MPI_OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
    CHECK(req == MPI_REQUEST_NULL);
  } else {
    Buf in(Where::Gpu, l.span());
    in.fill(kPoison);
    MPI_Status st = unwritten_status();
    if (blocker == Blocker::Probe) {
      const auto give_up = Clock::now() + kDeadline;
      for (int flag = 0; !flag;) {
        MPI_OK(MPI_Iprobe(0, tag, MPI_COMM_WORLD, &flag, &st));
        if (!flag && Clock::now() > give_up) abort_job("the arrival (MPI_Iprobe) of rank 0's MPI_Isend");
      }
      CHECK(count_of(st, l.type) == l.count);
      MPI_OK(MPI_Probe(0, tag, MPI_COMM_WORLD, &st));  // there already: returns at once
      CHECK(st.MPI_TAG == tag);
      MPI_OK(MPI_Recv(in.get(), count_of(st, l.type), l.type, 0, tag, MPI_COMM_WORLD, &st));
    } else {
      MPI_Request req;
      MPI_OK(MPI_Irecv(in.get(), l.count, l.type, 0, tag, MPI_COMM_WORLD, &req));
      test_until_done(req, &st, what);
    }
    CHECK(st.MPI_SOURCE == 0);
    CHECK(st.MPI_TAG == tag);
    CHECK(count_of(st, l.type) == l.count);
    CHECK(first_difference(in.download(), expected(l, l, unsigned(tag))) == "");
    if (blocker == Blocker::Barrier || blocker == Blocker::Probe) {
      MPI_OK(MPI_Barrier(g_pair));
    } else {
      Buf out(blocker == Blocker::Recv ? Where::Gpu : Where::Host, sizeof(int) * 3);
      const std::vector<int> v = ints(3, tag);
      out.upload(std::vector<char>(reinterpret_cast<const char *>(v.data()),
                                   reinterpret_cast<const char *>(v.data() + 3)));
      MPI_OK(MPI_Send(out.get(), reply.count, reply.type, 0, tag + 1, MPI_COMM_WORLD));
    }
  }
}

}  // namespace

TEST_CASE("a nonblocking send progresses while the sender blocks elsewhere", "[storm][progress]") {
  if (g_rank > 1) return;
  Watchdog dog("a nonblocking send progresses while the sender blocks elsewhere", 240);
  Types types;
  const Layout layouts[] = {small_irregular(types), large_vector(types)};
  int tag = 400;
  for (const Layout &l : layouts)
    for (Blocker b : {Blocker::Barrier, Blocker::Probe, Blocker::Recv, Blocker::WaitOther}) {
      INFO(kBlockerNames[int(b)] << ", " << l.bytes() << " bytes");
      sender_blocks_elsewhere(l, b, tag);
      tag += 2;
    }
}

// ---- 5 ---------------------------------------------------------------------------------

TEST_CASE("MPI_Request_free on pending sends and receives", "[storm][free]") {
  if (g_rank > 1) return;
  Watchdog dog("MPI_Request_free on pending sends and receives");
  Types types;
  const MPI_Datatype sub = types.add(subarray3d());
  struct Item {
    Layout layout;
    Where where;
  };
  const Item items[] = {{small_irregular(types), Where::Gpu},
                        {{sub, 1}, Where::Gpu},
                        {small_irregular(types), Where::Host},
                        {large_vector(types), Where::Gpu}};
  constexpr int kItems = 4;

  SECTION("freed sends") {
    // Rank 0 frees its send requests at once and learns from rank 1's reply when the
    // buffers may go; rank 1 gives every message 30 s.
    if (g_rank == 0) {
      std::vector<std::unique_ptr<Buf>> outs;
      for (int k = 0; k < kItems; ++k) {
        const Item &it = items[k];
        outs.push_back(std::make_unique<Buf>(it.where, it.layout.span()));
        outs.back()->upload(pattern(it.layout.span(), unsigned(500 + k)));
        MPI_Request req;
        MPI_OK(MPI_Isend(outs.back()->get(), it.layout.count, it.layout.type, 1, 500 + k, MPI_COMM_WORLD, &req));
        MPI_OK(MPI_Request_free(&req));
        CHECK(req == MPI_REQUEST_NULL);
      }
      int done = 0;
      MPI_OK(MPI_Recv(&done, 1, MPI_INT, 1, 599, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
      CHECK(done == kItems);
    } else {
      int done = 0;
      for (int k = 0; k < kItems; ++k) {
        const Item &it = items[k];
        INFO("freed send " << k << " from " << to_string(it.where) << " memory, " << it.layout.bytes() << " bytes");
        Buf in(Where::Gpu, it.layout.span());
        in.fill(kPoison);
        MPI_Request req;
        MPI_Status st;
        MPI_OK(MPI_Irecv(in.get(), it.layout.count, it.layout.type, 0, 500 + k, MPI_COMM_WORLD, &req));
        test_until_done(req, &st, "the receipt of a send whose request rank 0 freed");
        CHECK(count_of(st, it.layout.type) == it.layout.count);
        const std::string diff = first_difference(in.download(), expected(it.layout, it.layout, unsigned(500 + k)));
        CHECK(diff == "");
        done += diff.empty();
      }
      MPI_OK(MPI_Send(&done, 1, MPI_INT, 0, 599, MPI_COMM_WORLD));
    }
  }

  SECTION("freed receives") {
    // Rank 1 frees its receive requests at once; the data must still arrive, seen only
    // in the buffers, while rank 1 keeps calling MPI.
    if (g_rank == 1) {
      std::vector<std::unique_ptr<Buf>> ins;
      for (int k = 0; k < kItems; ++k) {
        const Item &it = items[k];
        ins.push_back(std::make_unique<Buf>(it.where, it.layout.span()));
        ins.back()->fill(kPoison);
        MPI_Request req;
        MPI_OK(MPI_Irecv(ins.back()->get(), it.layout.count, it.layout.type, 0, 550 + k, MPI_COMM_WORLD, &req));
        MPI_OK(MPI_Request_free(&req));
        CHECK(req == MPI_REQUEST_NULL);
      }
      MPI_OK(MPI_Barrier(g_pair));  // the receives are posted
      const auto give_up = Clock::now() + kDeadline;  // for all of them
      bool all_arrived = true;
      for (int k = 0; k < kItems; ++k) {
        const Item &it = items[k];
        INFO("freed receive " << k << " into " << to_string(it.where) << " memory, " << it.layout.bytes()
                              << " bytes");
        const std::vector<char> want = expected(it.layout, it.layout, unsigned(550 + k));
        std::vector<char> got;
        while ((!ins[k]->download_quietly(got) || got != want) && Clock::now() < give_up) {
          int flag = 0;
          MPI_OK(MPI_Testall(0, nullptr, &flag, MPI_STATUSES_IGNORE));
          MPI_OK(MPI_Iprobe(MPI_ANY_SOURCE, 32000, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
        }
        const std::string diff = first_difference(ins[k]->download(), want);
        CHECK(diff == "");
        all_arrived = all_arrived && diff.empty();
      }
      // A receive that never finished may still write into its buffer: keep them all.
      if (!all_arrived)
        for (std::unique_ptr<Buf> &b : ins) b.release();
    } else {
      MPI_OK(MPI_Barrier(g_pair));
      for (int k = 0; k < kItems; ++k) {
        const Item &it = items[k];
        Buf out(it.where, it.layout.span());
        out.upload(pattern(it.layout.span(), unsigned(550 + k)));
        MPI_OK(MPI_Send(out.get(), it.layout.count, it.layout.type, 1, 550 + k, MPI_COMM_WORLD));
      }
    }
    MPI_OK(MPI_Barrier(g_pair));
  }
}

// ---- 6 ---------------------------------------------------------------------------------

TEST_CASE("MPI_Cancel of a pending receive", "[storm][cancel]") {
  if (g_rank > 1) return;
  Watchdog dog("MPI_Cancel of a pending receive");
  const int peer = 1 - g_rank;
  Types types;
  const Layout l{types.add(vector2d()), 2};
  const std::vector<char> poison(l.span(), kPoison);

  SECTION("alone") {
    Buf b(Where::Gpu, l.span());
    b.fill(kPoison);
    MPI_Request req;
    MPI_OK(MPI_Irecv(b.get(), l.count, l.type, peer, 999, MPI_COMM_WORLD, &req));
    MPI_OK(MPI_Cancel(&req));
    MPI_Status st = unwritten_status();
    MPI_OK(MPI_Wait(&req, &st));
    CHECK(req == MPI_REQUEST_NULL);
    CHECK(cancelled(st));
    CHECK(first_difference(b.download(), poison) == "");
  }

  SECTION("in one completion call with requests that complete") {
    const Completion hows[] = {Completion::Waitall, Completion::Testall, Completion::Waitsome, Completion::Testany};
    int round = 0;
    for (Completion how : hows) {
      INFO("completed by MPI_" << kCompletionNames[int(how)]);
      const int tag = 610 + round++;
      // [0] a receive that gets data, [1..3] receives that are cancelled, [4] the send
      Buf in(Where::Gpu, l.span()), out(Where::Gpu, l.span());
      Buf never_gpu(Where::Gpu, l.span()), never_host(Where::Host, l.span()), never_any(Where::Gpu, l.span());
      for (Buf *b : {&in, &never_gpu, &never_host, &never_any}) b->fill(kPoison);
      out.upload(pattern(l.span(), unsigned(tag * 2 + g_rank)));
      std::vector<MPI_Request> reqs(5);
      MPI_OK(MPI_Irecv(in.get(), l.count, l.type, peer, tag, MPI_COMM_WORLD, &reqs[0]));
      MPI_OK(MPI_Irecv(never_gpu.get(), l.count, l.type, peer, 998, MPI_COMM_WORLD, &reqs[1]));
      MPI_OK(MPI_Irecv(never_host.get(), l.count, l.type, MPI_ANY_SOURCE, 997, MPI_COMM_WORLD, &reqs[2]));
      MPI_OK(MPI_Irecv(never_any.get(), l.count, l.type, MPI_ANY_SOURCE, 996, MPI_COMM_WORLD, &reqs[3]));
      MPI_OK(MPI_Isend(out.get(), l.count, l.type, peer, tag, MPI_COMM_WORLD, &reqs[4]));
      for (int i = 1; i <= 3; ++i) MPI_OK(MPI_Cancel(&reqs[i]));
      std::vector<MPI_Status> statuses;
      complete_all(how, reqs, &statuses);
      CHECK_FALSE(cancelled(statuses[0]));
      CHECK(statuses[0].MPI_SOURCE == peer);
      CHECK(statuses[0].MPI_TAG == tag);
      CHECK(count_of(statuses[0], l.type) == l.count);
      CHECK(first_difference(in.download(), expected(l, l, unsigned(tag * 2 + peer))) == "");
      for (int i = 1; i <= 3; ++i) CHECK(cancelled(statuses[i]));
      CHECK(first_difference(never_gpu.download(), poison) == "");
      CHECK(first_difference(never_host.download(), poison) == "");
      CHECK(first_difference(never_any.download(), poison) == "");
    }
  }
}

// ---- 7 ---------------------------------------------------------------------------------

TEST_CASE("MPI_Request_get_status", "[storm][get_status]") {
  if (g_rank > 1) return;
  Watchdog dog("MPI_Request_get_status");
  const int peer = 1 - g_rank;
  Types types;
  const Layout layouts[] = {small_irregular(types), large_vector(types)};
  int tag = 700;
  for (const Layout &l : layouts) {
    INFO(l.bytes() << " bytes");
    ++tag;
    Buf in(Where::Gpu, l.span()), out(Where::Gpu, l.span());
    in.fill(kPoison);
    out.upload(pattern(l.span(), unsigned(tag * 2 + g_rank)));
    MPI_Request recv, send;
    MPI_OK(MPI_Irecv(in.get(), l.count, l.type, peer, tag, MPI_COMM_WORLD, &recv));
    MPI_OK(MPI_Isend(out.get(), l.count, l.type, peer, tag, MPI_COMM_WORLD, &send));
    int flag = 0;
    MPI_Status st = unwritten_status();
    while (!flag) MPI_OK(MPI_Request_get_status(send, &flag, &st));
    CHECK(send != MPI_REQUEST_NULL);
    flag = 0;
    st = unwritten_status();
    while (!flag) MPI_OK(MPI_Request_get_status(recv, &flag, &st));
    CHECK(recv != MPI_REQUEST_NULL);
    CHECK(st.MPI_SOURCE == peer);
    CHECK(st.MPI_TAG == tag);
    CHECK(count_of(st, l.type) == l.count);
    const std::vector<char> want = expected(l, l, unsigned(tag * 2 + peer));
    CHECK(first_difference(in.download(), want) == "");  // in place before the request is freed
    MPI_Status again = unwritten_status();
    MPI_OK(MPI_Request_get_status(recv, &flag, &again));  // asking twice changes nothing
    CHECK(flag);
    CHECK(again.MPI_TAG == tag);
    MPI_Status last = unwritten_status();
    MPI_OK(MPI_Wait(&recv, &last));
    CHECK(recv == MPI_REQUEST_NULL);
    CHECK(last.MPI_SOURCE == st.MPI_SOURCE);
    CHECK(last.MPI_TAG == st.MPI_TAG);
    CHECK(count_of(last, l.type) == count_of(st, l.type));
    CHECK(first_difference(in.download(), want) == "");
    MPI_OK(MPI_Wait(&send, MPI_STATUS_IGNORE));
    CHECK(send == MPI_REQUEST_NULL);
  }
}

// ---- 8 ---------------------------------------------------------------------------------

TEST_CASE("threads storm under MPI_THREAD_MULTIPLE", "[storm][threads]") {
  int provided = 0;
  MPI_Query_thread(&provided);
  if (provided < MPI_THREAD_MULTIPLE) {
    WARN("thread level " << provided << ", not MPI_THREAD_MULTIPLE (set TEMPI_TEST_THREADS=1): not tested here");
    return;
  }
  if (g_rank > 1) return;
  Watchdog dog("threads storm under MPI_THREAD_MULTIPLE");
  const int me = g_rank, peer = 1 - me;
  Types types;
  const MPI_Datatype vec = types.add(vector2d()), sub = types.add(subarray3d());
  const Layout shapes[] = {small_irregular(types), {vec, 1}, {sub, 1}};
  constexpr int kThreads = 4, kRounds = 20, kEach = 8;
  auto layout_of = [&](int k) { return shapes[k % 3]; };
  auto memory_of = [](int k) { return k % 4 == 3 ? Where::Host : Where::Gpu; };
  // Buffers are made here: Catch's macros stay on this thread.
  std::vector<std::vector<std::unique_ptr<Buf>>> ins(kThreads), outs(kThreads);
  for (int t = 0; t < kThreads; ++t)
    for (int k = 0; k < kEach; ++k) {
      ins[t].push_back(std::make_unique<Buf>(memory_of(k), layout_of(k).span()));
      outs[t].push_back(std::make_unique<Buf>(memory_of(k + 1), layout_of(k).span()));
    }
  std::vector<std::string> failures(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      std::string &failure = failures[t];
      std::vector<char> got;
      for (int r = 0; r < kRounds && failure.empty(); ++r) {
        auto tag = [&](int k) { return 10000 + t * 200 + r * kEach + k; };
        auto seed = [&](int k, int sender) { return unsigned(tag(k) * 2 + sender); };
        std::vector<MPI_Request> reqs(2 * kEach);
        for (int k = 0; k < kEach && failure.empty(); ++k) {
          const Layout l = layout_of(k);
          if (!ins[t][k]->upload_quietly(std::vector<char>(l.span(), kPoison)) ||
              !outs[t][k]->upload_quietly(pattern(l.span(), seed(k, me))))
            failure = "a copy to the buffers failed";
        }
        if (!failure.empty()) break;
        int err = MPI_SUCCESS;
        for (int k = 0; k < kEach; ++k)
          err |= MPI_Irecv(ins[t][k]->get(), layout_of(k).count, layout_of(k).type, k % 3 ? peer : MPI_ANY_SOURCE,
                           tag(k), MPI_COMM_WORLD, &reqs[k]);
        for (int k = 0; k < kEach; ++k)
          err |= MPI_Isend(outs[t][k]->get(), layout_of(k).count, layout_of(k).type, peer, tag(k), MPI_COMM_WORLD,
                           &reqs[kEach + k]);
        std::vector<MPI_Status> statuses(2 * kEach, unwritten_status());
        if (r % 2) {
          err |= MPI_Waitall(2 * kEach, reqs.data(), statuses.data());
        } else {
          for (int flag = 0; !flag && err == MPI_SUCCESS;)
            err |= MPI_Testall(2 * kEach, reqs.data(), &flag, statuses.data());
        }
        const std::string where = "thread " + std::to_string(t) + " round " + std::to_string(r) + ": ";
        if (err != MPI_SUCCESS) {
          failure = where + "an MPI call failed";
          break;
        }
        for (int k = 0; k < 2 * kEach; ++k)
          if (reqs[k] != MPI_REQUEST_NULL) failure = where + "request " + std::to_string(k) + " is still live";
        for (int k = 0; k < kEach && failure.empty(); ++k) {
          const Layout l = layout_of(k);
          const MPI_Status &st = statuses[k];
          int n = -1;
          MPI_Get_count(&st, l.type, &n);
          if (st.MPI_SOURCE != peer || st.MPI_TAG != tag(k) || n != l.count) {
            failure = where + "message " + std::to_string(k) + ": status says source " + std::to_string(st.MPI_SOURCE) +
                      ", tag " + std::to_string(st.MPI_TAG) + ", count " + std::to_string(n);
            break;
          }
          const std::string diff = ins[t][k]->download_quietly(got)
                                       ? first_difference(got, expected(l, l, seed(k, peer)))
                                       : "a copy from the buffer failed";
          if (!diff.empty()) failure = where + "message " + std::to_string(k) + ": " + diff;
        }
      }
    });
  for (std::thread &th : threads) th.join();
  for (const std::string &f : failures) CHECK(f == "");
}

// ---- 4b --------------------------------------------------------------------------------

namespace {

enum class Collective { SplitType, Cart, DistGraph };
const char *const kCollectiveNames[] = {"MPI_Comm_split_type", "MPI_Cart_create", "MPI_Dist_graph_create_adjacent"};

// A blocking collective that makes a communicator (what a halo code calls while setting
// up), on ranks 0 and 1.
void make_and_free_communicator(Collective c) {
  MPI_Comm out = MPI_COMM_NULL;
  const int peer = 1 - g_rank;
  const int dims[1] = {2}, periods[1] = {0};
  switch (c) {
    case Collective::SplitType:
      MPI_OK(MPI_Comm_split_type(g_pair, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &out));
      break;
    case Collective::Cart:
      MPI_OK(MPI_Cart_create(g_pair, 1, dims, periods, 0, &out));
      break;
    case Collective::DistGraph:
      MPI_OK(MPI_Dist_graph_create_adjacent(g_pair, 1, &peer, MPI_UNWEIGHTED, 1, &peer, MPI_UNWEIGHTED,
                                            MPI_INFO_NULL, 0, &out));
      break;
  }
  if (out != MPI_COMM_NULL) MPI_OK(MPI_Comm_free(&out));
}

}  // namespace

// The same rule while the sender is in a blocking collective that TEMPI may not
// intercept. Last in this file: where it fails, the job is aborted.
TEST_CASE("a nonblocking send progresses while the sender is in a communicator-making collective",
          "[storm][progress]") {
  if (g_rank > 1) return;
  Types types;
  const Layout layouts[] = {small_irregular(types), large_vector(types)};
  int tag = 450;
  for (const Layout &l : layouts)
    for (Collective c : {Collective::SplitType, Collective::Cart, Collective::DistGraph}) {
      INFO("rank 0 in " << kCollectiveNames[int(c)] << ", " << l.bytes() << " bytes");
      ++tag;
      if (g_rank == 0) {
        Buf out(Where::Gpu, l.span());
        out.upload(pattern(l.span(), unsigned(tag)));
        MPI_Request req;
        MPI_OK(MPI_Isend(out.get(), l.count, l.type, 1, tag, MPI_COMM_WORLD, &req));
        make_and_free_communicator(c);
        MPI_OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
      } else {
        Buf in(Where::Gpu, l.span());
        in.fill(kPoison);
        MPI_Request req;
        MPI_Status st;
        MPI_OK(MPI_Irecv(in.get(), l.count, l.type, 0, tag, MPI_COMM_WORLD, &req));
        test_until_done(req, &st,
                        std::string("the receipt of rank 0's MPI_Isend (rank 0 in ") + kCollectiveNames[int(c)] + ")");
        CHECK(count_of(st, l.type) == l.count);
        CHECK(first_difference(in.download(), expected(l, l, unsigned(tag))) == "");
        make_and_free_communicator(c);
      }
    }
}

int main(int argc, char **argv) {
  select_test_gpu();
  init_mpi_threads_on_request(argc, argv);
  g_rank = rank();
  if (skipped_without_gpu()) return kSkipped;
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 2) {
    if (g_rank == 0) std::printf("test_storm needs 2 ranks, not %d\n", size);
    MPI_Finalize();
    return 1;
  }
  MPI_Comm_split(MPI_COMM_WORLD, g_rank < 2 ? 0 : MPI_UNDEFINED, g_rank, &g_pair);
  const int worst = run_catch_on_every_rank(argc, argv);
  if (g_pair != MPI_COMM_NULL) MPI_Comm_free(&g_pair);
  MPI_Finalize();
  return worst;
}
