#include "zero_copy/zero_copy.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <set>
#include <thread>

#include "config.hpp"
#include "base/errors.hpp"
#include "base/forward.hpp"
#include "log.hpp"
#include "node/node_share.hpp"
#include "zero_copy/progress_hooks.hpp"
#include "zero_copy/zero_copy_p2p.hpp"
#include "base/runtime.hpp"
#include "shared_blob.hpp"
#include "type_plan.hpp"

namespace tempi {

namespace {

// memcpy of n bytes that may be 0, where an empty vector's data() may be null (memcpy's
// pointers must never be null, whatever n).
void copy_bytes(void *dst, const void *src, size_t n) {
  if (n > 0) std::memcpy(dst, src, n);
}

// ---- The shared segment of one rank -------------------------------------------------------

// One pair as one end sees it: the k-th block (`occurrence`) between this rank and comm rank
// `peer` in one direction.
struct Entry {
  int32_t peer = 0, occurrence = 0;
  int64_t bytes = 0;
  int64_t plan_at = -1;  // a send: the plan's place in this rank's arena
  int64_t offset = 0;    // a send: where the plan starts, from the first byte of the send allocation
};

constexpr int kMaxEntries = 1024;  // pairs on the node per direction and call; more: the pack path
constexpr int kMaxReadable = 16;
constexpr size_t kArenaBytes = size_t(256) << 10;
constexpr size_t kIdBytes = 32;
constexpr int kMaxPersistent = 64;  // persistent zero-copy collectives alive per rank and communicator
constexpr int kMaxNodeRanks = 64;   // node ranks of a communicator that persistent zero-copy serves
constexpr int kBlockingCall = -2;   // ZeroCopyCall::negotiate's flags_at for a blocking call
constexpr int kNoFlags = -1;        // ... for a persistent init that has no flags
// What a rank says in Slot::library (0: not yet).
constexpr uint32_t kLibraryNoData = 1, kLibraryData = 2, kLibraryFailed = 3;

// What a rank says about one call. `seq` is written last (and zeroed first): a reader that
// finds the call's number before and after copying has a consistent copy.
struct Slot {
  std::atomic<uint64_t> seq{0};
  std::atomic<uint64_t> done{0};  // pairs whose readers finished reading this rank's send blocks
  std::atomic<uint64_t> seen{0};  // peers that copied this slot (it is not rewritten before all did)
  std::atomic<uint64_t> answered{0};  // readers that said which of this rank's send blocks they can map
  // A blocking call on a communicator that lies on this node: 0 until this rank knows whether
  // it gives the library any data in it, then kLibraryNoData, kLibraryData or kLibraryFailed
  // (it failed before asking); and how many ranks read that.
  std::atomic<uint32_t> library{0};
  std::atomic<uint64_t> library_seen{0};
  IpcHandle handle;               // of the send buffer's allocation (size 0: not exported)
  char send_device[kIdBytes] = {};
  int32_t flags_at = -1;          // a persistent init: this rank's flags (Segment::flags)
  int32_t nsend = 0, nrecv = 0;
  Entry entries[kMaxEntries * 2];  // sends, then receives
  // Per send entry, set by its reader before it answers: the reader cannot map the send
  // buffer (CUDA IPC refused it), so the pair takes the pack path at both ends.
  std::atomic<uint8_t> refused[kMaxEntries];
  // Per node rank of the call's pattern: the call in which this rank and that one last
  // decided their pairs, where this rank still keeps what they decided and its own
  // arguments are the same as then (ZeroCopyMemo); 0: none.
  uint64_t pair_tag[kMaxNodeRanks];
};

// One persistent collective's flags at one rank: the starts it made, the allocation that
// holds its send buffer at the latest start (written before `started`: the application may
// free the buffer and allocate it again at the same address between starts), and per node
// rank that reads its send buffer, the last start whose reads finished.
struct PersistentFlags {
  std::atomic<uint64_t> started{0};
  IpcHandle handle;  // size 0: the send blocks are not readable in one exported allocation
  std::atomic<uint64_t> read_done[kMaxNodeRanks];
};

struct Segment {
  int32_t pid = 0;
  int32_t nreadable = 0;
  uint64_t nonce = 0;  // random: a control message of zero-copy point-to-point carries it
  std::atomic<uint32_t> push_word{0};  // zero-copy point-to-point: its pusher sleeps on it (futex)
  char readable[kMaxReadable][kIdBytes] = {};  // GPUs whose memory this rank's GPU reads
  Slot slots[2];                               // calls alternate: a rank is at most one call ahead of a peer that waits for it
  std::atomic<uint64_t> arena_used{0};
  PersistentFlags flags[kMaxPersistent];
  P2pEntry board[kP2pEntries];  // this rank's zero-copy point-to-point sends (zero_copy_p2p.cpp)
  char arena[kArenaBytes];
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared-memory counters must be lock-free");

// A plan in the arena: a header, then its runs and dimensions; or, for a plan of more than
// kInlinePlanBytes (a triangle of thousands of rows), only the header, its runs and
// dimensions in a shared-memory block of its own (core/shared_blob.hpp) named by the
// owner's pid and nonce and `blob`. So the arena holds thousands of large types, where
// inline it held one triangle of 8,000 rows and no more.
struct PlanHeader {
  int64_t start, pattern_size, extent, nruns, ndims;
  uint64_t blob;  // 0: inline; else the serial of the block that holds the runs and dimensions
};
constexpr size_t kInlinePlanBytes = 2048;

void copy_id(char (&dst)[kIdBytes], const std::string &id) {
  std::memset(dst, 0, kIdBytes);
  std::memcpy(dst, id.data(), std::min(id.size(), kIdBytes - 1));
}

// ---- Peer allocations, mapped once --------------------------------------------------------

struct Mapping {
  int32_t pid;
  uint64_t buffer_id;
  void *base;
  uint64_t peer_base, peer_size;  // the allocation's range in its own process
  int users;                      // PeerMappings that hold it (never unmapped while held)
};

class Mappings {
 public:
  // The peer allocation named by `h`, mapped on the current device, and held by one more
  // user until release(). Most recently used first; the oldest that nobody holds beyond kMax
  // are unmapped (a peer's freed allocation stays alive while mapped). A mapping in use is
  // never unmapped: a kernel of this process or of another thread may be reading through it.
  // An allocation CUDA refused to map is remembered: the refusal returns the backend's error
  // the first time and Status::Unsupported afterwards, without asking CUDA again.
  Status get(int32_t pid, const IpcHandle &h, void **base) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (refused_.count({pid, h.buffer_id})) return Status::Unsupported;
    for (auto it = list_.begin(); it != list_.end(); ++it)
      if (it->pid == pid && it->buffer_id == h.buffer_id) {
        list_.splice(list_.begin(), list_, it);
        *base = it->base;
        ++it->users;
        return Status::Ok;
      }
    // A mapping of an allocation whose range the new one overlaps is of a freed allocation:
    // CUDA may answer the new handle with it (the old bytes, silently) or refuse the handle
    // ("resource already mapped"), so it goes first.
    close_unused([&](const Mapping &m) {
      return m.pid == pid && m.peer_base < h.base + uint64_t(h.size) && h.base < m.peer_base + m.peer_size;
    });
    Status st = gpu_backend().ipc_open(h, base);
    if (st != Status::Ok) {
      // CUDA refuses a second mapping of memory the owner freed and allocated again while an
      // older mapping of it is open here ("resource already mapped"): that process's other
      // mappings are of freed allocations or of buffers not in use; unmap them, retry once.
      close_unused([&](const Mapping &m) { return m.pid == pid; });
      st = gpu_backend().ipc_open(h, base);
      if (st != Status::Ok) {
        // Most often this process maps the allocation already through another handle: the
        // MPI library's own IPC cache (a CUDA-aware library's transport), which CUDA allows
        // once and which lasts as long as that cache keeps it. Buffer ids are never reused,
        // so the memory never refuses an allocation it has not seen.
        if (refused_.size() >= kMaxRefused) refused_.clear();
        refused_.insert({pid, h.buffer_id});
        return st;
      }
    }
    ++opened_;
    list_.push_front({pid, h.buffer_id, *base, h.base, uint64_t(h.size), 1});
    for (auto it = list_.end(); list_.size() > kMax && it != list_.begin();) {
      --it;
      if (it->users) continue;
      gpu_backend().ipc_close(it->base);
      it = list_.erase(it);
    }
    return Status::Ok;
  }
  void release(int32_t pid, uint64_t buffer_id) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Mapping &m : list_)
      if (m.pid == pid && m.buffer_id == buffer_id && m.users > 0) {
        --m.users;
        return;
      }
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const Mapping &m : list_) gpu_backend().ipc_close(m.base);
    list_.clear();
  }
  uint64_t opened() {
    std::lock_guard<std::mutex> lock(mutex_);
    return opened_;
  }

 private:
  // Unmaps the mappings that `which` selects and nobody holds (under mutex_).
  template <class Which>
  void close_unused(Which which) {
    for (auto it = list_.begin(); it != list_.end();)
      if (!it->users && which(*it)) {
        gpu_backend().ipc_close(it->base);
        it = list_.erase(it);
      } else {
        ++it;
      }
  }
  static constexpr size_t kMax = 64;
  static constexpr size_t kMaxRefused = 4096;
  std::mutex mutex_;
  std::list<Mapping> list_;
  std::set<std::pair<int32_t, uint64_t>> refused_;  // (process, allocation) that CUDA would not map
  uint64_t opened_ = 0;
};

Mappings &mappings() {
  static Mappings *m = new Mappings;  // immortal: used until MPI_Finalize
  return *m;
}

