#include "base/stats.hpp"

#include <array>
#include <atomic>
#include <cstring>

#include "log.hpp"

namespace tempi {

namespace {

// The table: every counter's name, declared once (docs/using.md, "Counters", says what each counts).
constexpr const char *kTable[] = {
    "gpu.synchronizations",
    "gpu.tables_placed",
    "gpu.tables_reused",
    "p2p.decisions_made",
    "p2p.decisions_recalled",
    "p2p.zero_copy_sends",
    "p2p.zero_copy_reads",
    "p2p.zero_copy_pushed",
    "p2p.probed_controls",
    "p2p.staged_for_control",
    "zero_copy.peer_blocks",
    "zero_copy.self_blocks",
    "zero_copy.mappings",
    "zero_copy.kept_pairs",
    "zero_copy.prepared_calls",
    "zero_copy.library_skipped",
    "phase.isend_ns",
    "phase.isend_calls",
    "phase.irecv_ns",
    "phase.irecv_calls",
    "phase.decide_ns",
    "phase.decide_calls",
    "phase.pointer_query_ns",
    "phase.pointer_query_calls",
    "phase.staging_ns",
    "phase.staging_calls",
    "phase.request_ns",
    "phase.request_calls",
    "phase.completion_ns",
    "phase.completion_calls",
    "phase.pack_launch_ns",
    "phase.pack_launch_calls",
    "phase.pack_wait_ns",
    "phase.pack_wait_calls",
    "phase.post_ns",
    "phase.post_calls",
    "phase.library_wait_ns",
    "phase.library_wait_calls",
    "phase.unpack_ns",
    "phase.unpack_calls",
    "phase.finish_sends_ns",
    "phase.finish_sends_calls",
    "phase.start_ns",
    "phase.start_calls",
    "phase.zero_copy_begin_ns",
    "phase.zero_copy_begin_calls",
    "phase.default_stream_ns",
    "phase.default_stream_calls",
    "phase.library_start_ns",
    "phase.library_start_calls",
    "phase.zero_copy_gate_ns",
    "phase.zero_copy_gate_calls",
    "phase.describe_ns",
    "phase.describe_calls",
    "phase.launch_ns",
    "phase.launch_calls",
    "phase.fence_ns",
    "phase.fence_calls",
    "phase.gpu_wait_ns",
    "phase.gpu_wait_calls",
};
constexpr int kCount = int(sizeof(kTable) / sizeof(kTable[0]));

std::array<std::atomic<uint64_t (*)()>, kCount> &readers() {
  static std::array<std::atomic<uint64_t (*)()>, kCount> r{};
  return r;
}

int index_of(const char *name) {
  for (int i = 0; i < kCount; ++i)
    if (name && std::strcmp(kTable[i], name) == 0) return i;
  return -1;
}

}  // namespace

void register_counters(const CounterReader *list, int n) {
  for (int k = 0; k < n; ++k) {
    const int i = index_of(list[k].name);
    if (i < 0) {
      TEMPI_LOG(Warn, "counter %s is not in the stats table (base/stats.cpp): not readable", list[k].name);
      continue;
    }
    readers()[size_t(i)].store(list[k].read, std::memory_order_release);
  }
}

bool read_counter(const char *name, uint64_t &value) {
  const int i = index_of(name);
  if (i < 0) return false;
  uint64_t (*read)() = readers()[size_t(i)].load(std::memory_order_acquire);
  value = read ? read() : 0;
  return true;
}

std::string nonzero_counters() {
  std::string out;
  for (int i = 0; i < kCount; ++i) {
    uint64_t v = 0;
    if (!read_counter(kTable[i], v) || v == 0) continue;
    out += (out.empty() ? "" : " ") + std::string(kTable[i]) + "=" + std::to_string(v);
  }
  return out;
}

}  // namespace tempi
