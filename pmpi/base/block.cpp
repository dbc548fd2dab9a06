// Blocks and their placement (block.hpp).
#include "base/block.hpp"

#include <algorithm>
#include <climits>

#include "backend.hpp"
#include "base/errors.hpp"
#include "base/runtime.hpp"
#include "base/validate.hpp"

namespace tempi {

bool gpu_data(const void *buf) {
  if (!buf || buf == MPI_IN_PLACE) return false;
  const MemorySpace s = gpu_backend().classify(buf);
  return s == MemorySpace::Device || s == MemorySpace::Managed;
}

namespace {

// The lowest and one past the highest byte offset a plan touches, relative to its buffer.
void reach(const Plan &p, int64_t &lowest, int64_t &highest) {
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (const Run &r : p.pattern) {
    const int64_t last = (r.count - 1) * r.stride;
    lo = std::min(lo, r.offset + std::min<int64_t>(0, last));
    hi = std::max(hi, r.offset + std::max<int64_t>(0, last) + r.length);
  }
  lowest = p.start + lo;
  highest = p.start + hi;
  for (const Dim &d : p.dims) {
    const int64_t last = (d.count - 1) * d.stride;
    lowest += std::min<int64_t>(0, last);
    highest += std::max<int64_t>(0, last);
  }
}

}  // namespace

bool place_block(void *buf, const Block &b, const std::shared_ptr<const TypeInfo> *same, PlacedBlock &out) {
  out.info = same ? *same : type_cache().find(b.type);
  const TypeInfo &info = *out.info;
  out.bytes = 0;
  if (b.count == 0 || info.size == 0) return true;
  if (!info.plan) return false;
  out.plan = info.plan->for_count(b.count);
  out.bytes = out.plan.packed_size();
  // A block's address need not lie in the allocation its data lies in (a lower bound
  // below its data, a displacement beyond it): GPU work starts from its first byte.
  out.typed = static_cast<char *>(buf) + b.disp;
  int64_t lowest, highest;
  reach(out.plan, lowest, highest);
  if (out.bytes > 0 && (lowest > 0 || highest <= 0)) {
    out.typed += lowest;
    out.plan.start -= lowest;
    highest -= lowest;
    lowest = 0;
  }
  out.low = lowest;
  out.high = highest;
  return true;
}

int check_types(const std::vector<Block> &blocks, MPI_Comm comm, const char *call) {
  MPI_Datatype checked = MPI_DATATYPE_NULL;
  for (const Block &b : blocks) {
    if (b.count < 0) return raise_error(comm, MPI_ERR_COUNT, "%s: negative count %d", call, b.count);
    // MPICH accepts any type for no data, null or uncommitted (MPI_Alltoallw callers name
    // MPI_DATATYPE_NULL for the peers they skip): nothing reads the type of an empty block.
    if (b.count == 0) continue;
    if (b.type == MPI_DATATYPE_NULL) return raise_error(comm, MPI_ERR_TYPE, "%s: MPI_DATATYPE_NULL", call);
    if (b.type == checked) continue;  // neighbouring blocks mostly share their type
    std::shared_ptr<const TypeInfo> info;
    if (const int err = check_datatype(comm, call, b.type, info)) return err;  // committed
    checked = b.type;
  }
  return MPI_SUCCESS;
}

}  // namespace tempi
