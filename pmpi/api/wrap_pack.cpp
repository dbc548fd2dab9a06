// MPI_Pack and MPI_Unpack on GPU buffers run through the backend; host-to-host
// calls, disabled TEMPI and types without a plan pass to the MPI library untouched.
#include "backend.hpp"
#include "base/errors.hpp"
#include "base/forward.hpp"
#include "config.hpp"
#include "p2p/local_work.hpp"
#include "log.hpp"
#include "p2p/messages.hpp"
#include "base/runtime.hpp"

#include <vector>
#include "base/type_cache.hpp"
#include "base/validate.hpp"

namespace tempi {

namespace {

// Device and managed memory, as for point-to-point (messages.cpp): pinned host memory is
// host memory, which the MPI library packs itself.
bool on_gpu(const void *p) {
  const MemorySpace s = gpu_backend().classify(p);
  return s == MemorySpace::Device || s == MemorySpace::Managed;
}

// Before the library works on host images of GPU buffers: every move that may touch them
// done, this thread's queued ones included (nothing else launches those first).
void settle_all() {
  if (moves_queued() || local_work().pending()) local_work().settle();
}

// TEMPI_DEFER_PACK=1: a move between two buffers in device memory of one GPU is issued
// on this thread's stream and not waited for; =2: a pack is queued, to be launched with
// the packs around it (local_work.hpp); =3: as 2, and an unpack joins this thread's open
// launch (a kernel already running, which takes the unpacks of consecutive calls).
// Returns false when the buffers do not qualify (the caller then moves the data and waits).
bool defer_move(const std::shared_ptr<const TypeInfo> &info, const Plan &plan, const void *typed, void *packed,
                int64_t bytes, bool to_packed, Status &st) {
  if (!config().defer_pack) return false;
  Backend &b = gpu_backend();
  if (b.classify(typed) != MemorySpace::Device || b.classify(packed) != MemorySpace::Device) return false;
  const int device = b.device_of(typed);
  if (device != b.device_of(packed)) return false;
  // Modes 2 and 3 queue packs only: their packed output is what MPI calls read next. An
  // unpack feeds the application's own kernels, so it is launched now, after the queued
  // packs (mode 3: into the open launch).
  const int mode = config().defer_pack;
  if (mode >= 2 && to_packed) {
    st = queue_move({info, plan, const_cast<void *>(typed), packed, bytes, to_packed, device});
    return true;
  }
  if (mode == 3) {
    st = join_open_move({info, plan, const_cast<void *>(typed), packed, bytes, to_packed, device});
    return true;
  }
  launch_queued_moves();
  const std::vector<MoveJob> job{{&plan, const_cast<void *>(typed), packed, bytes, Transfer{Method::Device, bytes}}};
  Fence done;
  st = to_packed ? b.pack_async(job, done) : b.unpack_async(job, done);
  if (st == Status::Ok) local_work().add(done, device);
  return true;
}

// Arguments MPI would reject, checked here because the MPI library never sees them
// (validate.hpp), in MPICH's order: the communicator, the count, the datatype, the byte
// size, position, and a null buffer where there is data. On success `info` is the type's.
int check_args(MPI_Comm comm, const char *call, int count, MPI_Datatype type, int bytes, const char *bytes_name,
               const int *position, const void *typed, const void *packed, std::shared_ptr<const TypeInfo> &info) {
  if (const int err = check_comm(comm, call)) return err;
  if (const int err = check_count(comm, call, count)) return err;
  if (const int err = check_datatype(comm, call, type, info)) return err;
  if (const int err = check_size(comm, call, bytes, bytes_name)) return err;
  if (const int err = check_not_null(comm, call, position, "position")) return err;
  if (count > 0 && info->size > 0) {
    if (const int err = check_not_null(comm, call, typed, "the typed buffer")) return err;
    if (const int err = check_not_null(comm, call, packed, "the packed buffer")) return err;
  }
  return MPI_SUCCESS;
}

// GPU memory a library that is not CUDA-aware must not see: copies of it in host memory.
class HostImage {
 public:
  // `bytes` bytes at `gpu` (null: not GPU memory, nothing to copy), read now if `read`.
  int take(const void *gpu, int64_t bytes, bool read, MPI_Comm comm, const char *call) {
    gpu_ = gpu;
    if (!gpu) return MPI_SUCCESS;
    host_.resize(size_t(bytes > 0 ? bytes : 1));
    if (read && bytes > 0 && gpu_backend().copy(host_.data(), gpu, size_t(bytes)) != Status::Ok)
      return raise_error(comm, MPI_ERR_INTERN, "%s: copying GPU data to the host failed", call);
    return MPI_SUCCESS;
  }
  // Writes bytes [first, last) of the image back to the GPU.
  int put_back(int64_t first, int64_t last, MPI_Comm comm, const char *call) {
    if (!gpu_ || last <= first) return MPI_SUCCESS;
    if (gpu_backend().copy(const_cast<char *>(static_cast<const char *>(gpu_)) + first, host_.data() + first,
                           size_t(last - first)) != Status::Ok)
      return raise_error(comm, MPI_ERR_INTERN, "%s: copying data back to the GPU failed", call);
    return MPI_SUCCESS;
  }
  char *data() { return host_.data(); }

