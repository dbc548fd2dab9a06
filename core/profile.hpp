// The measured system profile (docs/model.md): what tempi-measure
// found on one machine (one GPU model, one MPI library), written once as versioned JSON
// and read at start-up. The model in method.cpp predicts each method's time from it.
// Plain C++: no MPI, no CUDA, so the parser and the model are tested anywhere.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace tempi {

// Seconds as a function of bytes, measured at increasing sizes. Between two points the
// time is interpolated on log-log axes; below the first it is the first (latency);
// beyond the last it grows with the bytes at the last point's rate.
struct Curve {
  std::vector<double> bytes, seconds;
  double at(double b) const;
  bool empty() const { return bytes.empty(); }
};

// The sizes of a curve measured more than `tolerance` (a fraction) slower than some larger
// size: candidates for a disturbed measurement (the other work of a shared GPU, a host
// stall; on an H100 under MPS, 2026-11-25, 64-byte rows unpacked in 45.8, 26.1, 20.5, 17.1
// and 15.7 us from 1 KiB to 256 KiB, where the next run took 10 us throughout). Not proof:
// a larger size may take a faster path (the copy engines took 11.5 us for 16 KiB and 9.1 us
// for 64 KiB into an H200), so a caller measures a candidate again and keeps the lower
// time. Indices into `c.bytes`, ascending; `bytes` ascending.
std::vector<size_t> slower_than_larger(const Curve &c, double tolerance);

// The time of a kernel (or pitched copy) over a 2-D strided object of `block`-byte
// rows, by object size. `word` is the access width the kernels chose for the rows.
struct KernelRow {
  int64_t block = 0;
  int word = 0;
  Curve time;
};

// One direction of packing: rows by block size, and how much slower narrower access
// words are than the row's own (factor >= 1 at a fixed block and size; word -> factor).
struct KernelTable {
  std::vector<KernelRow> rows;
  std::vector<std::pair<int, double>> word_factor;
  // Seconds to move `bytes` in blocks of `block` bytes read or written `word` bytes at
  // a time: interpolated between the two measured block sizes around `block`.
  double at(double bytes, int64_t block, int word) const;
  bool empty() const { return rows.empty(); }
};

// Which process a message goes to, as far as the caller knows. Self: the calling process
// itself (a periodic halo on few ranks sends many of its messages to itself), which a
// library moves by its own loopback path: CUDA-aware Open MPI 4.1 moves GPU buffers to
// itself at 0.6 GB/s on an H200 (tempi-measure, 2026-11-24).
enum class PeerClass { Unknown, SameGpu, SameNode, OtherNode, Self };
const char *to_string(PeerClass p);
std::optional<PeerClass> peer_class_from(const std::string &name);
// Where another process runs relative to this one, from whether it shares this one's node and
// both GPUs' identities (Backend::device_id(): a PCI bus id, empty without a GPU, so a
// process without a GPU shares none).
PeerClass classify_peer(bool same_node, const std::string &my_gpu, const std::string &peer_gpu);

// The MPI library's time for a message between two GPU buffers, for one placement:
// alone (a ping-pong), and per message when kBatchMessages go each way at once.
struct DeviceWire {
  PeerClass peer = PeerClass::Unknown;
  Curve time;
  Curve batched;
};

// Messages in flight each way when tempi-measure times a batch (the batched curves): a
// 26-neighbour halo exchange between two ranks has 26 each way.
constexpr int kBatchMessages = 16;

// What a profile was measured on; a profile applies only where both match.
struct MachineIdentity {
  std::string gpu;          // the device name, e.g. "NVIDIA H200"
  std::string mpi_library;  // the first line of MPI_Get_library_version
};

// 2: staged_chunk_s (the staged method's cost per chunk beyond its kernel's launch).
// 3: the batched curves (mpi_host_batched, mpi_device[].batched): a library's time for one
//    message of many in flight is not its time alone; and device curves for the peer
//    class self (a library's loopback path).
constexpr int kProfileVersion = 3;

