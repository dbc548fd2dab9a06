// A backend for machines without a GPU that emulates one in host memory: memory it
// allocates or lends counts as "device" or "pinned", and packing runs the host
// reference packer. Linked into a second copy of the TEMPI archive that only tests
// use, it drives every GPU-buffer path of the MPI layer (methods, pipelining, the
// request table, completion calls) on CI, where no GPU exists.
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "backend.hpp"
#include "host_packer.hpp"

namespace tempi {

namespace {

class EmulatedBackend final : public Backend {
 public:
  bool has_gpu() override { return true; }
  std::string device_name() override { return "emulated GPU (host memory)"; }

  MemorySpace classify(const void *ptr) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = regions_.upper_bound(reinterpret_cast<uintptr_t>(ptr));
    if (it == regions_.begin()) return MemorySpace::Host;
    --it;
    const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
    return p < it->first + it->second.bytes ? it->second.space : MemorySpace::Host;
  }

  Status pack(const Plan &plan, const void *typed, void *packed, int64_t first, int64_t last) override {
    host_pack(plan, typed, packed, first, std::min(last, plan.packed_size()));
    return Status::Ok;
  }
  Status unpack(const Plan &plan, const void *packed, void *typed, int64_t first, int64_t last) override {
    host_unpack(plan, packed, typed, first, std::min(last, plan.packed_size()));
    return Status::Ok;
  }

  Status pack_accessible(const Plan &plan, const void *typed, void *packed, int64_t first, int64_t last) override {
    return pack(plan, typed, packed, first, last);
  }
  Status unpack_accessible(const Plan &plan, const void *packed, void *typed, int64_t first, int64_t last) override {
    return unpack(plan, packed, typed, first, last);
  }

  Status pack_to_host(const Plan &plan, const void *typed, void *host, int64_t bytes) override {
    return pack(plan, typed, host, 0, bytes);
  }
  Status unpack_from_host(const Plan &plan, const void *host, void *typed, int64_t bytes) override {
    return unpack(plan, host, typed, 0, bytes);
  }

  // Chunk by chunk, as the GPU pipeline does, so chunk boundaries are exercised.
  Status pack_staged(const Plan &plan, const void *typed, void *host, int64_t bytes, int64_t chunk) override {
    bytes = std::min(bytes, plan.packed_size());
    for (int64_t off = 0; off < bytes; off += chunk)
      host_pack(plan, typed, static_cast<char *>(host) + off, off, std::min(bytes, off + chunk));
    return Status::Ok;
  }
  Status unpack_staged(const Plan &plan, const void *host, void *typed, int64_t bytes, int64_t chunk) override {
    bytes = std::min(bytes, plan.packed_size());
    for (int64_t off = 0; off < bytes; off += chunk)
      host_unpack(plan, static_cast<const char *>(host) + off, typed, off, std::min(bytes, off + chunk));
    return Status::Ok;
  }

  Status acquire(ScratchKind kind, size_t bytes, Scratch &out) override {
    void *p = nullptr;
    if (Status st = allocate(bytes, kind == ScratchKind::Device ? MemorySpace::Device : MemorySpace::PinnedHost, &p);
        st != Status::Ok)
      return st;
    out.ptr = p;
    out.owner = std::shared_ptr<void>(p, [this](void *q) { release(q); });
    return Status::Ok;
  }

  int device_count() override { return 1; }
  Status select_device(int device) override { return device == 0 ? Status::Ok : Status::Unsupported; }
  int device_of(const void *ptr) override { return classify(ptr) == MemorySpace::Device ? 0 : -1; }
  int use_device(int) override { return 0; }

  Status allocate_device(size_t bytes, void **out) override { return allocate(bytes, MemorySpace::Device, out); }
  void free_device(void *ptr) override { release(ptr); }
  Status copy(void *dst, const void *src, size_t bytes) override {
    std::memmove(dst, src, bytes);
    return Status::Ok;
  }
  void release_plan(uint64_t) override {}

 private:
  struct Region {
    size_t bytes;
    MemorySpace space;
  };

  Status allocate(size_t bytes, MemorySpace space, void **out) {
    void *p = std::malloc(bytes ? bytes : 1);
    if (!p) return Status::NoMemory;
    std::lock_guard<std::mutex> lock(mutex_);
    regions_[reinterpret_cast<uintptr_t>(p)] = {bytes ? bytes : 1, space};
    *out = p;
    return Status::Ok;
  }

  void release(void *p) {
    if (!p) return;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      regions_.erase(reinterpret_cast<uintptr_t>(p));
    }
    std::free(p);
  }

  std::mutex mutex_;
  std::map<uintptr_t, Region> regions_;
};

}  // namespace

Backend &gpu_backend() {
  static Backend *backend = new EmulatedBackend;  // immortal, like the CUDA one
  return *backend;
}

}  // namespace tempi
