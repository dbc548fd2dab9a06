// Collectives on GPU buffers (docs/design.md, "Collectives and persistent requests"). One application collective
// stays one collective of the MPI library on the application's communicator:
//
//   1. each buffer argument of this rank that holds GPU data becomes a Side: its blocks
//      (one per peer) are packed into one staging buffer, all of them in one
//      Backend::pack_async batch and one wait;
//   2. the library runs the same collective on the packed bytes (MPI_BYTE counts and
//      displacements in bytes; MPI_BYTE types for the w-variants);
//   3. the blocks of the receive side are unpacked in one batch (one unpack_async, one wait).
//
// The decision is per buffer and per rank: a rank whose buffer is host memory passes its
// own arguments, and the packed bytes match any user type of the same signature, so ranks
// may mix GPU and host buffers and send and receive types may differ. MPI_IN_PLACE stays
// MPI_IN_PLACE (MPI requires it at all ranks for some calls, and a library may choose its
// algorithm by it). Where the library must see typed data (reductions), or TEMPI cannot
// plan a type, the library gets a host copy of the buffer's whole region instead
// (`Region`; only the blocks go back where TEMPI can plan them), so no GPU pointer reaches it — except that a blocking non-reduction
// collective on a CUDA-aware library gets the application's buffer as it is. Reductions
// and nonblocking collectives never get GPU memory: Open MPI 4.1's CUDA-aware build crashes
// in nonblocking reductions and MPI_Reduce_local and returns wrong bytes from nonblocking
// collectives on device buffers.
//
// Nonblocking collectives pack at the call, start the library's nonblocking collective on
// the packed bytes and record a CollectiveOp in the request table: the completion call
// that completes the request unpacks the receive blocks (wrap_completion.cpp), and the
// op keeps staging, wire arrays and wire types alive until then.
#pragma once

#include <mpi.h>

#include <functional>
#include <memory>
#include <vector>

#include "backend.hpp"
#include "base/type_cache.hpp"
#include "p2p/messages.hpp"
#include "p2p/requests.hpp"

namespace tempi {

class ZeroCopyPersistent;
class HeldHandles;

// One typed block of a buffer argument: `count` elements of `type` at `disp` bytes from
// the buffer's address.
struct Block {
  int64_t disp = 0;
  int count = 0;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  bool load = false;   // the library reads it: packed (or copied) before the call
  bool store = false;  // the library writes it: unpacked (or copied back) after the call
};

// MPI's checks of a buffer argument's blocks that the library no longer sees once TEMPI
// rewires them: counts not negative, the datatypes of non-empty blocks not null and
// committed (an empty block's type is never looked at). An MPI error code.
int check_types(const std::vector<Block> &blocks, MPI_Comm comm, const char *call);

// A block's plan placed at its data: GPU work starts at `typed` (the block's address, or
// its first byte where the block's address lies outside the bytes it touches).
struct PlacedBlock {
  std::shared_ptr<const TypeInfo> info;  // keeps device-side plan data alive
  Plan plan;
  char *typed = nullptr;
  int64_t bytes = 0;  // packed
  int64_t low = 0, high = 0;  // the bytes it touches: [typed + low, typed + high)
};
// False when TEMPI cannot plan the block's type. `same`: the info of a block of the same
// type (neighbouring blocks of most calls share one lookup), or null.
bool place_block(void *buf, const Block &b, const std::shared_ptr<const TypeInfo> *same, PlacedBlock &out);

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
  bool stores() const { return stores_; }
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

// The counts, displacements and types the library gets for one side: the user's for
// User and Region sides, bytes for Pack sides (in a unit of several bytes only where an
// int cannot hold them). Kept with the op: a nonblocking collective reads them until it completes.
struct Wire {
  int count = 0;                      // uniform blocks
  MPI_Datatype unit = MPI_BYTE;
  std::vector<int> counts, displs;    // per block
  std::vector<MPI_Aint> adispls;      // per block, MPI_Aint byte displacements
  std::vector<MPI_Datatype> types;    // per block
  OwnedType owned;                    // a unit TEMPI made
  std::vector<OwnedType> placed;      // per-block types that carry a displacement past 2 GiB
};

// Everything one collective call needs around the library call.
struct CollectiveOp final : TrackedOp {
  const char *call = "";
  MPI_Comm comm = MPI_COMM_NULL;
  Side send, recv;
  Wire swire, rwire;
  bool finished = false;  // the receive side is in place (finish ran)

