// The plan arena of a node share (node/share.hpp): each rank publishes the plans of the
// blocks its peers read once per (plan, count) and names them by arena offset afterwards;
// a peer reads each such plan once and keeps it (FALCON-X's memoization; docs/design.md,
// "Zero-copy between GPUs of one node"). Plans too large for the arena live in shared-memory
// blocks of their own (core/shared_blob.hpp), removed when their share goes or at
// MPI_Finalize. Thread-safe (NodeShare::plans_mutex).
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "log.hpp"
#include "node/share.hpp"
#include "shared_blob.hpp"
#include "type_plan.hpp"

namespace tempi {

namespace {

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

// memcpy of n bytes that may be 0, where an empty vector's data() may be null (memcpy's
// pointers must never be null, whatever n).
void copy_bytes(void *dst, const void *src, size_t n) {
  if (n > 0) std::memcpy(dst, src, n);
}

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

}  // namespace

void remove_all_plan_blobs() {
  std::lock_guard<std::mutex> lock(g_blobs_mutex);
  for (const std::string &name : g_blobs) remove_shared_blob(name);
  g_blobs.clear();
}

void NodeShare::release_plans() {
  for (const std::string &name : blobs) forget_blob(name);
  for (auto &p : peer_plans) gpu_backend().release_plan(p.second.id);
}

int64_t NodeShare::publish(const Plan &plan, uint64_t id, int64_t count) {
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

const Plan *NodeShare::peer_plan(int peer, int64_t at) {
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

int64_t publish_plan(NodeShare &s, const Plan &plan, uint64_t id, int64_t count) { return s.publish(plan, id, count); }

const Plan *peer_plan(NodeShare &s, int peer, int64_t at) { return s.peer_plan(peer, at); }

}  // namespace tempi
