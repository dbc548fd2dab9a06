// TEMPI's per-user registry of processes and the GPUs they use (pmpi/base/gpu_sharing.hpp),
// which the start-up warning and tempi-info read: live entries of other processes count,
// this process's own does not, a dead process's entry is removed, another GPU's is not
// counted.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <string>

#include "base/gpu_sharing.hpp"

namespace {

std::string registry() { return "/dev/shm/tempi-gpus-" + std::to_string(getuid()); }

bool exists(const std::string &path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

void touch(const std::string &path) {
  if (FILE *f = std::fopen(path.c_str(), "w")) std::fclose(f);
}

// A pid that belonged to a process which has exited and been reaped.
pid_t dead_pid() {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  int status = 0;
  waitpid(child, &status, 0);
  return child;
}

}  // namespace

TEST_CASE("the registry counts other live processes on a GPU and forgets dead ones", "[gpu_sharing]") {
  if (!exists("/dev/shm")) {
    WARN("no /dev/shm here: the registry is not used");
    return;
  }
  mkdir(registry().c_str(), 0700);
  // A bus id of no real GPU, unique to this run (ids contain ':' and '.', as real ones do).
  const std::string id = "ffff:ff:1f." + std::to_string(getpid() % 10);
  const std::string other_gpu = id + "0";
  const std::string live = registry() + "/" + id + "." + std::to_string(getppid());
  const std::string mine = registry() + "/" + id + "." + std::to_string(getpid());
  const std::string dead = registry() + "/" + id + "." + std::to_string(dead_pid());
  const std::string elsewhere = registry() + "/" + other_gpu + "." + std::to_string(getppid());
  for (const std::string &p : {live, mine, dead, elsewhere}) touch(p);
  REQUIRE(exists(dead));

  CHECK(tempi::other_processes_on(id) == 1);  // the parent; not this process, not the dead one
  CHECK_FALSE(exists(dead));
  CHECK(exists(live));
  CHECK(tempi::other_processes_on(other_gpu) == 1);
  CHECK(tempi::other_processes_on("") == 0);

  for (const std::string &p : {live, mine, elsewhere}) unlink(p.c_str());
  CHECK(tempi::other_processes_on(id) == 0);
}