std::atomic<uint64_t> g_peer_blocks{0}, g_self_blocks{0}, g_kept_pairs{0}, g_prepared_calls{0}, g_library_skipped{0};
std::atomic<bool> g_stopped{false};
// This process's plan blocks (core/shared_blob.hpp): each share removes its own when it goes,
// and MPI_Finalize the rest (MPI never deletes the attributes of a communicator left alive).
std::mutex g_blobs_mutex;
std::set<std::string> g_blobs;
void remember_blob(const std::string &name) {
  std::lock_guard<std::mutex> lock(g_blobs_mutex);
  g_blobs.insert(name);
}
void forget_blob(const std::string &name) {
  std::lock_guard<std::mutex> lock(g_blobs_mutex);
  if (g_blobs.erase(name)) remove_shared_blob(name);
}
void forget_all_blobs() {
  std::lock_guard<std::mutex> lock(g_blobs_mutex);
  for (const std::string &name : g_blobs) remove_shared_blob(name);
  g_blobs.clear();
}
// Communicators on which zero-copy point-to-point is on: while there are none (most programs),
// the receives and probes that ask p2p_share skip the attribute lookup.
std::atomic<int> g_p2p_comms{0};
std::atomic<uint64_t> g_p2p_generation{0};

// The identity (PCI bus id) of GPU `device`, asked once.
std::string identity_of(int device) {
  static std::mutex mutex;
  static std::map<int, std::string> known;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = known.find(device);
  if (it != known.end()) return it->second;
  Backend &b = gpu_backend();
  const int previous = b.use_device(device);
  std::string id = b.device_id();
  b.use_device(previous);
  return known[device] = id;
}

}  // namespace

// ---- Repeated blocking calls -------------------------------------------------------------------

// One rank's half of a blocking call, a function of its own arguments alone (the types' plans,
// the send allocation): its blocks placed, its pairs with itself, its slot's entries.
struct LocalHalf {
  std::vector<int> socc, rocc;  // per position: which occurrence of its peer it is, or -1
  std::vector<PlacedBlock> splaced, rplaced;
  std::vector<char> sok, rok;   // per position: the block may move by zero-copy
  std::vector<ZeroCopyCall::Read> self_reads;  // blocks to itself
  std::vector<size_t> self_sends, self_recvs;  // their positions
  IpcHandle handle;             // of the send buffer's allocation
  bool exported = false;
  bool recv_home = false;       // the receive buffer is on this rank's GPU
  std::string send_device;      // the send buffer's GPU, where exported
  std::vector<Entry> sends, recvs;  // the slot's entries
  int64_t send_lo = 0, send_hi = 0;
};

// What one blocking exchange collective on a communicator decided, kept for its next call
// (docs/design.md, "Repeated blocking calls"): a halo exchange or a transpose makes the same
// call with the same arguments at every step, and planning its blocks, publishing their
// plans, mapping the peers' buffers and deciding the pairs cost about as much as moving the
// bytes. A call whose arguments, send allocation and types (TypeCache::generation) are those
// of the memo reuses its local half; a pair reuses what both ends decided when each end's
// slot names the same deciding call for it (Slot::pair_tag), which each end does only while
// its arguments are unchanged since: both ends read the same two tags, so they agree.
struct ZeroCopyMemo {
  struct Pair {
    uint64_t tag = 0;                 // the call in which both ends decided it; 0: nothing kept
    std::vector<size_t> sends_read;   // positions of the send blocks that the peer reads
    std::vector<size_t> recvs_read;   // positions of the receive blocks read from the peer
    std::vector<ZeroCopyCall::Read> reads;
    // The peer's send allocation as mapped when decided. Not held between calls (a call on
    // another communicator may have to close it to map the peer's next allocation at the same
    // place, which it can only do for one the peer freed, and then the peer's tag changes):
    // a call that keeps the pair maps it again (found mapped, most often) and holds it.
    int32_t pid = 0;
    IpcHandle handle;
    char *base = nullptr;
  };
  // The arguments it was made for.
  const char *call = nullptr;
  void *sbuf = nullptr, *rbuf = nullptr;
  bool cartesian = false;
  std::vector<int> dests, sources;
  std::vector<Block> sblocks, rblocks;
  uint64_t types = 0;
  bool valid = false;
  LocalHalf local;
  std::vector<Pair> pairs;  // by node rank
  // The moves of a call that kept every pair, described for the device once
  // (Backend::prepare_moves), while no pair is decided again and no mapping moves.
  Prepared prepared;
  bool unpreparable = false;  // the backend said no for these moves
  int device = -1;            // the GPU the moves run on
  void forget_moves() {
    prepared = Prepared{};
    unpreparable = false;
  }

  static bool same_blocks(const std::vector<Block> &a, const std::vector<Block> &b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](const Block &x, const Block &y) {
             return x.disp == y.disp && x.count == y.count && x.type == y.type && x.load == y.load && x.store == y.store;
           });
  }
  bool matches(const char *c, void *s, const std::vector<Block> &sb, const std::vector<int> &d, void *r,
               const std::vector<Block> &rb, const std::vector<int> &src, bool cart, uint64_t generation,
               bool exported, const IpcHandle &h, bool recv_home) const {
    return valid && call == c && sbuf == s && rbuf == r && cartesian == cart && types == generation &&
           local.exported == exported && local.recv_home == recv_home &&
           (!exported || (local.handle.buffer_id == h.buffer_id && local.handle.offset == h.offset &&
                          local.handle.size == h.size)) &&
           dests == d && sources == src && same_blocks(sblocks, sb) && same_blocks(rblocks, rb);
  }
  void reset(size_t node_ranks) {
    valid = false;
    forget_moves();
    pairs.clear();
    pairs.resize(node_ranks);
    local = LocalHalf{};
  }
};

// ---- One communicator's node ---------------------------------------------------------------

struct NodeShare {
  MPI_Comm node = MPI_COMM_NULL;  // this node's ranks of the communicator
  MPI_Win win = MPI_WIN_NULL;
  int node_rank = 0;
  std::vector<Segment *> segments;  // by node rank
  std::vector<int> node_of;         // comm rank -> node rank, or -1
  std::vector<int> comm_of;         // node rank -> comm rank
  int home_device = -1;             // this rank's GPU (receive buffers elsewhere are not read by zero-copy)
  uint64_t seq = 0;                 // blocking exchange collectives on the communicator so far
  // This rank's published plans, by (plan id, count), and the peers' plans read so far.
  std::map<std::pair<uint64_t, int64_t>, int64_t> published;
  std::map<std::pair<int, int64_t>, Plan> peer_plans;  // this rank's own too
  std::vector<std::string> blobs;  // this rank's plans in shared-memory blocks, by serial - 1
  bool arena_full_logged = false;
  std::mutex plans_mutex;  // published and peer_plans: point-to-point calls run on any thread
  bool p2p = false;        // zero-copy point-to-point was enabled on the communicator (collectively)
  // Whether the last large message from each node rank (the last slot: from any rank) was a
  // control message (expects_control).
  std::unique_ptr<std::atomic<bool>[]> last_was_control;
  // A persistent collective was made on the communicator (every rank of it knows alike: the
  // init is collective). Its requests may outlive the communicator's handle (MPI allows
  // freeing a communicator that persistent requests still use) and are freed by each rank
  // on its own, so the window cannot be freed collectively any more: it stays until
  // MPI_Finalize.
  bool had_persistent = false;
  std::mutex flags_mutex;  // flags_used: given back by whichever thread drops a persistent collective last
  std::vector<bool> flags_used = std::vector<bool>(kMaxPersistent, false);  // this rank's PersistentFlags
  ZeroCopyMemo memo;  // the last blocking call's decisions (a communicator's calls are ordered)

  Segment &mine() { return *segments[size_t(node_rank)]; }

  // This rank's free persistent flags, cleared (-1: none, or a node too large to serve).
  int take_flags() {
    if (segments.size() > size_t(kMaxNodeRanks)) return -1;
    std::lock_guard<std::mutex> lock(flags_mutex);
    for (int i = 0; i < kMaxPersistent; ++i)
      if (!flags_used[size_t(i)]) {
        flags_used[size_t(i)] = true;
        PersistentFlags &f = mine().flags[i];
        f.started.store(0, std::memory_order_relaxed);
        for (auto &d : f.read_done) d.store(0, std::memory_order_relaxed);
        return i;
      }
    return -1;
  }
  void give_flags(int i) {
    std::lock_guard<std::mutex> lock(flags_mutex);
    if (i >= 0) flags_used[size_t(i)] = false;
  }

  ~NodeShare() {
    if (p2p) {
      --g_p2p_comms;
      g_p2p_generation.fetch_add(1, std::memory_order_acq_rel);
    }
    for (const std::string &name : blobs) forget_blob(name);
    for (auto &p : peer_plans) gpu_backend().release_plan(p.second.id);
    // After MPI_Finalize began the library frees its own objects; before, freeing is
    // collective on the node, as the communicator's free that runs this is.
    if (g_stopped.load() || had_persistent) return;
    if (win != MPI_WIN_NULL) PMPI_Win_free(&win);
    if (node != MPI_COMM_NULL) PMPI_Comm_free(&node);
  }

