// Built instead of cuda/ when CUDA is disabled: a backend with no GPU, so every
// buffer is host memory and every call passes through to MPI.
#include "backend.hpp"

namespace tempi {

namespace {

class StubBackend final : public Backend {
 public:
  bool has_gpu() override { return false; }
  std::string device_name() override { return "none (built without CUDA)"; }
  MemorySpace classify(const void *) override { return MemorySpace::Host; }
  Status pack(const Plan &, const void *, void *, int64_t, int64_t) override { return Status::Unsupported; }
  Status unpack(const Plan &, const void *, void *, int64_t, int64_t) override { return Status::Unsupported; }
  Status queue_range(const Plan &, void *, void *, int64_t, int64_t, bool) override { return Status::Unsupported; }
  Status acquire(ScratchKind, size_t, Scratch &) override { return Status::Unsupported; }
  MemoryUse memory_use() override { return {}; }
  Status pack_async(const std::vector<MoveJob> &, Fence &) override { return Status::Unsupported; }
  Status unpack_async(const std::vector<MoveJob> &, Fence &) override { return Status::Unsupported; }
  Status move_async(const std::vector<PairJob> &, Fence &) override { return Status::Unsupported; }
  Status queue_copy(void *, const void *, size_t, Lane) override { return Status::Unsupported; }
  Status order(Lane, Lane) override { return Status::Unsupported; }
  Status finish(Lane) override { return Status::Ok; }
  bool query(const Fence &) override { return true; }
  Status wait(const Fence &) override { return Status::Ok; }
  uint64_t synchronizations() override { return 0; }
  Status wait_default_stream() override { return Status::Ok; }
  Status order_default_stream_after(const Fence &) override { return Status::Ok; }
  std::string device_id() override { return ""; }
  bool mps_enabled() override { return false; }
  int device_count() override { return 0; }
  Status select_device(int) override { return Status::Unsupported; }
  int device_of(const void *) override { return -1; }
  int use_device(int) override { return 0; }
  Status allocate_device(size_t, void **) override { return Status::Unsupported; }
  void free_device(void *) override {}
  Status copy(void *, const void *, size_t) override { return Status::Unsupported; }
  Status ipc_export(const void *, IpcHandle &) override { return Status::Unsupported; }
  Status ipc_open(const IpcHandle &, void **) override { return Status::Unsupported; }
  void ipc_close(void *) override {}
  bool ipc_peer_access(const std::string &) override { return false; }
  void release_plan(uint64_t) override {}
};

}  // namespace

Backend &gpu_backend() {
  static Backend *backend = new StubBackend;  // immortal, like the CUDA one
  return *backend;
}

}  // namespace tempi
