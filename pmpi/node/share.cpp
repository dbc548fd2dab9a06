// Setting up and finding a communicator's node share (node/share.hpp, node/node_share.hpp):
// made collectively at the communicator's first use by zero-copy, kept as its attribute and
// deleted with it; the per-rank accessors that point-to-point uses; and its end at
// MPI_Finalize.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "backend.hpp"
#include "config.hpp"
#include "log.hpp"
#include "node/peer_mapping.hpp"
#include "node/share.hpp"

namespace tempi {

namespace {

std::atomic<bool> g_stopped{false};  // MPI_Finalize began: shares free nothing collectively
// Communicators on which zero-copy point-to-point is on: while there are none (most programs),
// the receives and probes that ask p2p_share skip the attribute lookup.
std::atomic<int> g_p2p_comms{0};
std::atomic<uint64_t> g_p2p_generation{0};

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

// This node's ranks of `comm` (TEMPI_IPC_RANKS_PER_NODE: smaller "nodes", for tests), and
// the rank maps between the two communicators. False where the node cannot be made.
bool split_node(MPI_Comm comm, NodeShare &share) {
  MPI_Comm node = MPI_COMM_NULL;
  if (PMPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) != MPI_SUCCESS) return false;
  if (const int k = config().ipc_ranks_per_node; k > 0) {  // tests: smaller "nodes"
    int world = 0;
    PMPI_Comm_rank(MPI_COMM_WORLD, &world);
    MPI_Comm part = MPI_COMM_NULL;
    const int err = PMPI_Comm_split(node, world / k, 0, &part);
    PMPI_Comm_free(&node);
    if (err != MPI_SUCCESS) return false;
    node = part;
  }
  share.node = node;
  int n = 0, size = 0;
  PMPI_Comm_rank(node, &share.node_rank);
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
  share.comm_of = in_comm;
  share.node_of.assign(size_t(size), -1);
  for (int i = 0; i < n; ++i) share.node_of[size_t(in_comm[size_t(i)])] = i;
  return true;
}

// This rank's segment, written: its process, nonce and the GPUs its GPU reads (its own and
// its peers').
void write_segment(void *base, NodeShare &share) {
  Backend &b = gpu_backend();
  Segment *mine = new (base) Segment;
  mine->pid = int32_t(getpid());
  mine->nonce = random_nonce();
  share.home_device = OnDevice(0).previous();  // the current GPU: the one use_device replaces
  for (int d = 0; d < b.device_count() && mine->nreadable < kMaxReadable; ++d) {
    const std::string id = gpu_identity(d);
    if (id.empty()) continue;
    if (d == share.home_device || b.ipc_peer_access(id)) copy_id(mine->readable[mine->nreadable++], id);
  }
}

// Collective on `comm` (its first blocking exchange collective): whether every rank takes
// part (TEMPI on, TEMPI_IPC not off, a GPU), and then this node's shared window.
std::shared_ptr<NodeShare> make_share(MPI_Comm comm) {
  int everyone = config().ipc && gpu_backend().has_gpu() ? 1 : 0;
  if (PMPI_Allreduce(MPI_IN_PLACE, &everyone, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS || !everyone) return nullptr;
  auto share = std::make_shared<NodeShare>();
  if (!split_node(comm, *share)) return nullptr;
  void *base = nullptr;
  int windows = PMPI_Win_allocate_shared(MPI_Aint(sizeof(Segment)), 1, MPI_INFO_NULL, share->node, &base,
                                         &share->win) == MPI_SUCCESS;
  if (!windows) share->win = MPI_WIN_NULL;
  // Every node must have its window, or no rank takes part: the ranks of one call must all
  // run it as zero-copy or all not (a one-count call becomes a v-call only where they do).
  if (PMPI_Allreduce(MPI_IN_PLACE, &windows, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS || !windows) {
    TEMPI_LOG(Warn, "zero-copy: no shared memory window on a node of this communicator; it uses the pack path");
    if (share->win != MPI_WIN_NULL) PMPI_Win_free(&share->win);
    PMPI_Comm_free(&share->node);
    return nullptr;
  }
  const int n = int(share->comm_of.size());
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
  write_segment(base, *share);
  PMPI_Barrier(share->node);  // every segment is written before anyone reads one
  return share;
}

}  // namespace

NodeShare::~NodeShare() {
  if (p2p) {
    --g_p2p_comms;
    g_p2p_generation.fetch_add(1, std::memory_order_acq_rel);
  }
  release_plans();
  // After MPI_Finalize began the library frees its own objects; before, freeing is
  // collective on the node, as the communicator's free that runs this is.
  if (g_stopped.load() || had_persistent) return;
  if (win != MPI_WIN_NULL) PMPI_Win_free(&win);
  if (node != MPI_COMM_NULL) PMPI_Comm_free(&node);
}

int NodeShare::take_flags() {
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

void NodeShare::give_flags(int i) {
  std::lock_guard<std::mutex> lock(flags_mutex);
  if (i >= 0) flags_used[size_t(i)] = false;
}

std::shared_ptr<NodeShare> node_share(MPI_Comm comm) {
  const int keyval = share_keyval();
  if (keyval == MPI_KEYVAL_INVALID) return nullptr;
  void *value = nullptr;
  int found = 0;
  PMPI_Comm_get_attr(comm, keyval, &value, &found);
  if (found) return *static_cast<std::shared_ptr<NodeShare> *>(value);
  auto *kept = new std::shared_ptr<NodeShare>(make_share(comm));
  PMPI_Comm_set_attr(comm, keyval, kept);
  return *kept;
}

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

void node_finalizing() { g_stopped = true; }

void node_close() {
  unmap_all_peers();
  remove_all_plan_blobs();
}

}  // namespace tempi