  // The arena offset of `plan` (placed for `count` elements of plan id `id`), publishing it
  // the first time; -1 when it cannot be published (the arena full, no room in /dev/shm).
  int64_t publish(const Plan &plan, uint64_t id, int64_t count) {
    std::lock_guard<std::mutex> lock(plans_mutex);
    const auto key = std::make_pair(id, count);
    auto it = published.find(key);
    if (it != published.end()) return it->second;
    Segment &s = mine();
    const size_t runs = plan.pattern.size() * sizeof(Run), dims = plan.dims.size() * sizeof(Dim);
    const uint64_t at = (s.arena_used.load(std::memory_order_relaxed) + 7) & ~uint64_t(7);
    const bool inline_body = runs + dims <= kInlinePlanBytes && at + sizeof(PlanHeader) + runs + dims <= kArenaBytes;
    if (at + sizeof(PlanHeader) > kArenaBytes) {
      if (!arena_full_logged)
        TEMPI_LOG(Info, "zero-copy: the plan arena of this communicator is full; new types take the pack path");
      arena_full_logged = true;
      return -1;
    }
    PlanHeader h{plan.start, plan.pattern_size, plan.extent, int64_t(plan.pattern.size()), int64_t(plan.dims.size()), 0};
    char *p = s.arena + at;
    if (inline_body) {
      copy_bytes(p + sizeof h, plan.pattern.data(), runs);
      copy_bytes(p + sizeof h + runs, plan.dims.data(), dims);
    } else {
      std::vector<char> body(runs + dims);
      copy_bytes(body.data(), plan.pattern.data(), runs);
      copy_bytes(body.data() + runs, plan.dims.data(), dims);
      h.blob = blobs.size() + 1;
      const std::string name = shared_blob_name(s.pid, s.nonce, h.blob);
      if (const int err = write_shared_blob(name, body.data(), body.size())) {
        TEMPI_LOG(Info, "zero-copy: no room for a type of %zu runs in shared memory (%s: %s); it takes the pack path",
                  plan.pattern.size(), name.c_str(), std::strerror(err));
        return -1;
      }
      blobs.push_back(name);
      remember_blob(name);
    }
    std::memcpy(p, &h, sizeof h);
    s.arena_used.store(at + sizeof h + (inline_body ? runs + dims : 0), std::memory_order_release);
    published.emplace(key, int64_t(at));
    // This rank's own reads of it (a message to itself, a push) never go back to the arena.
    Plan own = plan;
    own.id = new_plan_id();
    peer_plans.emplace(std::make_pair(node_rank, int64_t(at)), std::move(own));
    return int64_t(at);
  }

  // Node rank `peer`'s plan at arena offset `at` (published before the slot that names it),
  // or null where its shared-memory block cannot be read.
  const Plan *peer_plan(int peer, int64_t at) {
    std::lock_guard<std::mutex> lock(plans_mutex);
    const auto key = std::make_pair(peer, at);
    auto it = peer_plans.find(key);
    if (it != peer_plans.end()) return &it->second;
    const Segment &owner = *segments[size_t(peer)];
    const char *p = owner.arena + at;
    PlanHeader h;
    std::memcpy(&h, p, sizeof h);
    const size_t runs = size_t(h.nruns) * sizeof(Run), dims = size_t(h.ndims) * sizeof(Dim);
    std::vector<char> body(runs + dims);
    if (h.blob == 0) {
      copy_bytes(body.data(), p + sizeof h, body.size());
    } else {
      const std::string name = shared_blob_name(owner.pid, owner.nonce, h.blob);
      if (const int err = read_shared_blob(name, body.data(), body.size())) {
        TEMPI_LOG(Warn, "zero-copy: node rank %d's type %s cannot be read (%s): its messages to this rank are packed",
                  peer, name.c_str(), std::strerror(err));
        return nullptr;
      }
    }
    Plan plan;
    plan.start = h.start;
    plan.pattern_size = h.pattern_size;
    plan.extent = h.extent;
    std::vector<Run> pattern(static_cast<size_t>(h.nruns));
    copy_bytes(pattern.data(), body.data(), runs);
    plan.pattern = std::move(pattern);
    plan.dims.resize(size_t(h.ndims));
    copy_bytes(plan.dims.data(), body.data() + runs, dims);
    plan.id = new_plan_id();  // its device-side data is this process's
    return &peer_plans.emplace(key, std::move(plan)).first->second;
  }
};

namespace {

// ---- Setting up a communicator --------------------------------------------------------------

int delete_share(MPI_Comm, int, void *value, void *) {
  delete static_cast<std::shared_ptr<NodeShare> *>(value);
  return MPI_SUCCESS;
}

int share_keyval() {
  static const int keyval = [] {
    int k = MPI_KEYVAL_INVALID;
    PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_share, &k, nullptr);
    return k;
  }();
  return keyval;
}

// 64 random bits (never 0), from the kernel's generator.
uint64_t random_nonce() {
  uint64_t n = 0;
  if (FILE *f = std::fopen("/dev/urandom", "rb")) {
    if (std::fread(&n, sizeof n, 1, f) != 1) n = 0;
    std::fclose(f);
  }
  if (n == 0)
    n = uint64_t(std::chrono::steady_clock::now().time_since_epoch().count()) * 0x9E3779B97F4A7C15ull ^ uint64_t(getpid());
  return n | 1;
}

// Collective on `comm` (its first blocking exchange collective): whether every rank takes
// part (TEMPI on, TEMPI_IPC not off, a GPU), and then this node's shared window.
std::shared_ptr<NodeShare> make_share(MPI_Comm comm) {
  Backend &b = gpu_backend();
  int everyone = config().ipc && b.has_gpu() ? 1 : 0;
  if (PMPI_Allreduce(MPI_IN_PLACE, &everyone, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS || !everyone) return nullptr;
  auto share = std::make_shared<NodeShare>();
  MPI_Comm node = MPI_COMM_NULL;
  if (PMPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) != MPI_SUCCESS) return nullptr;
  if (const int k = config().ipc_ranks_per_node; k > 0) {  // tests: smaller "nodes"
    int world = 0;
    PMPI_Comm_rank(MPI_COMM_WORLD, &world);
    MPI_Comm part = MPI_COMM_NULL;
    const int err = PMPI_Comm_split(node, world / k, 0, &part);
    PMPI_Comm_free(&node);
    if (err != MPI_SUCCESS) return nullptr;
    node = part;
  }
  share->node = node;
  int n = 0, size = 0;
  PMPI_Comm_rank(node, &share->node_rank);
  PMPI_Comm_size(node, &n);
  PMPI_Comm_size(comm, &size);
  // Rank maps, through the groups.
  MPI_Group ng, cg;
  PMPI_Comm_group(node, &ng);
  PMPI_Comm_group(comm, &cg);
  std::vector<int> nodes(static_cast<size_t>(n)), in_comm(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) nodes[size_t(i)] = i;
  PMPI_Group_translate_ranks(ng, n, nodes.data(), cg, in_comm.data());
  PMPI_Group_free(&ng);
  PMPI_Group_free(&cg);
  share->comm_of = in_comm;
  share->node_of.assign(size_t(size), -1);
  for (int i = 0; i < n; ++i) share->node_of[size_t(in_comm[size_t(i)])] = i;

  void *base = nullptr;
  int windows = PMPI_Win_allocate_shared(MPI_Aint(sizeof(Segment)), 1, MPI_INFO_NULL, node, &base, &share->win) ==
                MPI_SUCCESS;
  if (!windows) share->win = MPI_WIN_NULL;
  // Every node must have its window, or no rank takes part: the ranks of one call must all
  // run it as zero-copy or all not (a one-count call becomes a v-call only where they do).
  if (PMPI_Allreduce(MPI_IN_PLACE, &windows, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS || !windows) {
    TEMPI_LOG(Warn, "zero-copy: no shared memory window on a node of this communicator; it uses the pack path");
    if (share->win != MPI_WIN_NULL) PMPI_Win_free(&share->win);
    PMPI_Comm_free(&share->node);
    return nullptr;
  }
  share->segments.resize(size_t(n));
  share->last_was_control.reset(new std::atomic<bool>[size_t(n) + 1]);
  for (int i = 0; i <= n; ++i) share->last_was_control[size_t(i)].store(true, std::memory_order_relaxed);
  for (int i = 0; i < n; ++i) {
    MPI_Aint bytes = 0;
    int unit = 0;
    void *p = nullptr;
    PMPI_Win_shared_query(share->win, i, &bytes, &unit, &p);
    share->segments[size_t(i)] = static_cast<Segment *>(p);
  }
  Segment *mine = new (base) Segment;
  mine->pid = int32_t(getpid());
  mine->nonce = random_nonce();
  // The GPUs this rank's GPU reads: its own and its peers'.
  share->home_device = b.use_device(0);
  b.use_device(share->home_device);
  for (int d = 0; d < b.device_count() && mine->nreadable < kMaxReadable; ++d) {
    const std::string id = identity_of(d);
    if (id.empty()) continue;
    if (d == share->home_device || b.ipc_peer_access(id)) copy_id(mine->readable[mine->nreadable++], id);
  }
  PMPI_Barrier(node);  // every segment is written before anyone reads one
  return share;
}

// The communicator's share: made at its first blocking exchange collective (collective),
// then found by attribute. Null: no zero-copy between ranks on this communicator.
std::shared_ptr<NodeShare> share_of(MPI_Comm comm) {
  const int keyval = share_keyval();
  if (keyval == MPI_KEYVAL_INVALID) return nullptr;
  void *value = nullptr;
  int found = 0;
  PMPI_Comm_get_attr(comm, keyval, &value, &found);
  if (found) return *static_cast<std::shared_ptr<NodeShare> *>(value);
  auto *kept = new std::shared_ptr<NodeShare>(make_share(comm));
  if (*kept) register_zero_copy();  // the first use of zero-copy: its progress hooks and counters
  PMPI_Comm_set_attr(comm, keyval, kept);
  return *kept;
}

// ---- Waiting ------------------------------------------------------------------------------

// Spins until `ready()`, letting the MPI library progress now and then, and saying once
// every half minute what it is waiting for.
template <class Ready>
void spin_until(Ready ready, MPI_Comm node, const char *call, const char *what, int peer) {
  auto began = std::chrono::steady_clock::now();
  for (uint64_t n = 1; !ready(); ++n) {
    if (n % 256 == 0) {
      int flag = 0;
      PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, node, &flag, MPI_STATUS_IGNORE);
      sched_yield();
    }
    if (n % 65536 == 0 && std::chrono::steady_clock::now() - began > std::chrono::seconds(30)) {
      TEMPI_LOG(Warn, "%s: still waiting for comm rank %d %s (zero-copy)", call, peer, what);
      began = std::chrono::steady_clock::now();
    }
  }
}

