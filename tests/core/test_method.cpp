#include <catch2/catch.hpp>

#include <chrono>

#include "method.hpp"
#include "synthetic_profile.hpp"

using namespace tempi;
using tempi::testing::Link;
using tempi::testing::placements_profile;
using tempi::testing::SyntheticRates;
using tempi::testing::synthetic_profile;

namespace {
Config small_pipeline() {
  Config c;
  c.pipeline_chunk = 1000;
  c.pipeline_threshold = 5000;
  return c;
}

// The built-in rules (no profile) for a message of `bytes` in blocks of 64 bytes.
Transfer builtin(Method requested, bool aware, int64_t bytes, bool contiguous, const Config &c, bool batched = false) {
  TransferQuery q;
  q.bytes = bytes;
  q.block = contiguous ? bytes : 64;
  q.word = 16;
  q.contiguous = contiguous;
  q.batched = batched;
  return choose_transfer(requested, aware, q, c, nullptr);
}

// A 2-D object of `bytes` in rows of `block` bytes at a pitch of two rows.
TransferQuery rows(int64_t bytes, int64_t block, bool batched = false) {
  Plan p;
  p.pattern = {{0, block, 0, 1}};
  p.pattern_size = block;
  p.dims = {{bytes / block, 2 * block}};
  p.extent = 2 * block * (bytes / block);
  return describe_message(p, batched);
}

TransferQuery contiguous(int64_t bytes, bool batched = false) {
  Plan p;
  p.pattern = {{0, bytes, 0, 1}};
  p.pattern_size = bytes;
  p.extent = bytes;
  return describe_message(p, batched);
}

Method auto_choice(const Profile &p, bool aware, const TransferQuery &q) {
  return choose_transfer(Method::Auto, aware, q, Config(), &p).method;
}
}  // namespace

TEST_CASE("a requested method is used when the MPI library allows it", "[method]") {
  const Config c = small_pipeline();
  for (bool aware : {false, true}) {
    CHECK(builtin(Method::OneShot, aware, 100, false, c).method == Method::OneShot);
    CHECK(builtin(Method::Staged, aware, 100, false, c).method == Method::Staged);
  }
  CHECK(builtin(Method::Device, true, 100, false, c).method == Method::Device);
}

TEST_CASE("the device method needs a CUDA-aware MPI", "[method]") {
  const Config c = small_pipeline();
  CHECK(builtin(Method::Device, false, 100, false, c).method == Method::Staged);
  for (int64_t bytes : {int64_t(1), int64_t(1) << 20, int64_t(1) << 30})
    for (bool contiguous : {false, true})
      CHECK(builtin(Method::Auto, false, bytes, contiguous, c).method != Method::Device);
}

TEST_CASE("without a profile, auto: one-shot for small messages, device or staged for large ones", "[method]") {
  const Config c = small_pipeline();
  CHECK(builtin(Method::Auto, true, 1024, false, c).method == Method::OneShot);
  CHECK(builtin(Method::Auto, true, 64 << 10, false, c).method == Method::Device);
  CHECK(builtin(Method::Auto, true, 64 << 20, false, c).method == Method::Device);
  // many messages in flight: one fused kernel into host memory beats the library's copies
  CHECK(builtin(Method::Auto, true, 64 << 10, false, c, true).method == Method::OneShot);
  CHECK(builtin(Method::Auto, true, 512 << 10, false, c, true).method == Method::OneShot);
  CHECK(builtin(Method::Auto, true, 8 << 20, false, c, true).method == Method::Device);  // FFT-transpose blocks
  CHECK(builtin(Method::Auto, true, 64 << 20, false, c, true).method == Method::Device);
  CHECK(builtin(Method::Auto, true, 512 << 10, true, c, true).method == Method::Device);
  CHECK(builtin(Method::Auto, false, 1024, false, c).method == Method::OneShot);
  CHECK(builtin(Method::Auto, false, 1 << 20, false, c).method == Method::OneShot);
  CHECK(builtin(Method::Auto, false, 64 << 20, false, c).method == Method::Staged);
  // contiguous data: passed as it is to a CUDA-aware library, one DMA copy otherwise
  CHECK(builtin(Method::Auto, true, 1024, true, c).method == Method::Device);
  CHECK(builtin(Method::Auto, false, 1024, true, c).method == Method::Staged);
  // In a batch a contiguous message is one more job of the fused one-shot kernel.
  CHECK(builtin(Method::Auto, false, 1024, true, c, true).method == Method::OneShot);
  CHECK(builtin(Method::Auto, false, 64 << 20, true, c, true).method == Method::Staged);
}

