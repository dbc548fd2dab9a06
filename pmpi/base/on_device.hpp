// OnDevice: makes GPU `device` current for its scope and the one before it current again at
// its end (the RAII form of Backend::use_device, as core/backend.hpp's OnDeviceOf is for a
// pointer's GPU). A negative device changes nothing. previous() is the GPU that was current
// before (-1 where it changed nothing).
#pragma once

#include "backend.hpp"

namespace tempi {

class OnDevice {
 public:
  explicit OnDevice(int device) {
    if (device >= 0) previous_ = gpu_backend().use_device(device);
  }
  ~OnDevice() {
    if (previous_ >= 0) gpu_backend().use_device(previous_);
  }
  OnDevice(const OnDevice &) = delete;
  OnDevice &operator=(const OnDevice &) = delete;

  int previous() const { return previous_; }

 private:
  int previous_ = -1;
};

}  // namespace tempi
