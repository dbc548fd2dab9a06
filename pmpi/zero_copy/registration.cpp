#include "zero_copy/registration.hpp"

#include "base/progress.hpp"
#include "base/stats.hpp"
#include "zero_copy/zero_copy.hpp"
#include "zero_copy/zero_copy_p2p.hpp"

namespace tempi {

namespace {

// Persistent zero-copy collectives' starts complete through their poll (which polls
// zero-copy messages too); at shutdown the zero-copy thread stops, the node shares are
// marked finalizing before the pushers drop theirs, and mapped peer allocations close
// (zero_copy_shutdown, in that order).
const ProgressHooks &collective_hooks() {
  static const ProgressHooks hooks = [] {
    ProgressHooks h;
    h.name = "zero-copy collectives";
    h.poll = zero_copy_progress;
    h.in_flight = zero_copy_in_flight;
    h.shutdown = zero_copy_shutdown;
    return h;
  }();
  return hooks;
}

// Zero-copy messages: control messages queued to be posted together, flights in flight
// (completed by the collectives' poll above), and errors of requests TEMPI completes itself.
const ProgressHooks &p2p_hooks() {
  static const ProgressHooks hooks = [] {
    ProgressHooks h;
    h.name = "zero-copy point-to-point";
    h.queued = p2p_queued;
    h.flush = p2p_post_queued;
    h.in_flight = p2p_in_flight;
    h.failures_pending = p2p_failures_pending;
    h.clear_failed = p2p_clear_failed;
    h.failed = p2p_failed;
    return h;
  }();
  return hooks;
}

constexpr CounterReader kCounters[] = {
    {"p2p.zero_copy_sends", [] { return p2p_counts().sends; }},
    {"p2p.zero_copy_reads", [] { return p2p_counts().reads; }},
    {"p2p.zero_copy_pushed", [] { return p2p_counts().pushed; }},
    {"p2p.probed_controls", [] { return p2p_counts().probed_controls; }},
    {"p2p.staged_for_control", [] { return p2p_counts().staged_for_control; }},
    {"zero_copy.peer_blocks", [] { return zero_copy_counts().peer_blocks; }},
    {"zero_copy.self_blocks", [] { return zero_copy_counts().self_blocks; }},
    {"zero_copy.mappings", [] { return zero_copy_counts().mappings; }},
    {"zero_copy.kept_pairs", [] { return zero_copy_counts().kept_pairs; }},
    {"zero_copy.prepared_calls", [] { return zero_copy_counts().prepared_calls; }},
    {"zero_copy.library_skipped", [] { return zero_copy_counts().library_skipped; }},
};

}  // namespace

void register_zero_copy() {
  static const bool registered = [] {
    register_progress(ProgressSlot::ZeroCopyCollectives, collective_hooks());
    register_progress(ProgressSlot::ZeroCopyP2p, p2p_hooks());
    register_counters(kCounters, int(sizeof(kCounters) / sizeof(kCounters[0])));
    static const ControlReceipt receipt{p2p_stage_for_control, p2p_take_controls};
    register_control_receipt(receipt);
    return true;
  }();
  (void)registered;
}

}  // namespace tempi
