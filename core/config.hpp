// Every environment variable TEMPI reads, declared once (name, default, meaning) in
// kKnobs and read once into Config. docs/environment.md lists the same table; a
// test keeps the two in step.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace tempi {

struct Knob {
  const char *name;
  const char *default_value;
  const char *meaning;
};

const std::vector<Knob> &knobs();

enum class LogLevel { Error = 0, Warn = 1, Info = 2, Debug = 3 };

// How packed GPU data moves in point-to-point calls.
enum class Method { Auto, Device, OneShot, Staged };

struct Config {
  bool disabled = false;
  LogLevel log_level = LogLevel::Warn;
  std::optional<bool> cuda_aware;  // empty: detect
  Method method = Method::Auto;
  int64_t pipeline_chunk = 0;      // bytes per pipelined chunk
  int64_t pipeline_threshold = 0;  // messages at least this large are pipelined
  bool eager_sends = false;        // nonblocking GPU sends pack and post before returning
  // MPI_Pack/MPI_Unpack between device buffers: 0 wait for the GPU, 1 return once the
  // kernel is launched, 2 return at once (launched, fused, at the next MPI call).
  int defer_pack = 0;
  // How TEMPI waits for its own GPU work: true, by polling a word of pinned host memory
  // that the stream writes after the work (TEMPI_WAIT=poll, where the GPU can); false,
  // cudaStreamSynchronize (TEMPI_WAIT=sync).
  bool wait_by_polling = true;
  // Blocking collectives on a CUDA-aware library: hand it packed GPU bytes (true) or stage
  // every GPU buffer through pinned host memory (false, the default: Open MPI 4.1's
  // collectives crash and hang on device buffers).
  bool coll_device = false;
  // Zero-copy between GPUs of one node in blocking collectives (TEMPI_IPC=auto|off).
  bool ipc = true;
  int ipc_ranks_per_node = 0;  // > 0: nodes of this many consecutive world ranks (tests)
  // Zero-copy point-to-point (where enabled on a communicator): nonblocking GPU sends of at
  // least this many packed bytes.
  int64_t p2p_zero_copy_min = 0;
  // TEMPI_PHASE_TIMES=1: time TEMPI's phases (base/phases.hpp) into counters.
  bool phase_times = false;
  std::string profile;  // TEMPI_PROFILE: a profile file, "none", or empty (the per-user cache)
};

// Parses `lookup(name)` (nullptr when unset) for each knob. Invalid values log a
// warning and keep the default.
Config parse_config(const std::function<const char *(const char *)> &lookup);

// The process-wide configuration, read from the environment on first use.
const Config &config();

}  // namespace tempi
