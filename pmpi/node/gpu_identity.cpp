// gpu_identity (node/node_share.hpp): a GPU's PCI bus id, which names it alike in every
// process of the node, asked of the backend once per device. Thread-safe.
#include <map>
#include <mutex>
#include <string>

#include "backend.hpp"
#include "node/node_share.hpp"

namespace tempi {

std::string gpu_identity(int device) {
  static std::mutex mutex;
  static std::map<int, std::string> known;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = known.find(device);
  if (it != known.end()) return it->second;
  const OnDevice on_it(device);
  return known[device] = gpu_backend().device_id();
}

}  // namespace tempi
