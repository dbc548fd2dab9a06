// Which way packed GPU data moves in a point-to-point call (docs/design.md,
// "Point-to-point"; docs/model.md, "The model"). choose_transfer() is the single decision point: with
// a measured profile (profile.hpp) it predicts each method's time and takes the fastest;
// without one it applies built-in rules measured on two H200s.
#pragma once

#include <cstdint>
#include <optional>

#include "config.hpp"
#include "plan.hpp"
#include "profile.hpp"

namespace tempi {

struct Transfer {
  Method method;  // never Auto
  int64_t chunk;  // bytes per pipeline chunk; >= the message size when not pipelined
};

// What the model needs to know of one message.
struct TransferQuery {
  int64_t bytes = 0;        // packed bytes
  int64_t block = 0;        // mean contiguous block (bytes)
  int word = 1;             // the access width the kernels can use (1-16 bytes)
  bool contiguous = false;  // one run: packing is a copy, or nothing on a CUDA-aware library
  // One of many messages in flight (a nonblocking call): its GPU work is issued and
  // waited for with the others', so it shares the synchronization.
  bool batched = false;
  PeerClass peer = PeerClass::Unknown;
};

// The query for `plan` (already for the call's count), assuming aligned buffers.
TransferQuery describe_message(const Plan &plan, bool batched, PeerClass peer = PeerClass::Unknown);

// A method's predicted time for one message, sender, wire and receiver together, and
// the pipeline chunk it assumes. Empty when the profile cannot predict the method
// (device without a device-buffer measurement).
struct Prediction {
  double seconds = 0;
  int64_t chunk = 0;
};
std::optional<Prediction> predict(const Profile &p, Method m, const TransferQuery &q, const Config &cfg);

// One side of the staged method (`pack`: the sender's kernel and copies to the host; else
// the receiver's copies to the device and kernel) in chunks of `chunk` bytes: one launch
// and one wait (none in a batch), chunk k+1's kernel beside chunk k's copy, and
// p.staged_chunk per chunk. tempi-measure fits staged_chunk against it.
double staged_side(const Profile &p, bool pack, const TransferQuery &q, int64_t chunk);

// `requested` is TEMPI_METHOD or its runtime override; Auto is decided from `profile`
// (the fastest prediction), or by the built-in rules when `profile` is null. Device
// needs a CUDA-aware MPI; requested without one, the staged method is used (the caller
// says so once). A pure function, for tests and tools.
Transfer choose_transfer(Method requested, bool cuda_aware, const TransferQuery &q, const Config &cfg,
                         const Profile *profile);

// The same with the process's profile (active_profile()); model decisions are cached
// per thread, so a repeated message costs a lookup.
Transfer choose_transfer(Method requested, bool cuda_aware, const TransferQuery &q, const Config &cfg);

// For a message that gathers several objects (a collective's blocks), whose block
// shape is not one: modeled as rows of kAssumedBlock bytes (contiguous: one run).
constexpr int64_t kAssumedBlock = 64;
Transfer choose_transfer(Method requested, bool cuda_aware, int64_t bytes, bool contiguous, const Config &cfg,
                         bool batched = false);

const char *to_string(Method m);

}  // namespace tempi
