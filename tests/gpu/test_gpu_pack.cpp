// GPU pack and unpack, compared byte for byte with the host reference packer:
// every canonical shape, every access width, misaligned buffers, large incounts,
// byte ranges, random types, and MPI_Pack / MPI_Unpack on every memory kind.
// Exits 77 (skipped) with a message where no GPU is usable.
#include <cuda_runtime_api.h>
#include <mpi.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend.hpp"
#include "host_packer.hpp"
#include "kernels.hpp"
#include "plan_check.hpp"
#include "random_type.hpp"
#include "type_plan.hpp"

using namespace tempi;

namespace {

Plan planned(const TypeDesc &d, int64_t count) {
  const std::optional<Plan> p = plan_type(d);
  REQUIRE(p);
  return p->for_count(count);
}

const TypeDesc B1 = desc::named(1), B2 = desc::named(2), B4 = desc::named(4), B8 = desc::named(8),
               B16 = desc::named(16);

// The canonical shapes: 1-D to 5-D strided, block lists, mixed structs.
std::vector<std::pair<const char *, TypeDesc>> shapes() {
  return {
      {"1-D contiguous", desc::contiguous(24, B4)},
      {"2-D vector of 1-byte elements", desc::vector(9, 3, 7, B1)},
      {"2-D vector of 2-byte elements", desc::vector(9, 3, 5, B2)},
      {"2-D vector of 4-byte elements", desc::vector(9, 3, 5, B4)},
      {"2-D vector of 8-byte elements", desc::vector(9, 3, 5, B8)},
      {"2-D vector of 16-byte elements", desc::vector(9, 3, 5, B16)},
      {"3-D subarray", desc::subarray({6, 7, 40}, {3, 4, 12}, {1, 2, 3}, ArrayOrder::C, B4)},
      {"4-D subarray", desc::subarray({3, 4, 5, 16}, {2, 3, 2, 8}, {1, 0, 2, 4}, ArrayOrder::C, B8)},
      {"5-D hvector nest", desc::hvector(2, 1, 9000, desc::hvector(3, 1, 2000, desc::hvector(2, 1, 600,
                                 desc::hvector(3, 1, 150, desc::contiguous(5, B2)))))},
      {"block list (indexed)", desc::indexed({3, 1, 4, 1, 5}, {20, 0, 9, 30, 2}, B4)},
      {"block list of long blocks", desc::hindexed({3000, 5000}, {8000, 0}, B1)},
      {"struct of mixed types", desc::structure({1, 2, 1}, {0, 8, 24}, {B4, B8, B2})},
      {"vector of structs", desc::vector(5, 2, 3, desc::resized(0, 32, desc::structure({1, 1}, {0, 8}, {B4, B8})))},
  };
}

}  // namespace

TEST_CASE("every shape, access width, misalignment and incount", "[gpu]") {
  uint64_t seed = 1;
  for (const auto &[name, d] : shapes()) {
    for (int64_t count : {1, 2, 7, 70000}) {
      const Plan plan = planned(d, count);
      if (Span(plan).bytes() > (int64_t(64) << 20)) continue;  // keeps the suite quick
      for (int ts : {0, 1, 2, 4, 8}) {
        for (int ps : {0, 3, 8}) {
          INFO(name << " count " << count << " typed shift " << ts << " packed shift " << ps);
          check_plan(plan, ts, ps, 0, plan.packed_size(), seed++);
          if (count == 70000) break;  // large counts: one alignment case is enough
        }
      }
    }
  }
}

TEST_CASE("byte ranges of the packed stream", "[gpu]") {
  std::mt19937_64 rng(3);
  for (const auto &[name, d] : shapes()) {
    const Plan plan = planned(d, 3);
    for (int i = 0; i < 8; ++i) {
      const int64_t a = rng() % plan.packed_size(), b = a + 1 + rng() % (plan.packed_size() - a);
      INFO(name << " range [" << a << "," << b << ")");
      check_plan(plan, int(rng() % 16), int(rng() % 16), a, b, rng());
    }
  }
}