// Every time is synchronous: what one TEMPI call costs, launch and synchronization
// included (tempi-measure times the backend's calls with a host clock).
struct Profile {
  int version = kProfileVersion;
  MachineIdentity machine;
  std::string driver;  // the GPU driver version (informative)
  std::string date;    // when it was measured (informative, ISO 8601)
  bool cuda_aware = false;
  PeerClass measured_peer = PeerClass::Unknown;  // where the other rank was
  double launch = 0;  // issuing one kernel without waiting
  double sync = 0;    // waiting for finished work (a launch plus a wait costs launch + sync)
  // The staged method's own cost per chunk and side, beyond its kernel's launch and the
  // GPU's work: issuing the copy, the event between kernel and copy streams, the copy
  // waiting for it. Fitted by tempi-measure from timed staged moves against the model.
  double staged_chunk = 0;
  KernelTable pack_device, unpack_device;  // between device buffers (device and staged methods)
  KernelTable pack_host, unpack_host;      // between device and mapped pinned host memory (one-shot)
  Curve copy_to_host, copy_to_device;      // copy engines, device <-> pinned host
  Curve mpi_host;                          // the MPI library between pinned host buffers
  Curve mpi_host_batched;                  // the same, per message of kBatchMessages each way
  std::vector<DeviceWire> mpi_device;      // between device buffers, where CUDA-aware

  // The device-buffer curve for `peer` (the measured one when `peer` has none), alone or
  // per message of a batch; null when there is none at all.
  const Curve *device_wire(PeerClass peer, bool batched = false) const;
  const Curve &host_wire(bool batched) const { return batched ? mpi_host_batched : mpi_host; }
};

// Point by point, the median of profiles measured one after another on one machine with
// one grid (tempi-measure --repeat): a run disturbed as a whole falls out (on an H100
// under MPS, 2026-11-25, one run in ten measured Open MPI's GPU-buffer latency at 18 us
// at every size where the others measured 12.8-15.2). The first run gives what is not
// measured (machine, date). Nothing, with `error` saying why, when the runs differ in
// their sizes, blocks, words or peers, or there is no run.
std::optional<Profile> median_profile(const std::vector<Profile> &runs, std::string &error);

std::string write_profile(const Profile &p);
// Parses and checks a profile; on failure returns nothing and says why in `error`.
std::optional<Profile> parse_profile(const std::string &text, std::string &error);

// The per-user cache file for a machine: $XDG_CACHE_HOME/tempi (else $HOME/.cache/tempi)
// / profile-<gpu>-<mpi>.json, names reduced to [A-Za-z0-9._-]. Empty when neither
// variable is set.
std::string profile_cache_path(const MachineIdentity &m, const std::function<const char *(const char *)> &env);

// The outcome of the start-up lookup: the profile in use (if any), the file it came
// from, and, when there is none, why.
struct ProfileChoice {
  std::optional<Profile> profile;
  std::string path;
  std::string reason;
};

// TEMPI_PROFILE (`named`: a file, or "none" for the built-in defaults), else the cache
// file for `here`. A file that is absent, unreadable, malformed, of another version or
// of another machine gives no profile and a reason.
ProfileChoice find_profile(const std::string &named, const MachineIdentity &here,
                           const std::function<const char *(const char *)> &env);

// The process's profile, read by the model. Two kinds of install: TEMPI's own start-up
// lookup (pmpi/base/runtime.cpp), and a program that installs a profile itself (tempi-measure
// the one it wrote, tests a synthetic one). The program's stands whichever comes first:
// TEMPI starts lazily, at its first intercepted call, so its lookup may come after the
// program's install and must not undo it; a later program install replaces an earlier
// one. Both return the profile now active (what active_profile() returns), so a caller
// uses what the model uses and can check it. Until the first install, or when the one
// in force holds none, active_profile() is null (the built-in rules).
const Profile *install_profile(ProfileChoice choice);
const Profile *install_startup_profile(ProfileChoice choice);
const Profile *active_profile();
// One line for people (tempi-info, the info log): the file in use, or why none is.
std::string profile_summary();

}  // namespace tempi
