#include "p2p/messages.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "base/errors.hpp"
#include "backend.hpp"
#include "p2p/local_work.hpp"
#include "base/gpu_batches.hpp"
#include "log.hpp"
#include "node/node_share.hpp"
#include "base/peers.hpp"
#include "phases.hpp"
#include "base/runtime.hpp"
#include "base/stats.hpp"
#include "base/validate.hpp"

namespace tempi {

namespace {

std::atomic<int> g_method{-1};  // -1: TEMPI_METHOD

// Device and managed memory are GPU data; pinned host memory is host memory the MPI
// library reads itself.
bool is_gpu_data(const void *buf) {
  const PhaseTimer timed(Phase::PointerQuery);
  const MemorySpace s = gpu_backend().classify(buf);
  return s == MemorySpace::Device || s == MemorySpace::Managed;
}

// MPI counts are ints: a message of 2^31 bytes or more goes as one element of a
// derived type of that many bytes (still the same bytes on the wire).
int wire_type(int64_t bytes, MPI_Comm comm, int &count, MPI_Datatype &type, OwnedType &owned) {
  if (bytes <= INT_MAX) {
    count = int(bytes);
    type = MPI_PACKED;
    return MPI_SUCCESS;
  }
  constexpr int kGiB = 1 << 30;
  MPI_Datatype gib, big;
  int err = PMPI_Type_contiguous(kGiB, MPI_BYTE, &gib);
  const int blocks[2] = {int(bytes / kGiB), int(bytes % kGiB)};
  const MPI_Aint displs[2] = {0, MPI_Aint(bytes / kGiB) * kGiB};
  MPI_Datatype types[2] = {gib, MPI_BYTE};
  if (err == MPI_SUCCESS) err = PMPI_Type_create_struct(2, blocks, displs, types, &big);
  if (err == MPI_SUCCESS) err = PMPI_Type_commit(&big);
  PMPI_Type_free(&gib);
  if (err != MPI_SUCCESS)
    return raise_error(comm, MPI_ERR_INTERN, "cannot describe a %lld-byte message to MPI", (long long)bytes);
  count = 1;
  type = big;
  owned = OwnedType(big);
  return MPI_SUCCESS;
}

}  // namespace

// The bytes a (count, type) buffer spans, relative to its address (types TEMPI cannot plan).
void span_of(int count, MPI_Datatype type, int64_t &lo, int64_t &bytes) {
  MPI_Count lb, extent, true_lb, true_extent;
  PMPI_Type_get_extent_x(type, &lb, &extent);
  PMPI_Type_get_true_extent_x(type, &true_lb, &true_extent);
  const int64_t last = int64_t(count - 1) * extent;
  lo = true_lb + std::min<int64_t>(0, last);
  bytes = true_lb + true_extent + std::max<int64_t>(0, last) - lo;
}

namespace {

void log_downgrade_once(Method requested) {
  static std::atomic<bool> said{false};
  if (requested == Method::Device && !mpi_is_cuda_aware() && !said.exchange(true))
    TEMPI_LOG(Warn, "the device method needs a CUDA-aware MPI library; using the staged method");
}

std::atomic<const ControlReceipt *> g_receipt{nullptr};  // register_control_receipt's

// Whether a receive from `peer` on `comm` may get a zero-copy control message: zero-copy
// point-to-point is on there and the source may be a rank of the node (itself included). A matched
// message (MPI_Mrecv, MPI_Imrecv) names no communicator here: never (docs/using.md).
std::shared_ptr<NodeShare> control_share(MPI_Comm comm, int peer, const char *call) {
  if (!std::strcmp(call, "MPI_Mrecv") || !std::strcmp(call, "MPI_Imrecv")) return nullptr;
  std::shared_ptr<NodeShare> share = p2p_share(comm);
  if (!share || peer == MPI_ANY_SOURCE) return share;
  return node_rank_of(*share, peer) >= 0 ? share : nullptr;  // this rank itself included
}
bool may_get_control(MPI_Comm comm, int peer, const char *call) { return bool(control_share(comm, peer, call)); }

struct Decision {
  std::shared_ptr<const TypeInfo> info;  // null: pass the user's arguments through
  bool plannable = false;
  Plan plan;
  Transfer transfer{Method::Staged, 0};
};

// Repeated calls (a halo exchange posts the same 52 calls at every step). A decision to pack
// depends on the call's arguments other than the buffer, on the datatype's plan, on the
// communicator's size and the peer's class, on the method requested and the profile, and on
// whether zero-copy point-to-point is on there. Each thread keeps its last decisions by those:
// a call that repeats one pays its pointer query and a lookup instead of the type cache, the
// checks, the model and a plan built again. An entry holds while the generations it was made
// in hold: the type cache's (a type freed or committed: a handle may come back with another
// layout), the communicators' (any one freed: its handle may come back with another group) and
// zero-copy point-to-point's (switched on or off anywhere). A receive's guess of a control
// message (below) is never kept, nor is an error.
struct DecisionKey {
  int count = 0, peer = 0;
  uint64_t type = 0, comm = 0;
  const char *call = nullptr;  // a literal per call site (MPI_Mrecv and persistent receives differ)
  bool receive = false, batched = false, may_zero_copy = false, cuda_aware = false;
  Method requested = Method::Auto;
  PeerClass peer_class = PeerClass::Unknown;
  const Profile *profile = nullptr;
  uint64_t types = 0, comms = 0, p2p = 0;  // the generations

