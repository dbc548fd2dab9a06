#include "config.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <strings.h>

namespace tempi {

const std::vector<Knob> &knobs() {
  static const std::vector<Knob> table = {
      {"TEMPI_DISABLE", "unset",
       "When set (to anything but 0), every call passes straight to the MPI library: TEMPI plans nothing."},
      {"TEMPI_LOG_LEVEL", "warn", "How much TEMPI prints to stderr: error, warn, info or debug."},
      {"TEMPI_CUDA_AWARE", "auto",
       "Whether the MPI library accepts GPU pointers: yes, no, or auto (ask MPIX_Query_cuda_support / "
       "MPIX_GPU_query_support where the library has them, else assume no)."},
      {"TEMPI_METHOD", "auto",
       "How packed GPU data moves in point-to-point calls: auto, device (needs a CUDA-aware MPI), oneshot or "
       "staged. auto chooses by size and CUDA awareness (docs/using.md)."},
      {"TEMPI_PIPELINE_CHUNK", "4194304", "Bytes per chunk when a large message is packed or unpacked in a pipeline."},
      {"TEMPI_PIPELINE_THRESHOLD", "8388608", "Messages of at least this many packed bytes are pipelined."},
      {"TEMPI_EAGER_SENDS", "0",
       "1: a nonblocking send of GPU data packs and posts its message before it returns (one GPU "
       "synchronization per send). 0: the pack is queued, packs are issued in batches, and each message is "
       "posted by TEMPI's progress in later MPI calls (docs/using.md, \"Many messages in flight\")."},
      {"TEMPI_DEFER_PACK", "0",
       "Opt-in. 1: MPI_Pack and MPI_Unpack between two device buffers return as soon as their kernel is "
       "launched; the result is complete for every later MPI call, for work on the legacy default stream and "
       "after any device or legacy-stream synchronization, but not for the application's own non-blocking "
       "streams. 2: as 1 for MPI_Unpack; MPI_Pack returns at once and consecutive packs are launched together, "
       "as one fused kernel, by the thread's next MPI call that is not MPI_Pack; the packed output is complete "
       "only for later MPI calls of that thread. 3: as 2, and consecutive MPI_Unpack calls run in one kernel "
       "that is already running when the second is called; each call of such a run may run before GPU work the "
       "application queued after the run's first call "
       "(docs/using.md, \"Sequences of MPI_Pack and MPI_Unpack\"). 0: each call waits for its kernel."},
      {"TEMPI_WAIT", "poll",
       "How a call waits for the GPU work it issued: poll (the stream writes a word of pinned host memory after "
       "the work, with cuStreamWriteValue32, and the calling thread polls it; 0.6-1.1 us less per synchronous "
       "call than cudaStreamSynchronize on an H100; where the GPU or driver refuses stream memory operations, "
       "sync is used) or sync (cudaStreamSynchronize, which yields the CPU where the CUDA runtime decides to, "
       "e.g. with more processes than cores) (docs/using.md, \"The cost of one call\")."},
      {"TEMPI_COLL_DEVICE", "0",
       "1: blocking collectives (not reductions) on a CUDA-aware MPI library get TEMPI's packed GPU bytes "
       "instead of pinned host copies (fast; off by default because Open MPI 4.1's collectives crashed, hung "
       "or returned wrong bytes on device buffers in our tests). 0: every GPU buffer of a collective goes "
       "through host memory (docs/using.md, \"Collectives on GPU buffers\")."},
      {"TEMPI_IPC", "auto",
       "Zero-copy between GPUs of one node in blocking collectives: auto (the receiving GPU reads each "
       "same-node peer's typed object through CUDA IPC where both buffers are GPU memory and the GPUs have peer "
       "access) or off (every GPU buffer is packed and moved by the MPI library) (docs/using.md, \"Zero-copy "
       "collectives\")."},
      {"TEMPI_IPC_RANKS_PER_NODE", "unset",
       "For tests: treat each run of this many consecutive MPI_COMM_WORLD ranks of a shared-memory node as a "
       "node of its own, so that zero-copy and its fallback for other nodes mix in one call on one machine."},
      {"TEMPI_P2P_ZERO_COPY_MIN", "0",
       "On a communicator where the application enabled zero-copy point-to-point "
       "(TEMPIX_Comm_enable_zero_copy), the smallest packed size in bytes of a nonblocking GPU send that the "
       "receiving GPU reads through CUDA IPC; smaller messages are packed and moved by the MPI library "
       "(docs/using.md, \"Zero-copy point-to-point\")."},
      {"TEMPI_PHASE_TIMES", "0",
       "1: TEMPI times its own phases in point-to-point calls (wrapper calls, decisions, staging, requests, "
       "launches, waits, the MPI library's calls) into counters that tools read with TEMPIX_Counter "
       "(docs/using.md, \"Phase times\"). 0: not timed."},
      {"TEMPI_PROFILE", "unset",
       "The system profile written by tempi-measure, read at start-up: a file, or none for the built-in "
       "rules. Unset: the per-user cache file for this GPU model and MPI library (docs/model.md)."},
  };
  return table;
}

namespace {

bool warn_invalid(const char *name, const char *value) {
  std::fprintf(stderr, "[tempi] warn: ignoring %s=%s (invalid value; see docs/environment.md)\n", name, value);
  return false;
}

bool parse_bytes(const char *name, const char *value, int64_t &out) {
  char *end = nullptr;
  const long long v = std::strtoll(value, &end, 10);
  if (end == value || *end != '\0' || v <= 0) return warn_invalid(name, value);
  out = v;
  return true;
}

// A knob's declared default, so that each default is written once (in knobs()).
int64_t default_bytes(const char *name) {
  for (const Knob &k : knobs())
    if (!std::strcmp(k.name, name)) return std::strtoll(k.default_value, nullptr, 10);
  return 0;
}

}  // namespace

Config parse_config(const std::function<const char *(const char *)> &lookup) {
  Config c;
  c.pipeline_chunk = default_bytes("TEMPI_PIPELINE_CHUNK");
  c.pipeline_threshold = default_bytes("TEMPI_PIPELINE_THRESHOLD");
  if (const char *v = lookup("TEMPI_DISABLE")) c.disabled = std::strcmp(v, "0") != 0;
  if (const char *v = lookup("TEMPI_LOG_LEVEL")) {
    static const char *names[] = {"error", "warn", "info", "debug"};
    bool found = false;
    for (int i = 0; i < 4; ++i)
      if (!strcasecmp(v, names[i])) c.log_level = LogLevel(i), found = true;
    if (!found) warn_invalid("TEMPI_LOG_LEVEL", v);
  }
  if (const char *v = lookup("TEMPI_CUDA_AWARE")) {
    if (!strcasecmp(v, "yes") || !strcmp(v, "1"))
      c.cuda_aware = true;
    else if (!strcasecmp(v, "no") || !strcmp(v, "0"))
      c.cuda_aware = false;
    else if (strcasecmp(v, "auto"))
      warn_invalid("TEMPI_CUDA_AWARE", v);
  }
  if (const char *v = lookup("TEMPI_METHOD")) {
    if (!strcasecmp(v, "device"))
      c.method = Method::Device;
    else if (!strcasecmp(v, "oneshot"))
      c.method = Method::OneShot;
    else if (!strcasecmp(v, "staged"))
      c.method = Method::Staged;
    else if (strcasecmp(v, "auto"))
      warn_invalid("TEMPI_METHOD", v);
  }
  if (const char *v = lookup("TEMPI_EAGER_SENDS")) {
    if (!std::strcmp(v, "1"))
      c.eager_sends = true;
    else if (std::strcmp(v, "0"))
      warn_invalid("TEMPI_EAGER_SENDS", v);
  }
  if (const char *v = lookup("TEMPI_IPC")) {
    if (!strcasecmp(v, "off") || !std::strcmp(v, "0")) c.ipc = false;
    else if (strcasecmp(v, "auto") != 0)
      warn_invalid("TEMPI_IPC", v);
  }
  if (const char *v = lookup("TEMPI_P2P_ZERO_COPY_MIN")) parse_bytes("TEMPI_P2P_ZERO_COPY_MIN", v, c.p2p_zero_copy_min);
  if (const char *v = lookup("TEMPI_IPC_RANKS_PER_NODE")) {
    int64_t n = 0;
    if (parse_bytes("TEMPI_IPC_RANKS_PER_NODE", v, n)) c.ipc_ranks_per_node = int(n);
  }
  if (const char *v = lookup("TEMPI_COLL_DEVICE")) {
    if (!std::strcmp(v, "1"))
      c.coll_device = true;
    else if (std::strcmp(v, "0"))
      warn_invalid("TEMPI_COLL_DEVICE", v);
  }
  if (const char *v = lookup("TEMPI_DEFER_PACK")) {
    if (!std::strcmp(v, "0") || !std::strcmp(v, "1") || !std::strcmp(v, "2") || !std::strcmp(v, "3"))
      c.defer_pack = v[0] - '0';
    else
      warn_invalid("TEMPI_DEFER_PACK", v);
  }
  if (const char *v = lookup("TEMPI_WAIT")) {
    if (!strcasecmp(v, "sync"))
      c.wait_by_polling = false;
    else if (strcasecmp(v, "poll"))
      warn_invalid("TEMPI_WAIT", v);
  }
  if (const char *v = lookup("TEMPI_PHASE_TIMES")) {
    if (!std::strcmp(v, "1"))
      c.phase_times = true;
    else if (std::strcmp(v, "0"))
      warn_invalid("TEMPI_PHASE_TIMES", v);
  }
  if (const char *v = lookup("TEMPI_PROFILE")) c.profile = v;
  if (const char *v = lookup("TEMPI_PIPELINE_CHUNK")) parse_bytes("TEMPI_PIPELINE_CHUNK", v, c.pipeline_chunk);
  if (const char *v = lookup("TEMPI_PIPELINE_THRESHOLD"))
    parse_bytes("TEMPI_PIPELINE_THRESHOLD", v, c.pipeline_threshold);
  return c;
}

const Config &config() {
  static const Config c = parse_config([](const char *name) { return std::getenv(name); });
  return c;
}

}  // namespace tempi
