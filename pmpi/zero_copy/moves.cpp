// Typed-to-typed moves of zero-copy reads (zero_copy/moves.hpp says the contract).
#include "zero_copy/moves.hpp"

#include <algorithm>

#include "log.hpp"

namespace tempi {

void lend_scratch(std::vector<PairJob> &jobs, Scratch &scratch) {
  auto part = [](int64_t bytes) { return (bytes + 255) & ~int64_t(255); };
  int64_t total = 0;
  for (const PairJob &j : jobs) total += part(j.bytes);
  if (total == 0) return;
  if (const Status st = gpu_backend().acquire(ScratchKind::Device, size_t(total), scratch); st != Status::Ok) {
    TEMPI_LOG(Debug, "zero-copy: no device scratch of %lld bytes for a batch of moves (%s); the pairs that need it "
              "move one at a time", static_cast<long long>(total), to_string(st));
    return;
  }
  int64_t at = 0;
  for (PairJob &j : jobs) {
    j.scratch = static_cast<char *>(scratch.ptr) + at;
    at += part(j.bytes);
  }
}

Status move_pairs(const std::vector<PairJob> &jobs, Fence &done) {
  Backend &b = gpu_backend();
  Status st = b.move_async(jobs, done);
  const bool lent = std::all_of(jobs.begin(), jobs.end(), [](const PairJob &j) { return j.scratch != nullptr; });
  if (st != Status::Unsupported || lent) return st;
  // A pair needs scratch that lend_scratch could not give. move_async finished what it
  // launched before it said so, and moving a pair again writes the same bytes: each pair
  // moves now, alone, the ones that need it through scratch of their own size.
  for (PairJob one : jobs) {
    Scratch own;
    Fence f;
    st = b.move_async({one}, f);
    if (st == Status::Unsupported && !one.scratch) {
      if ((st = b.acquire(ScratchKind::Device, size_t(one.bytes), own)) != Status::Ok) return st;
      one.scratch = own.ptr;
      st = b.move_async({one}, f);
    }
    if (st == Status::Ok) st = b.wait(f);
    if (st != Status::Ok) return st;
  }
  done = Fence{};
  return Status::Ok;
}

}  // namespace tempi