  bool operator==(const DecisionKey &o) const {
    return count == o.count && peer == o.peer && type == o.type && comm == o.comm && call == o.call &&
           receive == o.receive && batched == o.batched && may_zero_copy == o.may_zero_copy &&
           cuda_aware == o.cuda_aware && requested == o.requested && peer_class == o.peer_class &&
           profile == o.profile && types == o.types && comms == o.comms && p2p == o.p2p;
  }
};

template <class Handle>
uint64_t bits_of(Handle h) {
  static_assert(sizeof(Handle) <= sizeof(uint64_t), "an MPI handle fits in 64 bits");
  uint64_t v = 0;
  std::memcpy(&v, &h, sizeof h);
  return v;
}

// The datatype's information is held weakly: the type cache holds it while the generation
// does, and a thread's entries must not keep plans' device data past MPI_Finalize.
struct KeptDecision {
  DecisionKey key;
  uint64_t hash = 0;
  uint64_t last_use = 0;  // 0: empty
  std::weak_ptr<const TypeInfo> info;
  Plan plan;
  Transfer transfer{Method::Staged, 0};
};

// Per thread, kWays-way set-associative: a halo exchange's 52 calls, or a few phases of
// them, fit without evicting one another (a direct-mapped table of 64 lost about half of
// them to collisions; a set that more calls of one phase share than it has ways loses them
// all, least recently used first), and a lookup compares at most kWays hashes.
constexpr size_t kSets = 64, kWays = 8;

struct KeptDecisions {
  std::array<KeptDecision, kSets * kWays> entries;
  std::vector<uint16_t> used;  // the entries filled since they were last dropped
  uint64_t clock = 0;
  // The generations the entries were made in: when one moves on, every entry is stale, and
  // those filled are dropped at once (their plans may be large).
  uint64_t types = 0, comms = 0, p2p = 0;