// What a peer's slot says to this rank (comm rank `me`) about one call.
struct PeerView {
  uint64_t tag = 0;  // its pair tag for this rank
  IpcHandle handle;
  char send_device[kIdBytes] = {};
  int flags_at = -1;
  std::vector<Entry> sends, recvs;  // its pairs with this rank
  std::vector<int> send_at;         // per entry of `sends`: its place in the peer's slot
};

// A consistent copy of a peer's slot for call `seq` (false would mean the peer went past
// the call without this rank's copy, which the `seen` count rules out). `tag_at`: this rank's
// node rank, whose pair tag goes to view.tag (-1: none); where it equals `kept` (not 0) the
// pairs are those decided then and the entries are not copied.
bool snapshot(Slot &s, uint64_t seq, int me, int tag_at, uint64_t kept, PeerView &view, MPI_Comm node,
              const char *call, int peer) {
  uint64_t seen = 0;
  spin_until([&] { return (seen = s.seq.load(std::memory_order_acquire)) >= seq; }, node, call,
             "to enter the call", peer);
  if (seen != seq) return false;
  view.tag = tag_at >= 0 && tag_at < kMaxNodeRanks ? s.pair_tag[tag_at] : 0;
  if (kept != 0 && view.tag == kept) {
    std::atomic_thread_fence(std::memory_order_acquire);
    return s.seq.load(std::memory_order_relaxed) == seq;
  }
  view.handle = s.handle;
  view.flags_at = s.flags_at;
  std::memcpy(view.send_device, s.send_device, kIdBytes);
  view.send_device[kIdBytes - 1] = 0;
  const int ns = std::max(0, std::min(s.nsend, int32_t(kMaxEntries)));
  const int nr = std::max(0, std::min(s.nrecv, int32_t(kMaxEntries)));
  for (int k = 0; k < ns + nr; ++k) {
    const Entry e = s.entries[k];
    if (e.peer != me) continue;
    if (k < ns) {
      view.sends.push_back(e);
      view.send_at.push_back(k);
    } else {
      view.recvs.push_back(e);
    }
  }
  std::atomic_thread_fence(std::memory_order_acquire);
  return s.seq.load(std::memory_order_relaxed) == seq;
}

// The place in `entries` of the pair with this occurrence, or -1.
int find_entry(const std::vector<Entry> &entries, int occurrence) {
  for (size_t k = 0; k < entries.size(); ++k)
    if (entries[k].occurrence == occurrence) return int(k);
  return -1;
}

bool readable_by(const Segment &receiver, const char *device) {
  if (!device[0]) return false;
  for (int i = 0; i < receiver.nreadable && i < kMaxReadable; ++i)
    if (!std::strncmp(receiver.readable[i], device, kIdBytes)) return true;
  return false;
}

// Per position of a peer list: which occurrence of its peer it is, or -1 where the position
// takes no part (MPI_PROC_NULL, another node, a duplicate Cartesian neighbour).
std::vector<int> occurrences(const std::vector<int> &peers, size_t n, bool cartesian, int me,
                             const std::vector<int> *node_of) {
  std::vector<int> occ(n, -1);
  std::map<int, int> seen;
  for (size_t i = 0; i < n && i < peers.size(); ++i) {
    const int p = peers[i];
    if (p == MPI_PROC_NULL || p < 0) continue;
    if (p != me && (!node_of || p >= int(node_of->size()) || (*node_of)[size_t(p)] < 0)) continue;
    occ[i] = seen[p]++;
  }
  if (cartesian)
    for (size_t i = 0; i < n && i < peers.size(); ++i)
      if (occ[i] >= 0 && seen[peers[i]] > 1) occ[i] = -1;
  return occ;
}

}  // namespace

// ---- The call ---------------------------------------------------------------------------------

ZeroCopyCall::~ZeroCopyCall() {
  if (started_) finish(MPI_SUCCESS);  // an error left the call early: peers still wait for this rank
}

int ZeroCopyCall::start(MPI_Comm comm, const char *call, void *sbuf, std::vector<Block> &sblocks,
                        const std::vector<int> &dests, void *rbuf, std::vector<Block> &rblocks,
                        const std::vector<int> &sources, bool cartesian) {
  if (const int err = negotiate(comm, call, sbuf, sblocks, dests, rbuf, rblocks, sources, cartesian, kBlockingCall))
    return err;
  if (active_.empty()) return MPI_SUCCESS;
  // Every block moved straight from the peer's typed block into this rank's (one launch
  // for the strided ones), issued now so that it overlaps the library's call.
  const OnDeviceOf on_its_gpu(rbuf);
  if (as_before_ && move_as_before()) return error_;
  prepare_moves();
  if (const Status st = move_pairs(moves_, fence_); st != Status::Ok)
    error_ = raise_error(comm, error_class_of(st), "%s: zero-copy moves on the GPU failed: %s", call, to_string(st));
  return error_;
}

int ZeroCopyCall::start_persistent(MPI_Comm comm, const char *call, void *sbuf, std::vector<Block> &sblocks,
                                   const std::vector<int> &dests, void *rbuf, std::vector<Block> &rblocks,
                                   const std::vector<int> &sources, bool cartesian,
                                   std::shared_ptr<ZeroCopyPersistent> &kept) {
  kept.reset();
  std::shared_ptr<NodeShare> node = share_of(comm);  // collective the first time
  if (node) node->had_persistent = true;
  const int flags_at = node && config().ipc ? node->take_flags() : -1;
  const int err = negotiate(comm, call, sbuf, sblocks, dests, rbuf, rblocks, sources, cartesian, flags_at);
  if (err == MPI_SUCCESS && (!reads_.empty() || !reader_ranks_.empty())) {
    const OnDeviceOf on_its_gpu(rbuf);
    prepare_moves();
  }
  if (err != MPI_SUCCESS || error_ != MPI_SUCCESS || (reads_.empty() && reader_ranks_.empty())) {
    if (node) node->give_flags(flags_at);
    mapped_.clear();
    // Pairs were decided at both ends: an error here leaves them undone, which the other
    // end's starts would wait for; the init fails (MPI_X_init returns the error).
    return err != MPI_SUCCESS ? err : error_;
  }
  auto p = std::make_shared<ZeroCopyPersistent>();
  p->call_ = call;
  p->comm_ = comm;
  p->node_ = node_;
  p->flags_at_ = flags_at;
  for (size_t peer = 0; peer < owner_flags_.size(); ++peer)
    if (told_[peer] > 0) p->owners_.push_back({int(peer), owner_flags_[peer]});
  p->readers_ = reader_ranks_;
  p->reads_ = std::move(reads_);
  p->moves_ = std::move(moves_);
  p->scratch_ = std::move(scratch_);
  p->mapped_ = std::move(mapped_);  // held for every start
  p->device_ = device_;
  p->sbuf_ = sbuf;
  p->send_lo_ = send_lo_;
  p->send_hi_ = send_hi_;
  p->send_device_ = sbuf ? gpu_backend().device_of(sbuf) : -1;
  reads_.clear();
  active_.clear();
  moves_.clear();
  mapped_.clear();
  // Nothing moved at init: finish() only ends the handshake.
  readers_ = 0;
  std::fill(told_.begin(), told_.end(), 0);
  kept = std::move(p);
  return MPI_SUCCESS;
}

