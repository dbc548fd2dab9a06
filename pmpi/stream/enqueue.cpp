// The enqueue calls (streams.hpp): each checks its arguments, builds its operation, and
// queues on the communicator's stream what the stream must do there; TEMPI's stream thread
// (engine.cpp) does the rest. The starts of nonblocking operations are held back until the
// next call that completes something on the same stream (or any MPI call that may block,
// through the progress room): MPI lets a nonblocking operation wait for its completion
// call, and so the starts of a halo exchange's 52 operations cost the stream one pack
// launch and one batch of word writes, not 52 of each; and its completion one batch of
// waits and one unpack launch (docs/design.md, "Stream-ordered communication").
#include <atomic>
#include <chrono>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "backend.hpp"
#include "base/errors.hpp"
#include "base/next.hpp"
#include "base/progress.hpp"
#include "base/type_cache.hpp"
#include "log.hpp"
#include "stream/engine.hpp"
#include "stream/stream_objects.hpp"
#include "stream/streams.hpp"

namespace tempi {
namespace streams {

void Op::deliver(const MPI_Status &st) {
  std::lock_guard<std::mutex> lock(result_mutex);
  result = st;
  finished = true;
  if (status_out) *status_out = st;
}

void Op::want(MPI_Status *out) {
  if (out == MPI_STATUS_IGNORE) return;
  std::lock_guard<std::mutex> lock(result_mutex);
  status_out = out;
  if (finished) *out = result;
}

namespace {

// A communicator bound to a stream.
struct StreamComm {
  AppStream *stream = nullptr;
  int peers = 0;  // the size of the group a rank argument names
};

std::shared_mutex g_comms_mutex;
std::unordered_map<MPI_Comm, StreamComm> g_comms;

std::mutex g_requests_mutex;
std::unordered_map<MPI_Request, std::shared_ptr<Op>> g_requests;

// Starts a stream holds back at most: a long run of nonblocking calls goes to the stream
// in batches of this many.
constexpr size_t kMaxDeferred = 128;

// Starts held back, over every stream (the progress room's cheap question).
std::atomic<int> g_deferred{0};

// The stream hooks' failures are GPU failures of the application's stream.
int stream_error(Status s, const char *what) {
  TEMPI_LOG(Error, "enqueue: %s on the application's stream failed: %s", what, to_string(s));
  return error_class_of(s);
}

// Puts the held-back starts on the stream: one pack launch for the device operations, one
// batch of word writes. The caller holds s.mutex.
int flush_locked(AppStream &s) {
  if (s.deferred.empty()) return MPI_SUCCESS;
  std::vector<MoveJob> packs;
  std::vector<uint32_t *> arrived;
  for (const auto &op : s.deferred) {
    // A device receive's buffer is packed into its staging too, where the library then
    // writes the message: a shorter message leaves the rest as it was, and the unpack at
    // its completion writes back the whole staging, so only the bytes received change,
    // as MPI says. (MPI keeps the application off a receive buffer until completion, so
    // what is packed at the start is what the buffer holds then. The unpack's extent is
    // fixed when it is queued, before the message's size is known.)
    if (op->device && op->bytes > 0)
      packs.push_back(MoveJob{&op->plan, op->typed, op->staging, op->bytes, Transfer{Method::OneShot, 0}});
    arrived.push_back(&op->words->arrived);
  }
  g_deferred.fetch_sub(int(s.deferred.size()), std::memory_order_relaxed);
  s.deferred.clear();
  Backend &b = gpu_backend();
  if (const Status st = b.stream_moves(s.handle, packs, true); st != Status::Ok) return stream_error(st, "packing");
  if (const Status st = b.stream_write(s.handle, arrived, 1); st != Status::Ok)
    return stream_error(st, "a word write");
  return MPI_SUCCESS;
}

// Puts the completions of `ops` on the stream (after flush_locked): it waits for each
// operation's `done`; the device receives then are unpacked by one launch; and it writes
// `consumed`, after which the stream touches neither the words nor the staging again.
int complete_locked(AppStream &s, const std::vector<std::shared_ptr<Op>> &ops) {
  std::vector<uint32_t *> done, consumed;
  std::vector<MoveJob> unpacks;
  for (const auto &op : ops) {
    if (!op->words || (op->is_send && op->device)) continue;  // a device send's buffer is free once packed
    done.push_back(&op->words->done);
    consumed.push_back(&op->words->consumed);  // the words (and staging) may go once the stream passed
    if (!op->is_send && op->device)
      unpacks.push_back(MoveJob{&op->plan, op->typed, op->staging, op->bytes, Transfer{Method::OneShot, 0}});
  }
  Backend &b = gpu_backend();
  if (const Status st = b.stream_wait(s.handle, done, 1); st != Status::Ok) return stream_error(st, "a wait");
  if (const Status st = b.stream_moves(s.handle, unpacks, false); st != Status::Ok)
    return stream_error(st, "unpacking");
  if (const Status st = b.stream_write(s.handle, consumed, 1); st != Status::Ok)
    return stream_error(st, "a word write");
  return MPI_SUCCESS;
}

// Whether the stream is being captured into a graph (refuse_capture below says why that
// matters): held-back starts then stay held back.
bool capturing(const AppStream &s) {
  bool on = false;
  return gpu_backend().stream_capturing(s.handle, on) == Status::Ok && on;
}

void flush_all_streams() {
  std::shared_lock<std::shared_mutex> lock(g_comms_mutex);
  for (auto &[comm, sc] : g_comms) {
    if (capturing(*sc.stream)) continue;
    std::lock_guard<std::mutex> held(sc.stream->mutex);
    if (const int err = flush_locked(*sc.stream)) TEMPI_LOG(Error, "enqueue: flushing held-back starts failed (%d)", err);
  }
}

void register_once() {
  static const ProgressHooks hooks = [] {
    ProgressHooks h;
    h.name = "stream-ordered operations";
    h.queued = [] { return g_deferred.load(std::memory_order_relaxed) > 0; };
    h.flush = [](MPI_Comm, int) { flush_all_streams(); };
    h.drain = [] {
      flush_all_streams();
      engine_drain();
    };
    h.shutdown = engine_shutdown;
    return h;
  }();
  register_progress(ProgressSlot::Streams, hooks);
}

// Enqueued operations are not captured into CUDA graphs yet: a replay would repeat the
// stream's words and moves without TEMPI's stream thread knowing of the operations.
int refuse_capture(const AppStream &s, const char *what) {
  if (!capturing(s)) return MPI_SUCCESS;
  TEMPI_LOG(Error, "%s: the stream is being captured into a CUDA graph, which enqueued operations do not support yet",
            what);
  return MPI_ERR_OTHER;
}

bool find(MPI_Comm comm, StreamComm &out) {
  std::shared_lock<std::shared_mutex> lock(g_comms_mutex);
  const auto it = g_comms.find(comm);
  if (it == g_comms.end()) return false;
  out = it->second;
  return true;
}

MPI_Status null_status() {
  MPI_Status st{};
  st.MPI_SOURCE = MPI_PROC_NULL;
  st.MPI_TAG = MPI_ANY_TAG;
  st.MPI_ERROR = MPI_SUCCESS;
  PMPI_Status_set_elements(&st, MPI_BYTE, 0);
  return st;
}

// The generalized request an application holds for a nonblocking enqueued operation.
int query_op(void *extra, MPI_Status *status) {
  const std::shared_ptr<Op> &op = *static_cast<std::shared_ptr<Op> *>(extra);
  std::lock_guard<std::mutex> lock(op->result_mutex);
  MPI_Count n = 0;
  if (PMPI_Get_elements_x(&op->result, MPI_BYTE, &n) != MPI_SUCCESS || n == MPI_UNDEFINED) n = 0;
  PMPI_Status_set_elements_x(status, MPI_BYTE, n);
  PMPI_Status_set_cancelled(status, 0);
  status->MPI_SOURCE = op->result.MPI_SOURCE;
  status->MPI_TAG = op->result.MPI_TAG;
  status->MPI_ERROR = op->result.MPI_ERROR;
  return op->result.MPI_ERROR;
}
int free_op(void *extra) {
  delete static_cast<std::shared_ptr<Op> *>(extra);
  return MPI_SUCCESS;
}
int cancel_op(void *, int) { return MPI_SUCCESS; }  // an enqueued operation is not cancelled

int start_request(const std::shared_ptr<Op> &op, MPI_Request *request) {
  auto *holder = new std::shared_ptr<Op>(op);
  if (const int err = PMPI_Grequest_start(query_op, free_op, cancel_op, holder, &op->request)) {
    delete holder;
    return err;
  }
  *request = op->request;
  std::lock_guard<std::mutex> lock(g_requests_mutex);
  g_requests[op->request] = op;
  return MPI_SUCCESS;
}

// Checks the arguments of one operation and builds it: MPI_SUCCESS and `op` null for a
// peer MPI_PROC_NULL.
int build(bool is_send, const void *buf, int count, MPI_Datatype type, int peer, int tag, MPI_Comm comm,
          const StreamComm &sc, std::shared_ptr<Op> &op) {
  const char *what = is_send ? "TEMPIX_Send_enqueue" : "TEMPIX_Recv_enqueue";
  if (count < 0) {
    TEMPI_LOG(Error, "%s: count %d is negative", what, count);
    return MPI_ERR_COUNT;
  }
  const bool any_tag = !is_send && tag == MPI_ANY_TAG;
  if (tag < 0 && !any_tag) {
    TEMPI_LOG(Error, "%s: tag %d is invalid", what, tag);
    return MPI_ERR_TAG;
  }
  const bool any_source = !is_send && peer == MPI_ANY_SOURCE;
  if (peer != MPI_PROC_NULL && !any_source && (peer < 0 || peer >= sc.peers)) {
    TEMPI_LOG(Error, "%s: rank %d is not in the communicator (size %d)", what, peer, sc.peers);
    return MPI_ERR_RANK;
  }
  if (type == MPI_DATATYPE_NULL) {
    TEMPI_LOG(Error, "%s: the datatype is MPI_DATATYPE_NULL", what);
    return MPI_ERR_TYPE;
  }
  op = nullptr;
  if (peer == MPI_PROC_NULL) return MPI_SUCCESS;
  const std::shared_ptr<const TypeInfo> info = type_cache().find(type);
  if (!info->committed) {
    TEMPI_LOG(Error, "%s: the datatype is not committed", what);
    return MPI_ERR_TYPE;
  }
  auto o = std::make_shared<Op>();
  o->is_send = is_send;
  o->peer = peer;
  o->tag = tag;
  o->comm = comm;
  o->stream = sc.stream;
  o->bytes = info->size * int64_t(count);
  Backend &b = gpu_backend();
  const MemorySpace space = o->bytes > 0 ? b.classify(buf) : MemorySpace::Host;
  o->device = space == MemorySpace::Device || space == MemorySpace::Managed;
  if (o->device) {
    if (!info->plan) {
      TEMPI_LOG(Error, "%s: TEMPI has no plan for this datatype, and a GPU buffer needs one", what);
      return MPI_ERR_TYPE;
    }
    o->gpu = b.device_of(buf);
    if (o->gpu != sc.stream->device) {
      TEMPI_LOG(Error, "%s: the buffer is on GPU %d, the communicator's stream on GPU %d", what, o->gpu,
                sc.stream->device);
      return MPI_ERR_BUFFER;
    }
    o->plan = info->plan->for_count(count);
    o->typed = const_cast<void *>(buf);
  }
  constexpr size_t kWordsBytes = 64;  // a cache line of its own
  static_assert(sizeof(OpWords) <= kWordsBytes, "the words fit their line");
  const size_t block = kWordsBytes + (o->device ? size_t(o->bytes) : 0);
  if (const Status st = b.acquire(ScratchKind::Pinned, block, o->block); st != Status::Ok) {
    TEMPI_LOG(Error, "%s: no pinned memory for the operation (%zu bytes): %s", what, block, to_string(st));
    return error_class_of(st);
  }
  o->words = new (o->block.ptr) OpWords{0, 0, 0};
  if (o->device) {
    o->staging = static_cast<char *>(o->block.ptr) + kWordsBytes;
    o->buf = o->staging;
    o->count = int(o->bytes);
    o->type = MPI_BYTE;
  } else {
    o->buf = const_cast<void *>(buf);
    o->count = count;
    o->type = type;
  }
  op = std::move(o);
  return MPI_SUCCESS;
}

// Takes a built operation to its stream: held back (nonblocking), or with every start
// held back before it put on the stream, and its completion after (blocking).
int enqueue(const std::shared_ptr<Op> &op, const StreamComm &sc, bool blocking) {
  AppStream &s = *sc.stream;
  std::lock_guard<std::mutex> lock(s.mutex);
  s.deferred.push_back(op);
  g_deferred.fetch_add(1, std::memory_order_relaxed);
  engine_add(op);
  if (!blocking && s.deferred.size() < kMaxDeferred) return MPI_SUCCESS;
  if (const int err = flush_locked(s)) return err;
  return blocking ? complete_locked(s, {op}) : MPI_SUCCESS;
}

int operation(bool is_send, void *buf, int count, MPI_Datatype type, int peer, int tag, MPI_Comm comm,
              MPI_Status *status, MPI_Request *request) {
  const char *what = is_send ? (request ? "TEMPIX_Isend_enqueue" : "TEMPIX_Send_enqueue")
                             : (request ? "TEMPIX_Irecv_enqueue" : "TEMPIX_Recv_enqueue");
  StreamComm sc;
  if (!find(comm, sc)) {
    TEMPI_LOG(Error, "%s: the communicator is not bound to a stream (TEMPIX_Stream_comm_create)", what);
    return MPI_ERR_COMM;
  }
  if (const int err = refuse_capture(*sc.stream, what)) return err;
  std::shared_ptr<Op> op;
  if (const int err = build(is_send, buf, count, type, peer, tag, comm, sc, op)) return err;
  if (!op) {  // MPI_PROC_NULL: nothing to do, at once
    if (status != MPI_STATUS_IGNORE && status) *status = null_status();
    if (!request) return MPI_SUCCESS;
    op = std::make_shared<Op>();
    op->deliver(null_status());
    if (const int err = start_request(op, request)) return err;
    return PMPI_Grequest_complete(op->request);
  }
  if (request) {
    if (const int err = start_request(op, request)) return err;
  } else if (!is_send) {
    op->want(status);
  }
  return enqueue(op, sc, request == nullptr);
}

}  // namespace

int send(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *request) {
  return operation(true, const_cast<void *>(buf), count, type, dest, tag, comm, MPI_STATUS_IGNORE, request);
}

int recv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Status *status,
         MPI_Request *request) {
  return operation(false, buf, count, type, source, tag, comm, status, request);
}

int wait(int count, MPI_Request *requests, MPI_Status *statuses) {
  if (count < 0 || (count > 0 && !requests)) {
    TEMPI_LOG(Error, "TEMPIX_Waitall_enqueue: count %d or the request array is invalid", count);
    return MPI_ERR_ARG;
  }
  // Found first, all of them, so that an unknown request changes nothing.
  std::vector<std::shared_ptr<Op>> ops(static_cast<size_t>(count));
  {
    std::lock_guard<std::mutex> lock(g_requests_mutex);
    for (int i = 0; i < count; ++i) {
      if (requests[i] == MPI_REQUEST_NULL) continue;
      const auto it = g_requests.find(requests[i]);
      if (it == g_requests.end()) {
        TEMPI_LOG(Error, "TEMPIX_Wait_enqueue: request %d is not one of TEMPIX_Isend_enqueue or TEMPIX_Irecv_enqueue", i);
        return MPI_ERR_REQUEST;
      }
      ops[size_t(i)] = it->second;
    }
  }
  for (const auto &op : ops)  // refused before anything changed: the requests stay the application's
    if (op && op->stream)
      if (const int err = refuse_capture(*op->stream, "TEMPIX_Wait_enqueue")) return err;
  {
    std::lock_guard<std::mutex> lock(g_requests_mutex);
    for (int i = 0; i < count; ++i)
      if (ops[size_t(i)]) g_requests.erase(requests[i]);
  }
  // The completions go to each operation's stream, one batch per stream.
  std::vector<AppStream *> order;
  std::unordered_map<AppStream *, std::vector<std::shared_ptr<Op>>> by_stream;
  for (int i = 0; i < count; ++i) {
    MPI_Status *out = statuses == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &statuses[i];
    const std::shared_ptr<Op> &op = ops[size_t(i)];
    if (!op) {
      if (out != MPI_STATUS_IGNORE) *out = null_status();
      continue;
    }
    op->want(out);
    PMPI_Request_free(&requests[i]);  // the stream thread completes it; its copy of the handle stays valid
    requests[i] = MPI_REQUEST_NULL;
    if (!op->words) continue;  // MPI_PROC_NULL
    AppStream *s = op->stream;
    if (!by_stream.count(s)) order.push_back(s);
    by_stream[s].push_back(op);
  }
  int result = MPI_SUCCESS;
  for (AppStream *s : order) {
    std::lock_guard<std::mutex> lock(s->mutex);
    if (const int err = flush_locked(*s)) result = err;
    else if (const int err2 = complete_locked(*s, by_stream[s])) result = err2;
  }
  return result;
}

int comm_create(MPI_Comm comm, AppStream *stream, MPI_Comm *newcomm) {
  if (!stream || !newcomm) {
    TEMPI_LOG(Error, "TEMPIX_Stream_comm_create: %s is null", !stream ? "the stream" : "newcomm");
    return MPI_ERR_ARG;
  }
  int provided = MPI_THREAD_SINGLE;
  PMPI_Query_thread(&provided);
  if (provided != MPI_THREAD_MULTIPLE) {
    TEMPI_LOG(Error, "TEMPIX_Stream_comm_create: enqueued operations are handed to the MPI library by TEMPI's own "
                     "thread, which needs MPI_THREAD_MULTIPLE (MPI_Init_thread)");
    return MPI_ERR_OTHER;
  }
  flush_sends();
  if (const int err = next::MPI_Comm_dup(comm, newcomm)) return err;
  int inter = 0, peers = 0;
  PMPI_Comm_test_inter(*newcomm, &inter);
  if (inter) PMPI_Comm_remote_size(*newcomm, &peers);
  else PMPI_Comm_size(*newcomm, &peers);
  register_once();
  stream->comms.fetch_add(1, std::memory_order_acq_rel);
  std::unique_lock<std::shared_mutex> lock(g_comms_mutex);
  g_comms[*newcomm] = StreamComm{stream, peers};
  return MPI_SUCCESS;
}

void comm_freeing(MPI_Comm comm) {
  StreamComm sc;
  if (!find(comm, sc)) return;
  {
    std::lock_guard<std::mutex> lock(sc.stream->mutex);
    flush_locked(*sc.stream);
  }
  const auto start = std::chrono::steady_clock::now();
  auto warned = start;
  while (engine_unposted(comm)) {
    std::this_thread::yield();
    const auto now = std::chrono::steady_clock::now();
    if (now - warned > std::chrono::seconds(30)) {
      warned = now;
      TEMPI_LOG(Warn, "MPI_Comm_free: the communicator's stream has not reached all its enqueued operations "
                         "after %lld s",
                (long long)std::chrono::duration_cast<std::chrono::seconds>(now - start).count());
    }
  }
  std::unique_lock<std::shared_mutex> lock(g_comms_mutex);
  g_comms.erase(comm);
  sc.stream->comms.fetch_sub(1, std::memory_order_acq_rel);
}

}  // namespace streams
}  // namespace tempi