TEST_CASE("objects larger than 4 GiB use 64-bit offsets", "[gpu][large]") {
  size_t free_bytes = 0, total = 0;
  cudaMemGetInfo(&free_bytes, &total);
  if (free_bytes < (size_t(6) << 30)) {
    WARN("skipped: under 6 GiB of free device memory");
    return;
  }
  // 64 blocks of 16 bytes, 80 MiB apart: a 5 GiB span, 1 KiB packed
  const Plan plan = planned(desc::hvector(64, 16, int64_t(80) << 20, B1), 1);
  check_plan(plan, 0, 0, 0, plan.packed_size(), 11);
}

TEST_CASE("random types through the GPU path", "[gpu][property]") {
  const uint64_t seed = test::seed_from(0, nullptr, 20261122);
  test::RandomTypes gen(seed);
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 1500; ++i) {
    const TypeDesc d = gen.next();
    const Plan plan = planned(d, 1 + rng() % 3);
    if (plan.packed_size() == 0) continue;
    INFO("seed " << seed << " type " << i << ": " << to_string(d));
    check_plan(plan, int(rng() % 16), int(rng() % 16), 0, plan.packed_size(), rng());
  }
}

TEST_CASE("batches of asynchronous moves: fused launches, every method, one wait", "[gpu][async]") {
  const uint64_t seed = test::seed_from(0, nullptr, 20261123);
  test::RandomTypes gen(seed);
  std::mt19937_64 rng(seed);
  const std::vector<std::pair<const char *, TypeDesc>> fixed = shapes();
  Backend &b = gpu_backend();
  for (int round = 0; round < 12; ++round) {
    // 1 to 120 objects: more than one fused launch holds, of every kind
    const int n = round == 0 ? 1 : 1 + int(rng() % 120);
    struct Obj {
      Plan plan;
      std::string name;
      int64_t lo, span, bytes;
      int ts, ps;
      std::unique_ptr<PaddedDeviceBuf> typed;
      Scratch packed;
      std::vector<unsigned char> image, expect;
    };
    std::vector<Obj> objs(n);
    std::vector<MoveJob> jobs;
    for (int i = 0; i < n; ++i) {
      Obj &o = objs[i];
      const bool from_fixed = rng() % 2;
      const TypeDesc d = from_fixed ? fixed[rng() % fixed.size()].second : gen.next();
      o.name = to_string(d);
      o.plan = planned(d, 1 + int64_t(rng() % 3));
      const Span sp(o.plan);
      o.lo = sp.lo;
      o.span = sp.bytes();
      o.bytes = o.plan.packed_size();
      o.ts = int(rng() % 9);
      o.ps = int(rng() % 9);
      o.typed = std::make_unique<PaddedDeviceBuf>(std::max<int64_t>(o.span, 1));
      o.image = random_bytes(o.span, rng());
      if (o.span) CUDA_OK(cudaMemcpy(o.typed->at(o.ts), o.image.data(), o.span, cudaMemcpyHostToDevice));
      const int m = int(rng() % 3);
      Transfer t{m == 0 ? Method::Device : (m == 1 ? Method::OneShot : Method::Staged), o.bytes};
      if (t.method == Method::Staged && rng() % 3 == 0) t.chunk = 1 + int64_t(rng() % std::max<int64_t>(1, o.bytes));
      REQUIRE(b.acquire(t.method == Method::Device ? ScratchKind::Device : ScratchKind::Pinned,
                        size_t(o.bytes + 16), o.packed) == Status::Ok);
      const std::vector<unsigned char> poison(size_t(o.bytes + 16), 0xA5);
      CUDA_OK(cudaMemcpy(o.packed.ptr, poison.data(), poison.size(), cudaMemcpyDefault));
      o.expect = poison;
      host_pack(o.plan, o.image.data() - o.lo, o.expect.data() + o.ps, 0, o.bytes);
      jobs.push_back({&o.plan, o.typed->at(o.ts) - o.lo, static_cast<char *>(o.packed.ptr) + o.ps, o.bytes, t});
    }
    INFO("seed " << seed << " round " << round << " objects " << n);
    const uint64_t syncs = b.synchronizations();
    Fence done;
    REQUIRE(b.pack_async(jobs, done) == Status::Ok);
    REQUIRE(b.wait(done) == Status::Ok);
    CHECK(b.synchronizations() == syncs + 1);
    for (Obj &o : objs) {
      INFO(o.name);
      std::vector<unsigned char> got(o.expect.size());
      CUDA_OK(cudaMemcpy(got.data(), o.packed.ptr, got.size(), cudaMemcpyDefault));
      REQUIRE(got == o.expect);
    }
    // unpack into freshly poisoned typed buffers: the gaps must keep the poison
    for (Obj &o : objs) {
      o.image = random_bytes(o.span, rng());
      if (o.span) CUDA_OK(cudaMemcpy(o.typed->at(o.ts), o.image.data(), o.span, cudaMemcpyHostToDevice));
      host_unpack(o.plan, o.expect.data() + o.ps, o.image.data() - o.lo, 0, o.bytes);
    }
    REQUIRE(b.unpack_async(jobs, done) == Status::Ok);
    REQUIRE(b.wait(done) == Status::Ok);
    for (Obj &o : objs) {
      INFO(o.name);
      std::vector<unsigned char> back(size_t(o.span));
      if (o.span) CUDA_OK(cudaMemcpy(back.data(), o.typed->at(o.ts), o.span, cudaMemcpyDeviceToHost));
      REQUIRE(back == o.image);
    }
  }
}

