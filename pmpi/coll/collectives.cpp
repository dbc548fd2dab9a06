#include "coll/collectives.hpp"

#include <algorithm>
#include <climits>
#include <mutex>
#include <numeric>
#include <set>
#include <string>
#include <type_traits>

#include "config.hpp"
#include "base/errors.hpp"
#include "base/forward.hpp"
#include "host_packer.hpp"
#include "p2p/local_work.hpp"
#include "log.hpp"
#include "p2p/persistent.hpp"
#include "p2p/requests.hpp"
#include "base/runtime.hpp"
#include "base/validate.hpp"
#include "zero_copy/zero_copy.hpp"

namespace tempi {

bool gpu_data(const void *buf) {
  if (!buf || buf == MPI_IN_PLACE) return false;
  const MemorySpace s = gpu_backend().classify(buf);
  return s == MemorySpace::Device || s == MemorySpace::Managed;
}

namespace {

// Where a side with no bytes points the library, which reads and writes nothing there.
// Two places, so that a send side and a receive side never look aliased.
char g_nothing[2][16];

int64_t extent_of(MPI_Datatype type) {
  MPI_Count lb = 0, extent = 0;
  PMPI_Type_get_extent_x(type, &lb, &extent);
  return extent;
}

// A datatype of `bytes` contiguous bytes: the unit of wire counts where an int cannot
// count bytes.
int make_unit(int64_t bytes, MPI_Comm comm, const char *call, MPI_Datatype &unit, OwnedType &owned) {
  unit = MPI_BYTE;
  if (bytes <= 1) return MPI_SUCCESS;
  MPI_Datatype t = MPI_DATATYPE_NULL;
  int err;
  if (bytes <= INT_MAX) {
    err = PMPI_Type_contiguous(int(bytes), MPI_BYTE, &t);
  } else {
    constexpr int kGiB = 1 << 30;
    MPI_Datatype gib = MPI_DATATYPE_NULL;
    err = PMPI_Type_contiguous(kGiB, MPI_BYTE, &gib);
    const int lengths[2] = {int(bytes / kGiB), int(bytes % kGiB)};
    const MPI_Aint displs[2] = {0, MPI_Aint(bytes / kGiB) * kGiB};
    MPI_Datatype types[2] = {gib, MPI_BYTE};
    if (err == MPI_SUCCESS) err = PMPI_Type_create_struct(2, lengths, displs, types, &t);
    if (gib != MPI_DATATYPE_NULL) PMPI_Type_free(&gib);
  }
  if (err == MPI_SUCCESS) err = PMPI_Type_commit(&t);
  if (err != MPI_SUCCESS)
    return raise_error(comm, MPI_ERR_INTERN, "%s: cannot describe %lld packed bytes to MPI", call, (long long)bytes);
  unit = t;
  owned = OwnedType(t);
  return MPI_SUCCESS;
}

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

int copy_failed(MPI_Comm comm, const char *call, const char *where, Status st) {
  return raise_error(comm, MPI_ERR_INTERN, "%s: copying data %s failed: %s", call, where, to_string(st));
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

// ---- Side --------------------------------------------------------------------------------

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

int Side::plan(void *buf, std::vector<Block> blocks, bool typed_only, MPI_Comm comm, const char *call) {
  user_ = buf;
  blocks_ = std::move(blocks);
  if (const int err = check_types(blocks_, comm, call)) return err;
  for (const Block &b : blocks_) stores_ = stores_ || b.store;
  settle_other_threads();
  const bool aware = library_reads_gpu_ && !typed_only;
  const size_t n = blocks_.size();
  bool plannable = !typed_only, contiguous = true;
  int64_t total = 0;
  if (plannable) {
    bytes_.assign(n, 0);
    offsets_.assign(n, 0);
    plans_.assign(n, Plan{});
    infos_.assign(n, nullptr);
    typed_.assign(n, nullptr);
    for (size_t i = 0; i < n && plannable; ++i) {
      const Block &b = blocks_[i];
      offsets_[i] = total;
      if (b.count == 0) continue;
      const bool same = i > 0 && blocks_[i - 1].type == b.type && infos_[i - 1];
      PlacedBlock placed;
      if (!place_block(buf, b, same ? &infos_[i - 1] : nullptr, placed)) {
        plannable = false;
        break;
      }
      infos_[i] = std::move(placed.info);
      if (placed.bytes == 0) continue;
      plans_[i] = std::move(placed.plan);
      bytes_[i] = placed.bytes;
      typed_[i] = placed.typed;
      contiguous = contiguous && plans_[i].contiguous();
      total += bytes_[i];
    }
  }
  if (plannable) {
    // A collective moves many blocks with one synchronization: the batched choice, for
    // blocks of the average size (what the library moves per message).
    int64_t moving = 0;
    for (size_t i = 0; i < n; ++i) moving += bytes_[i] > 0;
    transfer_ = choose_transfer(requested_method(), aware, moving ? total / moving : 0, contiguous, config(), true);
    // Contiguous data on a CUDA-aware library needs no packing: the library reads it, as
    // bytes at each block's first byte (Direct), or through the user's types where a block
    // would lie below the buffer's address.
    if (aware && transfer_.method == Method::Device && contiguous) {
      if (local_work().pending()) local_work().settle();
      bool below = false;
      for (size_t i = 0; i < n; ++i) {
        if (bytes_[i] == 0) continue;
        offsets_[i] = typed_[i] + plans_[i].start + plans_[i].pattern[0].offset - static_cast<char *>(buf);
        below = below || offsets_[i] < 0;
      }
      if (!below) mode_ = Mode::Direct;
      return MPI_SUCCESS;
    }
    mode_ = Mode::Pack;
    device_ = gpu_backend().device_of(buf);
    if (total == 0) {
      lib_ = g_nothing[stores_ ? 1 : 0];
      return MPI_SUCCESS;
    }
    Backend &b = gpu_backend();
    const OnDeviceOf on_its_gpu(buf);  // device staging from this GPU's pool
    if (transfer_.method == Method::Device) {
      if (b.acquire(ScratchKind::Device, size_t(total), staging_) != Status::Ok) {
        TEMPI_LOG(Warn, "%s: no device memory for %lld packed bytes; using the one-shot method", call,
                  (long long)total);
        transfer_ = {Method::OneShot, total};
      }
    }
    if (!staging_.owner) {  // pinned, else pageable memory, which only the staged method reaches
      bool pageable = false;
      if (const int err = acquire_host_staging(total, comm, call, staging_, pageable)) return err;
      if (pageable && transfer_.method != Method::Staged) transfer_ = {Method::Staged, total};
    }
    lib_ = staging_.ptr;
    return MPI_SUCCESS;
  }
  // The library must see the user's types: never in GPU memory (a CUDA-aware Open MPI
  // crashes copying such a block to itself), always a host copy of the region.
  mode_ = Mode::Region;
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (const Block &b : blocks_) {
    if (b.count == 0) continue;
    int size = 0;
    PMPI_Type_size(b.type, &size);
    if (size == 0) continue;
    int64_t l, s;
    span_of(b.count, b.type, l, s);
    lo = std::min(lo, b.disp + l);
    hi = std::max(hi, b.disp + l + s);
  }
  if (lo >= hi) {  // nothing to move
    lib_ = g_nothing[stores_ ? 1 : 0];
    return MPI_SUCCESS;
  }
  lo_ = lo;
  span_ = hi - lo;
  device_ = gpu_backend().device_of(buf);
  bool pageable = false;  // the copies in and out reach pageable memory too
  if (const int err = acquire_host_staging(span_, comm, call, staging_, pageable)) return err;
  lib_ = static_cast<char *>(staging_.ptr) - lo_;
  return plan_region_back(buf, comm, call);
}

int Side::plan_region_back(void *buf, MPI_Comm comm, const char *call) {
  if (!stores_) return MPI_SUCCESS;
  const size_t n = blocks_.size();
  bytes_.assign(n, 0);
  offsets_.assign(n, 0);
  plans_.assign(n, Plan{});
  infos_.assign(n, nullptr);
  typed_.assign(n, nullptr);
  int64_t total = 0;
  for (size_t i = 0; i < n; ++i) {
    const Block &b = blocks_[i];
    if (!b.store || b.count == 0) continue;
    PlacedBlock placed;
    if (!place_block(buf, b, nullptr, placed)) return MPI_SUCCESS;  // the whole region goes back
    offsets_[i] = total;
    infos_[i] = std::move(placed.info);
    plans_[i] = std::move(placed.plan);
    bytes_[i] = placed.bytes;
    typed_[i] = placed.typed;
    total += placed.bytes;
  }
  // Blocks with no bytes between them (a reduction on contiguous data, the common case):
  // the copy of the whole region is the same bytes, without the pack.
  if (total == span_ && std::all_of(plans_.begin(), plans_.end(), [&](const Plan &p) {
        return p.packed_size() == 0 || p.contiguous();
      }))
    return MPI_SUCCESS;
  whole_back_ = false;
  transfer_ = {Method::OneShot, total};
  if (total == 0) return MPI_SUCCESS;
  bool pageable = false;
  if (const int err = acquire_host_staging(total, comm, call, back_, pageable)) return err;
  if (pageable) transfer_ = {Method::Staged, total};
  return MPI_SUCCESS;
}

int Side::load(MPI_Comm comm, const char *call) {
  Backend &b = gpu_backend();
  if (mode_ == Mode::Region) {
    // Always, for a receive side too: the bytes between its blocks go back unchanged.
    if (span_ == 0) return MPI_SUCCESS;
    const Status st = b.copy(staging_.ptr, static_cast<char *>(user_) + lo_, size_t(span_));
    return st == Status::Ok ? MPI_SUCCESS : copy_failed(comm, call, "from the GPU to the host", st);
  }
  if (mode_ != Mode::Pack) return MPI_SUCCESS;
  std::vector<MoveJob> jobs;
  for (size_t i = 0; i < blocks_.size(); ++i)
    if (blocks_[i].load && bytes_[i] > 0)
      jobs.push_back({&plans_[i], typed_[i],
                      static_cast<char *>(staging_.ptr) + offsets_[i], bytes_[i], transfer_});
  if (jobs.empty()) return MPI_SUCCESS;
  const OnDeviceOf on_its_gpu(user_);
  Fence done;
  Status st = b.pack_async(jobs, done);
  if (st == Status::Ok) st = b.wait(done);
  if (st != Status::Ok)
    return raise_error(comm, MPI_ERR_INTERN, "%s: packing GPU data (%s method) failed: %s", call,
                       to_string(transfer_.method), to_string(st));
  return MPI_SUCCESS;
}

void Side::unpack_jobs(std::vector<MoveJob> &jobs) {
  const bool by_plan = mode_ == Mode::Region && !whole_back_;
  if (mode_ != Mode::Pack && !by_plan) return;
  char *packed = static_cast<char *>(by_plan ? back_.ptr : staging_.ptr);
  for (size_t i = 0; i < blocks_.size(); ++i)
    if (blocks_[i].store && bytes_[i] > 0)
      jobs.push_back({&plans_[i], typed_[i], packed + offsets_[i], bytes_[i], transfer_});
}

int Side::region_back(MPI_Comm comm, const char *call) {
  if (mode_ != Mode::Region || !stores_ || span_ == 0) return MPI_SUCCESS;
  if (!whole_back_) {  // the blocks' bytes, packed from the host copy; unpack_jobs puts them back
    char *const host_user = static_cast<char *>(staging_.ptr) - lo_;
    for (size_t i = 0; i < blocks_.size(); ++i)
      if (blocks_[i].store && bytes_[i] > 0)
        host_pack(plans_[i], host_user + (typed_[i] - static_cast<char *>(user_)),
                  static_cast<char *>(back_.ptr) + offsets_[i], 0, bytes_[i]);
    return MPI_SUCCESS;
  }
  const OnDeviceOf on_its_gpu(user_);
  const Status st = gpu_backend().copy(static_cast<char *>(user_) + lo_, staging_.ptr, size_t(span_));
  return st == Status::Ok ? MPI_SUCCESS : copy_failed(comm, call, "from the host to the GPU", st);
}

// ---- finishing ---------------------------------------------------------------------------

TrackedOp::Finisher CollectiveOp::finisher() const { return finish_collectives; }

int finish_collectives(std::vector<OpFinishing> &batch) {
  Backend &b = gpu_backend();
  struct OnGpu {
    int device;
    std::vector<MoveJob> jobs;
    std::vector<OpFinishing *> owners;
  };
  std::vector<OnGpu> gpus;
  for (OpFinishing &f : batch) {
    CollectiveOp &op = static_cast<CollectiveOp &>(*f.op);
    if (op.finished) continue;
    op.finished = true;
    if (f.err != MPI_SUCCESS) continue;  // the library reported it; the buffer is undefined
    f.result = op.recv.region_back(op.comm, op.call);
    std::vector<MoveJob> jobs;
    op.recv.unpack_jobs(jobs);
    if (jobs.empty()) continue;
    auto g = std::find_if(gpus.begin(), gpus.end(), [&](const OnGpu &o) { return o.device == op.recv.device(); });
    if (g == gpus.end()) g = gpus.insert(gpus.end(), OnGpu{op.recv.device(), {}, {}});
    g->jobs.insert(g->jobs.end(), jobs.begin(), jobs.end());
    g->owners.push_back(&f);
  }
  auto failed = [](OpFinishing &f, Status st) {
    const CollectiveOp &op = static_cast<const CollectiveOp &>(*f.op);
    if (f.result == MPI_SUCCESS)
      f.result = raise_error(op.comm, MPI_ERR_INTERN, "%s: unpacking received data on the GPU failed: %s",
                             op.call, to_string(st));
  };
  std::vector<Fence> fences(gpus.size());
  std::vector<Status> issued(gpus.size(), Status::Ok);
  for (size_t i = 0; i < gpus.size(); ++i) {
    const int previous = gpus[i].device >= 0 ? b.use_device(gpus[i].device) : -1;
    issued[i] = b.unpack_async(gpus[i].jobs, fences[i]);
    if (previous >= 0) b.use_device(previous);
  }
  for (size_t i = 0; i < gpus.size(); ++i) {
    const int previous = gpus[i].device >= 0 ? b.use_device(gpus[i].device) : -1;
    Status st = issued[i];
    const Status waited = b.wait(fences[i]);
    if (st == Status::Ok) st = waited;
    if (previous >= 0) b.use_device(previous);
    if (st != Status::Ok)
      for (OpFinishing *f : gpus[i].owners) failed(*f, st);
  }
  int first = MPI_SUCCESS;
  for (const OpFinishing &f : batch)
    if (first == MPI_SUCCESS) first = f.result;
  return first;
}

int start_collective(CollectiveOp &op) {
  if (const int err = op.send.load(op.comm, op.call)) return err;
  if (const int err = op.recv.load(op.comm, op.call)) return err;
  op.finished = false;
  return MPI_SUCCESS;
}

int finish_collective(CollectiveOp &op, int err) {
  return finish_one(op, err);
}

namespace coll {

namespace {

// ---- the communicator ------------------------------------------------------------------

struct Group {
  int rank = 0, size = 0, remote = 0;
  bool inter = false;
  int peers() const { return inter ? remote : size; }  // blocks of an all-to-all buffer
};

// False for a communicator the library must judge (it reports the error).
bool group_of(MPI_Comm comm, Group &g) {
  if (comm == MPI_COMM_NULL) return false;
  int inter = 0;
  if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS) return false;
  g.inter = inter != 0;
  PMPI_Comm_rank(comm, &g.rank);
  PMPI_Comm_size(comm, &g.size);
  if (g.inter) PMPI_Comm_remote_size(comm, &g.remote);
  return true;
}

// A rooted collective: this process is its root (an intercommunicator's MPI_ROOT), another
// member (Leaf), or takes no part (an intercommunicator's MPI_PROC_NULL).
enum class Role { None, Root, Leaf };
bool role_of(const Group &g, int root, Role &r) {
  if (g.inter) {
    if (root == MPI_ROOT) r = Role::Root;
    else if (root == MPI_PROC_NULL) r = Role::None;
    else if (root >= 0 && root < g.remote) r = Role::Leaf;
    else return false;
    return true;
  }
  if (root < 0 || root >= g.size) return false;
  r = root == g.rank ? Role::Root : Role::Leaf;
  return true;
}

// The neighbourhood of a process topology, in MPI's order: a Cartesian one's missing
// neighbours are MPI_PROC_NULL (their blocks are left alone). False without a topology.
bool neighbourhood(MPI_Comm comm, std::vector<int> &sources, std::vector<int> &dests, bool *cartesian = nullptr) {
  int status = MPI_UNDEFINED;
  if (comm == MPI_COMM_NULL || PMPI_Topo_test(comm, &status) != MPI_SUCCESS) return false;
  if (cartesian) *cartesian = status == MPI_CART;
  if (status == MPI_CART) {
    int ndims = 0;
    PMPI_Cartdim_get(comm, &ndims);
    for (int d = 0; d < ndims; ++d) {
      int negative = MPI_PROC_NULL, positive = MPI_PROC_NULL;
      PMPI_Cart_shift(comm, d, 1, &negative, &positive);
      sources.push_back(negative);
      sources.push_back(positive);
    }
    dests = sources;
    return true;
  }
  if (status == MPI_GRAPH) {
    int rank = 0, n = 0;
    PMPI_Comm_rank(comm, &rank);
    PMPI_Graph_neighbors_count(comm, rank, &n);
    sources.resize(size_t(n));
    if (n > 0) PMPI_Graph_neighbors(comm, rank, n, sources.data());
    dests = sources;
    return true;
  }
  if (status == MPI_DIST_GRAPH) {
    int in = 0, out = 0, weighted = 0;
    PMPI_Dist_graph_neighbors_count(comm, &in, &out, &weighted);
    sources.resize(size_t(in));
    dests.resize(size_t(out));
    std::vector<int> sw(size_t(std::max(in, 1))), dw(size_t(std::max(out, 1)));
    int nothing[1];
    PMPI_Dist_graph_neighbors(comm, in, in ? sources.data() : nothing, sw.data(), out,
                              out ? dests.data() : nothing, dw.data());
    return true;
  }
  return false;
}

// Comm ranks 0..n-1: the peers of an all-to-all's blocks.
std::vector<int> every_rank(int n) {
  std::vector<int> v(size_t(std::max(n, 0)));
  for (int i = 0; i < n; ++i) v[size_t(i)] = i;
  return v;
}

// ---- blocks ------------------------------------------------------------------------------

int64_t step_of(int count, MPI_Datatype type) {
  return type == MPI_DATATYPE_NULL || count <= 0 ? 0 : int64_t(count) * extent_of(type);
}

std::vector<Block> single(int count, MPI_Datatype type, bool load, bool store) {
  return {Block{0, count, type, load, store}};
}

// n blocks of `count` elements, block i at i * count * extent.
std::vector<Block> uniform(int n, int count, MPI_Datatype type, bool load, bool store) {
  const int64_t step = step_of(count, type);
  std::vector<Block> v(size_t(std::max(n, 0)));
  for (int i = 0; i < n; ++i) v[size_t(i)] = Block{i * step, count, type, load, store};
  return v;
}

int null_array(MPI_Comm comm, const char *call, const char *what) {
  return raise_error(comm, MPI_ERR_ARG, "%s: %s is NULL", call, what);
}

// n blocks of counts[i] elements at displs[i] extents.
int varying(int n, const int counts[], const int displs[], MPI_Datatype type, bool load, bool store, MPI_Comm comm,
            const char *call, std::vector<Block> &v) {
  if (n > 0 && !counts) return null_array(comm, call, "the counts array");
  if (n > 0 && !displs) return null_array(comm, call, "the displacements array");
  const int64_t extent = type == MPI_DATATYPE_NULL ? 0 : extent_of(type);
  v.resize(size_t(n));
  for (int i = 0; i < n; ++i) v[size_t(i)] = Block{int64_t(displs[i]) * extent, counts[i], type, load, store};
  return MPI_SUCCESS;
}

// n blocks of counts[i] elements of types[i] at displs[i] bytes.
template <class Disp>
int typed(int n, const int counts[], const Disp displs[], const MPI_Datatype types[], bool load, bool store,
          MPI_Comm comm, const char *call, std::vector<Block> &v) {
  if (n > 0 && !counts) return null_array(comm, call, "the counts array");
  if (n > 0 && !displs) return null_array(comm, call, "the displacements array");
  if (n > 0 && !types) return null_array(comm, call, "the datatypes array");
  v.resize(size_t(n));
  for (int i = 0; i < n; ++i) v[size_t(i)] = Block{int64_t(displs[i]), counts[i], types[i], load, store};
  return MPI_SUCCESS;
}

// ---- one count for every peer, as per-peer counts ----------------------------------------

// Zero-copy needs per-peer counts (a zero-copy pair's count becomes 0 at both ends of the
// library's call), which the calls with one count for every peer cannot express. On a
// communicator where zero-copy takes part (zero_copy_participates: the same answer at
// every rank), their blocking and persistent, not-in-place forms run as the v-variant with
// equal counts at every rank alike (MPI_IN_PLACE, blocking and persistent are the same at
// every rank by the standard), so the library still sees one collective. Nonblocking
// forms cannot take part in zero-copy (docs/using.md) and stay as they are.
bool as_varying(MPI_Comm comm, bool in_place, const Issue &how) {
  return (!how.request || how.persistent) && !in_place && zero_copy_participates(comm);
}


// `n` equal blocks of `count` elements of `type` as per-peer arrays: block i at i * count
// extents, or every block at 0 (`at_zero`: one send block for every peer, as in the
// gathers to all). Where i * count overflows an int, the unit becomes a contiguous type of
// `count` elements (count 1, displacement i), which has the same type signature.
struct PerPeer {
  std::vector<int> counts, displs;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  OwnedType owned;
};
int per_peer(int n, int count, MPI_Datatype type, bool at_zero, MPI_Comm comm, const char *call, PerPeer &out) {
  out.type = type;
  int per_block = count;  // elements of out.type per block, and the displacement step
  if (!at_zero && n > 1 && int64_t(n - 1) * count > INT_MAX) {
    MPI_Datatype t = MPI_DATATYPE_NULL;
    int err = PMPI_Type_contiguous(count, type, &t);
    if (err == MPI_SUCCESS) err = PMPI_Type_commit(&t);
    if (err != MPI_SUCCESS)
      return raise_error(comm, MPI_ERR_INTERN, "%s: cannot describe blocks of %d elements to MPI", call, count);
    out.type = t;
    out.owned = OwnedType(t);
    per_block = 1;
  }
  out.counts.assign(size_t(std::max(n, 0)), per_block);
  out.displs.resize(size_t(std::max(n, 0)));
  for (int i = 0; i < n; ++i) out.displs[size_t(i)] = at_zero ? 0 : i * per_block;
  return MPI_SUCCESS;
}

// The per-peer arrays of a one-count call run as its v-variant: a persistent init keeps
// them with its request (its library call at every start reads them), a blocking call
// drops them on return.
struct Varying {
  PerPeer s, r;
};
Issue varying_issue(const Issue &how, std::shared_ptr<const Varying> arrays) {
  if (!how.persistent) return Issue(nullptr);
  how.init->arrays = std::move(arrays);
  return how;
}
const char *varying_name(const Issue &how, const char *blocking, const char *init) {
  return how.persistent ? init : blocking;
}

// ---- what the library gets ---------------------------------------------------------------

// Uniform blocks: one count and type for all of them.
int wire_uniform(const Side &s, int user_count, MPI_Datatype user_type, const CollectiveOp &op, Wire &w) {
  // Direct blocks qualify only where they lie as packed blocks would: block i at i bytes(0).
  bool packed_layout = s.mode() == Side::Mode::Pack;
  if (s.mode() == Side::Mode::Direct) {
    packed_layout = true;
    for (size_t i = 0; i < s.blocks(); ++i)
      packed_layout = packed_layout && s.bytes(i) == s.bytes(0) && s.offset(i) == int64_t(i) * s.bytes(0);
  }
  if (!packed_layout) {
    w.count = user_count;
    w.unit = user_type;
    return MPI_SUCCESS;
  }
  const int64_t bytes = s.blocks() ? s.bytes(0) : 0;
  if (bytes <= INT_MAX) {
    w.count = int(bytes);
    w.unit = MPI_BYTE;
    return MPI_SUCCESS;
  }
  w.count = 1;
  return make_unit(bytes, op.comm, op.call, w.unit, w.owned);
}

// The unit in which every byte count (and, with `displs_too`, every offset) of a packed
// side fits an int: one byte where it can, else their greatest common divisor.
int wire_unit(const Side &s, bool displs_too, const CollectiveOp &op, Wire &w, int64_t &unit) {
  int64_t top = 0, g = 0;
  for (size_t i = 0; i < s.blocks(); ++i) {
    top = std::max(top, s.bytes(i));
    g = std::gcd(g, s.bytes(i));
    if (displs_too) {
      top = std::max(top, s.offset(i));
      g = std::gcd(g, s.offset(i));
    }
  }
  unit = 1;
  if (top > INT_MAX) {
    unit = g;
    if (top / g > INT_MAX)
      return raise_error(op.comm, MPI_ERR_COUNT, "%s: %lld packed bytes cannot be counted in ints", op.call,
                         (long long)top);
  }
  return make_unit(unit, op.comm, op.call, w.unit, w.owned);
}

struct VArgs {
  const int *counts, *displs;
  MPI_Datatype type;
};

// Per-block counts and displacements in units of one type (the v-variants).
int wire_varying(const Side &s, const int *user_counts, const int *user_displs, MPI_Datatype user_type,
                 const CollectiveOp &op, Wire &w, VArgs &out) {
  out = {user_counts, user_displs, user_type};
  if (!s.rewired()) return MPI_SUCCESS;
  int64_t unit = 1;
  if (const int err = wire_unit(s, true, op, w, unit)) return err;
  const size_t n = s.blocks();
  w.counts.resize(std::max<size_t>(n, 1));
  w.displs.resize(std::max<size_t>(n, 1));
  for (size_t i = 0; i < n; ++i) {
    w.counts[i] = int(s.bytes(i) / unit);
    w.displs[i] = int(s.offset(i) / unit);
  }
  out = {w.counts.data(), w.displs.data(), w.unit};
  return MPI_SUCCESS;
}

template <class Disp>
struct WArgs {
  const int *counts;
  const Disp *displs;
  const MPI_Datatype *types;
};

// Per-block counts, byte displacements and types (the w-variants), in arrays of at least
// `room` entries.
template <class Disp>
int wire_typed(const Side &s, const int *user_counts, const Disp *user_displs, const MPI_Datatype *user_types,
               const CollectiveOp &op, Wire &w, std::vector<Disp> &displs, WArgs<Disp> &out, size_t room = 1) {
  out = {user_counts, user_displs, user_types};
  if (!s.rewired()) return MPI_SUCCESS;
  if (s.mode() == Side::Mode::Direct && std::is_same<Disp, int>::value)
    for (size_t i = 0; i < s.blocks(); ++i)
      if (s.offset(i) > INT_MAX) return MPI_SUCCESS;  // beyond int displacements: the user's types
  int64_t unit = 1;
  if (const int err = wire_unit(s, false, op, w, unit)) return err;
  const size_t n = s.blocks();
  w.counts.assign(std::max(n, room), 0);
  displs.assign(std::max(n, room), 0);
  w.types.assign(std::max(n, room), w.unit);
  w.placed.clear();
  for (size_t i = 0; i < n; ++i) {
    w.counts[i] = int(s.bytes(i) / unit);
    if (!std::is_same<Disp, int>::value || s.offset(i) <= INT_MAX) {
      displs[i] = Disp(s.offset(i));
      continue;
    }
    // Staging offsets add up over the blocks, so they pass 2 GiB where every displacement
    // the application gave was small (an FFT transpose's blocks at displacement 0): such a
    // block goes as one element of a type that carries its offset, at displacement 0.
    if (w.counts[i] == 0) continue;
    const MPI_Aint at = MPI_Aint(s.offset(i));
    MPI_Datatype placed = MPI_DATATYPE_NULL;
    if (PMPI_Type_create_hindexed(1, &w.counts[i], &at, w.unit, &placed) != MPI_SUCCESS ||
        PMPI_Type_commit(&placed) != MPI_SUCCESS)
      return raise_error(op.comm, MPI_ERR_INTERN, "%s: cannot make a type for a block past 2 GiB of staging",
                         op.call);
    w.placed.emplace_back(placed);
    w.types[i] = placed;
    w.counts[i] = 1;
  }
  out = {w.counts.data(), displs.data(), w.types.data()};
  return MPI_SUCCESS;
}

// ---- the call ----------------------------------------------------------------------------

// "MPI_X_init" for a persistent collective: the name outlives the op (errors, logs).
const char *init_name(const char *blocking) {
  static std::mutex mutex;
  static std::set<std::string> names;
  std::lock_guard<std::mutex> lock(mutex);
  return names.insert(std::string(blocking) + "_init").first->c_str();
}

std::shared_ptr<CollectiveOp> new_op(const char *blocking, const char *nonblocking, MPI_Comm comm, const Issue &how) {
  auto op = std::make_shared<CollectiveOp>();
  op->call = how.persistent ? init_name(blocking) : how.request ? nonblocking : blocking;
  op->comm = comm;
  // By default no collective hands GPU memory to the library, even a CUDA-aware one: on
  // two H200s (2026-11-23) Open MPI 4.1's nonblocking collectives (libnbc) returned wrong
  // bytes for device buffers, its blocking MPI_Alltoallw crashed copying a rank's own block
  // of a non-contiguous type (ompi_datatype_sndrcv, plain memcpy), and a blocking
  // MPI_Alltoallv of device bytes hung now and then; MPI offers no query for which calls a
  // library's CUDA-awareness covers. TEMPI_COLL_DEVICE=1 hands packed bytes of blocking
  // calls to a CUDA-aware library (FFT transpose: 77 us instead of milliseconds).
  const bool gpu_ok = mpi_is_cuda_aware() && !how.request && config().coll_device;
  op->send.library_reads_gpu(gpu_ok);
  op->recv.library_reads_gpu(gpu_ok);
  return op;
}

// The zero-copy handshake of an exchange collective (zero_copy.hpp): a blocking call moves
// its zero-copy pairs now; a persistent init decides them for every start (how.init keeps
// what the starts do); a nonblocking call takes no part (its pairs would have to be agreed
// before the call returns, which needs the peers).
int zero_copy_handshake(ZeroCopyCall &zc, const Issue &how, MPI_Comm comm, const char *call, void *sbuf,
                        std::vector<Block> &sblocks, const std::vector<int> &dests, void *rbuf,
                        std::vector<Block> &rblocks, const std::vector<int> &sources, bool cartesian) {
  if (!how.request) return zc.start(comm, call, sbuf, sblocks, dests, rbuf, rblocks, sources, cartesian);
  if (how.persistent)
    return zc.start_persistent(comm, call, sbuf, sblocks, dests, rbuf, rblocks, sources, cartesian,
                               how.init->zero_copy);
  return MPI_SUCCESS;
}

bool needed(const CollectiveOp &op) { return op.send.used() || op.recv.used(); }

// Whether any of the first n counts is not 0 (a rank's arguments give the library data).
bool any_count(const int *counts, size_t n) {
  return counts && std::any_of(counts, counts + n, [](int c) { return c != 0; });
}
// The same for a neighbourhood's counts: a block to or from MPI_PROC_NULL carries nothing
// (so a non-periodic grid's border ranks may skip the library too).
bool any_count(const int *counts, const std::vector<int> &peers) {
  if (!counts) return false;
  for (size_t i = 0; i < peers.size(); ++i)
    if (peers[i] != MPI_PROC_NULL && counts[i] != 0) return true;
  return false;
}

// The library's part of an exchange collective, `call`, unless the call is blocking and no
// rank of the communicator gives the library any data (ZeroCopyCall::library_needed).
template <class Call>
int library_part(ZeroCopyCall &zc, const Issue &how, bool carries, const Call &call) {
  if (!how.request && !zc.library_needed(carries)) return MPI_SUCCESS;
  return call();
}

// One side of an exchange collective, its blocks gathered: the GPU buffer (null: a host
// side, whose blocks are empty) and the ranks its blocks go to or come from (null: no
// zero-copy handshake, as on an intercommunicator).
struct ExchangeSide {
  void *buf;
  std::vector<Block> blocks;
  const std::vector<int> *peers;
};

// The middle of an exchange collective: both sides' types checked (before peers rely on
// this rank), the zero-copy handshake (`zc_recv`: whether zero-copy may write the receive
// buffer, which MPI_IN_PLACE keeps from it), and the GPU sides planned.
int check_agree_plan(CollectiveOp &op, ZeroCopyCall &zc, const Issue &how, ExchangeSide send, ExchangeSide recv,
                     bool zc_recv, bool cartesian) {
  if (const int err = check_types(send.blocks, op.comm, op.call)) return err;
  if (const int err = check_types(recv.blocks, op.comm, op.call)) return err;
  if (send.peers && recv.peers)
    if (const int err = zero_copy_handshake(zc, how, op.comm, op.call, send.buf, send.blocks, *send.peers,
                                            zc_recv ? recv.buf : nullptr, recv.blocks, *recv.peers, cartesian))
      return err;
  if (send.buf)
    if (const int err = op.send.plan(send.buf, std::move(send.blocks), false, op.comm, op.call)) return err;
  if (recv.buf)
    if (const int err = op.recv.plan(recv.buf, std::move(recv.blocks), false, op.comm, op.call)) return err;
  return MPI_SUCCESS;
}

// Before the library's call: the send blocks packed (or regions copied in). A persistent
// init packs nothing: each start does (start_collective).
int load(CollectiveOp &op, const Issue &how = Issue{}) {
  if (how.persistent) return MPI_SUCCESS;
  if (const int err = op.send.load(op.comm, op.call)) return err;
  return op.recv.load(op.comm, op.call);
}

// After the library's call returned `err`: a blocking call finishes now; a nonblocking
// one is tracked so that the completion call that completes it finishes it; a persistent
// one is tracked, inactive, until MPI_Request_free (persistent.hpp).
int conclude(std::shared_ptr<CollectiveOp> op, int err, const Issue &how) {
  if (!how.request) return err != MPI_SUCCESS ? err : finish_collective(*op, err);
  if (err != MPI_SUCCESS) return err;
  auto p = std::make_unique<Pending>();
  if (how.persistent) {
    op->finished = true;  // nothing to unpack before the first start
    auto persistent = std::make_shared<PersistentOp>();
    persistent->call = op->call;
    persistent->comm = op->comm;
    persistent->restart = std::move(how.init->restart);
    persistent->zero_copy = std::move(how.init->zero_copy);
    persistent->arrays = std::move(how.init->arrays);
    persistent->held = std::move(how.init->held);
    if (const int e = persistent_handle(op->comm, op->call, how.request)) return e;
    how.init->made = true;
    p->persistent = std::move(persistent);
  }
  p->op = std::move(op);
  requests().add(*how.request, std::move(p));
  return MPI_SUCCESS;
}

// A call that TEMPI leaves to the library as it is (no GPU side used): its persistent
// form is still TEMPI's (each start issues the library's nonblocking call), since the
// library's own persistent collectives are not to be trusted (docs/using.md).
int untouched(std::shared_ptr<CollectiveOp> op, int err, const Issue &how) {
  return how.persistent ? conclude(std::move(op), err, how) : err;
}

void *mutable_buf(const void *p) { return const_cast<void *>(p); }

// The rest of a collective that passes one count of one type on each side, once its sides
// are planned: the library's call on the application's arguments where neither side needs
// TEMPI, else on the staging, after the send side is loaded. `next` issues the library's call.
template <class Next>
int issue_uniform(std::shared_ptr<CollectiveOp> op, const Issue &how, const void *sbuf, int scount,
                  MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype, const Next &next) {
  if (!needed(*op)) return untouched(op, next(sbuf, scount, stype, rbuf, rcount, rtype), how);
  if (const int err = load(*op, how)) return err;
  Wire &sw = op->swire, &rw = op->rwire;
  if (const int err = wire_uniform(op->send, scount, stype, *op, sw)) return err;
  if (const int err = wire_uniform(op->recv, rcount, rtype, *op, rw)) return err;
  return conclude(op, next(op->send.library_buffer(sbuf), sw.count, sw.unit, op->recv.library_buffer(rbuf), rw.count,
                           rw.unit),
                  how);
}

// A side that holds a reduction's typed data (Region on a library that is not CUDA-aware).
int plan_typed(Side &s, const void *buf, int count, MPI_Datatype type, bool store, const CollectiveOp &op) {
  if (!gpu_data(buf)) return MPI_SUCCESS;
  return s.plan(mutable_buf(buf), single(count, type, true, store), true, op.comm, op.call);
}

}  // namespace

// The library's own form of a collective, as the application issued it (`how`, an Issue):
// persistent (kept, so that every start issues the nonblocking form on the same arguments),
// nonblocking (on the application's request) or blocking. ARGS are the arguments before the
// request. A macro, since the three forms are three functions of the library.
#define TEMPI_FORWARD(how, NONBLOCKING, BLOCKING, ...)                                                   \
  ((how).persistent ? (how).keep([=](MPI_Request *lib) { return TEMPI_NEXT(NONBLOCKING)(__VA_ARGS__, lib); }) \
   : (how).request  ? TEMPI_NEXT(NONBLOCKING)(__VA_ARGS__, (how).request)                                 \
                    : TEMPI_NEXT(BLOCKING)(__VA_ARGS__))

// ---- rooted ------------------------------------------------------------------------------

int bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm, Issue how) {
  auto next = [&](void *b, int c, MPI_Datatype t) {
    return TEMPI_FORWARD(how, MPI_Ibcast, MPI_Bcast, b, c, t, root, comm);
  };
  Group g;
  Role role;
  if (!gpu_data(buf) || !group_of(comm, g) || !role_of(g, root, role) || role == Role::None)
    return next(buf, count, type);
  auto op = new_op("MPI_Bcast", "MPI_Ibcast", comm, how);
  const bool sends = role == Role::Root;
  Side &s = sends ? op->send : op->recv;
  if (const int err = s.plan(buf, single(count, type, sends, !sends), false, comm, op->call)) return err;
  if (!needed(*op)) return untouched(op, next(buf, count, type), how);
  if (const int err = load(*op, how)) return err;
  Wire &w = sends ? op->swire : op->rwire;
  if (const int err = wire_uniform(s, count, type, *op, w)) return err;
  return conclude(op, next(s.library_buffer(buf), w.count, w.unit), how);
}

int gather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype, int root,
           MPI_Comm comm, Issue how) {
  auto next = [&](const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt) {
    return TEMPI_FORWARD(how, MPI_Igather, MPI_Gather, s, sc, st, r, rc, rt, root, comm);
  };
  Group g;
  Role role;
  if (!group_of(comm, g) || !role_of(g, root, role) || role == Role::None)
    return next(sbuf, scount, stype, rbuf, rcount, rtype);
  auto op = new_op("MPI_Gather", "MPI_Igather", comm, how);
  const bool in_place = sbuf == MPI_IN_PLACE;
  const bool sends = !g.inter || role == Role::Leaf;
  if (sends && gpu_data(sbuf))
    if (const int err = op->send.plan(mutable_buf(sbuf), single(scount, stype, true, false), false, comm, op->call))
      return err;
  if (role == Role::Root && gpu_data(rbuf)) {
    std::vector<Block> blocks = uniform(g.peers(), rcount, rtype, false, true);
    if (in_place && !g.inter) blocks[size_t(g.rank)].store = false;  // the root's own block stays where it is
    if (const int err = op->recv.plan(rbuf, std::move(blocks), false, comm, op->call)) return err;
  }
  return issue_uniform(std::move(op), how, sbuf, scount, stype, rbuf, rcount, rtype, next);
}

int gatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, const int rcounts[], const int displs[],
            MPI_Datatype rtype, int root, MPI_Comm comm, Issue how) {
  auto next = [&](const void *s, int sc, MPI_Datatype st, void *r, const int *rc, const int *rd, MPI_Datatype rt) {
    return TEMPI_FORWARD(how, MPI_Igatherv, MPI_Gatherv, s, sc, st, r, rc, rd, rt, root, comm);
  };
  Group g;
  Role role;
  if (!group_of(comm, g) || !role_of(g, root, role) || role == Role::None)
    return next(sbuf, scount, stype, rbuf, rcounts, displs, rtype);
  auto op = new_op("MPI_Gatherv", "MPI_Igatherv", comm, how);
  const bool in_place = sbuf == MPI_IN_PLACE;
  const bool sends = !g.inter || role == Role::Leaf;
  if (sends && gpu_data(sbuf))
    if (const int err = op->send.plan(mutable_buf(sbuf), single(scount, stype, true, false), false, comm, op->call))
      return err;
  if (role == Role::Root && gpu_data(rbuf)) {
    std::vector<Block> blocks;
    if (const int err = varying(g.peers(), rcounts, displs, rtype, false, true, comm, op->call, blocks)) return err;
    if (in_place && !g.inter) blocks[size_t(g.rank)].store = false;
    if (const int err = op->recv.plan(rbuf, std::move(blocks), false, comm, op->call)) return err;
  }
  if (!needed(*op)) return untouched(op, next(sbuf, scount, stype, rbuf, rcounts, displs, rtype), how);
  if (const int err = load(*op, how)) return err;
  Wire &sw = op->swire;
  VArgs r;
  if (const int err = wire_uniform(op->send, scount, stype, *op, sw)) return err;
  if (const int err = wire_varying(op->recv, rcounts, displs, rtype, *op, op->rwire, r)) return err;
  return conclude(op, next(op->send.library_buffer(sbuf), sw.count, sw.unit, op->recv.library_buffer(rbuf), r.counts,
                           r.displs, r.type),
                  how);
}