 private:
  const void *gpu_ = nullptr;
  std::vector<char> host_;
};

// A datatype TEMPI does not plan, with GPU memory on either side: the library packs
// between host images of the buffers. Also on a CUDA-aware library, whose MPI_Pack may
// not accept GPU memory (seen: CUDA-aware Open MPI 4.1.4, SIGSEGV on two H200s).
int pack_through_host(const void *inbuf, int incount, MPI_Datatype type, void *outbuf, int outsize, int *position,
                      MPI_Comm comm) {
  int64_t lo = 0, span = 0;
  span_of(incount, type, lo, span);
  HostImage typed, packed;
  if (int err = typed.take(on_gpu(inbuf) ? static_cast<const char *>(inbuf) + lo : nullptr, span, true, comm,
                           "MPI_Pack"))
    return err;
  if (int err = packed.take(on_gpu(outbuf) ? outbuf : nullptr, outsize, false, comm, "MPI_Pack")) return err;
  const void *src = on_gpu(inbuf) ? typed.data() - lo : inbuf;
  void *dst = on_gpu(outbuf) ? packed.data() : outbuf;
  const int before = *position;
  const int err = TEMPI_NEXT(MPI_Pack)(src, incount, type, dst, outsize, position, comm);
  if (err != MPI_SUCCESS) return err;
  if (const int put = packed.put_back(before, *position, comm, "MPI_Pack")) {
    *position = before;  // a failed call leaves the position where it was
    return put;
  }
  return MPI_SUCCESS;
}

int unpack_through_host(const void *inbuf, int insize, int *position, void *outbuf, int outcount, MPI_Datatype type,
                        MPI_Comm comm) {
  int64_t lo = 0, span = 0;
  span_of(outcount, type, lo, span);
  HostImage packed, typed;
  if (int err = packed.take(on_gpu(inbuf) ? inbuf : nullptr, insize, true, comm, "MPI_Unpack")) return err;
  // The typed image is read first: the bytes between the type's blocks go back unchanged.
  char *typed_gpu = on_gpu(outbuf) ? static_cast<char *>(outbuf) + lo : nullptr;
  if (int err = typed.take(typed_gpu, span, true, comm, "MPI_Unpack")) return err;
  const void *src = on_gpu(inbuf) ? packed.data() : inbuf;
  void *dst = on_gpu(outbuf) ? typed.data() - lo : outbuf;
  const int before = *position;
  const int err = TEMPI_NEXT(MPI_Unpack)(src, insize, position, dst, outcount, type, comm);
  if (err != MPI_SUCCESS) return err;
  if (const int put = typed.put_back(0, span, comm, "MPI_Unpack")) {
    *position = before;
    return put;
  }
  return MPI_SUCCESS;
}

}  // namespace

}  // namespace tempi

using namespace tempi;

