#include "base/gpu_sharing.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "log.hpp"

namespace tempi {

namespace {

std::string registry_dir() { return "/dev/shm/tempi-gpus-" + std::to_string(getuid()); }

bool alive(pid_t pid) { return kill(pid, 0) == 0 || errno == EPERM; }

// Entries are "<bus id>.<pid>"; bus ids contain ':' and '.', so the pid follows the last '.'.
// Counts the live ones, `except` left out.
int count_sharers(const std::string &dir, const std::string &device_id, pid_t except = 0) {
  DIR *d = opendir(dir.c_str());
  if (!d) return 0;
  int n = 0;
  while (const dirent *e = readdir(d)) {
    const std::string name = e->d_name;
    const size_t dot = name.rfind('.');
    if (dot == std::string::npos || name.compare(0, dot, device_id) != 0 || dot != device_id.size()) continue;
    const pid_t pid = pid_t(std::atol(name.c_str() + dot + 1));
    if (pid > 0 && alive(pid))
      n += pid != except;
    else
      unlink((dir + "/" + name).c_str());  // left by a process that died
  }
  closedir(d);
  return n;
}

}  // namespace

void GpuSharing::join(const std::string &device_id, bool mps) {
  if (device_id.empty() || !path_.empty()) return;
  const std::string dir = registry_dir();
  mkdir(dir.c_str(), 0700);
  path_ = dir + "/" + device_id + "." + std::to_string(getpid());
  const int fd = open(path_.c_str(), O_CREAT | O_WRONLY, 0600);
  if (fd < 0) {
    TEMPI_LOG(Debug, "cannot register in %s (%s): GPU sharing is not checked", dir.c_str(), std::strerror(errno));
    path_.clear();
    return;
  }
  close(fd);
  sharers_ = count_sharers(dir, device_id);
  if (sharers_ > 1 && !mps)
    TEMPI_LOG(Info,
              "%d processes of this node use GPU %s without MPS: the GPU time-slices between them and every "
              "synchronization waits for a slice (0.28 ms measured on an H200). Start MPS "
              "(nvidia-cuda-mps-control -d) before the job; see docs/using.md, \"Ranks that share a GPU\"",
              sharers_, device_id.c_str());
  else if (sharers_ > 1)
    TEMPI_LOG(Info, "%d processes of this node share GPU %s through MPS", sharers_, device_id.c_str());
}

void GpuSharing::leave() {
  if (path_.empty()) return;
  unlink(path_.c_str());
  path_.clear();
}

int other_processes_on(const std::string &device_id) {
  return device_id.empty() ? 0 : count_sharers(registry_dir(), device_id, getpid());
}

GpuSharing &gpu_sharing() {
  static GpuSharing *s = new GpuSharing;
  return *s;
}

}  // namespace tempi