void ZeroCopyCall::place_local(MPI_Comm comm, void *sbuf, const std::vector<Block> &sblocks,
                               const std::vector<int> &dests, void *rbuf, const std::vector<Block> &rblocks,
                               const std::vector<int> &sources, bool cartesian, bool listing, LocalHalf &local) {
  int me = 0;
  PMPI_Comm_rank(comm, &me);
  const std::vector<int> *node_of = node_ ? &node_->node_of : nullptr;
  // A side that is not GPU data takes no part (its blocks stay as they are).
  local.socc = occurrences(dests, sbuf ? sblocks.size() : 0, cartesian, me, node_of);
  local.rocc = occurrences(sources, rbuf ? rblocks.size() : 0, cartesian, me, node_of);
  local.splaced.assign(local.socc.size(), PlacedBlock{});
  local.rplaced.assign(local.rocc.size(), PlacedBlock{});
  local.sok.assign(local.socc.size(), 0);
  local.rok.assign(local.rocc.size(), 0);
  // A side with a block TEMPI cannot plan reaches the library as a host copy of its region,
  // through the application's own counts: none of its blocks may be left out, so the side
  // takes no part.
  auto place_side = [](void *buf, const std::vector<Block> &blocks, const std::vector<int> &occ,
                       std::vector<PlacedBlock> &placed, std::vector<char> &ok) {
    for (size_t i = 0; i < occ.size(); ++i) {
      if (blocks[i].count <= 0) continue;
      const bool same = i > 0 && placed[i - 1].info && blocks[i - 1].type == blocks[i].type;
      if (!place_block(buf, blocks[i], same ? &placed[i - 1].info : nullptr, placed[i])) {
        std::fill(ok.begin(), ok.end(), 0);
        return;
      }
      ok[i] = occ[i] >= 0 && placed[i].bytes > 0;
    }
  };
  place_side(sbuf, sblocks, local.socc, local.splaced, local.sok);
  place_side(rbuf, rblocks, local.rocc, local.rplaced, local.rok);

  // Blocks to itself: the k-th send to this rank pairs with the k-th receive from it.
  for (size_t i = 0; i < local.socc.size(); ++i) {
    if (!local.sok[i] || dests[i] != me) continue;
    for (size_t j = 0; j < local.rocc.size(); ++j)
      if (local.rok[j] && sources[j] == me && local.rocc[j] == local.socc[i] &&
          local.rplaced[j].bytes == local.splaced[i].bytes) {
        Read rd;
        rd.from = -1;
        rd.own_plan = local.splaced[i].plan;
        rd.typed = local.splaced[i].typed;
        rd.into = local.rplaced[j];
        local.self_reads.push_back(std::move(rd));
        local.self_sends.push_back(i);
        local.self_recvs.push_back(j);
        break;
      }
  }
  if (!node_) return;
  // This rank's entries: its sends to node peers (plans published), then its receives.
  for (size_t i = 0; listing && local.exported && i < local.socc.size() && local.sends.size() < size_t(kMaxEntries);
       ++i) {
    if (!local.sok[i] || dests[i] == me) continue;
    const PlacedBlock &p = local.splaced[i];
    const int64_t at = int64_t(p.typed - static_cast<char *>(sbuf)) + local.handle.offset;
    if (at + p.low < 0 || at + p.high > local.handle.size) continue;  // data beyond the exported allocation
    const int64_t plan_at = node_->publish(p.plan, p.info->plan->id, sblocks[i].count);
    if (plan_at < 0) continue;
    local.sends.push_back(Entry{dests[i], local.socc[i], p.bytes, plan_at, at});
    const int64_t from_sbuf = int64_t(p.typed - static_cast<char *>(sbuf));
    const bool first = local.sends.size() == 1;
    local.send_lo = first ? from_sbuf + p.low : std::min(local.send_lo, from_sbuf + p.low);
    local.send_hi = first ? from_sbuf + p.high : std::max(local.send_hi, from_sbuf + p.high);
  }
  for (size_t j = 0; listing && local.recv_home && j < local.rocc.size() && local.recvs.size() < size_t(kMaxEntries);
       ++j) {
    if (!local.rok[j] || sources[j] == me) continue;
    local.recvs.push_back(Entry{sources[j], local.rocc[j], local.rplaced[j].bytes, -1, 0});
  }
}