TEST_CASE("without a profile, staged messages at the threshold and above are pipelined", "[method]") {
  const Config c = small_pipeline();
  CHECK(builtin(Method::Staged, false, 4999, false, c).chunk >= 4999);
  CHECK(builtin(Method::Staged, false, 5000, false, c).chunk == 1000);
  CHECK(builtin(Method::Staged, false, 123456, false, c).chunk == 1000);
  // the other methods move each message in one piece
  CHECK(builtin(Method::OneShot, false, 123456, false, c).chunk >= 123456);
  CHECK(builtin(Method::Device, true, 123456, false, c).chunk >= 123456);
}

TEST_CASE("methods have names", "[method]") {
  CHECK(std::string(to_string(Method::Device)) == "device");
  CHECK(std::string(to_string(Method::OneShot)) == "oneshot");
  CHECK(std::string(to_string(Method::Staged)) == "staged");
}

TEST_CASE("a message's shape comes from its plan", "[method]") {
  const TransferQuery q = rows(24 * 1000, 24);
  CHECK(q.bytes == 24 * 1000);
  CHECK(q.block == 24);
  CHECK(q.word == 8);  // 24-byte rows at a 48-byte pitch: 8-byte words
  CHECK_FALSE(q.contiguous);
  CHECK(rows(4096, 64).word == 16);
  CHECK(rows(4096, 6).word == 2);
  const TransferQuery c = contiguous(12345, true);
  CHECK(c.contiguous);
  CHECK(c.block == 12345);
  CHECK(c.batched);
}

TEST_CASE("with a profile, auto takes the method the profile predicts fastest", "[method][model]") {
  const TransferQuery q = rows(1 << 20, 64);
  SECTION("a fast CUDA-aware library: device") {
    SyntheticRates r;
    r.mpi_device = {1e-6, 500e9};
    r.mpi_host = {2e-6, 5e9};
    CHECK(auto_choice(synthetic_profile(r), true, q) == Method::Device);
    // the same machine, library not CUDA-aware (or declared so): never device
    CHECK(auto_choice(synthetic_profile(r), false, q) != Method::Device);
  }
  SECTION("fast kernels on mapped host memory, a slow device path: one-shot") {
    SyntheticRates r;
    r.pack_host = {1e-6, 200e9};
    r.mpi_device = {50e-6, 10e9};
    CHECK(auto_choice(synthetic_profile(r), true, q) == Method::OneShot);
    CHECK(auto_choice(synthetic_profile(r), false, q) == Method::OneShot);
  }
  SECTION("slow mapped-host kernels, fast device kernels and copy engines: staged") {
    SyntheticRates r;
    r.pack_host = {1e-6, 2e9};
    r.pack_device = {1e-6, 2e12};
    r.copy = {1e-6, 200e9};
    CHECK(auto_choice(synthetic_profile(r), false, q) == Method::Staged);
    r.mpi_device = {100e-6, 1e9};
    CHECK(auto_choice(synthetic_profile(r), true, q) == Method::Staged);
  }
  SECTION("contiguous data on a CUDA-aware library goes as it is when the library is fast") {
    SyntheticRates r;
    r.mpi_device = {2e-6, 300e9};
    CHECK(auto_choice(synthetic_profile(r), true, contiguous(1 << 20)) == Method::Device);
  }
  SECTION("contiguous data is not always staged without CUDA awareness: both moves are one copy") {
    const Method m = auto_choice(synthetic_profile(), false, contiguous(64));
    CHECK(m != Method::Device);
    const auto staged = predict(synthetic_profile(), Method::Staged, contiguous(64), Config());
    const auto oneshot = predict(synthetic_profile(), Method::OneShot, contiguous(64), Config());
    REQUIRE(staged);
    REQUIRE(oneshot);
    CHECK(staged->seconds == Approx(oneshot->seconds));
  }
}

namespace {
TransferQuery to(PeerClass peer, TransferQuery q) {
  q.peer = peer;
  return q;
}
}  // namespace

