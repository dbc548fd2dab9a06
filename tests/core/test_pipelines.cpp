// The pipelines written once above the backend's hooks (core/pipelines.cpp), against a
// backend that runs every step at once on host memory and writes down the steps: the bytes
// are the host packer's, each pipeline waits once, the staged method pipelines its chunks
// (range, then the copy lane ordered after it), and a pipeline falls back where the hooks
// say no (no device staging, no pitched copy).
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend.hpp"
#include "host_packer.hpp"
#include "type_desc.hpp"
#include "type_plan.hpp"

using namespace tempi;

namespace {

class RecordingBackend final : public Backend {
 public:
  std::vector<std::string> steps;
  bool staging = true;     // acquire(Device) succeeds
  bool whole_copy = false;  // queue_whole_copy takes the object
  int finishes = 0;

  bool has_gpu() override { return true; }
  std::string device_name() override { return "recording"; }
  std::string device_id() override { return ""; }
  bool mps_enabled() override { return false; }
  int device_count() override { return 1; }
  Status select_device(int) override { return Status::Ok; }
  int device_of(const void *) override { return -1; }
  int use_device(int) override { return 0; }
  MemorySpace classify(const void *) override { return MemorySpace::Host; }

  Status pack(const Plan &plan, const void *typed, void *packed, int64_t first, int64_t last) override {
    steps.push_back("pack");
    host_pack(plan, typed, packed, first, last);
    return Status::Ok;
  }
  Status unpack(const Plan &plan, const void *packed, void *typed, int64_t first, int64_t last) override {
    steps.push_back("unpack");
    host_unpack(plan, packed, typed, first, last);
    return Status::Ok;
  }
  Status queue_range(const Plan &plan, void *typed, void *packed, int64_t first, int64_t last,
                     bool to_packed) override {
    steps.push_back("range " + std::to_string(first) + " " + std::to_string(last));
    if (to_packed)
      host_pack(plan, typed, packed, first, last);
    else
      host_unpack(plan, packed, typed, first, last);
    return Status::Ok;
  }
  Status queue_whole_copy(const Plan &plan, void *typed, void *host, int64_t bytes, bool to_host,
                          bool &queued) override {
    queued = whole_copy;
    if (!queued) return Status::Ok;
    steps.push_back("whole");
    if (to_host)
      host_pack(plan, typed, host, 0, bytes);
    else
      host_unpack(plan, host, typed, 0, bytes);
    return Status::Ok;
  }

  Status pack_async(const std::vector<MoveJob> &, Fence &) override { return Status::Unsupported; }
  Status unpack_async(const std::vector<MoveJob> &, Fence &) override { return Status::Unsupported; }
  Status move_async(const std::vector<PairJob> &, Fence &) override { return Status::Unsupported; }

  Status queue_copy(void *dst, const void *src, size_t bytes, Lane lane) override {
    steps.push_back(std::string(lane == Lane::Work ? "copy work " : "copy copy ") + std::to_string(bytes));
    std::memmove(dst, src, bytes);
    return Status::Ok;
  }
  Status order(Lane waiter, Lane waited) override {
    steps.push_back(std::string("order ") + (waiter == Lane::Work ? "work" : "copy") + " after " +
                    (waited == Lane::Work ? "work" : "copy"));
    return Status::Ok;
  }
  Status finish(Lane) override {
    ++finishes;
    steps.push_back("finish");
    return Status::Ok;
  }
  bool query(const Fence &) override { return true; }
  Status wait(const Fence &) override { return Status::Ok; }
  uint64_t synchronizations() override { return uint64_t(finishes); }
  Status wait_default_stream() override { return Status::Ok; }
  Status order_default_stream_after(const Fence &) override { return Status::Ok; }

  Status acquire(ScratchKind, size_t bytes, Scratch &out) override {
    if (!staging) return Status::NoMemory;
    auto buffer = std::make_shared<std::vector<char>>(bytes);
    out.ptr = buffer->data();
    out.owner = buffer;
    return Status::Ok;
  }
  MemoryUse memory_use() override { return {}; }
  Status allocate_device(size_t, void **) override { return Status::Unsupported; }
  void free_device(void *) override {}
  Status copy(void *dst, const void *src, size_t bytes) override {
    std::memmove(dst, src, bytes);
    return Status::Ok;
  }
  void release_plan(uint64_t) override {}

  Status ipc_export(const void *, IpcHandle &) override { return Status::Unsupported; }
  Status ipc_open(const IpcHandle &, void **) override { return Status::Unsupported; }
  void ipc_close(void *) override {}
  bool ipc_peer_access(const std::string &) override { return false; }
};

// 2-D strided: 10 rows of 12 bytes, 20 apart (packed 120 bytes).
Plan strided_plan() {
  const std::optional<Plan> p = plan_type(desc::vector(10, 3, 5, desc::named(4)));
  REQUIRE(p);
  REQUIRE(p->strided());
  return *p;
}

std::vector<char> pattern(size_t n, unsigned seed) {
  std::vector<char> v(n);
  std::mt19937 rng(seed);
  for (char &c : v) c = char(rng());
  return v;
}

}  // namespace

