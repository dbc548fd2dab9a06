// How one buffer argument of this rank reaches the MPI library in a collective (Side): the
// application's buffer as it is, its blocks packed into staging, its contiguous blocks
// handed over in place, or a host copy of the region they span. plan() decides once per
// call (once per persistent request); load() and the unpack jobs move the data around the
// library's call. coll/collectives.hpp says when each mode applies and why.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "backend.hpp"
#include "base/block.hpp"
#include "p2p/messages.hpp"

namespace tempi {

// How one buffer argument of this rank reaches the MPI library.
class Side {
 public:
  enum class Mode {
    User,    // the application's buffer and arguments (host memory, not significant, CUDA-aware library)
    Pack,    // packed bytes in staging; block i at offset(i), bytes(i) long
    Direct,  // contiguous blocks in the application's GPU buffer, for a CUDA-aware library: block i
             // is bytes(i) bytes at offset(i) from the buffer, handed over as bytes (a subarray
             // type that happens to be contiguous is copied row by row by some libraries)
    Region,  // a host copy of the bytes the blocks span; the library gets the user's types. Only
             // the blocks' bytes go back (by their plans), or, for a type TEMPI cannot plan,
             // the whole copy, the bytes between blocks included
  };

  // Decides for `buf` (GPU data) and takes staging. `typed_only`: the library must see
  // typed data (reductions), so no packing. Returns an MPI error code (raised on `comm`).
  int plan(void *buf, std::vector<Block> blocks, bool typed_only, MPI_Comm comm, const char *call);
  // Whether the library may be handed GPU memory for this call (a CUDA-aware library, a
  // blocking call). Set before plan(); reductions (typed_only) never hand it GPU memory.
  void library_reads_gpu(bool yes) { library_reads_gpu_ = yes; }

  Mode mode() const { return mode_; }
  bool used() const { return mode_ != Mode::User; }
  // Whether the library gets bytes (block i: bytes(i) at offset(i)) instead of user types.
  bool rewired() const { return mode_ == Mode::Pack || mode_ == Mode::Direct; }
  // What the library gets as the buffer.
  void *library_buffer(void *user) const { return mode_ == Mode::User || mode_ == Mode::Direct ? user : lib_; }
  const void *library_buffer(const void *user) const {
    return mode_ == Mode::User || mode_ == Mode::Direct ? user : lib_;
  }
  size_t blocks() const { return blocks_.size(); }
  int64_t bytes(size_t i) const { return bytes_[i]; }
  int64_t offset(size_t i) const { return offsets_[i]; }

  // Before the call: packs the blocks marked `load` (one batch), or copies the region in.
  int load(MPI_Comm comm, const char *call);
  // After the call: the unpack jobs of the blocks marked `store` (Pack, and Region where
  // they have plans), or the copy back of the whole region. `region_back` runs first: it
  // packs a Region's blocks from the host copy, or copies the whole region back now;
  // unpack_jobs only lists.
  void unpack_jobs(std::vector<MoveJob> &jobs);
  int device() const { return device_; }
  int region_back(MPI_Comm comm, const char *call);

 private:
  bool library_reads_gpu_ = false;
  Mode mode_ = Mode::User;
  void *user_ = nullptr;
  void *lib_ = nullptr;
  int device_ = -1;
  bool stores_ = false;
  std::vector<Block> blocks_;
  std::vector<std::shared_ptr<const TypeInfo>> infos_;  // keep device-side plan data alive
  std::vector<Plan> plans_;
  std::vector<char *> typed_;  // per block: where its plan starts (its address, or its first byte)
  std::vector<int64_t> offsets_, bytes_;
  Transfer transfer_{Method::OneShot, 0};
  int64_t lo_ = 0, span_ = 0;  // Region: bytes [lo, lo + span) around the buffer
  Scratch staging_;
  bool whole_back_ = true;  // Region: the whole copy goes back, not the store blocks by their plans
  Scratch back_;            // Region: the store blocks packed for the write-back by plan

  // Region: plans the store blocks' write-back, where TEMPI can plan all of them, and
  // takes host memory for their packed bytes. Returns an MPI error code (raised on `comm`).
  int plan_region_back(void *buf, MPI_Comm comm, const char *call);
};

}  // namespace tempi