TEST_CASE("the peer's placement picks the library's device-buffer curve: the choice differs by peer",
          "[method][model][peer]") {
  const Profile p = placements_profile();
  const TransferQuery q = rows(1 << 20, 512);
  CHECK(auto_choice(p, true, to(PeerClass::SameGpu, q)) == Method::Device);
  CHECK(auto_choice(p, true, to(PeerClass::SameNode, q)) != Method::Device);
  CHECK(auto_choice(p, true, to(PeerClass::OtherNode, q)) != Method::Device);
  // an unknown peer is predicted in the placement the profile was measured in
  CHECK(auto_choice(p, true, to(PeerClass::Unknown, q)) == auto_choice(p, true, to(PeerClass::SameNode, q)));
  const auto same_gpu = predict(p, Method::Device, to(PeerClass::SameGpu, q), Config());
  const auto other_node = predict(p, Method::Device, to(PeerClass::OtherNode, q), Config());
  REQUIRE(same_gpu);
  REQUIRE(other_node);
  CHECK(same_gpu->seconds < other_node->seconds);
  // methods that do not hand GPU buffers to the library do not depend on the peer (the
  // profile has one host curve)
  for (Method m : {Method::OneShot, Method::Staged})
    CHECK(predict(p, m, to(PeerClass::SameGpu, q), Config())->seconds ==
          Approx(predict(p, m, to(PeerClass::OtherNode, q), Config())->seconds));
  // describe_message carries the peer
  Plan plan;
  plan.pattern = {{0, 512, 0, 1}};
  plan.pattern_size = 512;
  plan.dims = {{2048, 1024}};
  plan.extent = 1024 * 2048;
  CHECK(describe_message(plan, false, PeerClass::OtherNode).peer == PeerClass::OtherNode);
  CHECK(describe_message(plan, false).peer == PeerClass::Unknown);
}

TEST_CASE("the model pipelines a large staged message when kernel and copy overlap", "[method][model]") {
  SyntheticRates r;
  r.pack_host = {1e-6, 1e9};
  r.pack_device = {1e-6, 50e9};
  r.copy = {1e-6, 50e9};
  const Profile p = synthetic_profile(r);
  const Config c;
  const Transfer big = choose_transfer(Method::Auto, false, rows(64 << 20, 512), c, &p);
  CHECK(big.method == Method::Staged);
  CHECK(big.chunk < 64 << 20);
  CHECK(big.chunk >= 256 << 10);
  // the chosen chunk is predicted no slower than moving the message in one piece
  const TransferQuery q = rows(64 << 20, 512);
  const auto best = predict(p, Method::Staged, q, c);
  REQUIRE(best);
  CHECK(best->chunk == big.chunk);
  // a small message is never pipelined
  CHECK(choose_transfer(Method::Auto, false, rows(64 << 10, 512), c, &p).chunk >= 64 << 10);
  // a forced staged method gets the model's chunk too
  CHECK(choose_transfer(Method::Staged, false, q, c, &p).chunk == big.chunk);
}

TEST_CASE("the staged method pays its cost per chunk on each side, and the model weighs it", "[method][model]") {
  // Slow mapped-host kernels, fast device kernels and copies: staged wins while its chunks
  // are free; when each chunk costs its copy's issue and the event between the streams,
  // one-shot does for a message of one chunk, and a pipelined message takes fewer chunks.
  SyntheticRates r;
  r.pack_host = {10e-6, 5e9};
  r.pack_device = {1e-6, 1e12};
  r.copy = {1e-6, 50e9};
  const Config c;
  const TransferQuery small = rows(64 << 10, 512), large = rows(64 << 20, 512);
  const Profile free_chunks = synthetic_profile(r);
  r.staged_chunk = 40e-6;
  const Profile costly = synthetic_profile(r);
  const auto before = predict(free_chunks, Method::Staged, small, c), after = predict(costly, Method::Staged, small, c);
  REQUIRE(before);
  REQUIRE(after);
  CHECK(after->seconds == Approx(before->seconds + 2 * r.staged_chunk));  // one chunk a side
  CHECK(staged_side(costly, true, small, small.bytes) ==
        Approx(staged_side(free_chunks, true, small, small.bytes) + r.staged_chunk));
  CHECK(staged_side(costly, false, large, 1 << 20) ==
        Approx(staged_side(free_chunks, false, large, 1 << 20) + 64 * r.staged_chunk));
  CHECK(auto_choice(free_chunks, false, small) == Method::Staged);
  CHECK(auto_choice(costly, false, small) == Method::OneShot);
  const int64_t chunk_free = predict(free_chunks, Method::Staged, large, c)->chunk;
  const int64_t chunk_costly = predict(costly, Method::Staged, large, c)->chunk;
  CHECK(chunk_costly > chunk_free);
}