int scatter(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype, int root,
            MPI_Comm comm, Issue how) {
  auto next = [&](const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt) {
    return TEMPI_FORWARD(how, MPI_Iscatter, MPI_Scatter, s, sc, st, r, rc, rt, root, comm);
  };
  Group g;
  Role role;
  if (!group_of(comm, g) || !role_of(g, root, role) || role == Role::None)
    return next(sbuf, scount, stype, rbuf, rcount, rtype);
  auto op = new_op("MPI_Scatter", "MPI_Iscatter", comm, how);
  const bool in_place = rbuf == MPI_IN_PLACE;
  const bool receives = !g.inter || role == Role::Leaf;
  if (role == Role::Root && gpu_data(sbuf)) {
    std::vector<Block> blocks = uniform(g.peers(), scount, stype, true, false);
    if (in_place && !g.inter) blocks[size_t(g.rank)].load = false;  // the root's own block is not sent
    if (const int err = op->send.plan(mutable_buf(sbuf), std::move(blocks), false, comm, op->call)) return err;
  }
  if (receives && gpu_data(rbuf))
    if (const int err = op->recv.plan(rbuf, single(rcount, rtype, false, true), false, comm, op->call)) return err;
  return issue_uniform(std::move(op), how, sbuf, scount, stype, rbuf, rcount, rtype, next);
}

