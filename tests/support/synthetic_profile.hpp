// Synthetic system profiles for the model's tests: each part is a latency plus bytes
// over a rate, so a test can make any method the fastest by its choice of rates.
#pragma once

#include <optional>

#include "profile.hpp"

namespace tempi::testing {

struct Link {
  double latency;  // seconds
  double rate;     // bytes per second
};

inline Curve curve_of(Link l) {
  Curve c;
  for (double b = 1024; b <= 64.0 * 1024 * 1024; b *= 4) {
    c.bytes.push_back(b);
    c.seconds.push_back(l.latency + b / l.rate);
  }
  return c;
}

// Rows of blocks 8, 64 and 512 bytes; smaller blocks run at a quarter (8) and half (64) the rate.
inline KernelTable kernels_of(Link l) {
  KernelTable t;
  for (int64_t block : {8, 64, 512}) {
    const double slowdown = block == 8 ? 4 : block == 64 ? 2 : 1;
    t.rows.push_back({block, block == 8 ? 8 : 16, curve_of({l.latency, l.rate / slowdown})});
  }
  t.word_factor = {{1, 8}, {2, 4}, {4, 2}, {8, 1.2}, {16, 1}};
  return t;
}

struct SyntheticRates {
  double launch = 3e-6, sync = 5e-6;
  double staged_chunk = 0;
  Link pack_device{10e-6, 1e12}, pack_host{10e-6, 50e9};
  Link copy{10e-6, 50e9};
  Link mpi_host{2e-6, 20e9};
  Link mpi_device{15e-6, 100e9};
  // Per message of a batch; unset: as alone.
  std::optional<Link> mpi_host_batched, mpi_device_batched;
  // The library's loopback of GPU buffers (alone and batched); unset: as mpi_device.
  std::optional<Link> mpi_self;
  bool cuda_aware = true;
};

// Every GPU step is measured as TEMPI runs it, launch and synchronization included.
inline Link with_floor(Link l, const SyntheticRates &r) { return {l.latency + r.launch + r.sync, l.rate}; }

inline Profile synthetic_profile(const SyntheticRates &r = {}) {
  Profile p;
  p.machine = {"Synthetic GPU", "Synthetic MPI 1.0"};
  p.driver = "1.0";
  p.date = "2026-01-01T00:00:00Z";
  p.cuda_aware = r.cuda_aware;
  p.measured_peer = PeerClass::SameNode;
  p.launch = r.launch;
  p.sync = r.sync;
  p.staged_chunk = r.staged_chunk;
  p.pack_device = p.unpack_device = kernels_of(with_floor(r.pack_device, r));
  p.pack_host = p.unpack_host = kernels_of(with_floor(r.pack_host, r));
  p.copy_to_host = p.copy_to_device = curve_of(with_floor(r.copy, r));
  p.mpi_host = curve_of(r.mpi_host);
  p.mpi_host_batched = curve_of(r.mpi_host_batched.value_or(r.mpi_host));
  if (r.cuda_aware) {
    p.mpi_device.push_back(
        {PeerClass::SameNode, curve_of(r.mpi_device), curve_of(r.mpi_device_batched.value_or(r.mpi_device))});
    const Link self = r.mpi_self.value_or(r.mpi_device);
    p.mpi_device.push_back({PeerClass::Self, curve_of(self), curve_of(self)});
  }
  return p;
}

// Measured between two GPUs of one node, with a faster device-buffer curve for the same
// GPU and slower ones for another node and for the process itself: for 1 MiB in rows of
// 512 bytes, the device method is the fastest on one GPU only.
inline Profile placements_profile() {
  SyntheticRates r;
  r.pack_host = {10e-6, 50e9};
  r.mpi_host = {2e-6, 20e9};
  r.mpi_device = {20e-6, 5e9};  // SameNode: slower than one-shot through host memory
  r.mpi_self = Link{30e-6, 0.5e9};  // the library's loopback: slower still, as on Open MPI 4.1
  Profile p = synthetic_profile(r);
  p.mpi_device.push_back({PeerClass::SameGpu, curve_of({1e-6, 2e12}), curve_of({1e-6, 2e12})});
  p.mpi_device.push_back({PeerClass::OtherNode, curve_of({40e-6, 2e9}), curve_of({40e-6, 2e9})});
  return p;
}

}  // namespace tempi::testing