int ZeroCopyCall::negotiate(MPI_Comm comm, const char *call, void *sbuf, std::vector<Block> &sblocks,
                            const std::vector<int> &dests, void *rbuf, std::vector<Block> &rblocks,
                            const std::vector<int> &sources, bool cartesian, int flags_at) {
  call_ = call;
  comm_ = comm;
  node_ = share_of(comm);  // collective the first time: before any decision of this rank's own
  if (!config().ipc) return MPI_SUCCESS;
  // A persistent init without flags of its own (all taken) lists no pair: the pack path.
  const bool listing = flags_at != kNoFlags;
  const bool persistent = flags_at != kBlockingCall;
  blocking_ = !persistent;
  const uint64_t types_now = type_cache().generation();  // before any lookup of this call
  int me = 0;
  PMPI_Comm_rank(comm, &me);
  Backend &b = gpu_backend();

  // This rank's half: the memo's where its arguments are those of the communicator's last
  // blocking call, else placed now (into the memo, for the next call).
  IpcHandle handle;
  bool exported = false;
  if (node_ && sbuf) exported = b.ipc_export(sbuf, handle) == Status::Ok;
  if (sbuf && !exported && node_)
    TEMPI_LOG(Debug, "%s: the send buffer cannot be exported (IPC); its blocks to peers use the pack path", call);
  const bool recv_home = rbuf && (!node_ || b.device_of(rbuf) == node_->home_device);
  ZeroCopyMemo *memo = node_ && !persistent ? &node_->memo : nullptr;
  const bool reused = memo && memo->matches(call, sbuf, sblocks, dests, rbuf, rblocks, sources, cartesian, types_now,
                                            exported, handle, recv_home);
  LocalHalf fresh;
  if (memo && !reused) {
    memo->reset(node_->segments.size());
    memo->call = call;
    memo->sbuf = sbuf;
    memo->rbuf = rbuf;
    memo->cartesian = cartesian;
    memo->dests = dests;
    memo->sources = sources;
    memo->sblocks = sblocks;
    memo->rblocks = rblocks;
    memo->types = types_now;
  }
  LocalHalf &local = memo ? memo->local : fresh;
  if (!reused) {
    local.handle = handle;
    local.exported = exported;
    local.recv_home = recv_home;
    if (exported) local.send_device = identity_of(b.device_of(sbuf));
    place_local(comm, sbuf, sblocks, dests, rbuf, rblocks, sources, cartesian, listing, local);
  }
  // Kept for the next call only once this call's slot says what the memo says.
  if (memo) memo->valid = false;

  // This call's slot.
  started_ = node_ != nullptr;
  if (node_) {
    // Every node peer of the call's pattern copies this slot and this rank copies theirs, host
    // buffers or not: so no rank rewrites a slot that a peer has yet to read.
    for (const std::vector<int> *list : {&dests, &sources})
      for (int p : *list)
        if (p >= 0 && p != me && p < int(node_->node_of.size()) && node_->node_of[size_t(p)] >= 0)
          peers_.push_back(node_->node_of[size_t(p)]);
    std::sort(peers_.begin(), peers_.end());
    peers_.erase(std::unique(peers_.begin(), peers_.end()), peers_.end());
    told_.assign(node_->segments.size(), 0);
    owner_flags_.assign(node_->segments.size(), -1);

    seq_ = ++node_->seq;
    Slot &slot = node_->mine().slots[seq_ & 1];
    slot.seq.store(0, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    slot.done.store(0, std::memory_order_relaxed);
    slot.seen.store(0, std::memory_order_relaxed);
    slot.answered.store(0, std::memory_order_relaxed);
    slot.library.store(0, std::memory_order_relaxed);
    slot.library_seen.store(0, std::memory_order_relaxed);
    slot.handle = local.exported ? local.handle : IpcHandle{};
    slot.flags_at = persistent ? flags_at : -1;
    copy_id(slot.send_device, local.exported ? local.send_device : std::string());
    int ns = int(local.sends.size());
    const int nr = int(local.recvs.size());
    copy_bytes(slot.entries, local.sends.data(), size_t(ns) * sizeof(Entry));
    copy_bytes(slot.entries + ns, local.recvs.data(), size_t(nr) * sizeof(Entry));
    send_lo_ = local.send_lo;
    send_hi_ = local.send_hi;
    bool keep = memo != nullptr;
    // Peers read the send blocks in place with their own GPUs, which do not follow this
    // process's legacy default stream as TEMPI's streams do: the application's work
    // there (a kernel or copy that filled the buffer) must be finished before they may.
    if (ns > 0) {
      const OnDeviceOf on_its_gpu(sbuf);
      if (const Status st = b.wait_default_stream(); st != Status::Ok) {
        ns = 0;  // nobody reads this buffer: the pack path (which follows the stream) for all
        keep = false;
        copy_bytes(slot.entries, local.recvs.data(), size_t(nr) * sizeof(Entry));
        error_ = raise_error(comm, MPI_ERR_INTERN, "%s: waiting for the GPU's default stream failed: %s", call,
                             to_string(st));
      }
    }
    for (int k = 0; k < ns; ++k) slot.refused[k].store(0, std::memory_order_relaxed);
    slot.nsend = ns;
    slot.nrecv = nr;
    // A pair kept from an earlier call reads the peer's allocation again: mapped now, before
    // the tag says so (the cache may have unmapped it between calls, and mapping it again may
    // be refused, as by a CUDA-aware library's own mapping): where it cannot be, the tag is 0
    // and both ends decide the pair again, which refuses it the usual way.
    if (keep && reused)
      for (int p : peers_) {
        ZeroCopyMemo::Pair &pair = memo->pairs[size_t(p)];
        if (pair.tag == 0 || pair.reads.empty()) continue;
        PeerMapping mapped;
        Status st;
        {
          const OnDeviceOf on_its_gpu(rbuf);
          st = mapped.map(pair.pid, pair.handle);
        }
        if (st != Status::Ok) {
          pair = ZeroCopyMemo::Pair{};
          memo->forget_moves();
          continue;
        }
        if (mapped.base() != pair.base) {
          memo->forget_moves();
          pair.base = mapped.base();
          for (Read &rd : pair.reads) rd.typed = pair.base + rd.from_sbuf + pair.handle.offset;
        }
        mapped_.push_back(std::move(mapped));  // held until the GPU is done (finish)
      }
    for (int p : peers_)
      if (p < kMaxNodeRanks) slot.pair_tag[p] = keep && reused ? memo->pairs[size_t(p)].tag : 0;
    if (!keep) memo = nullptr;  // this call's decisions go to reads_ and mapped_, not to the memo
    slot.seq.store(seq_, std::memory_order_release);
  }

  // The peers' slots of this call, and each pair's decision. Both ends find the same pairs
  // from the same two entries; the reader then maps the owner's send buffer and answers
  // whether it could, and a pair whose mapping CUDA refused takes the pack path at both
  // ends. Every rank answers as it reads its peers' slots, and waits for answers only after
  // it has answered all of its own (reading a slot waits only for its peer to enter the
  // call): no rank waits for another that waits for it. A pair whose two slots name the same
  // deciding call keeps what was decided then, at both ends, and nobody answers for it.
  std::vector<std::pair<int, int>> offered;  // (entry in this rank's slot, node rank that reads it)
  std::vector<int> decided;                  // node ranks whose pairs this call decides (memo)
  uint64_t askers = 0;                       // node ranks that must answer this rank
  for (int peer : peers_) {
    Slot &mine_slot = node_->mine().slots[seq_ & 1];
    PeerView theirs;
    const int peer_comm = node_->comm_of[size_t(peer)];
    Slot &their_slot = node_->segments[size_t(peer)]->slots[seq_ & 1];
    const uint64_t kept = peer < kMaxNodeRanks ? mine_slot.pair_tag[peer] : 0;
    const bool copied = snapshot(their_slot, seq_, me, node_->node_rank, kept, theirs, node_->node, call, peer_comm);
    their_slot.seen.fetch_add(1, std::memory_order_acq_rel);
    if (!copied) {
      TEMPI_LOG(Error, "%s: comm rank %d left the call before this rank read its zero-copy slot", call, peer_comm);
      if (memo) {
        memo->pairs[size_t(peer)] = ZeroCopyMemo::Pair{};
        memo->forget_moves();
      }
      continue;
    }
    if (memo && kept != 0 && theirs.tag == kept) {
      const ZeroCopyMemo::Pair &pair = memo->pairs[size_t(peer)];  // its mapping held since the slot was written
      for (size_t i : pair.sends_read) sblocks[i].count = 0;
      readers_ += int(pair.sends_read.size());
      if (!pair.sends_read.empty()) reader_ranks_.push_back(peer);
      for (size_t j : pair.recvs_read) rblocks[j].count = 0;
      told_[size_t(peer)] += int(pair.reads.size());
      g_kept_pairs.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    ZeroCopyMemo::Pair *pair = memo ? &memo->pairs[size_t(peer)] : nullptr;
    if (pair) {
      // The kept mapping taken before the slot was written goes first: the peer's buffer may
      // be a new allocation where the old one was, which CUDA maps only once the old is closed.
      if (pair->tag != 0 && !pair->reads.empty())
        for (PeerMapping &m : mapped_)
          if (m.pid() == pair->pid && m.buffer_id() == pair->handle.buffer_id) m.release();
      *pair = ZeroCopyMemo::Pair{};
      decided.push_back(peer);
    }
    std::vector<Read> &reads = pair ? pair->reads : reads_;
    Segment &peer_seg = *node_->segments[size_t(peer)];
    // Blocks this rank sends to the peer: offered when its entry matches; read once it answers.
    const size_t offered_before = offered.size();
    for (int k = 0; k < mine_slot.nsend; ++k) {
      const Entry &e = mine_slot.entries[k];
      if (e.peer != peer_comm) continue;
      const int r = find_entry(theirs.recvs, e.occurrence);
      if (r < 0 || theirs.recvs[size_t(r)].bytes != e.bytes || !readable_by(peer_seg, mine_slot.send_device)) continue;
      offered.push_back({k, peer});
    }
    askers += offered.size() > offered_before ? 1 : 0;
    // Blocks this rank receives from the peer: read from its send buffer where it maps.
    bool answer = false;
    for (int k = 0; k < mine_slot.nrecv; ++k) {
      const Entry &e = mine_slot.entries[mine_slot.nsend + k];
      if (e.peer != peer_comm) continue;
      const int at = find_entry(theirs.sends, e.occurrence);
      if (at < 0) continue;
      const Entry &s = theirs.sends[size_t(at)];
      if (s.bytes != e.bytes || theirs.handle.size == 0 || !readable_by(node_->mine(), theirs.send_device)) continue;
      answer = true;
      size_t j = 0;
      while (j < local.rocc.size() && !(sources[j] == peer_comm && local.rocc[j] == e.occurrence && local.rok[j])) ++j;
      PeerMapping mapped;
      Status st = Status::Unsupported;
      // The peer's plan first: where it cannot be read (peer_plan says why), the pair is refused.
      const Plan *plan = j < local.rocc.size() ? node_->peer_plan(peer, s.plan_at) : nullptr;
      if (plan) {
        const OnDeviceOf on_its_gpu(rbuf);
        st = mapped.map(peer_seg.pid, theirs.handle);
      }
      if (st != Status::Ok) {
        their_slot.refused[theirs.send_at[size_t(at)]].store(1, std::memory_order_relaxed);
        if (st != Status::Unsupported)
          TEMPI_LOG(Info,
                    "%s: comm rank %d's GPU buffer cannot be mapped here (CUDA IPC refused it; the MPI library "
                    "may map it already); its blocks to this rank take the pack path from now on",
                    call, peer_comm);
        continue;
      }
      ++told_[size_t(peer)];  // the owner waits until this pair is read
      owner_flags_[size_t(peer)] = theirs.flags_at;
      rblocks[j].count = 0;
      if (pair) {
        pair->recvs_read.push_back(j);
        pair->pid = peer_seg.pid;
        pair->handle = theirs.handle;
        pair->base = mapped.base();
      }
      Read rd;
      rd.from = peer;
      rd.plan = plan;
      rd.typed = mapped.base() + s.offset;
      rd.from_sbuf = s.offset - theirs.handle.offset;
      rd.mapping = int(mapped_.size());
      rd.into = local.rplaced[j];
      reads.push_back(std::move(rd));
      mapped_.push_back(std::move(mapped));
    }
    if (answer) their_slot.answered.fetch_add(1, std::memory_order_acq_rel);
  }
  if (askers > 0) {
    Slot &mine_slot = node_->mine().slots[seq_ & 1];
    spin_until([&] { return mine_slot.answered.load(std::memory_order_acquire) >= askers; }, node_->node, call,
               "to answer whether it maps this rank's send buffer", -1);
    for (const auto &[k, peer] : offered) {
      if (mine_slot.refused[k].load(std::memory_order_relaxed)) continue;
      const Entry &e = mine_slot.entries[k];
      for (size_t i = 0; i < local.socc.size(); ++i)
        if (dests[i] == e.peer && local.socc[i] == e.occurrence && local.sok[i]) {
          sblocks[i].count = 0;
          if (memo) memo->pairs[size_t(peer)].sends_read.push_back(i);
        }
      ++readers_;
      if (reader_ranks_.empty() || reader_ranks_.back() != peer) reader_ranks_.push_back(peer);
    }
  }
  for (int peer : decided) memo->pairs[size_t(peer)].tag = seq_;
  if (memo && !decided.empty()) memo->forget_moves();

  // Blocks to itself.
  for (size_t k = 0; k < local.self_reads.size(); ++k) {
    sblocks[local.self_sends[k]].count = 0;
    rblocks[local.self_recvs[k]].count = 0;
  }
  const size_t own = local.self_reads.size();
  active_.clear();
  if (memo) {
    for (int peer : peers_)
      for (const Read &rd : memo->pairs[size_t(peer)].reads) active_.push_back(&rd);
    for (const Read &rd : local.self_reads) active_.push_back(&rd);
    memo->valid = error_ == MPI_SUCCESS;
    as_before_ = memo->valid && reused && decided.empty();
  } else {
    for (Read &rd : local.self_reads) reads_.push_back(std::move(rd));
    local.self_reads.clear();
    for (const Read &rd : reads_) active_.push_back(&rd);
  }
  if (node_)
    TEMPI_LOG(Debug, "%s: zero-copy call %llu on this node: %zu blocks read from peers, %zu to itself, %d readers%s",
              call, (unsigned long long)seq_, active_.size() - own, own, readers_,
              reused ? " (arguments as at the last call)" : "");
  return error_;
}

bool ZeroCopyCall::move_as_before() {
  ZeroCopyMemo &memo = node_->memo;
  Backend &b = gpu_backend();
  if (!memo.prepared && !memo.unpreparable) {
    prepare_moves(false);  // no scratch: a prepared move needs none
    memo.device = device_;
    memo.unpreparable = b.prepare_moves(moves_, memo.prepared) != Status::Ok;
    moves_.clear();
  }
  if (!memo.prepared) return false;
  device_ = memo.device;
  if (const Status st = b.move_prepared(memo.prepared, fence_); st != Status::Ok)
    error_ = raise_error(comm_, error_class_of(st), "%s: zero-copy moves on the GPU failed: %s", call_, to_string(st));
  g_prepared_calls.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void ZeroCopyCall::prepare_moves(bool lend) {
  if (active_.empty()) return;
  device_ = gpu_backend().device_of(active_.front()->into.typed);
  for (const Read *rd : active_)
    moves_.push_back({rd->from < 0 ? &rd->own_plan : rd->plan, rd->typed, &rd->into.plan, rd->into.typed,
                      rd->into.bytes});
  if (lend) lend_scratch(moves_, scratch_);
}

bool ZeroCopyCall::library_round() const {
  return started_ && blocking_ && node_->segments.size() == node_->node_of.size();
}

bool ZeroCopyCall::library_needed(bool carries) {
  if (!library_round()) return true;
  return tell_library(carries ? kLibraryData : kLibraryNoData);
}

bool ZeroCopyCall::tell_library(uint32_t mine_says) {
  Slot &mine = node_->mine().slots[seq_ & 1];
  mine.library.store(mine_says, std::memory_order_release);
  bool any = mine_says == kLibraryData;
  int failed = -1;
  for (size_t r = 0; r < node_->segments.size(); ++r) {
    if (int(r) == node_->node_rank) continue;
    Slot &theirs = node_->segments[r]->slots[seq_ & 1];
    uint32_t says = 0;
    spin_until(
        [&] {
          return theirs.seq.load(std::memory_order_acquire) == seq_ &&
                 (says = theirs.library.load(std::memory_order_acquire)) != 0;
        },
        node_->node, call_, "to say whether it gives the library data", node_->comm_of[r]);
    any = any || says == kLibraryData;
    if (says == kLibraryFailed) failed = node_->comm_of[r];
    theirs.library_seen.fetch_add(1, std::memory_order_acq_rel);
  }
  library_round_ = true;
  if (failed >= 0) {
    // That rank will not call the library: nobody does, and the call fails here too.
    if (error_ == MPI_SUCCESS && mine_says != kLibraryFailed)
      error_ = raise_error(comm_, MPI_ERR_OTHER, "%s: comm rank %d failed in this call; no rank calls the MPI library",
                           call_, failed);
    return false;
  }
  if (!any) g_library_skipped.fetch_add(1, std::memory_order_relaxed);
  return any;
}

int ZeroCopyCall::finish(int err) {
  if (!started_ && active_.empty()) return err;
  Backend &b = gpu_backend();
  if (fence_) {
    const int previous = device_ >= 0 ? b.use_device(device_) : -1;
    const Status st = b.wait(fence_);
    if (previous >= 0) b.use_device(previous);
    fence_ = Fence{};
    if (st != Status::Ok && error_ == MPI_SUCCESS)
      error_ = raise_error(comm_, MPI_ERR_INTERN, "%s: zero-copy moves on the GPU failed: %s", call_, to_string(st));
  }
  for (const Read *rd : active_) (rd->from < 0 ? g_self_blocks : g_peer_blocks).fetch_add(1, std::memory_order_relaxed);
  active_.clear();
  reads_.clear();
  mapped_.clear();  // the GPU is done with the peers' buffers
  if (started_) {
    // A rank that failed before asking whether to call the library says so in the round,
    // or its peers would wait there for it (and skip the library: it will not call it).
    if (!library_round_ && library_round()) tell_library(kLibraryFailed);
    started_ = false;
    for (size_t peer = 0; peer < told_.size(); ++peer)
      if (told_[peer]) node_->segments[peer]->slots[seq_ & 1].done.fetch_add(uint64_t(told_[peer]));
    Slot &slot = node_->mine().slots[seq_ & 1];
    const uint64_t peers = peers_.size();
    const uint64_t told = library_round_ ? node_->segments.size() - 1 : 0;
    spin_until(
        [&] {
          return slot.done.load(std::memory_order_acquire) >= uint64_t(readers_) &&
                 slot.seen.load(std::memory_order_acquire) >= peers &&
                 slot.library_seen.load(std::memory_order_acquire) >= told;
        },
        node_->node, call_, "to finish with this rank's zero-copy slot", -1);
  }
  return err != MPI_SUCCESS ? err : error_;
}

// ---- Persistent collectives ----------------------------------------------------------------

namespace {

// TEMPI's zero-copy thread: issues the reads of started persistent collectives once the
// peers they read from have started the same instance, and tells those peers when the reads
// are done. It never calls MPI; it exists so that no start waits for another process and
// no peer's completion depends on whether this process is inside an MPI call.
class ZeroCopyThread {
 public:
  void add(std::shared_ptr<ZeroCopyPersistent> op) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
      work_.push_back(std::move(op));
    }
    wake_.notify_one();
  }
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_one();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void run() {
    std::vector<std::shared_ptr<ZeroCopyPersistent>> mine;
    for (unsigned idle = 0;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        if (mine.empty()) wake_.wait(lock, [&] { return stopping_ || !work_.empty(); });
        if (stopping_) return;
        for (auto &op : work_) mine.push_back(std::move(op));
        work_.clear();
      }
      const size_t before = mine.size();
      mine.erase(std::remove_if(mine.begin(), mine.end(), [](const auto &op) { return op->advance(); }), mine.end());
      // Peers start within microseconds in a tight loop, or much later: spin a little,
      // then yield, then sleep briefly, so that a waiting start costs no core.
      idle = mine.size() < before ? 0 : idle + 1;
      if (idle > 2000) std::this_thread::sleep_for(std::chrono::microseconds(50));
      else if (idle > 200) std::this_thread::yield();
    }
  }
  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<std::shared_ptr<ZeroCopyPersistent>> work_;
  std::thread thread_;
  bool stopping_ = false;
};

ZeroCopyThread &zero_copy_thread() {
  static ZeroCopyThread *t = new ZeroCopyThread;  // stopped at MPI_Finalize, never destroyed
  return *t;
}

// Started persistent collectives whose generalized request is not completed yet.
struct InFlight {
  std::shared_ptr<ZeroCopyPersistent> op;
  MPI_Request gated;
};
std::mutex g_flight_mutex;
std::vector<InFlight> g_in_flight;
std::atomic<size_t> g_in_flight_count{0};

}  // namespace