int scatterv(const void *sbuf, const int scounts[], const int displs[], MPI_Datatype stype, void *rbuf, int rcount,
             MPI_Datatype rtype, int root, MPI_Comm comm, Issue how) {
  auto next = [&](const void *s, const int *sc, const int *sd, MPI_Datatype st, void *r, int rc, MPI_Datatype rt) {
    return TEMPI_FORWARD(how, MPI_Iscatterv, MPI_Scatterv, s, sc, sd, st, r, rc, rt, root, comm);
  };
  Group g;
  Role role;
  if (!group_of(comm, g) || !role_of(g, root, role) || role == Role::None)
    return next(sbuf, scounts, displs, stype, rbuf, rcount, rtype);
  auto op = new_op("MPI_Scatterv", "MPI_Iscatterv", comm, how);
  const bool in_place = rbuf == MPI_IN_PLACE;
  const bool receives = !g.inter || role == Role::Leaf;
  if (role == Role::Root && gpu_data(sbuf)) {
    std::vector<Block> blocks;
    if (const int err = varying(g.peers(), scounts, displs, stype, true, false, comm, op->call, blocks)) return err;
    if (in_place && !g.inter) blocks[size_t(g.rank)].load = false;
    if (const int err = op->send.plan(mutable_buf(sbuf), std::move(blocks), false, comm, op->call)) return err;
  }
  if (receives && gpu_data(rbuf))
    if (const int err = op->recv.plan(rbuf, single(rcount, rtype, false, true), false, comm, op->call)) return err;
  if (!needed(*op)) return untouched(op, next(sbuf, scounts, displs, stype, rbuf, rcount, rtype), how);
  if (const int err = load(*op, how)) return err;
  VArgs s;
  Wire &rw = op->rwire;
  if (const int err = wire_varying(op->send, scounts, displs, stype, *op, op->swire, s)) return err;
  if (const int err = wire_uniform(op->recv, rcount, rtype, *op, rw)) return err;
  return conclude(op, next(op->send.library_buffer(sbuf), s.counts, s.displs, s.type, op->recv.library_buffer(rbuf),
                           rw.count, rw.unit),
                  how);
}

