#include "base/peers.hpp"

#include <array>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <numeric>
#include <unordered_map>
#include <vector>

#include "backend.hpp"
#include "base/next.hpp"
#include "log.hpp"
#include "base/runtime.hpp"

namespace tempi {

namespace {

// ---- The world's placement (learned once, collectively) -------------------------------------

// By rank of MPI_COMM_WORLD, where that process runs relative to this one. Null until
// learned; never freed, since any thread may read it without a lock until the process ends.
std::atomic<const std::vector<PeerClass> *> g_world{nullptr};
std::atomic<bool> g_world_tried{false};

// What each rank of a node tells the others. A PCI bus id has 12 characters.
struct Placement {
  int world_rank;
  char gpu[64];
};

// Collective on MPI_COMM_WORLD: the ranks of this node (MPI_COMM_TYPE_SHARED, as the MPI
// library defines a node) tell each other their rank and GPU; every other rank is on
// another node. A failure leaves every peer Unknown (said once).
void learn_world() {
  int rank = 0, size = 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &size);
  Placement mine{};
  mine.world_rank = rank;
  std::snprintf(mine.gpu, sizeof mine.gpu, "%s", gpu_backend().device_id().c_str());
  MPI_Comm node = MPI_COMM_NULL;
  int err = next::MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  std::vector<Placement> all;
  if (err == MPI_SUCCESS) {
    int n = 0;
    PMPI_Comm_size(node, &n);
    all.resize(size_t(n));
    err = next::MPI_Allgather(&mine, int(sizeof mine), MPI_BYTE, all.data(), int(sizeof mine), MPI_BYTE, node);
    next::MPI_Comm_free(&node);
  }
  if (err != MPI_SUCCESS) {
    TEMPI_LOG(Warn, "peers: cannot learn which ranks share this node (MPI error %d); every message is predicted "
              "for the placement its profile was measured in", err);
    return;
  }
  auto *world = new std::vector<PeerClass>(size_t(size), PeerClass::OtherNode);
  int same_gpu = 0;
  for (const Placement &p : all) {
    if (p.world_rank < 0 || p.world_rank >= size) continue;
    const PeerClass c = p.world_rank == rank
                            ? PeerClass::Self
                            : classify_peer(true, mine.gpu, std::string(p.gpu, strnlen(p.gpu, sizeof p.gpu)));
    (*world)[size_t(p.world_rank)] = c;
    same_gpu += c == PeerClass::SameGpu || (c == PeerClass::Self && *mine.gpu);
  }
  g_world.store(world, std::memory_order_release);
  TEMPI_LOG(Debug, "peers: %zu of %d ranks on this node, %d of them on this GPU (%s)", all.size(), size, same_gpu,
            *mine.gpu ? mine.gpu : "none");
}

// ---- Each communicator's map (local, at its first use) --------------------------------------

// By rank of a communicator (of its remote group on an intercommunicator), the class.
struct CommPeers {
  std::vector<PeerClass> by_rank;
};

// The maps of the communicators in use, by handle: one is kept per communicator (nullptr
// while a thread makes it; a thread that misses meanwhile makes one for its own answer)
// and dropped by the delete callback of TEMPI's attribute on its communicator, which also
// moves the generation on, so that every thread's cache forgets the handle (the MPI
// library may give it to the next communicator it creates). The callback runs inside the
// library, which may hold its own lock meanwhile: no MPI call is made with `mutex` held.
struct Registry {
  std::mutex mutex;
  std::unordered_map<uint64_t, std::unique_ptr<CommPeers>> maps;
};
Registry &registry() {
  static Registry *r = new Registry;  // immortal: MPI_Finalize deletes MPI_COMM_WORLD's attributes last
  return *r;
}
std::atomic<uint64_t> g_generation{1};

// A handle as a number: an int in MPICH, a pointer in Open MPI.
uint64_t key_of(MPI_Comm comm) {
  static_assert(sizeof(MPI_Comm) <= sizeof(uint64_t), "MPI_Comm fits in 64 bits");
  uint64_t key = 0;
  std::memcpy(&key, &comm, sizeof comm);
  return key;
}

int drop_map(MPI_Comm comm, int, void *, void *) {
  std::unique_ptr<CommPeers> gone;
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.maps.find(key_of(comm));
  if (it != r.maps.end()) {
    gone = std::move(it->second);
    r.maps.erase(it);
  }
  g_generation.fetch_add(1, std::memory_order_acq_rel);
  return MPI_SUCCESS;
}

int map_keyval() {
  static const int keyval = [] {
    int k = MPI_KEYVAL_INVALID;
    PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, drop_map, &k, nullptr);
    return k;
  }();
  return keyval;
}

