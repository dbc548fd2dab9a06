// Zero-copy between processes of one node through CUDA IPC (Backend's IPC hooks,
// backend_hooks.hpp): exporting an allocation, mapping a peer's, and whether this GPU
// reaches another's memory.
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

#include "ipc.hpp"
#include "log.hpp"
#include "pointers.hpp"

namespace tempi {

namespace {

// Exported allocations by buffer id: cudaIpcGetMemHandle costs microseconds per call.
constexpr size_t kMaxExported = 4096;
std::mutex g_ipc_mutex;
std::unordered_map<unsigned long long, cudaIpcMemHandle_t> &exported() {
  static auto *m = new std::unordered_map<unsigned long long, cudaIpcMemHandle_t>;  // immortal, like the backend
  return *m;
}

}  // namespace

Status ipc_export_of(const void *ptr, IpcHandle &out) {
  // The allocation's identity and extent in one driver query (cudart has none for them).
  const PointerAttributesFn get_attributes = pointer_attributes_fn();
  if (!ptr || !get_attributes) return Status::Unsupported;
  unsigned long long id = 0;
  CUdeviceptr start = 0;
  size_t size = 0;
  int capable = 0, type = 0;
  CUpointer_attribute which[] = {CU_POINTER_ATTRIBUTE_BUFFER_ID, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                 CU_POINTER_ATTRIBUTE_RANGE_SIZE, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
                                 CU_POINTER_ATTRIBUTE_MEMORY_TYPE};
  void *values[] = {&id, &start, &size, &capable, &type};
  if (get_attributes(5, which, values, reinterpret_cast<CUdeviceptr>(ptr)) != CUDA_SUCCESS || !capable ||
      type != CU_MEMORYTYPE_DEVICE)
    return Status::Unsupported;
  {
    std::lock_guard<std::mutex> lock(g_ipc_mutex);
    auto it = exported().find(id);
    if (it == exported().end()) {
      cudaIpcMemHandle_t h;
      if (cudaIpcGetMemHandle(&h, reinterpret_cast<void *>(start)) != cudaSuccess) {
        cudaGetLastError();
        return Status::Unsupported;
      }
      if (exported().size() >= kMaxExported) exported().clear();  // handles of freed memory go too
      it = exported().emplace(id, h).first;
    }
    static_assert(sizeof(cudaIpcMemHandle_t) <= sizeof(out.bytes), "IpcHandle holds a CUDA IPC handle");
    std::memcpy(out.bytes, &it->second, sizeof(cudaIpcMemHandle_t));
  }
  out.buffer_id = id;
  out.offset = int64_t(reinterpret_cast<CUdeviceptr>(ptr) - start);
  out.size = int64_t(size);
  out.base = uint64_t(start);
  return Status::Ok;
}

Status ipc_map(const IpcHandle &handle, void **base) {
  cudaIpcMemHandle_t h;
  std::memcpy(&h, handle.bytes, sizeof h);
  const cudaError_t err = cudaIpcOpenMemHandle(base, h, cudaIpcMemLazyEnablePeerAccess);
  if (err == cudaSuccess) return Status::Ok;
  cudaGetLastError();
  // The caller retries or falls back, and says so. Already mapped: this process mapped the
  // allocation through another handle (the MPI library's own IPC cache), which CUDA allows once.
  if (log_enabled(LogLevel::Debug)) log(LogLevel::Debug, "cudaIpcOpenMemHandle: %s", cudaGetErrorString(err));
  return Status::GpuError;
}

void ipc_unmap(void *base) {
  if (cudaIpcCloseMemHandle(base) != cudaSuccess) cudaGetLastError();
}

bool ipc_reaches(const std::string &device) {
  int mine = 0, theirs = -1, can = 0;
  if (cudaGetDevice(&mine) != cudaSuccess || cudaDeviceGetByPCIBusId(&theirs, device.c_str()) !=
                                                                 cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  if (theirs == mine) return true;
  if (cudaDeviceCanAccessPeer(&can, mine, theirs) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return can != 0;
}

}  // namespace tempi
