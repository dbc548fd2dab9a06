#include "shared_blob.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace tempi {

namespace {

// Maps `bytes` of `fd` (at least one page: mmap refuses 0 bytes).
void *map(int fd, size_t bytes, int prot) {
  void *p = mmap(nullptr, bytes > 0 ? bytes : 1, prot, MAP_SHARED, fd, 0);
  return p == MAP_FAILED ? nullptr : p;
}

}  // namespace

std::string shared_blob_name(int32_t pid, uint64_t nonce, uint64_t serial) {
  char name[96];
  std::snprintf(name, sizeof name, "/tempi-plan-%" PRId32 "-%016" PRIx64 "-%" PRIu64, pid, nonce, serial);
  return name;
}

int write_shared_blob(const std::string &name, const void *data, size_t bytes) {
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) return errno;
  // posix_fallocate returns its error instead of setting errno.
  int err = bytes > 0 ? posix_fallocate(fd, 0, off_t(bytes)) : 0;
  void *p = nullptr;
  if (err == 0 && bytes > 0 && !(p = map(fd, bytes, PROT_READ | PROT_WRITE))) err = errno;
  if (p) {
    std::memcpy(p, data, bytes);
    munmap(p, bytes);
  }
  close(fd);
  if (err != 0) shm_unlink(name.c_str());
  return err;
}

int read_shared_blob(const std::string &name, void *out, size_t bytes) {
  const int fd = shm_open(name.c_str(), O_RDONLY, 0);
  if (fd < 0) return errno;
  struct stat st;
  int err = fstat(fd, &st) != 0 ? errno : (size_t(st.st_size) != bytes ? EBADMSG : 0);
  if (err == 0 && bytes > 0) {
    if (void *p = map(fd, bytes, PROT_READ)) {
      std::memcpy(out, p, bytes);
      munmap(p, bytes);
    } else {
      err = errno;
    }
  }
  close(fd);
  return err;
}

void remove_shared_blob(const std::string &name) { shm_unlink(name.c_str()); }

}  // namespace tempi
