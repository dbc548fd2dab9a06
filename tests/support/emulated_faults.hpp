// The emulated backend's fault injection (tests/support/emulated_backend.cpp), for tests
// of how TEMPI survives a failing GPU runtime: the n-th next operation of a kind fails as
// the CUDA call would (an allocation with NoMemory, a kernel launch or a copy with
// GpuError), once; the operations after it work again.
#pragma once

namespace tempi {

enum class EmulatedFault {
  DeviceAlloc,  // allocate_device, acquire(ScratchKind::Device): cudaMalloc
  PinnedAlloc,  // acquire(ScratchKind::Pinned): cudaHostAlloc
  Launch,       // a pack or unpack (pack_async, unpack_async, each chunk's queue_range)
  Copy,         // copy: cudaMemcpy
};

// Arms the fault: the n-th next operation of `kind` fails (n >= 1); 0 disarms it.
void emulated_fail_nth(EmulatedFault kind, int n);

}  // namespace tempi
