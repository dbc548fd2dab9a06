// One point-to-point message on a GPU buffer, as the MPI library sees it (docs/design.md,
// "Point-to-point"). A send packs the user's data and hands the MPI library the
// packed bytes; a receive hands it a staging buffer and unpacks once the data is in.
// On the wire each application message stays one message on the application's
// communicator and tag, holding exactly the bytes MPI_Pack would produce, so any
// matching receive works. Host buffers, MPI_PROC_NULL, empty messages and disabled
// TEMPI pass the user's arguments through untouched.
#pragma once

#include <mpi.h>

#include <memory>
#include <vector>

#include "backend.hpp"
#include "method.hpp"
#include "base/type_cache.hpp"

namespace tempi {

struct NodeShare;  // node_share.hpp

// A derived datatype TEMPI made for the wire, freed with its owner.
class OwnedType {
 public:
  OwnedType() = default;
  explicit OwnedType(MPI_Datatype t) : type_(t) {}
  OwnedType(OwnedType &&o) noexcept : type_(o.type_) { o.type_ = MPI_DATATYPE_NULL; }
  OwnedType &operator=(OwnedType &&o) noexcept {
    std::swap(type_, o.type_);
    return *this;
  }
  OwnedType(const OwnedType &) = delete;
  OwnedType &operator=(const OwnedType &) = delete;
  ~OwnedType();

 private:
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
};

// The arguments to give the MPI library for a send, and what must live until it completes.
struct Outgoing {
  const void *buf = nullptr;
  int count = 0;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  Scratch staging;  // the packed bytes
  OwnedType wire_type;
};

// How a send's data reaches the MPI library: the user's arguments (PassThrough), a host
// copy of the whole region that the library packs itself (Region: types TEMPI cannot
// plan), or packed by TEMPI (Pack).
struct SendPlan {
  enum class Kind { PassThrough, Region, Pack };
  Kind kind = Kind::PassThrough;
  std::shared_ptr<const TypeInfo> info;  // Pack: keeps device-side plan data alive
  Plan plan;
  Transfer transfer{Method::Staged, 0};
  int64_t region_lo = 0, region_bytes = 0;  // Region: the bytes around the buffer
};

// Everything a send needs before its data moves: the decision, staging, and in `out`
// the arguments for the MPI library. Returns an MPI error code (raised on `comm`).
// `batched`: a nonblocking call, whose GPU work is issued with others (choose_transfer).
// `may_zero_copy`: a send that zero-copy point-to-point may take (p2p_isend), so a
// contiguous one is planned as a pack too, never handed to the library as it is.
int plan_send(const void *buf, int count, MPI_Datatype type, int peer, MPI_Comm comm, const char *call,
              SendPlan &sp, Outgoing &out, bool batched = false, bool may_zero_copy = false);

// Moves a planned send's data into its staging (completes before returning).
int fill_staging(const void *buf, const SendPlan &sp, Outgoing &out, MPI_Comm comm, const char *call);

// The arguments to give the MPI library for a receive, and what to do once it completed.
struct Incoming {
  void *buf = nullptr;
  int count = 0;
  MPI_Datatype type = MPI_DATATYPE_NULL;

  enum class After { Nothing, Unpack, CopyBack };
  After after = After::Nothing;
  bool finished = false;  // finish_recv ran (MPI_Request_get_status may run it early)
  MPI_Comm comm = MPI_COMM_NULL;
  int peer = MPI_ANY_SOURCE;  // the source the receive names
  void *user = nullptr;
  Scratch staging;
  OwnedType wire_type;
  // Unpack: the user's plan and how the bytes move to the GPU.
  std::shared_ptr<const TypeInfo> info;  // keeps device-side plan data alive
  Plan plan;
  Transfer transfer{Method::Staged, 0};
  int device = -1;  // the GPU that holds `user`
  // CopyBack: a type TEMPI cannot plan, received by the MPI library into a host copy
  // of the bytes [region_lo, region_lo + region_bytes) around `user`.
  int64_t region_lo = 0, region_bytes = 0;
  // A receive that may get a zero-copy control message (zero_copy_p2p.hpp): the
  // communicator's node share, and the packed bytes the user's buffer holds (its staging
  // holds at least kControlBytes).
  std::shared_ptr<NodeShare> p2p;
  int64_t capacity = 0;
  // Finished by MPI_Request_get_status, before the completion call that ends the request:
  // what that call reports again (the size that replaced a control message's, the error).
  bool early = false;
  MPI_Count early_elements = 0;
  int early_result = MPI_SUCCESS;
};

int prepare_recv(void *buf, int count, MPI_Datatype type, int peer, MPI_Comm comm, const char *call, Incoming &in,
                 bool batched = false);

// After the MPI library completed the receive with `status` and error `err`: moves
// what arrived into the user's buffer (nothing when cancelled or failed). A zero-copy
// message's size replaces the control message's in `status`.
int finish_recv(Incoming &in, MPI_Status &status, int err);

// finish_recv for receives that completed together: their unpacks are issued together
// and waited for once per GPU. Each entry's own error goes to `result`; returns the first.
struct Finishing {
  Incoming *in;
  MPI_Status status;
  int err;
  int result = MPI_SUCCESS;
};
int finish_recvs(std::vector<Finishing> &batch);
// finish_recv for MPI_Request_get_status, which found the receive complete: the data is put
// in place and `status` made what the application sees, and the completion call that ends
// the request reports both again.
int finish_recv_early(Incoming &in, MPI_Status &status);

// The size of a zero-copy control message on the wire: the staging of a receive that may
// get one holds at least this many bytes.
constexpr int kControlBytes = 48;

// What a receive asks of zero-copy point-to-point (zero_copy/zero_copy_p2p.hpp, which
// registers these when it is first used: until then no communicator has it on, p2p_share
// finds none, and no receive expects a control message). stage_for_control: whether a
// receive from `source` stages in host memory for an expected control message;
// take_controls: the receives of `batch` that got one read their senders' objects.
struct ControlReceipt {
  bool (*stage_for_control)(NodeShare &s, int source);
  void (*take_controls)(std::vector<Finishing> &batch);
};
void register_control_receipt(const ControlReceipt &r);

// The bytes [lo, lo + bytes) relative to its address that a buffer of `count` (> 0)
// elements of `type` spans.
void span_of(int count, MPI_Datatype type, int64_t &lo, int64_t &bytes);

// Host staging for `bytes`: pinned memory, else pageable memory (`pageable`: then only
// the staged method reaches it from the GPU), said once per call. MPI_ERR_NO_MEM (raised
// on `comm`) when neither can be had.
int acquire_host_staging(int64_t bytes, MPI_Comm comm, const char *call, Scratch &out, bool &pageable);

// Decisions on GPU buffers made in full, and those a repeated call took from its thread's
// kept decisions (messages.cpp, "Repeated calls") (tests).
struct DecisionCounts {
  uint64_t made = 0, recalled = 0;
};
DecisionCounts decision_counts();

// The method that TEMPI_METHOD requested, or what TEMPIX_Set_method set since.
Method requested_method();
void set_requested_method(Method m);

}  // namespace tempi
