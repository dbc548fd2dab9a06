// Stream objects (stream_objects.hpp, streams.hpp): made from the info object that names a
// cudaStream_t, the way MPICH's MPIX_Stream_create takes one, and freed.
#include "stream/stream_objects.hpp"

#include <cstdio>
#include <cstring>
#include <string>

#include "backend.hpp"
#include "log.hpp"
#include "stream/streams.hpp"

namespace tempi {
namespace streams {

namespace {

// The info value of `key`, or "" where there is none.
std::string info_value(MPI_Info info, const char *key) {
  if (info == MPI_INFO_NULL) return "";
  int length = 0, found = 0;
  if (PMPI_Info_get_valuelen(info, key, &length, &found) != MPI_SUCCESS || !found) return "";
  std::string value(size_t(length) + 1, '\0');
  if (PMPI_Info_get(info, key, length + 1, &value[0], &found) != MPI_SUCCESS || !found) return "";
  value.resize(std::strlen(value.c_str()));
  return value;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// `out` from its hexadecimal form, exactly sizeof(out) bytes of it.
bool from_hex(const std::string &hex, void *out, size_t size) {
  if (hex.size() != 2 * size) return false;
  auto *bytes = static_cast<unsigned char *>(out);
  for (size_t k = 0; k < size; ++k) {
    const int hi = hex_digit(hex[2 * k]), lo = hex_digit(hex[2 * k + 1]);
    if (hi < 0 || lo < 0) return false;
    bytes[k] = static_cast<unsigned char>(hi * 16 + lo);
  }
  return true;
}

}  // namespace

int info_set_hex(MPI_Info info, const char *key, const void *value, int value_size) {
  if (info == MPI_INFO_NULL || !key || value_size < 0 || (value_size > 0 && !value)) {
    TEMPI_LOG(Error, "TEMPIX_Info_set_hex: invalid info, key or value");
    return MPI_ERR_ARG;
  }
  std::string hex(2 * size_t(value_size), '0');
  const auto *bytes = static_cast<const unsigned char *>(value);
  for (int k = 0; k < value_size; ++k) std::snprintf(&hex[2 * size_t(k)], 3, "%02x", bytes[k]);
  return PMPI_Info_set(info, key, hex.c_str());
}

int stream_create(MPI_Info info, AppStream **out) {
  if (!out) {
    TEMPI_LOG(Error, "TEMPIX_Stream_create: the stream argument is null");
    return MPI_ERR_ARG;
  }
  *out = nullptr;
  const std::string type = info_value(info, "type");
  if (type != "cudaStream_t") {
    TEMPI_LOG(Error, "TEMPIX_Stream_create: the info object must name a GPU stream (\"type\" \"cudaStream_t\", "
                     "\"value\" by TEMPIX_Info_set_hex); it says type \"%s\"", type.c_str());
    return MPI_ERR_ARG;
  }
  void *handle = nullptr;
  if (!from_hex(info_value(info, "value"), &handle, sizeof handle)) {
    TEMPI_LOG(Error, "TEMPIX_Stream_create: the info's \"value\" is not a cudaStream_t written by TEMPIX_Info_set_hex");
    return MPI_ERR_ARG;
  }
  const int device = gpu_backend().stream_device(handle);
  if (device < 0) {
    TEMPI_LOG(Error, "TEMPIX_Stream_create: the GPU runtime does not know that stream (or this build has no GPU)");
    return MPI_ERR_ARG;
  }
  auto *s = new AppStream;
  s->handle = handle;
  s->device = device;
  *out = s;
  return MPI_SUCCESS;
}

int stream_free(AppStream **stream) {
  if (!stream || !*stream) {
    TEMPI_LOG(Error, "TEMPIX_Stream_free: the stream is null");
    return MPI_ERR_ARG;
  }
  if ((*stream)->comms.load(std::memory_order_acquire) > 0) {
    TEMPI_LOG(Error, "TEMPIX_Stream_free: communicators bound to the stream are still in use (MPI_Comm_free them first)");
    return MPI_ERR_ARG;
  }
  delete *stream;
  *stream = nullptr;
  return MPI_SUCCESS;
}

}  // namespace streams
}  // namespace tempi