TEST_CASE("messages in flight share the synchronization: the choice for a batch can differ", "[method][model]") {
  // Synchronization is costly, the library's own device path slowish: alone, a contiguous
  // message goes to the library as it is (no GPU step at all); in a batch, the copies'
  // waits are shared, and one-shot through host memory is faster.
  SyntheticRates r;
  r.launch = 2e-6;
  r.sync = 20e-6;
  r.copy = {1e-6, 50e9};
  r.mpi_host = {2e-6, 20e9};
  r.mpi_device = {25e-6, 50e9};
  const Profile p = synthetic_profile(r);
  CHECK(auto_choice(p, true, contiguous(16 << 10, false)) == Method::Device);
  CHECK(auto_choice(p, true, contiguous(16 << 10, true)) != Method::Device);
  const auto alone = predict(p, Method::OneShot, rows(16 << 10, 64, false), Config());
  const auto batched = predict(p, Method::OneShot, rows(16 << 10, 64, true), Config());
  CHECK(batched->seconds == Approx(alone->seconds - 2 * r.sync));
}

TEST_CASE("a library whose device messages do not overlap in flight loses the batch it wins alone", "[method][model]") {
  // One 256 KiB device message alone beats pack-to-host + host send, but with 16 in flight
  // each way the library's device path takes them in turn (here: 60 us a message) while
  // its host path overlaps them: the batched curves, not the single ones, decide a batch.
  SyntheticRates r;
  r.mpi_host = {5e-6, 5e9};
  r.mpi_device = {10e-6, 100e9};
  r.mpi_host_batched = Link{1e-6, 10e9};
  r.mpi_device_batched = Link{60e-6, 20e9};
  const Profile p = synthetic_profile(r);
  const TransferQuery alone = rows(256 << 10, 512, false), batched = rows(256 << 10, 512, true);
  CHECK(auto_choice(p, true, alone) == Method::Device);
  CHECK(auto_choice(p, true, batched) == Method::OneShot);
  // the batched prediction is made of the batched curves
  const Curve &host = p.host_wire(true);
  CHECK(host.at(256 << 10) == Approx(1e-6 + (256 << 10) / 10e9));  // a measured point
  const auto device_alone = predict(p, Method::Device, alone, Config());
  const auto device_batched = predict(p, Method::Device, batched, Config());
  REQUIRE(device_alone);
  REQUIRE(device_batched);
  CHECK(device_batched->seconds - device_alone->seconds ==
        Approx((60e-6 + (256 << 10) / 20e9) - (10e-6 + (256 << 10) / 100e9) - 2 * r.sync));
}

TEST_CASE("a message to the rank itself is predicted with the library's loopback curve", "[method][model]") {
  // Between ranks the library's device path wins 1 MiB; its loopback (0.6 GB/s, as CUDA-aware
  // Open MPI 4.1 on an H200) loses it to one-shot.
  SyntheticRates r;
  r.mpi_device = {5e-6, 300e9};
  r.mpi_self = Link{20e-6, 0.6e9};
  const Profile p = synthetic_profile(r);
  TransferQuery q = rows(1 << 20, 512);
  for (bool batched : {false, true}) {
    q.batched = batched;
    q.peer = PeerClass::SameNode;
    CHECK(auto_choice(p, true, q) == Method::Device);
    q.peer = PeerClass::Self;
    CHECK(auto_choice(p, true, q) == Method::OneShot);
    const auto self = predict(p, Method::Device, q, Config());
    q.peer = PeerClass::SameNode;
    const auto other = predict(p, Method::Device, q, Config());
    REQUIRE(self);
    REQUIRE(other);
    CHECK(self->seconds - other->seconds == Approx((20e-6 + (1 << 20) / 0.6e9) - (5e-6 + (1 << 20) / 300e9)));
  }
  // Without a loopback curve the rank itself gets no device prediction at all (never the
  // curve between ranks), as the built-in rules send it through host memory; every other
  // peer falls back to the measured placement's curve.
  Profile none = p;
  none.mpi_device.erase(none.mpi_device.begin() + 1);
  REQUIRE(none.mpi_device.size() == 1);
  q.peer = PeerClass::Self;
  CHECK_FALSE(predict(none, Method::Device, q, Config()));
  CHECK(auto_choice(none, true, q) != Method::Device);
  for (PeerClass peer : {PeerClass::SameGpu, PeerClass::OtherNode, PeerClass::Unknown})
    CHECK(none.device_wire(peer) == &none.mpi_device.front().time);
}

