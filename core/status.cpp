#include "backend.hpp"

namespace tempi {

const char *to_string(Status s) {
  switch (s) {
    case Status::Ok:
      return "ok";
    case Status::NoMemory:
      return "out of memory";
    case Status::GpuError:
      return "GPU error";
    case Status::Unsupported:
      return "unsupported";
  }
  return "unknown";
}

}  // namespace tempi