// A fused launch of more than a few objects finds their descriptions in device memory, and a
// batch repeated byte for byte reuses the copy there (cuda/fused_tables.cu, place_table): the data
// moved must be the current data, whatever batch ran before and whichever tables were evicted.
TEST_CASE("repeated batches launch from descriptions kept on the device", "[gpu][async]") {
  const uint64_t seed = test::seed_from(0, nullptr, 20261125);
  std::mt19937_64 rng(seed);
  Backend &b = gpu_backend();
  // Strided shapes: every object joins the fused launch.
  const std::vector<TypeDesc> kinds = {
      desc::vector(9, 3, 5, B4), desc::vector(9, 3, 7, B1), desc::vector(9, 3, 5, B8),
      desc::subarray({6, 7, 40}, {3, 4, 12}, {1, 2, 3}, ArrayOrder::C, B4),
      desc::subarray({3, 4, 5, 16}, {2, 3, 2, 8}, {1, 0, 2, 4}, ArrayOrder::C, B8)};
  constexpr int kObjects = 60;  // two launches: 48 objects and 12
  struct Obj {
    Plan plan;
    int64_t lo = 0, span = 0, bytes = 0;
    std::unique_ptr<PaddedDeviceBuf> typed;
    Scratch packed;  // room for two placements of the packed bytes
    std::vector<unsigned char> image;
  };
  std::vector<Obj> objs(kObjects);
  for (int i = 0; i < kObjects; ++i) {
    Obj &o = objs[size_t(i)];
    o.plan = planned(kinds[size_t(i) % kinds.size()], 1 + i % 3);
    const Span sp(o.plan);
    o.lo = sp.lo;
    o.span = sp.bytes();
    o.bytes = o.plan.packed_size();
    o.typed = std::make_unique<PaddedDeviceBuf>(o.span);
    REQUIRE(b.acquire(i % 2 ? ScratchKind::Device : ScratchKind::Pinned, size_t(2 * o.bytes + 64), o.packed) ==
            Status::Ok);
  }
  // The jobs of the first `n` objects; `shifted` objects write their packed bytes elsewhere
  // (another description).
  auto jobs_of = [&](int n, int shifted) {
    std::vector<MoveJob> jobs;
    for (int i = 0; i < n; ++i) {
      Obj &o = objs[size_t(i)];
      char *packed = static_cast<char *>(o.packed.ptr) + (i < shifted ? o.bytes + 16 : 0);
      jobs.push_back({&o.plan, o.typed->at(0) - o.lo, packed, o.bytes, Transfer{Method::OneShot, o.bytes}});
    }
    return jobs;
  };
  // Packs with fresh typed data, then unpacks fresh packed data; both against the host packer.
  auto check_round = [&](const std::vector<MoveJob> &jobs, const char *what) {
    INFO("seed " << seed << ": " << what);
    for (size_t i = 0; i < jobs.size(); ++i) {
      Obj &o = objs[i];
      o.image = random_bytes(o.span, rng());
      CUDA_OK(cudaMemcpy(o.typed->at(0), o.image.data(), size_t(o.span), cudaMemcpyHostToDevice));
    }
    Fence done;
    REQUIRE(b.pack_async(jobs, done) == Status::Ok);
    REQUIRE(b.wait(done) == Status::Ok);
    for (size_t i = 0; i < jobs.size(); ++i) {
      Obj &o = objs[i];
      std::vector<unsigned char> expect(size_t(o.bytes)), got(size_t(o.bytes));
      host_pack(o.plan, o.image.data() - o.lo, expect.data(), 0, o.bytes);
      CUDA_OK(cudaMemcpy(got.data(), jobs[i].packed, got.size(), cudaMemcpyDefault));
      REQUIRE(got == expect);
      const std::vector<unsigned char> incoming = random_bytes(o.bytes, rng());
      CUDA_OK(cudaMemcpy(jobs[i].packed, incoming.data(), incoming.size(), cudaMemcpyDefault));
      host_unpack(o.plan, incoming.data(), o.image.data() - o.lo, 0, o.bytes);
    }
    REQUIRE(b.unpack_async(jobs, done) == Status::Ok);
    REQUIRE(b.wait(done) == Status::Ok);
    for (size_t i = 0; i < jobs.size(); ++i) {
      Obj &o = objs[i];
      std::vector<unsigned char> back(size_t(o.span));
      CUDA_OK(cudaMemcpy(back.data(), o.typed->at(0), back.size(), cudaMemcpyDeviceToHost));
      REQUIRE(back == o.image);
    }
  };
  const FusedTableCounts start = fused_table_counts();
  auto placed = [&] { return fused_table_counts().placed - start.placed; };
  auto reused = [&] { return fused_table_counts().reused - start.reused; };

  const std::vector<MoveJob> halo = jobs_of(26, 0);
  check_round(halo, "first batch of 26");
  CHECK(placed() == 2);  // its pack and its unpack
  CHECK(reused() == 0);
  check_round(halo, "the same batch again, new data");
  CHECK(placed() == 2);
  CHECK(reused() == 2);
  check_round(jobs_of(26, 1), "one object's packed bytes elsewhere");
  CHECK(placed() == 4);
  check_round(halo, "the first batch once more");
  CHECK(reused() == 4);
  check_round(jobs_of(kObjects, 0), "60 objects: two launches");
  CHECK(placed() == 8);
  check_round(jobs_of(4, 0), "four objects: in the launch's parameter");
  CHECK(placed() == 8);
  CHECK(reused() == 4);
  // Eight other batches (16 tables: pack and unpack) evict the first one's.
  for (int k = 2; k < 10; ++k) check_round(jobs_of(26, k), "evicting");
  CHECK(placed() == 24);
  check_round(halo, "the first batch after its tables were evicted");
  CHECK(placed() == 26);
  CHECK(reused() == 4);

  // A dozen distinct batches issued back to back, one wait at the end: tables are rewritten
  // while launches that read them may still be queued on the stream. Each batch packs the
  // same 26 objects into places of its own.
  {
    INFO("seed " << seed << ": twelve batches before one wait");
    for (int i = 0; i < 26; ++i) {
      Obj &o = objs[size_t(i)];
      o.image = random_bytes(o.span, rng());
      CUDA_OK(cudaMemcpy(o.typed->at(0), o.image.data(), size_t(o.span), cudaMemcpyHostToDevice));
    }
    constexpr int kBatches = 12;
    int64_t per_batch = 0;
    for (int i = 0; i < 26; ++i) per_batch += (objs[size_t(i)].bytes + 15) / 16 * 16;
    Scratch area;
    REQUIRE(b.acquire(ScratchKind::Device, size_t(per_batch * kBatches), area) == Status::Ok);
    CUDA_OK(cudaMemset(area.ptr, 0xA5, size_t(per_batch * kBatches)));
    std::vector<std::vector<MoveJob>> batches(kBatches);
    std::vector<Fence> fences(kBatches);
    for (int k = 0; k < kBatches; ++k) {
      char *at = static_cast<char *>(area.ptr) + k * per_batch;
      for (int i = 0; i < 26; ++i) {
        Obj &o = objs[size_t(i)];
        batches[size_t(k)].push_back({&o.plan, o.typed->at(0) - o.lo, at, o.bytes, Transfer{Method::OneShot, o.bytes}});
        at += (o.bytes + 15) / 16 * 16;
      }
      REQUIRE(b.pack_async(batches[size_t(k)], fences[size_t(k)]) == Status::Ok);
    }
    for (Fence &f : fences) REQUIRE(b.wait(f) == Status::Ok);
    for (int k = 0; k < kBatches; ++k)
      for (int i = 0; i < 26; ++i) {
        Obj &o = objs[size_t(i)];
        std::vector<unsigned char> expect(size_t(o.bytes)), got(size_t(o.bytes));
        host_pack(o.plan, o.image.data() - o.lo, expect.data(), 0, o.bytes);
        CUDA_OK(cudaMemcpy(got.data(), batches[size_t(k)][size_t(i)].packed, got.size(), cudaMemcpyDeviceToHost));
        INFO("batch " << k << " object " << i);
        REQUIRE(got == expect);
      }
    CHECK(placed() == 26 + kBatches);
  }

  // Pairs (Backend::move_async: a typed object straight into another of the same plan), the
  // same batch twice: its table placed, then reused.
  {
    INFO("seed " << seed << ": pairs");
    std::vector<std::unique_ptr<PaddedDeviceBuf>> targets;
    std::vector<Scratch> scratch(26);
    std::vector<PairJob> pairs;
    for (int i = 0; i < 26; ++i) {
      Obj &o = objs[size_t(i)];
      targets.push_back(std::make_unique<PaddedDeviceBuf>(o.span));
      REQUIRE(b.acquire(ScratchKind::Device, size_t(o.bytes), scratch[size_t(i)]) == Status::Ok);
      pairs.push_back({&o.plan, o.typed->at(0) - o.lo, &o.plan, targets.back()->at(0) - o.lo, o.bytes,
                       scratch[size_t(i)].ptr});
    }
    for (int pass = 0; pass < 2; ++pass) {
      std::vector<std::vector<unsigned char>> want(26);
      for (int i = 0; i < 26; ++i) {
        Obj &o = objs[size_t(i)];
        o.image = random_bytes(o.span, rng());
        CUDA_OK(cudaMemcpy(o.typed->at(0), o.image.data(), size_t(o.span), cudaMemcpyHostToDevice));
        want[size_t(i)] = random_bytes(o.span, rng());  // the target's bytes outside the object stay
        CUDA_OK(cudaMemcpy(targets[size_t(i)]->at(0), want[size_t(i)].data(), size_t(o.span), cudaMemcpyHostToDevice));
        std::vector<unsigned char> packed(size_t(o.bytes));
        host_pack(o.plan, o.image.data() - o.lo, packed.data(), 0, o.bytes);
        host_unpack(o.plan, packed.data(), want[size_t(i)].data() - o.lo, 0, o.bytes);
      }
      const FusedTableCounts before = fused_table_counts();
      Fence done;
      REQUIRE(b.move_async(pairs, done) == Status::Ok);
      REQUIRE(b.wait(done) == Status::Ok);
      const FusedTableCounts after = fused_table_counts();
      CHECK(after.placed - before.placed == (pass == 0 ? 1u : 0u));
      CHECK(after.reused - before.reused == (pass == 0 ? 0u : 1u));
      for (int i = 0; i < 26; ++i) {
        std::vector<unsigned char> got(size_t(objs[size_t(i)].span));
        CUDA_OK(cudaMemcpy(got.data(), targets[size_t(i)]->at(0), got.size(), cudaMemcpyDeviceToHost));
        INFO("pass " << pass << " pair " << i);
        REQUIRE(got == want[size_t(i)]);
      }
    }
  }
}