namespace {
// The v-variants under the name of the call the application made (errors and logs).
int alltoallv_as(const char *name, const void *sbuf, const int scounts[], const int sdispls[], MPI_Datatype stype,
                 void *rbuf, const int rcounts[], const int rdispls[], MPI_Datatype rtype, MPI_Comm comm,
                 Issue how);
int neighbor_alltoallv_as(const char *name, const void *sbuf, const int scounts[], const int sdispls[],
                          MPI_Datatype stype, void *rbuf, const int rcounts[], const int rdispls[], MPI_Datatype rtype,
                          MPI_Comm comm, Issue how);

// A one-count collective run as a v-form (`alltoallv_as` or `neighbor_alltoallv_as`, where
// zero-copy serves it): every peer's count and displacement made once (send displacements
// all zero where every peer gets the same block), kept by a persistent request for its starts.
using VForm = int (*)(const char *, const void *, const int[], const int[], MPI_Datatype, void *, const int[],
                      const int[], MPI_Datatype, MPI_Comm, Issue);
int as_v_form(VForm v_form, const char *name, const void *sbuf, int nsend, int scount, MPI_Datatype stype,
              bool same_block, void *rbuf, int nrecv, int rcount, MPI_Datatype rtype, MPI_Comm comm,
              const Issue &how) {
  auto v = std::make_shared<Varying>();
  if (const int err = per_peer(nsend, scount, stype, same_block, comm, name, v->s)) return err;
  if (const int err = per_peer(nrecv, rcount, rtype, false, comm, name, v->r)) return err;
  return v_form(name, sbuf, v->s.counts.data(), v->s.displs.data(), v->s.type, rbuf, v->r.counts.data(),
                v->r.displs.data(), v->r.type, comm, varying_issue(how, v));
}
}  // namespace