extern "C" {

int TEMPI_WRAPPER(MPI_Pack)(const void *inbuf, int incount, MPI_Datatype datatype, void *outbuf, int outsize,
                            int *position, MPI_Comm comm) {
  const PointerScope one_call;
  if (!active() || (!on_gpu(inbuf) && !on_gpu(outbuf)))
    return TEMPI_NEXT(MPI_Pack)(inbuf, incount, datatype, outbuf, outsize, position, comm);
  std::shared_ptr<const TypeInfo> info;
  if (const int err = check_args(comm, "MPI_Pack", incount, datatype, outsize, "outsize", position, inbuf, outbuf, info))
    return err;
  if (const int err = raise_deferred_failure(comm, "MPI_Pack")) return err;
  // Checked before any path writes: the host image of a GPU output buffer holds outsize bytes.
  const int64_t bytes = info->size * incount;
  if (*position < 0 || *position + bytes > outsize)
    return raise_error(comm, MPI_ERR_TRUNCATE, "MPI_Pack: %lld bytes at position %d do not fit in outsize %d",
                       (long long)bytes, *position, outsize);
  if (!info->plan) {  // even a CUDA-aware library may not pack GPU memory (Open MPI 4.1 crashes)
    settle_all();
    if (incount == 0) return TEMPI_NEXT(MPI_Pack)(inbuf, incount, datatype, outbuf, outsize, position, comm);
    return pack_through_host(inbuf, incount, datatype, outbuf, outsize, position, comm);
  }
  const OnDeviceOf on_its_gpu(gpu_backend().device_of(inbuf) >= 0 ? inbuf : outbuf);
  if (local_work().pending()) local_work().settle_other_threads();  // this thread's queue keeps growing
  const Plan plan = info->plan->for_count(incount);
  char *out = static_cast<char *>(outbuf) + *position;
  Status st;
  if (!defer_move(info, plan, inbuf, out, bytes, true, st)) {
    launch_queued_moves();  // ahead of this one on the stream
    st = gpu_backend().pack(plan, inbuf, out, 0, bytes);
  }
  if (st != Status::Ok)
    return raise_error(comm, error_class_of(st), "MPI_Pack on a GPU buffer failed: %s", to_string(st));
  *position += int(bytes);
  return MPI_SUCCESS;
}

int TEMPI_WRAPPER(MPI_Unpack)(const void *inbuf, int insize, int *position, void *outbuf, int outcount,
                              MPI_Datatype datatype, MPI_Comm comm) {
  const PointerScope one_call;
  if (!active() || (!on_gpu(inbuf) && !on_gpu(outbuf)))
    return TEMPI_NEXT(MPI_Unpack)(inbuf, insize, position, outbuf, outcount, datatype, comm);
  std::shared_ptr<const TypeInfo> info;
  if (const int err = check_args(comm, "MPI_Unpack", outcount, datatype, insize, "insize", position, outbuf, inbuf, info))
    return err;
  if (const int err = raise_deferred_failure(comm, "MPI_Unpack")) return err;
  // Checked before any path writes: a short input would unpack part of the object.
  const int64_t bytes = info->size * outcount;
  if (*position < 0 || *position + bytes > insize)
    return raise_error(comm, MPI_ERR_TRUNCATE, "MPI_Unpack: %lld bytes at position %d exceed insize %d",
                       (long long)bytes, *position, insize);
  if (!info->plan) {
    settle_all();
    if (outcount == 0) return TEMPI_NEXT(MPI_Unpack)(inbuf, insize, position, outbuf, outcount, datatype, comm);
    return unpack_through_host(inbuf, insize, position, outbuf, outcount, datatype, comm);
  }
  const OnDeviceOf on_its_gpu(gpu_backend().device_of(outbuf) >= 0 ? outbuf : inbuf);
  if (local_work().pending()) local_work().settle_other_threads();
  const Plan plan = info->plan->for_count(outcount);
  char *in = const_cast<char *>(static_cast<const char *>(inbuf)) + *position;
  Status st;
  if (!defer_move(info, plan, outbuf, in, bytes, false, st)) {
    launch_queued_moves();
    st = gpu_backend().unpack(plan, in, outbuf, 0, bytes);
  }
  if (st != Status::Ok)
    return raise_error(comm, error_class_of(st), "MPI_Unpack to a GPU buffer failed: %s", to_string(st));
  *position += int(bytes);
  return MPI_SUCCESS;
}

}  // extern "C"
