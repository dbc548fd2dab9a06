// Whether several processes of this node use one GPU without the Multi-Process
// Service. Then the GPU time-slices between them and every synchronization waits for
// a slice (about 0.28 ms on an H200), which is why TEMPI says so once, with the remedy.
// Processes find each other without MPI (TEMPI starts lazily, outside any collective):
// each registers its GPU's PCI bus id in a per-user directory under /dev/shm and
// counts the live processes registered for the same GPU.
#pragma once

#include <string>

namespace tempi {

class GpuSharing {
 public:
  // Registers this process on GPU `device_id`; logs once when others share it without MPS.
  void join(const std::string &device_id, bool mps);
  void leave();
  // Processes of this node registered on this process's GPU, itself included (0 before join).
  int sharers() const { return sharers_; }

 private:
  std::string path_;
  int sharers_ = 0;
};

GpuSharing &gpu_sharing();

// Live processes of this user registered on GPU `device_id` (its PCI bus id), this process
// left out: what tempi-info reports. Entries of processes that died are removed.
int other_processes_on(const std::string &device_id);

}  // namespace tempi