// ---- all to all --------------------------------------------------------------------------

int allgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
              MPI_Comm comm, Issue how) {
  auto next = [&](const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt) {
    return TEMPI_FORWARD(how, MPI_Iallgather, MPI_Allgather, s, sc, st, r, rc, rt, comm);
  };
  Group g;
  if (!group_of(comm, g)) return next(sbuf, scount, stype, rbuf, rcount, rtype);
  const bool in_place = sbuf == MPI_IN_PLACE;
  if (!g.inter && as_varying(comm, in_place, how))
    return as_v_form(alltoallv_as, varying_name(how, "MPI_Allgather", "MPI_Allgather_init"), sbuf, g.size,
                     scount, stype, true, rbuf, g.size, rcount, rtype, comm, how);
  auto op = new_op("MPI_Allgather", "MPI_Iallgather", comm, how);
  if (!in_place && gpu_data(sbuf))
    if (const int err = op->send.plan(mutable_buf(sbuf), single(scount, stype, true, false), false, comm, op->call))
      return err;
  if (gpu_data(rbuf)) {
    std::vector<Block> blocks = uniform(g.peers(), rcount, rtype, false, true);
    if (in_place && !g.inter) blocks[size_t(g.rank)] = {blocks[size_t(g.rank)].disp, rcount, rtype, true, false};
    if (const int err = op->recv.plan(rbuf, std::move(blocks), false, comm, op->call)) return err;
  }
  return issue_uniform(std::move(op), how, sbuf, scount, stype, rbuf, rcount, rtype, next);
}

int allgatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, const int rcounts[], const int displs[],
               MPI_Datatype rtype, MPI_Comm comm, Issue how) {
  auto next = [&](const void *s, int sc, MPI_Datatype st, void *r, const int *rc, const int *rd, MPI_Datatype rt) {
    return TEMPI_FORWARD(how, MPI_Iallgatherv, MPI_Allgatherv, s, sc, st, r, rc, rd, rt, comm);
  };
  Group g;
  if (!group_of(comm, g)) return next(sbuf, scount, stype, rbuf, rcounts, displs, rtype);
  const bool in_place = sbuf == MPI_IN_PLACE;
  if (!g.inter && as_varying(comm, in_place, how)) {
    const char *name = varying_name(how, "MPI_Allgatherv", "MPI_Allgatherv_init");
    if (g.size > 0 && (!rcounts || !displs))
      return null_array(comm, name, !rcounts ? "the counts array" : "the displacements array");
    auto v = std::make_shared<Varying>();
    if (const int err = per_peer(g.size, scount, stype, true, comm, name, v->s)) return err;
    return alltoallv_as(name, sbuf, v->s.counts.data(), v->s.displs.data(), v->s.type, rbuf, rcounts, displs, rtype,
                        comm, varying_issue(how, v));
  }
  auto op = new_op("MPI_Allgatherv", "MPI_Iallgatherv", comm, how);
  if (!in_place && gpu_data(sbuf))
    if (const int err = op->send.plan(mutable_buf(sbuf), single(scount, stype, true, false), false, comm, op->call))
      return err;
  if (gpu_data(rbuf)) {
    std::vector<Block> blocks;
    if (const int err = varying(g.peers(), rcounts, displs, rtype, false, true, comm, op->call, blocks)) return err;
    if (in_place && !g.inter) {
      blocks[size_t(g.rank)].load = true;  // this rank's contribution, read by the library in place
      blocks[size_t(g.rank)].store = false;
    }
    if (const int err = op->recv.plan(rbuf, std::move(blocks), false, comm, op->call)) return err;
  }
  if (!needed(*op)) return untouched(op, next(sbuf, scount, stype, rbuf, rcounts, displs, rtype), how);
  if (const int err = load(*op, how)) return err;
  Wire &sw = op->swire;
  VArgs r;
  if (const int err = wire_uniform(op->send, scount, stype, *op, sw)) return err;
  if (const int err = wire_varying(op->recv, rcounts, displs, rtype, *op, op->rwire, r)) return err;
  return conclude(op, next(op->send.library_buffer(sbuf), sw.count, sw.unit, op->recv.library_buffer(rbuf), r.counts,
                           r.displs, r.type),
                  how);
}