// Local calls only: the communicator's ranks as ranks of MPI_COMM_WORLD.
std::unique_ptr<CommPeers> build_map(MPI_Comm comm, const std::vector<PeerClass> &world) {
  int inter = 0;
  MPI_Group group = MPI_GROUP_NULL, world_group = MPI_GROUP_NULL;
  if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS ||
      (inter ? PMPI_Comm_remote_group(comm, &group) : PMPI_Comm_group(comm, &group)) != MPI_SUCCESS)
    return nullptr;
  int n = 0, err = PMPI_Comm_group(MPI_COMM_WORLD, &world_group);
  std::vector<int> ranks, in_world;
  if (err == MPI_SUCCESS) err = PMPI_Group_size(group, &n);
  if (err == MPI_SUCCESS) {
    ranks.resize(size_t(n));
    in_world.resize(size_t(n));
    std::iota(ranks.begin(), ranks.end(), 0);
    err = PMPI_Group_translate_ranks(group, n, ranks.data(), world_group, in_world.data());
  }
  PMPI_Group_free(&group);
  if (world_group != MPI_GROUP_NULL) PMPI_Group_free(&world_group);
  if (err != MPI_SUCCESS) return nullptr;
  auto map = std::make_unique<CommPeers>();
  map->by_rank.assign(size_t(n), PeerClass::Unknown);
  for (size_t i = 0; i < size_t(n); ++i)  // MPI_UNDEFINED: a process outside MPI_COMM_WORLD
    if (in_world[i] >= 0 && size_t(in_world[i]) < world.size()) map->by_rank[i] = world[size_t(in_world[i])];
  return map;
}

// A per-thread direct-mapped cache of communicators' maps: a hit is a few loads, no lock.
struct CachedMap {
  uint64_t key = 0;
  uint64_t generation = 0;  // never a current one: g_generation starts at 1
  const CommPeers *map = nullptr;
};
constexpr size_t kCachedMaps = 8;
thread_local std::array<CachedMap, kCachedMaps> t_maps;

size_t slot(uint64_t key) { return size_t((key * 0x9E3779B97F4A7C15ull) >> 32) % kCachedMaps; }

PeerClass class_in(const CommPeers *map, int peer) {
  return map && size_t(peer) < map->by_rank.size() ? map->by_rank[size_t(peer)] : PeerClass::Unknown;
}

// The miss: the class from the registry's map of `comm`, made and kept now if nobody
// made it. Unknown while the world's placement is not known (nothing is kept then).
PeerClass class_on_miss(MPI_Comm comm, uint64_t key, uint64_t generation, int peer) {
  const std::vector<PeerClass> *world = g_world.load(std::memory_order_acquire);
  if (!world) return PeerClass::Unknown;
  Registry &r = registry();
  bool maker = false;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    auto made = r.maps.try_emplace(key);
    if (const CommPeers *kept = made.first->second.get()) {
      t_maps[slot(key)] = {key, generation, kept};
      return class_in(kept, peer);
    }
    maker = made.second;
  }
  std::unique_ptr<CommPeers> map = build_map(comm, *world);
  if (!maker) return class_in(map.get(), peer);  // another thread is making the one kept
  // The attribute, set once per communicator, only to hear of its free.
  const bool kept = map && map_keyval() != MPI_KEYVAL_INVALID &&
                    PMPI_Comm_set_attr(comm, map_keyval(), nullptr) == MPI_SUCCESS;
  std::lock_guard<std::mutex> lock(r.mutex);
  if (!kept) {
    r.maps.erase(key);
    return class_in(map.get(), peer);
  }
  const CommPeers *p = map.get();
  r.maps[key] = std::move(map);
  t_maps[slot(key)] = {key, generation, p};
  return class_in(p, peer);
}

}  // namespace

void learn_peers_at_collective(MPI_Comm comm) {
  if (comm != MPI_COMM_WORLD || g_world_tried.load(std::memory_order_acquire) || !active()) return;
  // One thread: MPI forbids two threads in collectives on one communicator at once.
  static std::once_flag once;
  std::call_once(once, [] {
    learn_world();
    g_world_tried.store(true, std::memory_order_release);
  });
}

uint64_t peers_generation() { return g_generation.load(std::memory_order_acquire); }
void comm_freed() { g_generation.fetch_add(1, std::memory_order_acq_rel); }

PeerClass peer_class(MPI_Comm comm, int peer) {
  if (peer < 0 || peer == MPI_ANY_SOURCE || peer == MPI_PROC_NULL) return PeerClass::Unknown;
  const uint64_t key = key_of(comm);
  // Read before the map: a communicator freed after this read leaves its entry stale.
  const uint64_t generation = g_generation.load(std::memory_order_acquire);
  const CachedMap &e = t_maps[slot(key)];
  if (e.key == key && e.generation == generation) return class_in(e.map, peer);
  return class_on_miss(comm, key, generation, peer);
}

}  // namespace tempi