TEST_CASE("without a profile, a message to the rank itself goes through host memory", "[method]") {
  TransferQuery q = rows(1 << 20, 512);
  CHECK(choose_transfer(Method::Auto, true, q, Config(), nullptr).method == Method::Device);
  q.peer = PeerClass::Self;
  CHECK(choose_transfer(Method::Auto, true, q, Config(), nullptr).method == Method::OneShot);
  // a contiguous one too (a CUDA-aware library would otherwise read the buffer itself)
  TransferQuery c = contiguous(64 << 20);
  c.peer = PeerClass::Self;
  CHECK(choose_transfer(Method::Auto, true, c, Config(), nullptr).method == Method::Staged);
  // forced, the device method is still the caller's
  CHECK(choose_transfer(Method::Device, true, q, Config(), nullptr).method == Method::Device);
}

TEST_CASE("requested methods override the model", "[method][model]") {
  const Profile p = synthetic_profile();
  const TransferQuery q = rows(1 << 20, 64);
  CHECK(choose_transfer(Method::OneShot, true, q, Config(), &p).method == Method::OneShot);
  CHECK(choose_transfer(Method::Device, true, q, Config(), &p).method == Method::Device);
  CHECK(choose_transfer(Method::Device, false, q, Config(), &p).method == Method::Staged);
  CHECK(choose_transfer(Method::Staged, true, q, Config(), &p).method == Method::Staged);
}

TEST_CASE("a profile without device measurements never predicts the device method", "[method][model]") {
  SyntheticRates r;
  r.cuda_aware = false;
  const Profile p = synthetic_profile(r);
  CHECK_FALSE(predict(p, Method::Device, rows(1 << 20, 64), Config()));
  // declared CUDA-aware at run time, the profile has nothing to say about device buffers
  CHECK(auto_choice(p, true, rows(1 << 20, 64)) != Method::Device);
}

TEST_CASE("the process's profile: decisions are cached and equal the model's", "[method][model]") {
  CHECK(profile_summary().find("none yet") != std::string::npos);
  ProfileChoice choice;
  choice.profile = synthetic_profile();
  choice.path = "/synthetic.json";
  install_profile(choice);
  REQUIRE(active_profile() != nullptr);
  CHECK(profile_summary().find("/synthetic.json") != std::string::npos);
  const Profile &p = *active_profile();
  const Config c;
  for (int round = 0; round < 2; ++round)  // the second round hits the cache
    for (int64_t bytes = 64; bytes <= int64_t(64) << 20; bytes *= 2)
      for (int64_t block : {4, 24, 64, 1000})
        for (bool batched : {false, true})
          for (bool aware : {false, true}) {
            const TransferQuery q = rows(bytes - bytes % block + block, block, batched);
            const Transfer cached = choose_transfer(Method::Auto, aware, q, c);
            const Transfer direct = choose_transfer(Method::Auto, aware, q, c, &p);
            CHECK(cached.method == direct.method);
            CHECK(cached.chunk == direct.chunk);
          }
  // the collective form goes through the same profile
  CHECK(choose_transfer(Method::Auto, true, int64_t(1) << 20, false, c).method ==
        choose_transfer(Method::Auto, true, rows(1 << 20, kAssumedBlock), c, &p).method);
}

TEST_CASE("cached decisions are kept per peer class", "[method][model][peer]") {
  ProfileChoice choice;
  choice.profile = placements_profile();
  choice.path = "/placements.json";
  const Profile *p = install_profile(choice);
  REQUIRE(p);
  const Config c;
  // The same message to peers in turn: a cache that ignored the peer would answer each
  // with the decision for the one before.
  for (int round = 0; round < 3; ++round)
    for (int64_t bytes : {int64_t(64) << 10, int64_t(1) << 20, int64_t(8) << 20})
      for (PeerClass peer :
           {PeerClass::SameGpu, PeerClass::SameNode, PeerClass::OtherNode, PeerClass::Self, PeerClass::Unknown}) {
        const TransferQuery q = to(peer, rows(bytes, 512));
        CHECK(choose_transfer(Method::Auto, true, q, c).method == choose_transfer(Method::Auto, true, q, c, p).method);
      }
  CHECK(choose_transfer(Method::Auto, true, to(PeerClass::SameGpu, rows(1 << 20, 512)), c).method == Method::Device);
  CHECK(choose_transfer(Method::Auto, true, to(PeerClass::SameNode, rows(1 << 20, 512)), c).method != Method::Device);
}