int alltoall(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
             MPI_Comm comm, Issue how) {
  auto next = [&](const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt) {
    return TEMPI_FORWARD(how, MPI_Ialltoall, MPI_Alltoall, s, sc, st, r, rc, rt, comm);
  };
  Group g;
  if (!group_of(comm, g)) return next(sbuf, scount, stype, rbuf, rcount, rtype);
  const bool in_place = sbuf == MPI_IN_PLACE;
  if (!g.inter && as_varying(comm, in_place, how))
    return as_v_form(alltoallv_as, varying_name(how, "MPI_Alltoall", "MPI_Alltoall_init"), sbuf, g.size,
                     scount, stype, false, rbuf, g.size, rcount, rtype, comm, how);
  auto op = new_op("MPI_Alltoall", "MPI_Ialltoall", comm, how);
  if (!in_place && gpu_data(sbuf))
    if (const int err = op->send.plan(mutable_buf(sbuf), uniform(g.peers(), scount, stype, true, false), false, comm,
                                      op->call))
      return err;
  if (gpu_data(rbuf))
    if (const int err = op->recv.plan(rbuf, uniform(g.peers(), rcount, rtype, in_place, true), false, comm, op->call))
      return err;
  return issue_uniform(std::move(op), how, sbuf, scount, stype, rbuf, rcount, rtype, next);
}

int alltoallv(const void *sbuf, const int scounts[], const int sdispls[], MPI_Datatype stype, void *rbuf,
              const int rcounts[], const int rdispls[], MPI_Datatype rtype, MPI_Comm comm, Issue how) {
  const char *name = how.persistent ? "MPI_Alltoallv_init" : how.request ? "MPI_Ialltoallv" : "MPI_Alltoallv";
  return alltoallv_as(name, sbuf, scounts, sdispls, stype, rbuf, rcounts,
                      rdispls, rtype, comm, how);
}

namespace {
int alltoallv_as(const char *name, const void *sbuf, const int scounts[], const int sdispls[], MPI_Datatype stype,
                 void *rbuf, const int rcounts[], const int rdispls[], MPI_Datatype rtype, MPI_Comm comm,
                 Issue how) {
  auto next = [&](const void *s, const int *sc, const int *sd, MPI_Datatype st, void *r, const int *rc,
                  const int *rd, MPI_Datatype rt) {
    return TEMPI_FORWARD(how, MPI_Ialltoallv, MPI_Alltoallv, s, sc, sd, st, r, rc, rd, rt, comm);
  };
  Group g;
  if (!group_of(comm, g)) return next(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype);
  auto op = new_op(name, name, comm, how);
  const bool in_place = sbuf == MPI_IN_PLACE;
  const bool sgpu = !in_place && gpu_data(sbuf), rgpu = gpu_data(rbuf);
  std::vector<Block> sblocks, rblocks;
  if (sgpu)
    if (const int err = varying(g.peers(), scounts, sdispls, stype, true, false, comm, op->call, sblocks)) return err;
  if (rgpu)
    if (const int err = varying(g.peers(), rcounts, rdispls, rtype, in_place, true, comm, op->call, rblocks))
      return err;
  ZeroCopyCall zc;
  const std::vector<int> all = g.inter ? std::vector<int>{} : every_rank(g.size);
  const std::vector<int> *peers = g.inter ? nullptr : &all;
  if (const int err = check_agree_plan(*op, zc, how, {sgpu ? mutable_buf(sbuf) : nullptr, std::move(sblocks), peers},
                                       {rgpu ? rbuf : nullptr, std::move(rblocks), peers}, !in_place, false))
    return err;
  const size_t n = size_t(g.peers());
  if (!needed(*op))
    return zc.finish(untouched(op,
                               library_part(zc, how, (!in_place && any_count(scounts, n)) || any_count(rcounts, n),
                                            [&] { return next(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype); }),
                               how));
  if (const int err = load(*op, how)) return err;
  VArgs s, r;
  if (const int err = wire_varying(op->send, scounts, sdispls, stype, *op, op->swire, s)) return err;
  if (const int err = wire_varying(op->recv, rcounts, rdispls, rtype, *op, op->rwire, r)) return err;
  return zc.finish(conclude(op,
                            library_part(zc, how, (!in_place && any_count(s.counts, n)) || any_count(r.counts, n),
                                         [&] {
                                           return next(op->send.library_buffer(sbuf), s.counts, s.displs, s.type,
                                                       op->recv.library_buffer(rbuf), r.counts, r.displs, r.type);
                                         }),
                            how));
}

}  // namespace

int alltoallw(const void *sbuf, const int scounts[], const int sdispls[], const MPI_Datatype stypes[], void *rbuf,
              const int rcounts[], const int rdispls[], const MPI_Datatype rtypes[], MPI_Comm comm,
              Issue how) {
  auto next = [&](const void *s, const int *sc, const int *sd, const MPI_Datatype *st, void *r, const int *rc,
                  const int *rd, const MPI_Datatype *rt) {
    return TEMPI_FORWARD(how, MPI_Ialltoallw, MPI_Alltoallw, s, sc, sd, st, r, rc, rd, rt, comm);
  };
  Group g;
  if (!group_of(comm, g)) return next(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes);
  auto op = new_op("MPI_Alltoallw", "MPI_Ialltoallw", comm, how);
  const bool in_place = sbuf == MPI_IN_PLACE;
  const bool sgpu = !in_place && gpu_data(sbuf), rgpu = gpu_data(rbuf);
  std::vector<Block> sblocks, rblocks;
  if (sgpu)
    if (const int err = typed(g.peers(), scounts, sdispls, stypes, true, false, comm, op->call, sblocks)) return err;
  if (rgpu)
    if (const int err = typed(g.peers(), rcounts, rdispls, rtypes, in_place, true, comm, op->call, rblocks))
      return err;
  ZeroCopyCall zc;
  const std::vector<int> all = g.inter ? std::vector<int>{} : every_rank(g.size);
  const std::vector<int> *peers = g.inter ? nullptr : &all;
  if (const int err = check_agree_plan(*op, zc, how, {sgpu ? mutable_buf(sbuf) : nullptr, std::move(sblocks), peers},
                                       {rgpu ? rbuf : nullptr, std::move(rblocks), peers}, !in_place, false))
    return err;
  const size_t n = size_t(g.peers());
  if (!needed(*op))
    return zc.finish(untouched(op,
                               library_part(zc, how, (!in_place && any_count(scounts, n)) || any_count(rcounts, n),
                                            [&] { return next(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes); }),
                               how));
  if (const int err = load(*op, how)) return err;
  WArgs<int> s, r;
  if (const int err = wire_typed(op->send, scounts, sdispls, stypes, *op, op->swire, op->swire.displs, s)) return err;
  if (const int err = wire_typed(op->recv, rcounts, rdispls, rtypes, *op, op->rwire, op->rwire.displs, r)) return err;
  return zc.finish(conclude(op,
                            library_part(zc, how, (!in_place && any_count(s.counts, n)) || any_count(r.counts, n),
                                         [&] {
                                           return next(op->send.library_buffer(sbuf), s.counts, s.displs, s.types,
                                                       op->recv.library_buffer(rbuf), r.counts, r.displs, r.types);
                                         }),
                            how));
}

// ---- neighbourhoods ----------------------------------------------------------------------

namespace {

// Blocks from or to MPI_PROC_NULL (a Cartesian border) are neither sent nor written.
void skip_null_peers(std::vector<Block> &blocks, const std::vector<int> &peers) {
  for (size_t i = 0; i < blocks.size() && i < peers.size(); ++i)
    if (peers[i] == MPI_PROC_NULL) blocks[i].load = blocks[i].store = false;
}

// Whether no rank of `comm` lists a peer twice among its sources or among its
// destinations (MPI_PROC_NULL aside). MPICH 4.0.2 pairs the blocks between repeated
// neighbours in MPI_Neighbor_alltoall in another order than in MPI_Neighbor_alltoallv
// (seen on a ring of 2 ranks: the first block sent meets the second block received), so
// that call runs as the v-variant only where no rank has repeated neighbours. Collective
// at a communicator's first call (every rank makes it), then an attribute of it.
bool distinct_neighbours(MPI_Comm comm, const std::vector<int> &sources, const std::vector<int> &dests) {
  static const int keyval = [] {
    int k = MPI_KEYVAL_INVALID;
    PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &k, nullptr);
    return k;
  }();
  void *value = nullptr;
  int found = 0;
  if (keyval != MPI_KEYVAL_INVALID && PMPI_Comm_get_attr(comm, keyval, &value, &found) == MPI_SUCCESS && found)
    return value != nullptr;
  auto repeats = [](std::vector<int> peers) {
    peers.erase(std::remove(peers.begin(), peers.end(), MPI_PROC_NULL), peers.end());
    std::sort(peers.begin(), peers.end());
    return std::adjacent_find(peers.begin(), peers.end()) != peers.end();
  };
  const int mine = repeats(sources) || repeats(dests) ? 0 : 1;
  int all = 0;
  if (PMPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS) return false;
  if (keyval != MPI_KEYVAL_INVALID) {
    static char yes;  // any non-null address
    PMPI_Comm_set_attr(comm, keyval, all ? &yes : nullptr);
  }
  return all != 0;
}

}  // namespace