TEST_CASE("the staged pipeline packs chunk by chunk, the copies ordered after each range, one wait",
          "[pipelines]") {
  RecordingBackend b;
  const Plan plan = strided_plan();
  const int64_t n = plan.packed_size();
  const std::vector<char> typed = pattern(200, 1);
  std::vector<char> want(static_cast<size_t>(n)), got(static_cast<size_t>(n), 0);
  host_pack(plan, typed.data(), want.data(), 0, n);
  REQUIRE(b.pack_staged(plan, typed.data(), got.data(), n, 48) == Status::Ok);
  CHECK(got == want);
  CHECK(b.finishes == 1);
  CHECK(b.steps == std::vector<std::string>{"order copy after work", "range 0 48", "order copy after work",
                                            "copy copy 48", "range 48 96", "order copy after work",
                                            "copy copy 48", "range 96 120", "order copy after work",
                                            "copy copy 24", "order work after copy", "finish"});
}

TEST_CASE("the staged pipeline unpacks chunk by chunk, each range after its copy, one wait", "[pipelines]") {
  RecordingBackend b;
  const Plan plan = strided_plan();
  const int64_t n = plan.packed_size();
  const std::vector<char> packed = pattern(static_cast<size_t>(n), 2);
  std::vector<char> want(200, 7), got(200, 7);
  host_unpack(plan, packed.data(), want.data(), 0, n);
  REQUIRE(b.unpack_staged(plan, packed.data(), got.data(), n, 64) == Status::Ok);
  CHECK(got == want);
  CHECK(b.finishes == 1);
  CHECK(b.steps == std::vector<std::string>{"order copy after work", "copy copy 64", "order work after copy",
                                            "range 0 64", "copy copy 56", "order work after copy", "range 64 120",
                                            "finish"});
}

TEST_CASE("one chunk stays on the work lane; a contiguous plan is one copy; no staging packs straight",
          "[pipelines]") {
  const Plan plan = strided_plan();
  const int64_t n = plan.packed_size();
  const std::vector<char> typed = pattern(200, 3);
  std::vector<char> want(static_cast<size_t>(n)), got(static_cast<size_t>(n), 0);
  host_pack(plan, typed.data(), want.data(), 0, n);
  {
    RecordingBackend b;
    REQUIRE(b.pack_staged(plan, typed.data(), got.data(), n, n) == Status::Ok);
    CHECK(got == want);
    CHECK(b.steps == std::vector<std::string>{"range 0 120", "copy work 120", "finish"});
  }
  {
    RecordingBackend b;
    b.staging = false;
    std::fill(got.begin(), got.end(), 0);
    REQUIRE(b.pack_staged(plan, typed.data(), got.data(), n, 48) == Status::Ok);
    CHECK(got == want);
    CHECK(b.steps == std::vector<std::string>{"pack"});
  }
  {
    RecordingBackend b;
    const std::optional<Plan> run = plan_type(desc::contiguous(30, desc::named(4)));
    REQUIRE(run);
    REQUIRE(run->contiguous());
    std::vector<char> out(120, 0);
    REQUIRE(b.pack_staged(*run, typed.data(), out.data(), 120, 48) == Status::Ok);
    CHECK(std::equal(out.begin(), out.end(), typed.begin()));
    CHECK(b.steps == std::vector<std::string>{"copy work 120", "finish"});
  }
}

TEST_CASE("the one-shot pipeline takes the backend's whole copy where it has one, else a range; one wait",
          "[pipelines]") {
  const Plan plan = strided_plan();
  const int64_t n = plan.packed_size();
  const std::vector<char> typed = pattern(200, 4);
  std::vector<char> want(static_cast<size_t>(n)), got(static_cast<size_t>(n), 0);
  host_pack(plan, typed.data(), want.data(), 0, n);
  for (const bool whole : {false, true}) {
    RecordingBackend b;
    b.whole_copy = whole;
    std::fill(got.begin(), got.end(), 0);
    REQUIRE(b.pack_to_host(plan, typed.data(), got.data(), n) == Status::Ok);
    CHECK(got == want);
    CHECK(b.steps == std::vector<std::string>{whole ? "whole" : "range 0 120", "finish"});
  }
}

TEST_CASE("an accessible range is clipped to the stream, and an empty one waits for nothing", "[pipelines]") {
  RecordingBackend b;
  const Plan plan = strided_plan();
  const std::vector<char> typed = pattern(200, 5);
  std::vector<char> out(200, 0);
  REQUIRE(b.pack_accessible(plan, typed.data(), out.data(), 100, 1000) == Status::Ok);
  REQUIRE(b.pack_accessible(plan, typed.data(), out.data(), 120, 1000) == Status::Ok);
  CHECK(b.steps == std::vector<std::string>{"range 100 120", "finish"});
}
