// CUDA IPC for zero-copy between processes of one node (ipc.cpp): what the backend's
// IPC hooks (core/backend_hooks.hpp, IpcHooks) forward to.
#pragma once

#include <string>

#include "backend.hpp"

namespace tempi {

Status ipc_export_of(const void *ptr, IpcHandle &out);
Status ipc_map(const IpcHandle &handle, void **base);
void ipc_unmap(void *base);
// Whether kernels on the current device can read memory of the GPU with PCI bus id `device`.
bool ipc_reaches(const std::string &device);

}  // namespace tempi