int neighbor_allgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
                       MPI_Comm comm, Issue how) {
  auto next = [&](const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt) {
    return TEMPI_FORWARD(how, MPI_Ineighbor_allgather, MPI_Neighbor_allgather, s, sc, st, r, rc, rt, comm);
  };
  std::vector<int> sources, dests;
  if (!neighbourhood(comm, sources, dests)) return next(sbuf, scount, stype, rbuf, rcount, rtype);
  if (as_varying(comm, false, how))
    return as_v_form(neighbor_alltoallv_as, varying_name(how, "MPI_Neighbor_allgather", "MPI_Neighbor_allgather_init"),
                     sbuf, int(dests.size()), scount, stype, true, rbuf, int(sources.size()), rcount, rtype, comm, how);
  auto op = new_op("MPI_Neighbor_allgather", "MPI_Ineighbor_allgather", comm, how);
  if (gpu_data(sbuf))
    if (const int err = op->send.plan(mutable_buf(sbuf), single(scount, stype, true, false), false, comm, op->call))
      return err;
  if (gpu_data(rbuf)) {
    std::vector<Block> blocks = uniform(int(sources.size()), rcount, rtype, false, true);
    skip_null_peers(blocks, sources);
    if (const int err = op->recv.plan(rbuf, std::move(blocks), false, comm, op->call)) return err;
  }
  return issue_uniform(std::move(op), how, sbuf, scount, stype, rbuf, rcount, rtype, next);
}

int neighbor_allgatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, const int rcounts[],
                        const int displs[], MPI_Datatype rtype, MPI_Comm comm, Issue how) {
  auto next = [&](const void *s, int sc, MPI_Datatype st, void *r, const int *rc, const int *rd, MPI_Datatype rt) {
    return TEMPI_FORWARD(how, MPI_Ineighbor_allgatherv, MPI_Neighbor_allgatherv, s, sc, st, r, rc, rd, rt, comm);
  };
  std::vector<int> sources, dests;
  if (!neighbourhood(comm, sources, dests)) return next(sbuf, scount, stype, rbuf, rcounts, displs, rtype);
  if (as_varying(comm, false, how)) {
    const char *name = varying_name(how, "MPI_Neighbor_allgatherv", "MPI_Neighbor_allgatherv_init");
    if (!sources.empty() && (!rcounts || !displs))
      return null_array(comm, name, !rcounts ? "the counts array" : "the displacements array");
    auto v = std::make_shared<Varying>();
    if (const int err = per_peer(int(dests.size()), scount, stype, true, comm, name, v->s)) return err;
    return neighbor_alltoallv_as(name, sbuf, v->s.counts.data(), v->s.displs.data(), v->s.type, rbuf, rcounts, displs,
                                 rtype, comm, varying_issue(how, v));
  }
  auto op = new_op("MPI_Neighbor_allgatherv", "MPI_Ineighbor_allgatherv", comm, how);
  if (gpu_data(sbuf))
    if (const int err = op->send.plan(mutable_buf(sbuf), single(scount, stype, true, false), false, comm, op->call))
      return err;
  if (gpu_data(rbuf)) {
    std::vector<Block> blocks;
    if (const int err = varying(int(sources.size()), rcounts, displs, rtype, false, true, comm, op->call, blocks))
      return err;
    skip_null_peers(blocks, sources);
    if (const int err = op->recv.plan(rbuf, std::move(blocks), false, comm, op->call)) return err;
  }
  if (!needed(*op)) return untouched(op, next(sbuf, scount, stype, rbuf, rcounts, displs, rtype), how);
  if (const int err = load(*op, how)) return err;
  Wire &sw = op->swire;
  VArgs r;
  if (const int err = wire_uniform(op->send, scount, stype, *op, sw)) return err;
  if (const int err = wire_varying(op->recv, rcounts, displs, rtype, *op, op->rwire, r)) return err;
  return conclude(op, next(op->send.library_buffer(sbuf), sw.count, sw.unit, op->recv.library_buffer(rbuf), r.counts,
                           r.displs, r.type),
                  how);
}

int neighbor_alltoall(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
                      MPI_Comm comm, Issue how) {
  auto next = [&](const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt) {
    return TEMPI_FORWARD(how, MPI_Ineighbor_alltoall, MPI_Neighbor_alltoall, s, sc, st, r, rc, rt, comm);
  };
  std::vector<int> sources, dests;
  if (!neighbourhood(comm, sources, dests)) return next(sbuf, scount, stype, rbuf, rcount, rtype);
  if (as_varying(comm, false, how) && distinct_neighbours(comm, sources, dests))
    return as_v_form(neighbor_alltoallv_as, varying_name(how, "MPI_Neighbor_alltoall", "MPI_Neighbor_alltoall_init"),
                     sbuf, int(dests.size()), scount, stype, false, rbuf, int(sources.size()), rcount, rtype, comm, how);
  auto op = new_op("MPI_Neighbor_alltoall", "MPI_Ineighbor_alltoall", comm, how);
  if (gpu_data(sbuf)) {
    std::vector<Block> blocks = uniform(int(dests.size()), scount, stype, true, false);
    skip_null_peers(blocks, dests);
    if (const int err = op->send.plan(mutable_buf(sbuf), std::move(blocks), false, comm, op->call)) return err;
  }
  if (gpu_data(rbuf)) {
    std::vector<Block> blocks = uniform(int(sources.size()), rcount, rtype, false, true);
    skip_null_peers(blocks, sources);
    if (const int err = op->recv.plan(rbuf, std::move(blocks), false, comm, op->call)) return err;
  }
  return issue_uniform(std::move(op), how, sbuf, scount, stype, rbuf, rcount, rtype, next);
}

int neighbor_alltoallv(const void *sbuf, const int scounts[], const int sdispls[], MPI_Datatype stype, void *rbuf,
                       const int rcounts[], const int rdispls[], MPI_Datatype rtype, MPI_Comm comm,
                       Issue how) {
  const char *name = how.persistent ? "MPI_Neighbor_alltoallv_init"
                     : how.request  ? "MPI_Ineighbor_alltoallv"
                                    : "MPI_Neighbor_alltoallv";
  return neighbor_alltoallv_as(name, sbuf, scounts, sdispls,
                               stype, rbuf, rcounts, rdispls, rtype, comm, how);
}

namespace {
int neighbor_alltoallv_as(const char *name, const void *sbuf, const int scounts[], const int sdispls[],
                          MPI_Datatype stype, void *rbuf, const int rcounts[], const int rdispls[], MPI_Datatype rtype,
                          MPI_Comm comm, Issue how) {
  auto next = [&](const void *s, const int *sc, const int *sd, MPI_Datatype st, void *r, const int *rc,
                  const int *rd, MPI_Datatype rt) {
    return TEMPI_FORWARD(how, MPI_Ineighbor_alltoallv, MPI_Neighbor_alltoallv, s, sc, sd, st, r, rc, rd, rt, comm);
  };
  std::vector<int> sources, dests;
  bool cartesian = false;
  if (!neighbourhood(comm, sources, dests, &cartesian))
    return next(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype);
  auto op = new_op(name, name, comm, how);
  const bool sgpu = gpu_data(sbuf), rgpu = gpu_data(rbuf);
  std::vector<Block> sblocks, rblocks;
  if (sgpu) {
    if (const int err = varying(int(dests.size()), scounts, sdispls, stype, true, false, comm, op->call, sblocks))
      return err;
    skip_null_peers(sblocks, dests);
  }
  if (rgpu) {
    if (const int err = varying(int(sources.size()), rcounts, rdispls, rtype, false, true, comm, op->call, rblocks))
      return err;
    skip_null_peers(rblocks, sources);
  }
  ZeroCopyCall zc;
  if (const int err = check_agree_plan(*op, zc, how, {sgpu ? mutable_buf(sbuf) : nullptr, std::move(sblocks), &dests},
                                       {rgpu ? rbuf : nullptr, std::move(rblocks), &sources}, true, cartesian))
    return err;
  if (!needed(*op))
    return zc.finish(untouched(
        op,
        library_part(zc, how, any_count(scounts, dests) || any_count(rcounts, sources),
                     [&] { return next(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype); }),
        how));
  if (const int err = load(*op, how)) return err;
  VArgs s, r;
  if (const int err = wire_varying(op->send, scounts, sdispls, stype, *op, op->swire, s)) return err;
  if (const int err = wire_varying(op->recv, rcounts, rdispls, rtype, *op, op->rwire, r)) return err;
  return zc.finish(conclude(op,
                            library_part(zc, how, any_count(s.counts, dests) || any_count(r.counts, sources),
                                         [&] {
                                           return next(op->send.library_buffer(sbuf), s.counts, s.displs, s.type,
                                                       op->recv.library_buffer(rbuf), r.counts, r.displs, r.type);
                                         }),
                            how));
}

}  // namespace

int neighbor_alltoallw(const void *sbuf, const int scounts[], const MPI_Aint sdispls[], const MPI_Datatype stypes[],
                       void *rbuf, const int rcounts[], const MPI_Aint rdispls[], const MPI_Datatype rtypes[],
                       MPI_Comm comm, Issue how) {
  auto next = [&](const void *s, const int *sc, const MPI_Aint *sd, const MPI_Datatype *st, void *r, const int *rc,
                  const MPI_Aint *rd, const MPI_Datatype *rt) {
    return TEMPI_FORWARD(how, MPI_Ineighbor_alltoallw, MPI_Neighbor_alltoallw, s, sc, sd, st, r, rc, rd, rt, comm);
  };
  std::vector<int> sources, dests;
  bool cartesian = false;
  if (!neighbourhood(comm, sources, dests, &cartesian))
    return next(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes);
  auto op = new_op("MPI_Neighbor_alltoallw", "MPI_Ineighbor_alltoallw", comm, how);
  const bool sgpu = gpu_data(sbuf), rgpu = gpu_data(rbuf);
  std::vector<Block> sblocks, rblocks;
  if (sgpu) {
    if (const int err = typed(int(dests.size()), scounts, sdispls, stypes, true, false, comm, op->call, sblocks))
      return err;
    skip_null_peers(sblocks, dests);
  }
  if (rgpu) {
    if (const int err = typed(int(sources.size()), rcounts, rdispls, rtypes, false, true, comm, op->call, rblocks))
      return err;
    skip_null_peers(rblocks, sources);
  }
  ZeroCopyCall zc;
  if (const int err = check_agree_plan(*op, zc, how, {sgpu ? mutable_buf(sbuf) : nullptr, std::move(sblocks), &dests},
                                       {rgpu ? rbuf : nullptr, std::move(rblocks), &sources}, true, cartesian))
    return err;
  if (!needed(*op))
    return zc.finish(untouched(
        op,
        library_part(zc, how, any_count(scounts, dests) || any_count(rcounts, sources),
                     [&] { return next(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes); }),
        how));
  if (const int err = load(*op, how)) return err;
  // MPICH before 4.1 reads the count arrays of MPI_Neighbor_alltoallw with the other
  // direction's degree (pmodels/mpich#6233): TEMPI's arrays hold max(indegree, outdegree).
  const size_t room = std::max(sources.size(), dests.size());
  WArgs<MPI_Aint> s, r;
  if (const int err = wire_typed(op->send, scounts, sdispls, stypes, *op, op->swire, op->swire.adispls, s, room))
    return err;
  if (const int err = wire_typed(op->recv, rcounts, rdispls, rtypes, *op, op->rwire, op->rwire.adispls, r, room))
    return err;
  return zc.finish(conclude(op,
                            library_part(zc, how, any_count(s.counts, dests) || any_count(r.counts, sources),
                                         [&] {
                                           return next(op->send.library_buffer(sbuf), s.counts, s.displs, s.types,
                                                       op->recv.library_buffer(rbuf), r.counts, r.displs, r.types);
                                         }),
                            how));
}