TEST_CASE("MPI_Pack and MPI_Unpack on every memory kind", "[gpu][mpi]") {
  MPI_Datatype t;
  MPI_Type_create_subarray(3, std::vector<int>{8, 9, 10}.data(), std::vector<int>{4, 5, 6}.data(),
                           std::vector<int>{1, 2, 3}.data(), MPI_ORDER_C, MPI_FLOAT, &t);
  MPI_Type_commit(&t);
  const int count = 2, span = 2 * 8 * 9 * 10 * 4;
  int size = 0;
  MPI_Pack_size(count, t, MPI_COMM_WORLD, &size);
  const std::vector<unsigned char> host = random_bytes(span, 5);
  std::vector<unsigned char> expect(size + 16, 0);
  int expect_pos = 16;
  PMPI_Pack(host.data(), count, t, expect.data(), size + 16, &expect_pos, MPI_COMM_WORLD);
  const int bytes = expect_pos - 16;
  CHECK(bytes <= size);

  enum Kind { Host, Device, Managed };
  for (Kind in : {Host, Device, Managed})
    for (Kind out : {Host, Device, Managed}) {
      if (in == Host && out == Host) continue;
      INFO("typed " << in << " packed " << out);
      PaddedDeviceBuf dtyped(span, in == Managed ? Memory::Managed : Memory::Device),
          dpacked(size + 16, out == Managed ? Memory::Managed : Memory::Device);
      std::vector<unsigned char> htyped = host, hpacked(size + 16, 0);
      void *typed = in == Host ? static_cast<void *>(htyped.data()) : dtyped.base;
      void *packed = out == Host ? static_cast<void *>(hpacked.data()) : dpacked.base;
      if (in != Host) CUDA_OK(cudaMemcpy(typed, host.data(), span, cudaMemcpyDefault));
      if (out != Host) CUDA_OK(cudaMemset(packed, 0, size + 16));
      int pos = 16;
      REQUIRE(MPI_Pack(typed, count, t, packed, size + 16, &pos, MPI_COMM_WORLD) == MPI_SUCCESS);
      CHECK(pos == 16 + bytes);
      std::vector<unsigned char> got(size + 16);
      CUDA_OK(cudaMemcpy(got.data(), packed, size + 16, cudaMemcpyDefault));
      CHECK(std::memcmp(got.data(), expect.data(), 16 + bytes) == 0);

      // unpack into a zeroed typed buffer: equals PMPI_Unpack on the host
      std::vector<unsigned char> ref(span, 0);
      int rpos = 16;
      PMPI_Unpack(expect.data(), size + 16, &rpos, ref.data(), count, t, MPI_COMM_WORLD);
      CUDA_OK(cudaMemset(in == Host ? dtyped.base : typed, 0, span));
      if (in == Host) std::fill(htyped.begin(), htyped.end(), 0);
      pos = 16;
      REQUIRE(MPI_Unpack(packed, size + 16, &pos, typed, count, t, MPI_COMM_WORLD) == MPI_SUCCESS);
      CHECK(pos == 16 + bytes);
      std::vector<unsigned char> back(span);
      CUDA_OK(cudaMemcpy(back.data(), typed, span, cudaMemcpyDefault));
      CHECK(back == ref);
    }

  // too small an output buffer: MPI_ERR_TRUNCATE and nothing written
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  PaddedDeviceBuf dtyped(span), dpacked(size);
  CUDA_OK(cudaMemset(dpacked.base, 0x77, size));
  int pos = 0;
  int err = MPI_Pack(dtyped.base, count, t, dpacked.base, bytes - 1, &pos, MPI_COMM_WORLD), cls = 0;
  MPI_Error_class(err, &cls);
  CHECK(cls == MPI_ERR_TRUNCATE);
  CHECK(pos == 0);
  std::vector<unsigned char> untouched(size);
  CUDA_OK(cudaMemcpy(untouched.data(), dpacked.base, size, cudaMemcpyDeviceToHost));
  CHECK(std::all_of(untouched.begin(), untouched.end(), [](unsigned char c) { return c == 0x77; }));
  err = MPI_Pack(dtyped.base, -1, t, dpacked.base, size, &pos, MPI_COMM_WORLD);
  MPI_Error_class(err, &cls);
  CHECK(cls == MPI_ERR_COUNT);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
  MPI_Type_free(&t);
}