// The generalized request of one start (its state: a shared_ptr to the op, so that the
// op outlives a handle freed while active): its status is the library's part's error.
int gated_query(void *state, MPI_Status *status) {
  ZeroCopyPersistent *op = static_cast<std::shared_ptr<ZeroCopyPersistent> *>(state)->get();
  const int err = op->library_error_ != MPI_SUCCESS ? op->library_error_ : op->error_.load();
  PMPI_Status_set_elements(status, MPI_BYTE, 0);
  PMPI_Status_set_cancelled(status, 0);
  status->MPI_SOURCE = MPI_UNDEFINED;
  status->MPI_TAG = MPI_UNDEFINED;
  status->MPI_ERROR = err;
  return err;
}

namespace {
int gated_free(void *state) {
  delete static_cast<std::shared_ptr<ZeroCopyPersistent> *>(state);
  return MPI_SUCCESS;
}
int gated_cancel(void *, int) { return MPI_SUCCESS; }
}  // namespace

ZeroCopyPersistent::~ZeroCopyPersistent() {
  if (node_) node_->give_flags(flags_at_);
}

bool ZeroCopyPersistent::publish_send_buffer() {
  Backend &b = gpu_backend();
  IpcHandle h;
  const bool readable = b.ipc_export(sbuf_, h) == Status::Ok && b.device_of(sbuf_) == send_device_ &&
                        h.offset + send_lo_ >= 0 && h.offset + send_hi_ <= h.size;
  if (!readable) h = IpcHandle{};
  node_->mine().flags[flags_at_].handle = h;
  return readable;
}

int ZeroCopyPersistent::begin() {
  const uint64_t n = ++started_;
  library_ = MPI_REQUEST_NULL;
  library_done_ = false;
  library_error_ = MPI_SUCCESS;
  error_ = MPI_SUCCESS;
  bool readable = true;
  if (!readers_.empty()) {
    // Peers read the send buffer from now on: the application's work on the legacy default
    // stream that fills it must be finished (see ZeroCopyCall::negotiate).
    Backend &b = gpu_backend();
    const int previous = b.use_device(send_device_);
    if (const Status st = b.wait_default_stream(); st != Status::Ok)
      error_ = raise_error(comm_, MPI_ERR_INTERN, "%s: waiting for the GPU's default stream failed: %s", call_,
                           to_string(st));
    readable = publish_send_buffer();
    b.use_device(previous);
  }
  if (flags_at_ >= 0) node_->mine().flags[flags_at_].started.store(n, std::memory_order_release);
  phase_.store(reads_.empty() ? 3 : 1, std::memory_order_release);
  const int err = error_.load();
  if (!readable) {
    // Its readers fail this start too: every end completes it, with the error (MPI_Start
    // itself succeeds, so that the library's part runs at every rank and nobody waits).
    TEMPI_LOG(Error, "%s: the send buffer is no longer in one GPU allocation that holds all of its blocks (freed and "
              "allocated again since the init?); this start moves nothing to node peers and fails", call_);
    error_ = MPI_ERR_BUFFER;
  }
  return err;
}

int ZeroCopyPersistent::follow_owners() {
  int err = MPI_SUCCESS;
  for (const auto &o : owners_) {
    const int owner = o.first;
    const IpcHandle h = node_->segments[size_t(owner)]->flags[o.second].handle;  // read after `started`
    bool current = h.size > 0;
    for (const ZeroCopyCall::Read &rd : reads_)
      if (rd.from == owner && mapped_[size_t(rd.mapping)].buffer_id() != h.buffer_id) current = false;
    if (current) continue;
    // The owner's send buffer is in another allocation now: every read from it goes through
    // a mapping of that one (the old mappings let go first, so that the cache can unmap the
    // freed allocation that CUDA would otherwise answer, or refuse, the new handle with).
    for (const ZeroCopyCall::Read &rd : reads_)
      if (rd.from == owner) mapped_[size_t(rd.mapping)].release();
    for (size_t k = 0; k < reads_.size(); ++k) {
      ZeroCopyCall::Read &rd = reads_[k];
      if (rd.from != owner) continue;
      PeerMapping &m = mapped_[size_t(rd.mapping)];
      if (h.size == 0 || m.map(node_->segments[size_t(owner)]->pid, h) != Status::Ok) {
        if (err == MPI_SUCCESS)
          TEMPI_LOG(Error, "%s: node rank %d's send buffer is in a new GPU allocation that this rank cannot read; "
                    "this start moves nothing from it and fails", call_, owner);
        err = h.size == 0 ? MPI_ERR_BUFFER : MPI_ERR_OTHER;
        continue;
      }
      rd.typed = m.base() + h.offset + rd.from_sbuf;
      moves_[k].from_typed = rd.typed;
      prepared_ = Prepared{};  // described with the old address
      unpreparable_ = false;
    }
  }
  return err;
}