  void drop_stale(const DecisionKey &k) {
    if (k.types == types && k.comms == comms && k.p2p == p2p) return;
    for (uint16_t i : used) entries[i] = KeptDecision{};
    used.clear();
    types = k.types;
    comms = k.comms;
    p2p = k.p2p;
  }
};
static_assert(kSets * kWays <= 65536, "entry indices are 16-bit");

// On the heap, made at a thread's first decision: thread-local storage as large as the table
// would be taken from every thread's stack, the application's own threads included.
std::atomic<uint64_t> g_decisions_made{0}, g_decisions_recalled{0};

// The decision counters in the stats table (base/stats.hpp), registered at a thread's first
// decision (every decision comes through its thread's kept ones).
void register_decision_counters() {
  static constexpr CounterReader counters[] = {
      {"p2p.decisions_made", [] { return g_decisions_made.load(std::memory_order_relaxed); }},
      {"p2p.decisions_recalled", [] { return g_decisions_recalled.load(std::memory_order_relaxed); }},
  };
  register_counters(counters, 2);
}

KeptDecisions &kept() {
  thread_local std::unique_ptr<KeptDecisions> k;
  if (!k) {
    register_decision_counters();
    k = std::make_unique<KeptDecisions>();
  }
  return *k;
}

// Every field a call varies in reaches every bit of the hash (multiply, fold, multiply).
uint64_t hash_of(const DecisionKey &k) {
  uint64_t h = k.type * 0x9E3779B97F4A7C15ull;
  for (uint64_t v : {k.comm, uint64_t(uint32_t(k.peer)), uint64_t(uint32_t(k.count)),
                     uint64_t(reinterpret_cast<uintptr_t>(k.call)),
                     uint64_t(k.receive) | uint64_t(k.batched) << 1 | uint64_t(k.may_zero_copy) << 2}) {
    h = (h ^ v) * 0xFF51AFD7ED558CCDull;
    h ^= h >> 33;
  }
  return h;
}

KeptDecision *set_of(uint64_t hash) { return &kept().entries[size_t(hash % kSets) * kWays]; }

DecisionKey key_of(int count, MPI_Datatype type, int peer, bool receive, bool batched, bool may_zero_copy,
                   MPI_Comm comm, const char *call) {
  DecisionKey k;
  k.count = count;
  k.peer = peer;
  k.type = bits_of(type);
  k.comm = bits_of(comm);
  k.call = call;
  k.receive = receive;
  k.batched = batched;
  k.may_zero_copy = may_zero_copy;
  k.cuda_aware = mpi_is_cuda_aware();
  k.requested = requested_method();
  k.profile = active_profile();
  k.types = type_cache().generation();
  k.comms = peers_generation();
  k.p2p = p2p_generation();
  return k;
}

// `k` as key_of made it, without the peer's class: asked only of a communicator an entry was
// made on (its generation held), since a first question maps its group, and the handle may
// not be a communicator at all (checked later, on the full path).
bool recall(DecisionKey &k, uint64_t hash, MPI_Comm comm, Decision &d) {
  kept().drop_stale(k);
  KeptDecision *set = set_of(hash);
  for (size_t w = 0; w < kWays; ++w) {
    KeptDecision &e = set[w];
    if (!e.last_use || e.hash != hash) continue;
    k.peer_class = e.key.peer_class;
    if (!(e.key == k)) continue;
    if (peer_class(comm, k.peer) != k.peer_class) {  // placement learned since: made again
      e = KeptDecision{};
      return false;
    }
    d.info = e.info.lock();
    if (!d.info) return false;
    d.plannable = true;
    d.plan = e.plan;
    d.transfer = e.transfer;
    e.last_use = ++kept().clock;
    g_decisions_recalled.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  return false;
}

// Into the set's empty or least recently used way.
void keep(const DecisionKey &k, uint64_t hash, const Decision &d) {
  KeptDecision *set = set_of(hash);
  KeptDecision *e = &set[0];
  for (size_t w = 1; w < kWays && e->last_use; ++w)
    if (set[w].last_use < e->last_use) e = &set[w];
  if (!e->last_use) kept().used.push_back(uint16_t(e - kept().entries.data()));
  e->key = k;
  e->hash = hash;
  e->last_use = ++kept().clock;
  e->info = d.info;
  e->plan = d.plan;
  e->transfer = d.transfer;
}

// Whether TEMPI moves this buffer, and how (d.info null: pass the user's arguments
// through). Returns an MPI error code: the arguments of GPU data are checked here,
// before any GPU work (validate.hpp). Empty messages and MPI_PROC_NULL go to the MPI
// library as they are, which checks them without touching the buffer.
int decide(const void *buf, int count, MPI_Datatype type, int peer, bool receive, bool batched, bool may_zero_copy,
           MPI_Comm comm, const char *call, Decision &d) {
  const PhaseTimer timed(Phase::Decide);
  if (!active() || count == 0 || peer == MPI_PROC_NULL || !is_gpu_data(buf)) return MPI_SUCCESS;
  // Generations are read before anything they guard (a type freed meanwhile makes a key no
  // entry matches later).
  DecisionKey key = key_of(count, type, peer, receive, batched, may_zero_copy, comm, call);
  const uint64_t hash = hash_of(key);
  if (recall(key, hash, comm, d)) {
    settle_other_threads();
    return MPI_SUCCESS;
  }
  std::shared_ptr<const TypeInfo> info;
  if (const int err = check_comm(comm, call)) return err;
  if (const int err = check_count(comm, call, count)) return err;
  if (const int err = check_datatype(comm, call, type, info)) return err;
  if (const int err = check_rank(comm, call, peer, receive)) return err;
  settle_other_threads();
  g_decisions_made.fetch_add(1, std::memory_order_relaxed);
  if (info->size == 0) return MPI_SUCCESS;
  const bool aware = mpi_is_cuda_aware();
  // A receive that a zero-copy control message may reach goes through TEMPI's staging.
  const bool control_may_arrive = receive && may_get_control(comm, peer, call);
  if (!info->plan && control_may_arrive)
    return raise_error(comm, MPI_ERR_TYPE,
                       "%s: a GPU receive on a communicator with zero-copy point-to-point needs a type TEMPI can plan "
                       "(docs/using.md, \"Zero-copy point-to-point\")",
                       call);
  if (!info->plan) {
    if (!aware) d.info = std::move(info);  // the MPI library cannot read GPU memory: copy the region
    else if (local_work().pending()) local_work().settle();  // the library reads the buffer itself
    return MPI_SUCCESS;
  }
  d.plan = info->plan->for_count(count);
  const Method requested = requested_method();
  log_downgrade_once(requested);
  key.peer_class = peer_class(comm, peer);
  const TransferQuery message = describe_message(d.plan, batched, key.peer_class);
  d.transfer = choose_transfer(requested, aware, message, config());
  // A CUDA-aware library writes a control message into device staging with a copy, which
  // TEMPI then copies back to read: about 15 us a message more than in host memory (bench_large,
  // H100, 2026-11-24). So a receive that expects one stages as for a library that is not
  // CUDA-aware; data that arrives instead is moved from there. Persistent receives keep the
  // library's choice: their staging outlives any guess.
  const bool guessed = control_may_arrive && requested == Method::Auto && d.transfer.method == Method::Device &&
                       d.plan.packed_size() >= config().p2p_zero_copy_min && std::strcmp(call, "MPI_Recv_init") != 0;
  if (guessed) {
    if (const std::shared_ptr<NodeShare> share = p2p_share(comm); share && g_receipt.load(std::memory_order_acquire)->stage_for_control(*share, peer))
      d.transfer = choose_transfer(requested, false, message, config());
  }
  // The device method on one contiguous run needs no packing: the MPI library reads the
  // buffer. Not where zero-copy point-to-point may take the send: the receiver's one kernel
  // then writes its own object, where the library's transfer is followed by an unpack.
  const bool zero_copy_send =
      may_zero_copy && d.plan.packed_size() >= config().p2p_zero_copy_min && control_share(comm, peer, call);
  if (d.transfer.method == Method::Device && d.plan.contiguous() && !control_may_arrive && !zero_copy_send) {
    if (local_work().pending()) local_work().settle();
    return MPI_SUCCESS;
  }
  d.info = std::move(info);
  d.plannable = true;
  if (!guessed) keep(key, hash, d);  // a guess rests on what arrived last: made again at every call
  return MPI_SUCCESS;
}

// Host memory for staging when no pinned memory can be had: ordinary (pageable) memory,
// which the copy engines reach (the staged method) but kernels do not.
Status acquire_pageable(size_t bytes, Scratch &out) {
  void *p = std::malloc(bytes ? bytes : 1);
  if (!p) return Status::NoMemory;
  out.ptr = p;
  out.owner = std::shared_ptr<void>(p, [](void *q) { std::free(q); });
  return Status::Ok;
}

}  // namespace

void register_control_receipt(const ControlReceipt &r) {
  const ControlReceipt *none = nullptr;
  g_receipt.compare_exchange_strong(none, &r, std::memory_order_acq_rel);
}

DecisionCounts decision_counts() {
  return {g_decisions_made.load(std::memory_order_relaxed), g_decisions_recalled.load(std::memory_order_relaxed)};
}

int acquire_host_staging(int64_t bytes, MPI_Comm comm, const char *call, Scratch &out, bool &pageable) {
  pageable = false;
  if (gpu_backend().acquire(ScratchKind::Pinned, size_t(bytes), out) == Status::Ok) return MPI_SUCCESS;
  pageable = true;
  if (acquire_pageable(size_t(bytes), out) == Status::Ok) {
    TEMPI_LOG(Warn, "%s: no pinned host memory for %lld bytes; staging through pageable memory", call,
              (long long)bytes);
    return MPI_SUCCESS;
  }
  return raise_error(comm, MPI_ERR_NO_MEM, "%s: cannot stage %lld bytes in host memory", call, (long long)bytes);
}

namespace {

// Staging for `bytes`: device memory for the device method, else pinned host memory.
// Without device memory the one-shot method needs none; without pinned memory the
// staged method copies to and from pageable memory.
int acquire_staging(Transfer &t, int64_t bytes, MPI_Comm comm, const char *call, Scratch &out) {
  const PhaseTimer timed(Phase::Staging);
  Backend &b = gpu_backend();
  if (t.method == Method::Device) {
    if (b.acquire(ScratchKind::Device, size_t(bytes), out) == Status::Ok) return MPI_SUCCESS;
    TEMPI_LOG(Warn, "%s: no device memory for %lld packed bytes; using the one-shot method", call, (long long)bytes);
    t = {Method::OneShot, bytes};
  }
  bool pageable = false;
  if (const int err = acquire_host_staging(bytes, comm, call, out, pageable)) return err;
  if (pageable && t.method != Method::Staged) t = {Method::Staged, bytes};
  return MPI_SUCCESS;
}

}  // namespace

OwnedType::~OwnedType() {
  if (type_ == MPI_DATATYPE_NULL) return;
  int finalized = 0;
  PMPI_Finalized(&finalized);
  if (!finalized) PMPI_Type_free(&type_);
}

Method requested_method() {
  const int m = g_method.load(std::memory_order_relaxed);
  return m < 0 ? config().method : Method(m);
}

void set_requested_method(Method m) { g_method.store(int(m), std::memory_order_relaxed); }

int plan_send(const void *buf, int count, MPI_Datatype type, int peer, MPI_Comm comm, const char *call,
              SendPlan &sp, Outgoing &out, bool batched, bool may_zero_copy) {
  out.buf = buf;
  out.count = count;
  out.type = type;
  sp.kind = SendPlan::Kind::PassThrough;
  Decision d;
  if (const int err = decide(buf, count, type, peer, false, batched, may_zero_copy, comm, call, d)) return err;
  if (!d.info) return MPI_SUCCESS;
  const OnDeviceOf on_its_gpu(buf);  // device staging comes from this GPU's pool

  if (!d.plannable) {  // the whole region goes to the host; the MPI library packs it
    int64_t lo, bytes;
    span_of(count, type, lo, bytes);
    bool pageable = false;
    if (const int err = acquire_host_staging(bytes, comm, call, out.staging, pageable)) return err;
    sp.kind = SendPlan::Kind::Region;
    sp.region_lo = lo;
    sp.region_bytes = bytes;
    out.buf = static_cast<const char *>(out.staging.ptr) - lo;
    return MPI_SUCCESS;
  }

  const int64_t bytes = d.plan.packed_size();
  if (const int err = acquire_staging(d.transfer, bytes, comm, call, out.staging)) return err;
  sp.kind = SendPlan::Kind::Pack;
  sp.info = std::move(d.info);
  sp.plan = std::move(d.plan);
  sp.transfer = d.transfer;
  out.buf = out.staging.ptr;
  return wire_type(bytes, comm, out.count, out.type, out.wire_type);
}

int fill_staging(const void *buf, const SendPlan &sp, Outgoing &out, MPI_Comm comm, const char *call) {
  if (sp.kind == SendPlan::Kind::PassThrough) return MPI_SUCCESS;
  Backend &b = gpu_backend();
  const OnDeviceOf on_its_gpu(buf);
  if (sp.kind == SendPlan::Kind::Region) {
    const Status st = b.copy(out.staging.ptr, static_cast<const char *>(buf) + sp.region_lo, size_t(sp.region_bytes));
    if (st != Status::Ok)
      return raise_error(comm, error_class_of(st), "%s: copying GPU data to the host failed: %s", call, to_string(st));
    return MPI_SUCCESS;
  }
  const int64_t bytes = sp.plan.packed_size();
  Status st;
  switch (sp.transfer.method) {
    case Method::Staged:
      st = b.pack_staged(sp.plan, buf, out.staging.ptr, bytes, sp.transfer.chunk);
      break;
    case Method::OneShot:
      st = b.pack_to_host(sp.plan, buf, out.staging.ptr, bytes);
      break;
    default:
      st = b.pack_accessible(sp.plan, buf, out.staging.ptr, 0, bytes);
  }
  if (st != Status::Ok)
    return raise_error(comm, error_class_of(st), "%s: packing GPU data (%s method) failed: %s", call,
                       to_string(sp.transfer.method), to_string(st));
  return MPI_SUCCESS;
}

int prepare_recv(void *buf, int count, MPI_Datatype type, int peer, MPI_Comm comm, const char *call, Incoming &in,
                 bool batched) {
  in.buf = buf;
  in.count = count;
  in.type = type;
  in.comm = comm;
  in.peer = peer;
  in.user = buf;
  Decision d;
  if (const int err = decide(buf, count, type, peer, true, batched, false, comm, call, d)) return err;
  if (!d.info) return MPI_SUCCESS;
  Backend &b = gpu_backend();
  const OnDeviceOf on_its_gpu(buf);

  if (!d.plannable) {  // the MPI library unpacks into a host copy of the region, which goes back whole
    span_of(count, type, in.region_lo, in.region_bytes);
    bool pageable = false;
    if (const int err = acquire_host_staging(in.region_bytes, comm, call, in.staging, pageable)) return err;
    // The copy keeps the bytes between the type's blocks, which the copy back rewrites.
    if (const Status st = b.copy(in.staging.ptr, static_cast<char *>(buf) + in.region_lo, size_t(in.region_bytes));
        st != Status::Ok)
      return raise_error(comm, error_class_of(st), "%s: copying GPU data to the host failed: %s", call, to_string(st));
    in.buf = static_cast<char *>(in.staging.ptr) - in.region_lo;
    in.after = Incoming::After::CopyBack;
    return MPI_SUCCESS;
  }

  const int64_t capacity = d.plan.packed_size();
  in.capacity = capacity;
  // A receive that a node peer's zero-copy control message may reach takes its staging at
  // least that large.
  in.p2p = control_share(comm, peer, call);
  const int64_t staged = in.p2p ? std::max<int64_t>(capacity, kControlBytes) : capacity;
  if (const int err = acquire_staging(d.transfer, staged, comm, call, in.staging)) return err;
  in.device = b.device_of(buf);
  in.info = std::move(d.info);
  in.plan = std::move(d.plan);
  in.transfer = d.transfer;
  in.after = Incoming::After::Unpack;
  in.buf = in.staging.ptr;
  return wire_type(staged, comm, in.count, in.type, in.wire_type);
}

namespace {

// Whether a completed receive has data for TEMPI to move (marks it finished either way).
bool has_data_to_move(Incoming &in, const MPI_Status &status, int err) {
  if (in.after == Incoming::After::Nothing || in.finished) return false;
  in.finished = true;
  if (err != MPI_SUCCESS) return false;  // the MPI library reported it already
  int cancelled = 0;
  PMPI_Test_cancelled(&status, &cancelled);
  return !cancelled;
}

int unpack_failed(const Incoming &in, Status st) {
  return raise_error(in.comm, error_class_of(st), "moving received data to the GPU (%s method) failed: %s",
                     to_string(in.transfer.method), to_string(st));
}

// A receive finish_recv_early finished: what its completion reports.
int replay_early(Incoming &in, MPI_Status &status) {
  in.early = false;
  PMPI_Status_set_elements_x(&status, MPI_BYTE, in.early_elements);
  return in.early_result;
}

}  // namespace

int finish_recv_early(Incoming &in, MPI_Status &status) {
  if (in.early) {  // asked again: the first answer stands
    PMPI_Status_set_elements_x(&status, MPI_BYTE, in.early_elements);
    return in.early_result;
  }
  const int result = finish_recv(in, status, MPI_SUCCESS);
  in.early = true;
  PMPI_Get_elements_x(&status, MPI_BYTE, &in.early_elements);
  in.early_result = result;
  return result;
}

int finish_recvs(std::vector<Finishing> &batch) {
  // The unpacks run on this thread's stream, which does not follow another thread's deferred
  // MPI_Unpack into the same buffer (TEMPI_DEFER_PACK) that came before the receive.
  settle_other_threads();
  for (Finishing &f : batch)
    if (f.in->early) f.result = replay_early(*f.in, f.status);  // finished already, so skipped below
  // Zero-copy messages first: they are read straight into the user's buffers.
  if (std::any_of(batch.begin(), batch.end(), [](const Finishing &f) { return bool(f.in->p2p); }))
    g_receipt.load(std::memory_order_acquire)->take_controls(batch);
  // One receive alone takes the synchronous path (pitched copies for small objects).
  size_t unpacks = 0;
  for (const Finishing &f : batch) unpacks += f.in->after == Incoming::After::Unpack && !f.in->finished;
  if (unpacks <= 1) {
    int first = MPI_SUCCESS;
    for (Finishing &f : batch) {
      if (f.in->finished) {  // a zero-copy message, or a truncation found there
        if (first == MPI_SUCCESS) first = f.result;
        continue;
      }
      f.result = finish_recv(*f.in, f.status, f.err);
      if (first == MPI_SUCCESS) first = f.result;
    }
    return first;
  }
  // Every unpack is issued before one wait per GPU.
  std::vector<GpuMoves<Finishing>> gpus;
  int first = MPI_SUCCESS;
  for (Finishing &f : batch) {
    Incoming &in = *f.in;
    if (in.finished) continue;  // its result stands (reported below)
    if (in.after == Incoming::After::CopyBack) {
      f.result = finish_recv(in, f.status, f.err);
      if (first == MPI_SUCCESS) first = f.result;
      continue;
    }
    if (!has_data_to_move(in, f.status, f.err)) continue;
    MPI_Count received = 0;
    PMPI_Get_elements_x(&f.status, MPI_BYTE, &received);
    if (received <= 0) continue;
    add_move(gpus, in.device, MoveJob{&in.plan, in.user, in.staging.ptr, int64_t(received), in.transfer}, &f);
  }
  const std::vector<Status> status = move_by_gpu(gpus, false);
  for (size_t i = 0; i < gpus.size(); ++i)
    if (status[i] != Status::Ok)
      for (Finishing *f : gpus[i].owners) f->result = unpack_failed(*f->in, status[i]);
  for (const Finishing &f : batch)
    if (first == MPI_SUCCESS) first = f.result;
  return first;
}

int finish_recv(Incoming &in, MPI_Status &status, int err) {
  if (in.early) return replay_early(in, status);
  if (in.p2p && !in.finished) {
    std::vector<Finishing> one{{&in, status, err}};
    g_receipt.load(std::memory_order_acquire)->take_controls(one);
    status = one[0].status;
    if (in.finished) return one[0].result;
  }
  if (!has_data_to_move(in, status, err)) return MPI_SUCCESS;
  Backend &b = gpu_backend();
  const OnDeviceOf on_its_gpu(in.user);
  Status st;
  if (in.after == Incoming::After::CopyBack) {
    st = b.copy(static_cast<char *>(in.user) + in.region_lo, in.staging.ptr, size_t(in.region_bytes));
  } else {
    MPI_Count received = 0;
    PMPI_Get_elements_x(&status, MPI_BYTE, &received);
    switch (in.transfer.method) {
      case Method::Staged:
        st = b.unpack_staged(in.plan, in.staging.ptr, in.user, received, in.transfer.chunk);
        break;
      case Method::OneShot:
        st = b.unpack_from_host(in.plan, in.staging.ptr, in.user, received);
        break;
      default:
        st = b.unpack_accessible(in.plan, in.staging.ptr, in.user, 0, received);
    }
  }
  if (st != Status::Ok) return unpack_failed(in, st);
  return MPI_SUCCESS;
}

}  // namespace tempi
