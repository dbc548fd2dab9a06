// The pipelines of Backend (backend.hpp), written once above the narrow hooks
// (backend_hooks.hpp) for every backend: a range between GPU-accessible buffers, the
// one-shot method's moves to and from pinned host memory, and the staged method's
// chunked moves through device memory, waited for or only queued. Each pipeline waits at
// most once (one counted synchronization), as the tests that count them expect.
#include <algorithm>

#include "backend.hpp"
#include "log.hpp"

namespace tempi {

namespace {

#define PIPELINE_TRY(expr)                                \
  do {                                                    \
    if (const Status st_ = (expr); st_ != Status::Ok) return st_; \
  } while (0)

// The first byte of a contiguous plan's one run.
char *run_of(const Plan &plan, const void *typed) {
  return static_cast<char *>(const_cast<void *>(typed)) + plan.start + plan.pattern[0].offset;
}

Status accessible(Backend &b, const Plan &plan, void *typed, void *packed, int64_t first, int64_t last,
                  bool to_packed) {
  last = std::min(last, plan.packed_size());
  if (last <= first) return Status::Ok;
  PIPELINE_TRY(b.queue_range(plan, typed, packed, first, last, to_packed));
  return b.finish(Lane::Work);
}

Status one_shot(Backend &b, const Plan &plan, void *typed, void *host, int64_t bytes, bool to_host) {
  bytes = std::min(bytes, plan.packed_size());
  if (bytes <= 0) return Status::Ok;
  bool queued = false;
  PIPELINE_TRY(b.queue_whole_copy(plan, typed, host, bytes, to_host, queued));
  if (!queued) PIPELINE_TRY(b.queue_range(plan, typed, host, 0, bytes, to_host));
  return b.finish(Lane::Work);
}

// A contiguous plan is one copy by the copy engines, no kernel and no staging; another
// goes through device staging, or (none to be had) straight between GPU and host memory.
Status staged(Backend &b, const Plan &plan, void *typed, void *host, int64_t bytes, int64_t chunk, bool to_packed) {
  bytes = std::min(bytes, plan.packed_size());
  if (bytes <= 0) return Status::Ok;
  if (plan.contiguous()) {
    char *run = run_of(plan, typed);
    PIPELINE_TRY(b.queue_copy(to_packed ? host : run, to_packed ? run : host, size_t(bytes), Lane::Work));
    return b.finish(Lane::Work);
  }
  Scratch staging;
  if (b.acquire(ScratchKind::Device, size_t(bytes), staging) != Status::Ok) {
    TEMPI_LOG(Warn, "no device memory to stage %lld bytes: %s host memory", (long long)bytes,
              to_packed ? "packing straight into" : "unpacking straight from");
    return to_packed ? b.pack(plan, typed, host, 0, bytes) : b.unpack(plan, host, typed, 0, bytes);
  }
  const Status st = queue_staged(b, plan, typed, host, staging.ptr, bytes, chunk, to_packed);
  if (st != Status::Ok) {  // work already queued reads the staging: it ends before the staging goes back
    b.finish(Lane::Copy);
    b.finish(Lane::Work);
    return st;
  }
  return b.finish(Lane::Work);
}

}  // namespace

Status queue_staged(Backend &b, const Plan &plan, void *typed, void *host, void *staging, int64_t bytes,
                    int64_t chunk, bool to_packed) {
  char *dev = static_cast<char *>(staging);
  char *h = static_cast<char *>(host);
  if (chunk <= 0 || chunk >= bytes) {  // one chunk: all on one lane
    if (!to_packed) PIPELINE_TRY(b.queue_copy(dev, h, size_t(bytes), Lane::Work));
    PIPELINE_TRY(b.queue_range(plan, typed, dev, 0, bytes, to_packed));
    if (to_packed) PIPELINE_TRY(b.queue_copy(h, dev, size_t(bytes), Lane::Work));
    return Status::Ok;
  }
  // The copy lane must not start before earlier work on the work lane.
  PIPELINE_TRY(b.order(Lane::Copy, Lane::Work));
  for (int64_t off = 0; off < bytes; off += chunk) {
    const int64_t end = std::min(bytes, off + chunk);
    if (to_packed) {
      PIPELINE_TRY(b.queue_range(plan, typed, dev + off, off, end, true));
      PIPELINE_TRY(b.order(Lane::Copy, Lane::Work));
      PIPELINE_TRY(b.queue_copy(h + off, dev + off, size_t(end - off), Lane::Copy));
    } else {
      PIPELINE_TRY(b.queue_copy(dev + off, h + off, size_t(end - off), Lane::Copy));
      PIPELINE_TRY(b.order(Lane::Work, Lane::Copy));
      PIPELINE_TRY(b.queue_range(plan, typed, dev + off, off, end, false));
    }
  }
  if (to_packed) PIPELINE_TRY(b.order(Lane::Work, Lane::Copy));  // the work lane covers the last copy
  return Status::Ok;
}

Status Backend::pack_accessible(const Plan &plan, const void *typed, void *packed, int64_t first, int64_t last) {
  return accessible(*this, plan, const_cast<void *>(typed), packed, first, last, true);
}

Status Backend::unpack_accessible(const Plan &plan, const void *packed, void *typed, int64_t first, int64_t last) {
  return accessible(*this, plan, typed, const_cast<void *>(packed), first, last, false);
}

Status Backend::pack_to_host(const Plan &plan, const void *typed, void *host, int64_t bytes) {
  return one_shot(*this, plan, const_cast<void *>(typed), host, bytes, true);
}

Status Backend::unpack_from_host(const Plan &plan, const void *host, void *typed, int64_t bytes) {
  return one_shot(*this, plan, typed, const_cast<void *>(host), bytes, false);
}

Status Backend::pack_staged(const Plan &plan, const void *typed, void *host, int64_t bytes, int64_t chunk) {
  return staged(*this, plan, const_cast<void *>(typed), host, bytes, chunk, true);
}

Status Backend::unpack_staged(const Plan &plan, const void *host, void *typed, int64_t bytes, int64_t chunk) {
  return staged(*this, plan, typed, const_cast<void *>(host), bytes, chunk, false);
}

}  // namespace tempi
