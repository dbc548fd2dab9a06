// Reading the messages of zero-copy point-to-point (zero_copy/p2p_reads.hpp says the
// contract): the heads of received messages, the reads of control messages issued per GPU,
// pushes finished, and p2p_take_controls (zero_copy_p2p.hpp) for a batch that completed
// together.
#include "zero_copy/p2p_reads.hpp"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>

#include "base/errors.hpp"
#include "backend.hpp"
#include "config.hpp"
#include "log.hpp"
#include "zero_copy/moves.hpp"

namespace tempi {
namespace zcp2p {

namespace {

// Whether control bytes `c` from node rank `sender` on (`status`'s tag) name a live entry of
// that sender's board for this rank.
bool is_control(NodeShare &s, int sender, const Control &c, const MPI_Status &status) {
  if (c.magic != kMagic || c.sender != sender || c.nonce != nonce_of(s, sender) || c.entry >= uint32_t(kP2pEntries))
    return false;
  const P2pEntry &e = board_of(s, sender)[c.entry];
  return e.state.load(std::memory_order_acquire) == 1 && e.serial == c.serial && e.dest == my_node_rank(s) &&
         e.tag == status.MPI_TAG && e.bytes == c.bytes;
}

// The bytes that arrived for a zero-copy receive of `batch` that completed whole (no error,
// not cancelled, not handled yet), else -1.
int64_t arrived_bytes(const Finishing &f) {
  if (!f.in->p2p || f.in->finished || f.err != MPI_SUCCESS) return -1;
  int cancelled = 0;
  PMPI_Test_cancelled(&f.status, &cancelled);
  if (cancelled) return -1;
  MPI_Count received = 0;
  PMPI_Get_elements_x(&f.status, MPI_BYTE, &received);
  return int64_t(received);
}

// The first kControlBytes of each receive in `batch` that may hold a control message (a
// zero-copy receive, completed, not cancelled, of exactly that size from a rank of the
// node), by batch index; the others' heads are not read. Heads in device staging (a
// CUDA-aware library's) come back with one wait per GPU.
std::vector<Control> read_heads(std::vector<Finishing> &batch, std::vector<bool> &has_head) {
  Backend &b = gpu_backend();
  std::vector<Control> heads(batch.size());
  has_head.assign(batch.size(), false);
  std::vector<std::pair<int, size_t>> on_device;  // (GPU, batch index)
  for (size_t i = 0; i < batch.size(); ++i) {
    Finishing &f = batch[i];
    Incoming &in = *f.in;
    if (arrived_bytes(f) != kControlBytes || node_rank_of(*in.p2p, f.status.MPI_SOURCE) < 0) continue;
    if (in.transfer.method == Method::Device) {
      on_device.emplace_back(b.device_of(in.user), i);
    } else {
      std::memcpy(&heads[i], in.staging.ptr, sizeof(Control));
      has_head[i] = true;
    }
  }
  if (on_device.empty()) return heads;
  std::sort(on_device.begin(), on_device.end());
  Scratch pinned;  // where the copies land; the heads vector itself where none can be had
  const bool have_pinned = b.acquire(ScratchKind::Pinned, on_device.size() * sizeof(Control), pinned) == Status::Ok;
  Control *landing = have_pinned ? static_cast<Control *>(pinned.ptr) : nullptr;
  for (size_t k = 0; k < on_device.size();) {
    const int device = on_device[k].first;
    std::vector<Backend::CopyJob> jobs;
    size_t end = k;
    for (; end < on_device.size() && on_device[end].first == device; ++end) {
      const size_t i = on_device[end].second;
      jobs.push_back({landing ? &landing[end] : &heads[i], batch[i].in->staging.ptr, sizeof(Control)});
    }
    Status st;
    {
      const OnDevice on_it(device);
      st = b.copy_all(jobs);
    }
    for (; k < end; ++k) {
      const size_t i = on_device[k].second;
      if (st == Status::Ok) {
        if (landing) heads[i] = landing[k];
        has_head[i] = true;
        continue;
      }
      // Unread, it could be a control message: never unpacked as data.
      batch[i].in->finished = true;
      batch[i].result = raise_error(batch[i].in->comm, error_class_of(st),
                                    "reading a received message's head from device staging failed: %s", to_string(st));
    }
  }
  return heads;
}

}  // namespace

// Recognizes the control messages among receives that completed together, checks their
// sizes, and issues their reads (one launch per GPU). Marks every receive it handled
// finished; data beyond a receive's capacity is a truncation.
std::vector<Reads> issue_reads(std::vector<Finishing> &batch) {
  std::vector<Reads> gpus;
  Backend &b = gpu_backend();
  std::vector<bool> has_head;
  const std::vector<Control> heads = read_heads(batch, has_head);
  for (size_t i = 0; i < batch.size(); ++i) {
    Finishing &f = batch[i];
    Incoming &in = *f.in;
    const int64_t received = arrived_bytes(f);
    if (received < 0) continue;
    NodeShare &s = *in.p2p;
    const int sender = node_rank_of(s, f.status.MPI_SOURCE);
    const Control &c = heads[i];
    const bool control = has_head[i] && is_control(s, sender, c, f.status);
    const int64_t bytes = control ? c.bytes : received;
    if (control || bytes >= config().p2p_zero_copy_min) saw_message(s, sender, control);
    if (bytes > in.capacity) {  // a sender of a control message completes; the receive reports it
      in.finished = true;
      if (control) board_of(s, sender)[c.entry].state.store(2, std::memory_order_release);
      f.result = raise_error(in.comm, MPI_ERR_TRUNCATE, "a message of %lld bytes arrived for a receive of %lld",
                             static_cast<long long>(bytes), static_cast<long long>(in.capacity));
      PMPI_Status_set_elements_x(&f.status, MPI_BYTE, in.capacity);
      continue;
    }
    if (!control) continue;  // data: the usual unpack
    in.finished = true;
    P2pEntry &e = board_of(s, sender)[c.entry];
    const int device = b.device_of(in.user);
    // This rank's own buffer is read where it is; a peer's through its (cached) mapping.
    char *base = reinterpret_cast<char *>(uintptr_t(e.handle.base));
    PeerMapping mapped;
    Status st = Status::Ok;
    Landing *landing = nullptr;
    // The sender's plan (null where its shared-memory block cannot be read: peer_plan says
    // why, and the sender pushes the message as for a buffer that cannot be mapped).
    const Plan *plan = peer_plan(s, sender, e.plan_at);
    if (sender != my_node_rank(s)) {
      {
        const OnDevice on_it(device);
        st = plan ? mapped.map(pid_of(s, sender), e.handle) : Status::Unsupported;
        if (st == Status::Ok) base = mapped.base();
        // Refused (first time: GpuError; remembered: Unsupported): the sender pushes instead.
        if (st != Status::Ok) landing = take_landing(device, c.bytes);
      }
      if (st == Status::GpuError)
        TEMPI_LOG(Info, "comm rank %d's GPU buffer cannot be mapped here (CUDA IPC refused it; the MPI library may map "
                        "it already): its zero-copy messages to this rank are pushed by the sender from now on",
                  f.status.MPI_SOURCE);
    }
    if (st != Status::Ok && !landing) {
      e.state.store(2, std::memory_order_release);
      f.result = raise_error(in.comm, MPI_ERR_NO_MEM, "zero-copy: no landing buffer for a node peer's message whose "
                             "GPU buffer cannot be mapped here");
      continue;
    }
    PMPI_Status_set_elements_x(&f.status, MPI_BYTE, c.bytes);
    if (landing) {
      e.landing = landing->handle;
      e.state.store(kRefused, std::memory_order_release);
      std::atomic<uint32_t> &word = push_word(s, sender);
      word.fetch_add(1, std::memory_order_acq_rel);
      futex_wake(word);
      Reads push;
      push.device = device;
      push.landing = landing;
      push.reads.push_back({&f, nullptr, nullptr, c.bytes, &e, &in});
      gpus.push_back(std::move(push));
      continue;
    }
    auto g = std::find_if(gpus.begin(), gpus.end(), [&](const Reads &o) { return o.device == device && !o.landing; });
    if (g == gpus.end()) {
      g = gpus.insert(gpus.end(), Reads{});
      g->device = device;
    }
    g->reads.push_back({&f, plan, base + e.offset, c.bytes, &e, &in});
    if (mapped.base()) g->mapped.push_back(std::move(mapped));
  }
  for (Reads &g : gpus) {
    if (g.landing) continue;
    const OnDevice on_it(g.device);
    for (const Reads::Read &r : g.reads) g.jobs.push_back({r.from, r.from_typed, &r.in->plan, r.in->user, r.bytes});
    lend_scratch(g.jobs, g.scratch);
    g.status = move_pairs(g.jobs, g.fence);
  }
  return gpus;
}

namespace {

// reads_done for a push: whether the sender packed the message into the landing buffer
// (wait: until it has; its pusher thread needs no MPI call of the sender's); then releases
// the sender and unpacks into the receive buffer.
bool push_done(Reads &g, bool wait, int &err) {
  const Reads::Read &r = g.reads.front();
  auto pending = [&] {
    const uint32_t st = r.entry->state.load(std::memory_order_acquire);
    return st == kRefused || st == kPushing;
  };
  for (auto began = std::chrono::steady_clock::now(); pending();) {
    if (!wait) return false;
    sched_yield();
    if (std::chrono::steady_clock::now() - began > std::chrono::seconds(30)) {
      TEMPI_LOG(Warn, "still waiting for a node peer to push a zero-copy message after 30 s");
      began = std::chrono::steady_clock::now();
    }
  }
  const bool pushed = r.entry->state.load(std::memory_order_acquire) == kPushed;
  r.entry->state.store(2, std::memory_order_release);  // the sender's buffer is free
  Backend &b = gpu_backend();
  Status st = Status::GpuError;
  if (pushed) {
    const OnDevice on_it(g.device);
    st = b.unpack_accessible(r.in->plan, g.landing->ptr, r.in->user, 0, r.bytes);
  }
  give_landing(g.landing);
  g.landing = nullptr;
  if (!pushed)
    err = raise_error(r.in->comm, MPI_ERR_OTHER, "zero-copy: the sender could not pack its message for this rank");
  else if (st != Status::Ok)
    err = raise_error(r.in->comm, error_class_of(st), "zero-copy: unpacking a pushed message failed: %s",
                      to_string(st));
  else
    g_pushed.fetch_add(1, std::memory_order_relaxed);
  return true;
}

}  // namespace

bool reads_done(Reads &g, bool wait, int &err) {
  Backend &b = gpu_backend();
  err = MPI_SUCCESS;
  if (g.landing) return push_done(g, wait, err);
  if (g.status == Status::Ok) {
    const OnDevice on_it(g.device);
    bool finished = false;  // then nothing to wait for (failed included: g.status says so)
    if (!wait) g.status = b.poll(g.fence, finished);
    if (!wait && !finished) return false;
    if (!finished) g.status = b.wait(g.fence);
  }
  g.mapped.clear();  // the GPU is done with the senders' buffers
  for (const Reads::Read &r : g.reads) r.entry->state.store(2, std::memory_order_release);  // the sender's buffer is free
  if (g.status != Status::Ok)
    err = raise_error(g.reads.front().in->comm, error_class_of(g.status),
                      "reading a node peer's GPU buffer (zero-copy) failed: %s", to_string(g.status));
  else
    g_reads.fetch_add(g.reads.size(), std::memory_order_relaxed);
  return true;
}

}  // namespace zcp2p

using namespace zcp2p;

void p2p_take_controls(std::vector<Finishing> &batch) {
  std::vector<Reads> gpus = issue_reads(batch);
  for (Reads &g : gpus) {
    int err = MPI_SUCCESS;
    reads_done(g, true, err);
    if (err != MPI_SUCCESS)
      for (const Reads::Read &r : g.reads)
        if (r.f->result == MPI_SUCCESS) r.f->result = err;
  }
}

}  // namespace tempi
