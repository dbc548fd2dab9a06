// MPI_Pack and MPI_Unpack on GPU buffers run through the backend; host-to-host
// calls, disabled TEMPI and types without a plan pass to the MPI library untouched.
#include "backend.hpp"
#include "errors.hpp"
#include "forward.hpp"
#include "log.hpp"
#include "runtime.hpp"
#include "type_cache.hpp"

namespace tempi {

namespace {

bool on_gpu(const void *p) { return gpu_backend().classify(p) != MemorySpace::Host; }

// Arguments MPI would reject; checked here because the MPI library never sees them.
int check_args(MPI_Comm comm, const char *call, int count, MPI_Datatype type, const int *position) {
  if (count < 0) return raise_error(comm, MPI_ERR_COUNT, "%s: negative count %d", call, count);
  if (type == MPI_DATATYPE_NULL) return raise_error(comm, MPI_ERR_TYPE, "%s: MPI_DATATYPE_NULL", call);
  if (!position) return raise_error(comm, MPI_ERR_ARG, "%s: position is NULL", call);
  return MPI_SUCCESS;
}

}  // namespace

}  // namespace tempi

using namespace tempi;

extern "C" {

int TEMPI_WRAPPER(MPI_Pack)(const void *inbuf, int incount, MPI_Datatype datatype, void *outbuf, int outsize,
                            int *position, MPI_Comm comm) {
  if (!active() || (!on_gpu(inbuf) && !on_gpu(outbuf)))
    return TEMPI_NEXT(MPI_Pack)(inbuf, incount, datatype, outbuf, outsize, position, comm);
  if (const int err = check_args(comm, "MPI_Pack", incount, datatype, position)) return err;
  const std::shared_ptr<const TypeInfo> info = type_cache().find(datatype);
  if (!info->plan) return TEMPI_NEXT(MPI_Pack)(inbuf, incount, datatype, outbuf, outsize, position, comm);
  const int64_t bytes = info->size * incount;
  const OnDeviceOf on_its_gpu(gpu_backend().device_of(inbuf) >= 0 ? inbuf : outbuf);
  if (*position < 0 || *position + bytes > outsize)
    return raise_error(comm, MPI_ERR_TRUNCATE, "MPI_Pack: %lld bytes at position %d do not fit in outsize %d",
                       (long long)bytes, *position, outsize);
  const Status st = gpu_backend().pack(info->plan->for_count(incount), inbuf, static_cast<char *>(outbuf) + *position,
                                       0, bytes);
  if (st != Status::Ok) return raise_error(comm, MPI_ERR_INTERN, "MPI_Pack on a GPU buffer failed: %s", to_string(st));
  *position += int(bytes);
  return MPI_SUCCESS;
}

int TEMPI_WRAPPER(MPI_Unpack)(const void *inbuf, int insize, int *position, void *outbuf, int outcount,
                              MPI_Datatype datatype, MPI_Comm comm) {
  if (!active() || (!on_gpu(inbuf) && !on_gpu(outbuf)))
    return TEMPI_NEXT(MPI_Unpack)(inbuf, insize, position, outbuf, outcount, datatype, comm);
  if (const int err = check_args(comm, "MPI_Unpack", outcount, datatype, position)) return err;
  const std::shared_ptr<const TypeInfo> info = type_cache().find(datatype);
  if (!info->plan) return TEMPI_NEXT(MPI_Unpack)(inbuf, insize, position, outbuf, outcount, datatype, comm);
  const int64_t bytes = info->size * outcount;
  const OnDeviceOf on_its_gpu(gpu_backend().device_of(outbuf) >= 0 ? outbuf : inbuf);
  if (*position < 0 || *position + bytes > insize)
    return raise_error(comm, MPI_ERR_TRUNCATE, "MPI_Unpack: %lld bytes at position %d exceed insize %d",
                       (long long)bytes, *position, insize);
  const Status st = gpu_backend().unpack(info->plan->for_count(outcount),
                                         static_cast<const char *>(inbuf) + *position, outbuf, 0, bytes);
  if (st != Status::Ok)
    return raise_error(comm, MPI_ERR_INTERN, "MPI_Unpack to a GPU buffer failed: %s", to_string(st));
  *position += int(bytes);
  return MPI_SUCCESS;
}

}  // extern "C"
