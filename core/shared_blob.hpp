// Named, immutable blocks of bytes in POSIX shared memory (/dev/shm) that other processes
// of the node read: zero-copy's plans too large for a communicator's plan arena
// (pmpi/node/plan_arena.cpp). The pages of a block are reserved before it is written, so a full
// /dev/shm (a container's small one) is an error its writer sees, never a SIGBUS.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tempi {

// The name of block `serial` of process `pid` with random `nonce` ("/tempi-plan-...").
std::string shared_blob_name(int32_t pid, uint64_t nonce, uint64_t serial);

// Creates block `name` holding `bytes` bytes of `data` (it must not exist yet). 0, or the
// errno of the step that failed (nothing is left behind then).
int write_shared_blob(const std::string &name, const void *data, size_t bytes);

// Copies block `name` into `out`, which holds `bytes`: 0, or an errno (EBADMSG when the
// block's size is not `bytes`).
int read_shared_blob(const std::string &name, void *out, size_t bytes);

// Removes block `name` (processes that have it open keep reading it).
void remove_shared_blob(const std::string &name);

}  // namespace tempi