  MPI_Comm error_comm() const override { return comm; }
  Finisher finisher() const override;
};

// After the library completed `op` with error `err`: the receive side's data into the
// application's buffer (nothing when err is an error). Runs once.
int finish_collective(CollectiveOp &op, int err);

// finish_collective for ops that completed together (each a CollectiveOp): unpacks issued
// together, one wait per GPU.
int finish_collectives(std::vector<OpFinishing> &batch);

// Whether a buffer argument holds GPU data (device or managed memory; never MPI_IN_PLACE).
bool gpu_data(const void *buf);

// How a handler issues the library's call: blocking (`request` null), nonblocking, or an
// MPI-4 persistent init (`persistent`): then the handler plans and takes staging once and
// keeps, instead of calling the library, how to issue the library's nonblocking call on
// the staging (Init::restart), which every MPI_Start runs (persistent.hpp).
struct Issue {
  // A persistent init's outcome, owned by the wrapper: the restart, and whether the
  // handler made the request; where it did not (it left the call to the library before
  // planning anything), persistent_made makes it.
  struct Init {
    // `comm` and `types`, the handles of the application's that every start names, held
    // for as long as the request lives (persistent.hpp, HeldHandles).
    Init(MPI_Comm comm, const std::vector<MPI_Datatype> &types);
    std::function<int(MPI_Request *)> restart;
    bool made = false;
    std::shared_ptr<ZeroCopyPersistent> zero_copy;  // the zero-copy pairs every start moves (or null)
    // Arrays TEMPI made that `restart` reads at every start (the per-peer counts of a
    // one-count init run as its v-variant): they live as long as the request.
    std::shared_ptr<const void> arrays;
    std::shared_ptr<HeldHandles> held;
  };
  Issue(MPI_Request *r = nullptr) : request(r) {}  // the blocking and nonblocking calls
  static Issue persistent_init(MPI_Request *r, Init *init) {
    Issue i(r);
    i.persistent = true;
    i.init = init;
    return i;
  }
  int keep(std::function<int(MPI_Request *)> f) const {
    init->restart = std::move(f);
    return MPI_SUCCESS;
  }
  MPI_Request *request = nullptr;
  bool persistent = false;
  Init *init = nullptr;
};

// After a handler ran a persistent init that returned `err`: makes the request where the
// handler did not. Returns an MPI error code.
int persistent_made(int err, Issue::Init &init, MPI_Comm comm, const char *call, MPI_Request *request);

// The datatypes of a w-variant's arrays, as many as the call has blocks on each side (an
// all-to-all's peers, or a neighbourhood's destinations and sources); none of an array
// that is null or, with MPI_IN_PLACE, ignored.
std::vector<MPI_Datatype> block_types(MPI_Comm comm, bool neighbourhood, const MPI_Datatype stypes[],
                                      const MPI_Datatype rtypes[], bool in_place);

// Before the library's MPI_Start of a persistent collective: the send blocks' current
// data packed (or regions copied in), and the receive side marked unfinished.
int start_collective(CollectiveOp &op);

// The handlers (see Issue). Each runs the library's call exactly once.
namespace coll {

int bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm, Issue how);
int gather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype, int root,
           MPI_Comm comm, Issue how);
int gatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, const int rcounts[], const int displs[],
            MPI_Datatype rtype, int root, MPI_Comm comm, Issue how);
int scatter(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype, int root,
            MPI_Comm comm, Issue how);
int scatterv(const void *sbuf, const int scounts[], const int displs[], MPI_Datatype stype, void *rbuf, int rcount,
             MPI_Datatype rtype, int root, MPI_Comm comm, Issue how);
int allgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
              MPI_Comm comm, Issue how);
int allgatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, const int rcounts[], const int displs[],
               MPI_Datatype rtype, MPI_Comm comm, Issue how);
int alltoall(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
             MPI_Comm comm, Issue how);
int alltoallv(const void *sbuf, const int scounts[], const int sdispls[], MPI_Datatype stype, void *rbuf,
              const int rcounts[], const int rdispls[], MPI_Datatype rtype, MPI_Comm comm, Issue how);
int alltoallw(const void *sbuf, const int scounts[], const int sdispls[], const MPI_Datatype stypes[], void *rbuf,
              const int rcounts[], const int rdispls[], const MPI_Datatype rtypes[], MPI_Comm comm,
              Issue how);
int neighbor_allgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
                       MPI_Comm comm, Issue how);
int neighbor_allgatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, const int rcounts[],
                        const int displs[], MPI_Datatype rtype, MPI_Comm comm, Issue how);
int neighbor_alltoall(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
                      MPI_Comm comm, Issue how);
int neighbor_alltoallv(const void *sbuf, const int scounts[], const int sdispls[], MPI_Datatype stype, void *rbuf,
                       const int rcounts[], const int rdispls[], MPI_Datatype rtype, MPI_Comm comm,
                       Issue how);
int neighbor_alltoallw(const void *sbuf, const int scounts[], const MPI_Aint sdispls[], const MPI_Datatype stypes[],
                       void *rbuf, const int rcounts[], const MPI_Aint rdispls[], const MPI_Datatype rtypes[],
                       MPI_Comm comm, Issue how);

// Reductions: staged through host copies, on every library (see above).
int reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm,
           Issue how);
int allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
              Issue how);
int reduce_scatter(const void *sbuf, void *rbuf, const int rcounts[], MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                   Issue how);
int reduce_scatter_block(const void *sbuf, void *rbuf, int rcount, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                         Issue how);
int scan(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm, Issue how);
int exscan(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
           Issue how);
int reduce_local(const void *inbuf, void *inoutbuf, int count, MPI_Datatype type, MPI_Op op);

}  // namespace coll

}  // namespace tempi
