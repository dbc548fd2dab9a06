// Reading the messages of zero-copy point-to-point (zero_copy_p2p.hpp): among receives that
// completed together, the control messages recognized (never by chance: size, magic, nonce
// and a live entry of the sender's board), their sizes checked against the receives, and
// the senders' objects read through IPC mappings, one launch per GPU; or, where the sender's
// buffer cannot be mapped here, pushed by the sender into a landing buffer
// (zero_copy/p2p_push.hpp). Internal to the zero_copy/p2p_*.cpp files.
#pragma once

#include <memory>
#include <vector>

#include "zero_copy/p2p_flight.hpp"
#include "zero_copy/p2p_push.hpp"

namespace tempi {
namespace zcp2p {

// The reads of control messages that arrived together, on one GPU: issued at once, finished
// (their senders told, their receives complete) when the GPU is done.
struct Reads {
  int device = -1;
  struct Read {
    Finishing *f;  // null once the batch outlives its Finishing entries (progress: `flights`)
    const Plan *from;
    const void *from_typed;
    int64_t bytes;
    P2pEntry *entry;
    Incoming *in;
  };
  std::vector<Read> reads;
  std::vector<PeerMapping> mapped;  // the senders' buffers the reads read through, held until done
  std::vector<PairJob> jobs;
  Scratch scratch;
  Fence fence;
  Landing *landing = nullptr;  // a push: its one message arrives in this buffer, not through a read
  Status status = Status::Ok;
  std::vector<std::shared_ptr<Flight>> flights;  // progress: the receives these reads finish
};

// Recognizes the control messages among receives that completed together, checks their
// sizes, and issues their reads (one launch per GPU). Marks every receive it handled
// finished; data beyond a receive's capacity is a truncation.
std::vector<Reads> issue_reads(std::vector<Finishing> &batch);

// Whether the reads of `g` finished (wait: until they have); then tells their senders and
// returns the error (raised on the receive's communicator) in `err`.
bool reads_done(Reads &g, bool wait, int &err);

}  // namespace zcp2p
}  // namespace tempi