Status ZeroCopyPersistent::move() {
  Backend &b = gpu_backend();
  // Every start moves the same pairs: described for the device at the first (kept until an
  // owner's send buffer moves to another allocation).
  if (!prepared_ && !unpreparable_) unpreparable_ = b.prepare_moves(moves_, prepared_) != Status::Ok;
  if (!prepared_) return move_pairs(moves_, fence_);
  g_prepared_calls.fetch_add(1, std::memory_order_relaxed);
  return b.move_prepared(prepared_, fence_);
}

bool ZeroCopyPersistent::advance() {
  Backend &b = gpu_backend();
  const uint64_t n = started_;
  if (phase_.load(std::memory_order_acquire) == 1) {
    for (const auto &o : owners_)
      if (o.second < 0 ||
          node_->segments[size_t(o.first)]->flags[o.second].started.load(std::memory_order_acquire) < n)
        return false;
    const int previous = b.use_device(device_);
    if (const int err = follow_owners(); err != MPI_SUCCESS) {
      error_ = err;
    } else if (const Status st = move(); st != Status::Ok) {
      TEMPI_LOG(Error, "%s: zero-copy moves on the GPU failed: %s", call_, to_string(st));
      error_ = MPI_ERR_INTERN;
      fence_ = Fence{};
    }
    b.use_device(previous);
    phase_.store(2, std::memory_order_release);
  }
  if (fence_) {
    const int previous = b.use_device(device_);
    bool done = false;
    const Status st = b.poll(fence_, done);
    b.use_device(previous);
    if (!done) return false;
    if (st != Status::Ok) {  // the start ends with the error, its owners released
      TEMPI_LOG(Error, "%s: zero-copy moves on the GPU failed: %s", call_, to_string(st));
      error_ = MPI_ERR_INTERN;
    }
    fence_ = Fence{};
  }
  // Done reading: each owner may let its application change the send buffer again.
  for (const auto &o : owners_)
    if (o.second >= 0)
      node_->segments[size_t(o.first)]->flags[o.second].read_done[node_->node_rank].store(n, std::memory_order_release);
  for (const auto &rd : reads_) (rd.from < 0 ? g_self_blocks : g_peer_blocks).fetch_add(1, std::memory_order_relaxed);
  phase_.store(3, std::memory_order_release);
  return true;
}

int ZeroCopyPersistent::gate(MPI_Request library, MPI_Request *gated) {
  library_ = library;
  auto *state = new std::shared_ptr<ZeroCopyPersistent>(shared_from_this());
  const int err = PMPI_Grequest_start(gated_query, gated_free, gated_cancel, state, gated);
  if (err != MPI_SUCCESS) {
    delete state;
    return raise_error(comm_, err, "%s: cannot make the start's request", call_);
  }
  {
    std::lock_guard<std::mutex> lock(g_flight_mutex);
    g_in_flight.push_back({shared_from_this(), *gated});
    g_in_flight_count = g_in_flight.size();
  }
  if (phase_.load(std::memory_order_acquire) == 1) zero_copy_thread().add(shared_from_this());
  return MPI_SUCCESS;
}

bool ZeroCopyPersistent::finished_now() {
  if (!library_done_) {
    int flag = 1;
    MPI_Status st;
    if (library_ != MPI_REQUEST_NULL) {
      const int err = TEMPI_NEXT(MPI_Test)(&library_, &flag, &st);
      if (err != MPI_SUCCESS) {
        library_error_ = err;
        flag = 1;
      }
    }
    if (!flag) return false;
    library_done_ = true;
  }
  if (phase_.load(std::memory_order_acquire) != 3) return false;
  if (flags_at_ < 0) return true;
  const PersistentFlags &f = node_->mine().flags[flags_at_];
  for (int r : readers_)
    if (f.read_done[r].load(std::memory_order_acquire) < started_) return false;
  return true;
}

void zero_copy_progress() {
  p2p_progress();
  if (g_in_flight_count.load(std::memory_order_relaxed) == 0) return;
  std::unique_lock<std::mutex> lock(g_flight_mutex, std::try_to_lock);
  if (!lock.owns_lock()) return;  // another thread is at it
  for (auto it = g_in_flight.begin(); it != g_in_flight.end();)
    if (it->op->finished_now()) {
      PMPI_Grequest_complete(it->gated);
      it = g_in_flight.erase(it);
    } else {
      ++it;
    }
  g_in_flight_count = g_in_flight.size();
}

bool zero_copy_in_flight() { return g_in_flight_count.load(std::memory_order_relaxed) > 0 || p2p_in_flight(); }

bool zero_copy_participates(MPI_Comm comm) {
  int inter = 0;
  if (comm == MPI_COMM_NULL || PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter) return false;
  return share_of(comm) != nullptr;
}

ZeroCopyCounts zero_copy_counts() {
  return {g_peer_blocks.load(), g_self_blocks.load(), mappings().opened(), g_kept_pairs.load(),
          g_prepared_calls.load(), g_library_skipped.load()};
}

void zero_copy_drain() {
  for (auto began = std::chrono::steady_clock::now(); zero_copy_in_flight();) {
    zero_copy_progress();
    std::this_thread::yield();
    if (std::chrono::steady_clock::now() - began > std::chrono::seconds(30)) {
      TEMPI_LOG(Warn, "MPI_Finalize: zero-copy work (a persistent collective's start, or a send whose receive is not "
                "posted) has not finished after 30 s");
      began = std::chrono::steady_clock::now();
    }
  }
}

void zero_copy_shutdown() {
  zero_copy_thread().stop();
  g_stopped = true;
  p2p_shutdown();
  mappings().clear();
  forget_all_blobs();
}

// ---- What zero-copy point-to-point uses (node_share.hpp) -----------------------------------

std::shared_ptr<NodeShare> node_share(MPI_Comm comm) { return share_of(comm); }

std::shared_ptr<NodeShare> p2p_share(MPI_Comm comm) {
  if (g_p2p_comms.load(std::memory_order_relaxed) == 0) return nullptr;
  const int keyval = share_keyval();
  if (keyval == MPI_KEYVAL_INVALID || comm == MPI_COMM_NULL) return nullptr;
  void *value = nullptr;
  int found = 0;
  if (PMPI_Comm_get_attr(comm, keyval, &value, &found) != MPI_SUCCESS || !found) return nullptr;
  const std::shared_ptr<NodeShare> &s = *static_cast<std::shared_ptr<NodeShare> *>(value);
  return s && s->p2p ? s : nullptr;
}

uint64_t p2p_generation() { return g_p2p_generation.load(std::memory_order_acquire); }

void set_p2p(NodeShare &s, bool on) {
  const bool changed = on != s.p2p;
  if (changed) g_p2p_comms += on ? 1 : -1;
  s.p2p = on;
  // After the switch: a decision made under the new generation sees it.
  if (changed) g_p2p_generation.fetch_add(1, std::memory_order_acq_rel);
  // A zero-copy send or receive keeps the share past MPI_Comm_free (MPI lets it complete), and
  // the last one may drop it on one rank alone: the window cannot be freed collectively then,
  // so it stays until MPI_Finalize, as for persistent collectives.
  if (on) s.had_persistent = true;
}
int my_node_rank(const NodeShare &s) { return s.node_rank; }
int node_rank_of(const NodeShare &s, int comm_rank) {
  return comm_rank >= 0 && size_t(comm_rank) < s.node_of.size() ? s.node_of[size_t(comm_rank)] : -1;
}
MPI_Comm node_comm(const NodeShare &s) { return s.node; }
int home_device(const NodeShare &s) { return s.home_device; }
int32_t pid_of(const NodeShare &s, int node_rank) { return s.segments[size_t(node_rank)]->pid; }
uint64_t nonce_of(const NodeShare &s, int node_rank) { return s.segments[size_t(node_rank)]->nonce; }
bool reads_gpu(const NodeShare &s, int reader, const std::string &device) {
  char id[kIdBytes];
  copy_id(id, device);
  return readable_by(*s.segments[size_t(reader)], id);
}
P2pEntry *board_of(NodeShare &s, int node_rank) { return s.segments[size_t(node_rank)]->board; }
bool expects_control(const NodeShare &s, int node_rank) {
  const size_t slot = node_rank >= 0 ? size_t(node_rank) : s.segments.size();
  return s.last_was_control[slot].load(std::memory_order_relaxed);
}
void saw_message(NodeShare &s, int node_rank, bool control) {
  if (node_rank >= 0) s.last_was_control[size_t(node_rank)].store(control, std::memory_order_relaxed);
  s.last_was_control[s.segments.size()].store(control, std::memory_order_relaxed);
}
std::atomic<uint32_t> &push_word(NodeShare &s, int node_rank) { return s.segments[size_t(node_rank)]->push_word; }
int64_t publish_plan(NodeShare &s, const Plan &plan, uint64_t id, int64_t count) { return s.publish(plan, id, count); }
const Plan *peer_plan(NodeShare &s, int peer, int64_t at) { return s.peer_plan(peer, at); }

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

PeerMapping &PeerMapping::operator=(PeerMapping &&other) noexcept {
  if (this != &other) {
    release();
    pid_ = other.pid_;
    buffer_id_ = other.buffer_id_;
    base_ = other.base_;
    other.base_ = nullptr;
  }
  return *this;
}
Status PeerMapping::map(int32_t pid, const IpcHandle &h) {
  release();
  void *base = nullptr;
  const Status st = mappings().get(pid, h, &base);
  if (st != Status::Ok) return st;
  pid_ = pid;
  buffer_id_ = h.buffer_id;
  base_ = base;
  return Status::Ok;
}
void PeerMapping::release() {
  if (base_) mappings().release(pid_, buffer_id_);
  base_ = nullptr;
}
std::string gpu_identity(int device) { return identity_of(device); }

}  // namespace tempi