// ---- reductions --------------------------------------------------------------------------

int reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op mpi_op, int root, MPI_Comm comm,
           Issue how) {
  auto next = [&](const void *s, void *r) {
    return TEMPI_FORWARD(how, MPI_Ireduce, MPI_Reduce, s, r, count, type, mpi_op, root, comm);
  };
  Group g;
  Role role;
  if (!group_of(comm, g) || !role_of(g, root, role) || role == Role::None) return next(sbuf, rbuf);
  auto op = new_op("MPI_Reduce", "MPI_Ireduce", comm, how);
  const bool sends = g.inter ? role == Role::Leaf : !(role == Role::Root && sbuf == MPI_IN_PLACE);
  if (sends)
    if (const int err = plan_typed(op->send, sbuf, count, type, false, *op)) return err;
  if (role == Role::Root)
    if (const int err = plan_typed(op->recv, rbuf, count, type, true, *op)) return err;
  if (!needed(*op)) return untouched(op, next(sbuf, rbuf), how);
  if (const int err = load(*op, how)) return err;
  return conclude(op, next(op->send.library_buffer(sbuf), op->recv.library_buffer(rbuf)), how);
}

int allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op mpi_op, MPI_Comm comm,
              Issue how) {
  auto next = [&](const void *s, void *r) {
    return TEMPI_FORWARD(how, MPI_Iallreduce, MPI_Allreduce, s, r, count, type, mpi_op, comm);
  };
  auto op = new_op("MPI_Allreduce", "MPI_Iallreduce", comm, how);
  if (const int err = plan_typed(op->send, sbuf, count, type, false, *op)) return err;
  if (const int err = plan_typed(op->recv, rbuf, count, type, true, *op)) return err;
  if (!needed(*op)) return untouched(op, next(sbuf, rbuf), how);
  if (const int err = load(*op, how)) return err;
  return conclude(op, next(op->send.library_buffer(sbuf), op->recv.library_buffer(rbuf)), how);
}

int reduce_scatter(const void *sbuf, void *rbuf, const int rcounts[], MPI_Datatype type, MPI_Op mpi_op,
                   MPI_Comm comm, Issue how) {
  auto next = [&](const void *s, void *r) {
    return TEMPI_FORWARD(how, MPI_Ireduce_scatter, MPI_Reduce_scatter, s, r, rcounts, type, mpi_op, comm);
  };
  Group g;
  if (!group_of(comm, g) || (!gpu_data(sbuf) && !gpu_data(rbuf))) return next(sbuf, rbuf);
  auto op = new_op("MPI_Reduce_scatter", "MPI_Ireduce_scatter", comm, how);
  if (!rcounts) return null_array(comm, op->call, "recvcounts");
  int64_t total = 0;  // the input vector: every process's share (of the local group)
  for (int i = 0; i < g.size; ++i) {
    if (rcounts[i] < 0) return raise_error(comm, MPI_ERR_COUNT, "%s: negative count %d", op->call, rcounts[i]);
    total += rcounts[i];
  }
  if (total > INT_MAX)
    return raise_error(comm, MPI_ERR_COUNT, "%s: %lld elements in all cannot be staged", op->call, (long long)total);
  const bool in_place = sbuf == MPI_IN_PLACE;
  if (const int err = plan_typed(op->send, sbuf, int(total), type, false, *op)) return err;
  if (const int err = plan_typed(op->recv, rbuf, in_place ? int(total) : rcounts[g.rank], type, true, *op)) return err;
  if (!needed(*op)) return untouched(op, next(sbuf, rbuf), how);
  if (const int err = load(*op, how)) return err;
  return conclude(op, next(op->send.library_buffer(sbuf), op->recv.library_buffer(rbuf)), how);
}

int reduce_scatter_block(const void *sbuf, void *rbuf, int rcount, MPI_Datatype type, MPI_Op mpi_op, MPI_Comm comm,
                         Issue how) {
  auto next = [&](const void *s, void *r) {
    return TEMPI_FORWARD(how, MPI_Ireduce_scatter_block, MPI_Reduce_scatter_block, s, r, rcount, type, mpi_op, comm);
  };
  Group g;
  if (!group_of(comm, g) || (!gpu_data(sbuf) && !gpu_data(rbuf))) return next(sbuf, rbuf);
  auto op = new_op("MPI_Reduce_scatter_block", "MPI_Ireduce_scatter_block", comm, how);
  if (rcount < 0) return raise_error(comm, MPI_ERR_COUNT, "%s: negative count %d", op->call, rcount);
  const int64_t total = int64_t(rcount) * g.size;
  if (total > INT_MAX)
    return raise_error(comm, MPI_ERR_COUNT, "%s: %lld elements in all cannot be staged", op->call, (long long)total);
  const bool in_place = sbuf == MPI_IN_PLACE;
  if (const int err = plan_typed(op->send, sbuf, int(total), type, false, *op)) return err;
  if (const int err = plan_typed(op->recv, rbuf, in_place ? int(total) : rcount, type, true, *op)) return err;
  if (!needed(*op)) return untouched(op, next(sbuf, rbuf), how);
  if (const int err = load(*op, how)) return err;
  return conclude(op, next(op->send.library_buffer(sbuf), op->recv.library_buffer(rbuf)), how);
}

int scan(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op mpi_op, MPI_Comm comm,
         Issue how) {
  auto next = [&](const void *s, void *r) {
    return TEMPI_FORWARD(how, MPI_Iscan, MPI_Scan, s, r, count, type, mpi_op, comm);
  };
  auto op = new_op("MPI_Scan", "MPI_Iscan", comm, how);
  if (const int err = plan_typed(op->send, sbuf, count, type, false, *op)) return err;
  if (const int err = plan_typed(op->recv, rbuf, count, type, true, *op)) return err;
  if (!needed(*op)) return untouched(op, next(sbuf, rbuf), how);
  if (const int err = load(*op, how)) return err;
  return conclude(op, next(op->send.library_buffer(sbuf), op->recv.library_buffer(rbuf)), how);
}

int exscan(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op mpi_op, MPI_Comm comm,
           Issue how) {
  auto next = [&](const void *s, void *r) {
    return TEMPI_FORWARD(how, MPI_Iexscan, MPI_Exscan, s, r, count, type, mpi_op, comm);
  };
  auto op = new_op("MPI_Exscan", "MPI_Iexscan", comm, how);
  if (const int err = plan_typed(op->send, sbuf, count, type, false, *op)) return err;
  if (const int err = plan_typed(op->recv, rbuf, count, type, true, *op)) return err;
  if (!needed(*op)) return untouched(op, next(sbuf, rbuf), how);
  if (const int err = load(*op, how)) return err;
  return conclude(op, next(op->send.library_buffer(sbuf), op->recv.library_buffer(rbuf)), how);
}

int reduce_local(const void *inbuf, void *inoutbuf, int count, MPI_Datatype type, MPI_Op mpi_op) {
  auto op = new_op("MPI_Reduce_local", "MPI_Reduce_local", MPI_COMM_SELF, nullptr);
  if (const int err = plan_typed(op->send, inbuf, count, type, false, *op)) return err;
  if (const int err = plan_typed(op->recv, inoutbuf, count, type, true, *op)) return err;
  if (!needed(*op)) return TEMPI_NEXT(MPI_Reduce_local)(inbuf, inoutbuf, count, type, mpi_op);
  if (const int err = load(*op)) return err;
  const int err = TEMPI_NEXT(MPI_Reduce_local)(op->send.library_buffer(inbuf), op->recv.library_buffer(inoutbuf),
                                               count, type, mpi_op);
  return conclude(op, err, nullptr);
}

}  // namespace coll

Issue::Init::Init(MPI_Comm comm, const std::vector<MPI_Datatype> &types)
    : held(std::make_shared<HeldHandles>(comm, types)) {}

std::vector<MPI_Datatype> block_types(MPI_Comm comm, bool neighbourhood, const MPI_Datatype stypes[],
                                      const MPI_Datatype rtypes[], bool in_place) {
  std::vector<int> sources, dests;
  coll::Group g;
  if (neighbourhood) {
    if (!coll::neighbourhood(comm, sources, dests)) return {};
  } else {
    if (!coll::group_of(comm, g)) return {};
    sources.resize(size_t(g.peers()));
    dests.resize(size_t(g.peers()));
  }
  std::vector<MPI_Datatype> types;
  if (stypes && !in_place) types.insert(types.end(), stypes, stypes + dests.size());
  if (rtypes) types.insert(types.end(), rtypes, rtypes + sources.size());
  return types;
}

int persistent_made(int err, Issue::Init &init, MPI_Comm comm, const char *call, MPI_Request *request) {
  if (err != MPI_SUCCESS || init.made) return err;
  auto op = std::make_shared<CollectiveOp>();  // no side of TEMPI's: the application's arguments
  op->call = call;
  op->comm = comm;
  return coll::conclude(std::move(op), MPI_SUCCESS, Issue::persistent_init(request, &init));
}

}  // namespace tempi
