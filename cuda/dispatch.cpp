// The one room where cuda/ chooses how an object moves (thresholds in policy.hpp): a
// contiguous run by the copy engines, a strided plan by the strided or the tiled transpose
// kernels, a block list by the long-block, small-pattern or byte-balanced kernels (their
// tables uploaded once per plan and device), a whole object by one pitched copy, and which
// objects join a fused or open launch or run alone.
#include <cuda_runtime.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "blocklist.hpp"
#include "check.hpp"
#include "dispatch.hpp"
#include "pointers.hpp"
#include "resources.hpp"
#include "transpose.hpp"
#include "waits.hpp"

namespace tempi {

namespace {

// The widest access (16, 8, 4, 2 or 1 bytes) dividing every address, offset and length in `bits`.
int widest_word(uint64_t bits) {
  for (int w = 16; w > 1; w /= 2)
    if ((bits & uint64_t(w - 1)) == 0) return w;
  return 1;
}

// A block-list pattern's device data on one device (blocklist.hpp): plans of long blocks
// (long_block_plan) take the warp-per-piece kernel and its pieces, small patterns
// (small_pattern_plan) the tiled kernel for whole instances and the byte-balanced kernel
// for parts of instances, the others the byte-balanced kernel and its run table.
struct DeviceBlockList {
  Buffer owned;
  bool long_blocks = false;
  bool small = false;
  BlockListTable table;                // short blocks
  SmallPatternTable small_table;       // small patterns
  const LongPiece *pieces = nullptr;   // long blocks: the pieces of one instance
  std::vector<int64_t> piece_starts;   // long blocks: their stream offsets, on the host
};

// The plan's start and repetition dimensions, as every kernel's arguments hold them.
template <class Args>
void set_dims(const Plan &plan, Args &a) {
  a.start = plan.start;
  a.ndims = int(plan.dims.size());
  for (int d = 0; d < a.ndims; ++d) {
    a.counts[d] = plan.dims[d].count;
    a.strides[d] = plan.dims[d].stride;
  }
}

// What both block-list kernels' arguments say alike: one pattern instance repeated over
// the plan's dimensions, restricted to stream bytes [first, last).
template <class Args>
void repeat_over_dims(const Plan &plan, int64_t first, int64_t last, Args &a) {
  set_dims(plan, a);
  a.pattern_size = plan.pattern_size;
  a.first = first;
  a.last = last;
}

// Block-list tables live on the device that uploaded them: one entry per plan and device.
uint64_t units_key(uint64_t id, int device) { return id * kMaxDevices + uint64_t(device); }
std::mutex g_units_mutex;
std::unordered_map<uint64_t, std::shared_ptr<DeviceBlockList>> &units() {
  static auto *m = new std::unordered_map<uint64_t, std::shared_ptr<DeviceBlockList>>;  // immortal: plans may be released during static destruction
  return *m;
}

// The plan's block-list table on the current device, built and uploaded at its first use.
Status units_for(const Plan &plan, std::shared_ptr<DeviceBlockList> &out) {
  std::lock_guard<std::mutex> lock(g_units_mutex);
  const uint64_t key = units_key(plan.id, current_device());
  auto it = units().find(key);
  if (it != units().end()) {
    out = it->second;
    return Status::Ok;
  }
  auto list = std::make_shared<DeviceBlockList>();
  list->long_blocks = long_block_plan(plan);
  if (list->long_blocks) {
    const std::vector<LongPiece> pieces = long_pieces(plan);
    const size_t bytes = pieces.size() * sizeof(LongPiece);
    TEMPI_TRY(Buffer::allocate(Buffer::Kind::Device, bytes, list->owned));
    TEMPI_TRY(upload(list->owned.get(), pieces.data(), bytes));
    list->pieces = static_cast<const LongPiece *>(list->owned.get());
    for (const LongPiece &p : pieces) list->piece_starts.push_back(p.packed);
  } else {
    const BlockListImage image = blocklist_image(plan);
    list->small = small_pattern_plan(plan);
    const SmallPatternImage small = list->small ? small_pattern_image(plan) : SmallPatternImage{};
    const size_t at = (image.bytes() + 15) / 16 * 16;  // the small-pattern table follows, 16-byte aligned
    std::vector<char> host(at + (list->small ? small.bytes() : 0));
    TEMPI_TRY(Buffer::allocate(Buffer::Kind::Device, host.size(), list->owned));
    char *device = static_cast<char *>(list->owned.get());
    image.lay_out(host.data(), device, list->table);
    if (list->small) small.lay_out(host.data() + at, device + at, list->small_table);
    TEMPI_TRY(upload(device, host.data(), host.size()));
  }
  // Plans made without an id (tests of one-off plans) are not cached.
  if (plan.id != 0) units().emplace(key, list);
  out = list;
  return Status::Ok;
}

// A small pattern's whole instances (repetitions, or groups of them) in [first, last)
// through the tiled kernel, the parts of instances at the range's two ends (pipelined
// chunks cut them) through the byte-balanced one.
Status move_small_pattern(const Plan &plan, const DeviceBlockList &list, void *typed, void *packed,
                          int64_t first, int64_t last, bool to_packed, cudaStream_t stream) {
  const int64_t size = list.small_table.size;
  const int64_t whole_first = (first + size - 1) / size, whole_end = last / size;
  auto part = [&](int64_t lo, int64_t hi) {
    BlockListArgs a;
    a.table = list.table;
    repeat_over_dims(plan, lo, hi, a);
    return launch_blocklist(a, typed, static_cast<char *>(packed) + (lo - first), to_packed, stream);
  };
  if (whole_end <= whole_first) return part(first, last);
  SmallPatternArgs s;
  s.table = list.small_table;
  set_dims(plan, s);
  s.inst_first = whole_first;
  s.inst_count = whole_end - whole_first;
  if (to_packed) allocation_range(typed, s.readable_lo, s.readable_hi);
  TEMPI_TRY(launch_small_pattern(s, typed, static_cast<char *>(packed) + (whole_first * size - first), to_packed,
                                 stream));
  if (first < whole_first * size) TEMPI_TRY(part(first, whole_first * size));
  if (whole_end * size < last) TEMPI_TRY(part(whole_end * size, last));
  return Status::Ok;
}

}  // namespace

// The first byte of a contiguous plan's one run.
char *run_of(const Plan &plan, void *typed) {
  return static_cast<char *>(typed) + plan.start + plan.pattern[0].offset;
}

// A plan that is one contiguous run: stream bytes [first, last) are one copy, which
// cudaMemcpyAsync does at the copy rate (a kernel took 12% longer at 64 MiB, issue 11).
Status copy_run(const Plan &plan, void *typed, void *packed, int64_t first, int64_t last, bool to_packed,
                cudaStream_t stream) {
  char *run = run_of(plan, typed) + first;
  TEMPI_CUDA(cudaMemcpyAsync(to_packed ? packed : run, to_packed ? run : packed, size_t(last - first),
                             cudaMemcpyDefault, stream));
  return Status::Ok;
}

// Runs the kernel between a GPU-accessible typed buffer and a GPU-accessible packed buffer.
Status run_kernel(const Plan &plan, void *typed, void *packed, int64_t first, int64_t last, bool to_packed,
                  cudaStream_t stream) {
  if (plan.contiguous()) return copy_run(plan, typed, packed, first, last, to_packed, stream);
  const uint64_t addr_bits = uint64_t(reinterpret_cast<uintptr_t>(typed)) |
                             uint64_t(reinterpret_cast<uintptr_t>(packed)) | uint64_t(first) | uint64_t(last) |
                             uint64_t(plan.start);
  uint64_t dim_bits = 0;
  for (const Dim &d : plan.dims) dim_bits |= uint64_t(d.stride);
  if (int(plan.dims.size()) > kMaxKernelDims) return Status::Unsupported;

  if (plan.strided()) {
    StridedArgs a;
    set_dims(plan, a);
    a.block = plan.pattern_size;
    a.first = first;
    a.last = last;
    const int word = widest_word(addr_bits | dim_bits | uint64_t(a.block));
    if (tiled_transpose_fits(a, word)) return launch_tiled_transpose(a, word, typed, packed, to_packed, stream);
    return launch_strided(a, word, typed, packed, to_packed, stream);
  }

  std::shared_ptr<DeviceBlockList> list;
  TEMPI_TRY(units_for(plan, list));
  if (list->long_blocks) {
    LongBlockArgs a;
    a.pieces = list->pieces;
    a.npieces = int64_t(list->piece_starts.size());
    repeat_over_dims(plan, first, last, a);
    return launch_long_blocks(a, list->piece_starts, typed, packed, to_packed, stream);
  }
  if (list->small) return move_small_pattern(plan, *list, typed, packed, first, last, to_packed, stream);
  BlockListArgs a;
  a.table = list->table;
  repeat_over_dims(plan, first, last, a);
  return launch_blocklist(a, typed, packed, to_packed, stream);
}

// A job that can join a fused launch: a strided plan of few dimensions, 32-bit indices.
bool describe_fused(const MoveJob &j, void *packed, FusedObject &o) {
  const Plan &plan = *j.plan;
  if (!plan.strided() || int(plan.dims.size()) > policy::kMaxFusedDims) return false;
  uint64_t bits = uint64_t(reinterpret_cast<uintptr_t>(j.typed)) | uint64_t(reinterpret_cast<uintptr_t>(packed)) |
                  uint64_t(plan.start) | uint64_t(plan.pattern_size) | uint64_t(j.bytes);
  for (const Dim &d : plan.dims) bits |= uint64_t(d.stride);
  o.typed = j.typed;
  o.packed = packed;
  o.start = plan.start;
  o.block = plan.pattern_size;
  o.ndims = int(plan.dims.size());
  for (int d = 0; d < o.ndims; ++d) {
    o.counts[d] = plan.dims[d].count;
    o.strides[d] = plan.dims[d].stride;
  }
  o.bytes = std::min(j.bytes, plan.packed_size());
  o.word = widest_word(bits);
  return fusable(o.ndims, o.bytes, o.word);
}

// A large transpose or permutation leaves the fused launch for the tiled kernels
// (transpose.hpp). The fused strided kernel moves it 0.66-0.87 us per MB slower (issue
// 19's H200 table: N = 2000 and 4000 doubles), a launch of its own costs about 4 us
// (bench_call on an H100), so from 4 MiB up it runs alone.
bool runs_alone(const FusedObject &o) {
  if (o.bytes < policy::kAloneTranspose) return false;
  StridedArgs a;
  a.start = o.start;
  a.block = o.block;
  a.ndims = o.ndims;
  for (int d = 0; d < o.ndims; ++d) {
    a.counts[d] = o.counts[d];
    a.strides[d] = o.strides[d];
  }
  a.first = 0;
  a.last = o.bytes;
  return tiled_transpose_fits(a, o.word);
}

// One pitched copy between a whole 2-D or 3-D strided object and its packed bytes in
// host memory, where the layout allows one; `copied` says whether it did.
Status pitched_copy(const Plan &plan, void *typed, void *host, int64_t bytes, bool to_host, cudaStream_t stream,
                    bool &copied) {
  copied = false;
  const std::vector<Dim> &d = plan.dims;
  if (!plan.strided() || bytes != plan.packed_size() || d.size() > 2 || plan.instances() > policy::kMaxPitchedRows)
    return Status::Ok;
  char *base = run_of(plan, typed);
  const cudaMemcpyKind kind = to_host ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice;
  if (d.empty()) {  // one run
    TEMPI_CUDA(cudaMemcpyAsync(to_host ? host : base, to_host ? base : host, size_t(bytes), kind, stream));
    copied = true;
    return Status::Ok;
  }
  const size_t width = size_t(plan.pattern_size);
  // Rows must not overlap or run backwards, and pitches must stay within the engines' limit.
  constexpr int64_t kMaxPitch = int64_t(1) << 30;
  if (d[0].stride < int64_t(width) || d.back().stride >= kMaxPitch) return Status::Ok;
  if (d.size() == 1) {
    const size_t pitch = size_t(d[0].stride), rows = size_t(d[0].count);
    if (to_host)
      TEMPI_CUDA(cudaMemcpy2DAsync(host, width, base, pitch, width, rows, kind, stream));
    else
      TEMPI_CUDA(cudaMemcpy2DAsync(base, pitch, host, width, width, rows, kind, stream));
    copied = true;
    return Status::Ok;
  }
  // 3-D: planes must be whole numbers of rows apart, and not overlap.
  if (d[1].stride % d[0].stride != 0 || d[1].stride / d[0].stride < d[0].count) return Status::Ok;
  cudaMemcpy3DParms p = {};
  const cudaPitchedPtr object = make_cudaPitchedPtr(base, size_t(d[0].stride), width,
                                                    size_t(d[1].stride / d[0].stride));
  const cudaPitchedPtr packed = make_cudaPitchedPtr(host, width, width, size_t(d[0].count));
  p.srcPtr = to_host ? object : packed;
  p.dstPtr = to_host ? packed : object;
  p.extent = make_cudaExtent(width, size_t(d[0].count), size_t(d[1].count));
  p.kind = kind;
  TEMPI_CUDA(cudaMemcpy3DAsync(&p, stream));
  copied = true;
  return Status::Ok;
}

PairRoute choose_pair(const PairJob &j, int64_t bytes, FusedPair &p) {
  const MoveJob from{j.from, const_cast<void *>(j.from_typed), nullptr, bytes, Transfer{Method::Device, bytes}};
  const MoveJob to{j.to, j.to_typed, nullptr, bytes, Transfer{Method::Device, bytes}};
  if (!describe_fused(from, nullptr, p.from) || !describe_fused(to, nullptr, p.to)) return PairRoute::Other;
  if (j.to->contiguous() && runs_alone(p.from)) return PairRoute::PackIntoRun;
  if (j.from->contiguous() && runs_alone(p.to)) return PairRoute::UnpackFromRun;
  p.from.word = p.to.word = std::min(p.from.word, p.to.word);  // powers of two: the smaller divides both
  if (fusable(p.from.ndims, bytes, p.from.word) && fusable(p.to.ndims, bytes, p.to.word)) return PairRoute::Fused;
  return PairRoute::Other;
}

void release_plan_units(uint64_t id) {
  std::lock_guard<std::mutex> lock(g_units_mutex);
  for (int device = 0; device < kMaxDevices; ++device) units().erase(units_key(id, device));
}

}  // namespace tempi
