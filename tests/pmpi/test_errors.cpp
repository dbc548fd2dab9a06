// Bad arguments on GPU buffers (docs/using.md, "Errors"): every bad call that TEMPI
// answers for a GPU buffer must give the error class the MPI library gives for the same
// call on a host buffer, through the same error handler, and write nothing: no user
// buffer, no position, no request. The library's answer is asked at run time (PMPI_ on
// host memory), so the test holds for any library. Built against the emulated backend,
// whose device memory faults on host access, and run on one rank under mpiexec.
#include <mpi.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <vector>

#include "backend.hpp"
#include "p2p_support.hpp"
#include "p2p/requests.hpp"

using namespace p2p;

namespace {

// Which error handler a call invoked: the test communicator's or MPI_COMM_WORLD's.
int g_comm_hits = 0, g_world_hits = 0;
void on_comm_error(MPI_Comm *, int *, ...) { ++g_comm_hits; }
void on_world_error(MPI_Comm *, int *, ...) { ++g_world_hits; }

struct Outcome {
  int error_class;
  int comm_hits, world_hits;
  bool operator==(const Outcome &o) const {
    return error_class == o.error_class && comm_hits == o.comm_hits && world_hits == o.world_hits;
  }
};

std::ostream &operator<<(std::ostream &os, const Outcome &o) {
  char name[MPI_MAX_ERROR_STRING] = "";
  int len = 0;
  MPI_Error_string(o.error_class, name, &len);
  return os << "class " << o.error_class << " (" << name << "), handler of the communicator x" << o.comm_hits
            << ", of MPI_COMM_WORLD x" << o.world_hits;
}

template <class F>
Outcome outcome(F &&call) {
  g_comm_hits = g_world_hits = 0;
  const int err = call();
  int cls = MPI_SUCCESS;
  if (err != MPI_SUCCESS) MPI_Error_class(err, &cls);
  return {cls, g_comm_hits, g_world_hits};
}

// The same bad call through TEMPI on GPU memory and through the library on host memory.
#define SAME_AS_LIBRARY(tempi_call, library_call)            \
  do {                                                       \
    const Outcome tempi_ = outcome([&] { return tempi_call; });     \
    const Outcome library_ = outcome([&] { return library_call; }); \
    INFO("TEMPI: " #tempi_call);                             \
    INFO("library: " #library_call);                         \
    CHECK(library_.error_class != MPI_SUCCESS);              \
    CHECK(tempi_ == library_);                               \
  } while (0)

// A communicator whose errors are recorded (and returned), with MPI_COMM_WORLD's.
struct Handlers {
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Errhandler on_comm, on_world;
  Handlers() {
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_create_errhandler(on_comm_error, &on_comm);
    MPI_Comm_create_errhandler(on_world_error, &on_world);
    MPI_Comm_set_errhandler(comm, on_comm);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, on_world);
  }
  ~Handlers() {
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MPI_Errhandler_free(&on_comm);
    MPI_Errhandler_free(&on_world);
    MPI_Comm_free(&comm);
  }
};

MPI_Datatype uncommitted_vector() {
  MPI_Datatype t;
  MPI_Type_vector(16, 2, 5, MPI_INT, &t);
  return t;
}

constexpr size_t kBytes = 4096;

// A GPU buffer and a host buffer of kBytes, both full of poison; unchanged() says
// whether they still are.
struct Buffers {
  Buf gpu{Where::Gpu, kBytes};
  std::vector<char> host = std::vector<char>(kBytes, kPoison);
  Buffers() { gpu.fill(kPoison); }
  bool unchanged() const {
    const std::vector<char> poison(kBytes, kPoison);
    return gpu.download() == poison && host == poison;
  }
};

}  // namespace

TEST_CASE("MPI_Pack and MPI_Unpack of GPU data reject what the library rejects", "[errors]") {
  Handlers h;
  Buffers b;
  std::vector<char> lib_in(kBytes), lib_out(kBytes);
  MPI_Datatype loose = uncommitted_vector();
  MPI_Datatype v = vector2d();
  void *g = b.gpu.get();
  char *o = b.host.data();
  int pos = 0, lpos = 0;
  const int n = int(kBytes);

  SAME_AS_LIBRARY(MPI_Pack(g, 1, loose, o, n, &pos, h.comm), PMPI_Pack(lib_in.data(), 1, loose, lib_out.data(), n, &lpos, h.comm));
  SAME_AS_LIBRARY(MPI_Pack(g, 1, v, o, n, &pos, MPI_COMM_NULL),
                  PMPI_Pack(lib_in.data(), 1, v, lib_out.data(), n, &lpos, MPI_COMM_NULL));
  SAME_AS_LIBRARY(MPI_Pack(g, -1, v, o, n, &pos, h.comm), PMPI_Pack(lib_in.data(), -1, v, lib_out.data(), n, &lpos, h.comm));
  SAME_AS_LIBRARY(MPI_Pack(g, 1, MPI_DATATYPE_NULL, o, n, &pos, h.comm),
                  PMPI_Pack(lib_in.data(), 1, MPI_DATATYPE_NULL, lib_out.data(), n, &lpos, h.comm));
  SAME_AS_LIBRARY(MPI_Pack(g, 1, v, o, n, nullptr, h.comm),
                  PMPI_Pack(lib_in.data(), 1, v, lib_out.data(), n, nullptr, h.comm));
  SAME_AS_LIBRARY(MPI_Pack(g, 1, v, o, -1, &pos, h.comm), PMPI_Pack(lib_in.data(), 1, v, lib_out.data(), -1, &lpos, h.comm));
  // MPICH 4.0.2 dies by SIGSEGV on a NULL outbuf; MPI_ERR_ARG is what it gives for a NULL inbuf.
  CHECK(outcome([&] { return MPI_Pack(g, 1, v, nullptr, n, &pos, h.comm); }) == Outcome{MPI_ERR_ARG, 1, 0});
  // The GPU buffer as the packed side.
  SAME_AS_LIBRARY(MPI_Pack(o, 1, loose, g, n, &pos, h.comm), PMPI_Pack(lib_in.data(), 1, loose, lib_out.data(), n, &lpos, h.comm));
  SAME_AS_LIBRARY(MPI_Pack(nullptr, 1, v, g, n, &pos, h.comm), PMPI_Pack(nullptr, 1, v, lib_out.data(), n, &lpos, h.comm));

  SAME_AS_LIBRARY(MPI_Unpack(o, n, &pos, g, 1, loose, h.comm), PMPI_Unpack(lib_in.data(), n, &lpos, lib_out.data(), 1, loose, h.comm));
  SAME_AS_LIBRARY(MPI_Unpack(o, n, &pos, g, 1, v, MPI_COMM_NULL),
                  PMPI_Unpack(lib_in.data(), n, &lpos, lib_out.data(), 1, v, MPI_COMM_NULL));
  SAME_AS_LIBRARY(MPI_Unpack(o, n, &pos, g, -1, v, h.comm), PMPI_Unpack(lib_in.data(), n, &lpos, lib_out.data(), -1, v, h.comm));
  SAME_AS_LIBRARY(MPI_Unpack(o, -1, &pos, g, 1, v, h.comm), PMPI_Unpack(lib_in.data(), -1, &lpos, lib_out.data(), 1, v, h.comm));
  SAME_AS_LIBRARY(MPI_Unpack(o, n, nullptr, g, 1, v, h.comm), PMPI_Unpack(lib_in.data(), n, nullptr, lib_out.data(), 1, v, h.comm));
  SAME_AS_LIBRARY(MPI_Unpack(g, n, &pos, o, 1, MPI_DATATYPE_NULL, h.comm),
                  PMPI_Unpack(lib_in.data(), n, &lpos, lib_out.data(), 1, MPI_DATATYPE_NULL, h.comm));

  CHECK(pos == 0);
  CHECK(b.unchanged());
  MPI_Type_free(&loose);
  MPI_Type_free(&v);
}

TEST_CASE("MPI_Pack of GPU data that does not fit is truncated, writing nothing", "[errors]") {
  // MPICH 4.0.2 itself reports success here (and writes before the buffer for a negative
  // position); the standard says MPI_ERR_TRUNCATE, which TEMPI gives.
  Handlers h;
  Buffers b;
  MPI_Datatype v = vector2d();  // 1200 packed bytes
  for (const auto &[outsize, start] : {std::pair{1199, 0}, {1200, 1}, {100, 200}, {kBytes, -8}}) {
    int pos = start;
    INFO("outsize " << outsize << ", position " << start);
    CHECK(outcome([&] { return MPI_Pack(b.gpu.get(), 1, v, b.host.data(), int(outsize), &pos, h.comm); }) ==
          Outcome{MPI_ERR_TRUNCATE, 1, 0});
    CHECK(pos == start);
    CHECK(outcome([&] { return MPI_Unpack(b.host.data(), int(outsize), &pos, b.gpu.get(), 1, v, h.comm); }) ==
          Outcome{MPI_ERR_TRUNCATE, 1, 0});
    CHECK(pos == start);
  }
  CHECK(b.unchanged());
  MPI_Type_free(&v);
}

TEST_CASE("a type TEMPI does not plan is truncated as a planned one, writing nothing", "[errors]") {
  // The library packs such a type between host images of the GPU buffers, sized by the
  // call's arguments: the checks come first, else it writes past the image.
  Handlers h;
  Buffers typed, packed;
  const int count = 100;  // MPI_DOUBLE_INT: 1200 packed bytes
  for (const auto &[size, start] : {std::pair{1199, 0}, {1200, 1}, {100, 200}}) {
    int pos = start;
    INFO("size " << size << ", position " << start);
    CHECK(outcome([&] { return MPI_Pack(typed.gpu.get(), count, MPI_DOUBLE_INT, packed.gpu.get(), size, &pos, h.comm); }) ==
          Outcome{MPI_ERR_TRUNCATE, 1, 0});
    CHECK(pos == start);
    CHECK(outcome([&] { return MPI_Unpack(packed.gpu.get(), size, &pos, typed.gpu.get(), count, MPI_DOUBLE_INT, h.comm); }) ==
          Outcome{MPI_ERR_TRUNCATE, 1, 0});
    CHECK(pos == start);
  }
  CHECK(typed.unchanged());
  CHECK(packed.unchanged());
}

TEST_CASE("MPI_Pack between pinned host buffers is the library's", "[errors]") {
  // Pinned memory is host memory, as in point-to-point calls: the library's answer for the
  // same call on pageable memory, here one that does not fit.
  Handlers h;
  tempi::Scratch in, out;
  REQUIRE(tempi::gpu_backend().acquire(tempi::ScratchKind::Pinned, kBytes, in) == tempi::Status::Ok);
  REQUIRE(tempi::gpu_backend().acquire(tempi::ScratchKind::Pinned, kBytes, out) == tempi::Status::Ok);
  std::vector<char> host_in(kBytes, 1), host_out(kBytes, 0);
  std::memset(in.ptr, 1, kBytes);
  int pos = 40, host_pos = 40;
  const Outcome pinned = outcome([&] { return MPI_Pack(in.ptr, 6, MPI_DOUBLE, out.ptr, 64, &pos, h.comm); });
  const Outcome library =
      outcome([&] { return PMPI_Pack(host_in.data(), 6, MPI_DOUBLE, host_out.data(), 64, &host_pos, h.comm); });
  CHECK(pinned == library);
  CHECK(pos == host_pos);
}

TEST_CASE("point-to-point calls on GPU data reject what the library rejects, before any GPU work", "[errors]") {
  Handlers h;
  Buffers b;
  std::vector<char> lib(kBytes);
  MPI_Datatype loose = uncommitted_vector();
  MPI_Datatype v = vector2d();
  void *g = b.gpu.get();
  char *l = lib.data();
  MPI_Request req = MPI_REQUEST_NULL, lreq = MPI_REQUEST_NULL;
  int ub_flag = 0, *ub = nullptr;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &ub_flag);
  const int big_tag = *ub + 1;

  struct Bad {
    const char *what;
    int count;
    MPI_Datatype type;
    int peer, tag;
    MPI_Comm comm;
  };
  const std::vector<Bad> sends = {
      {"not committed", 1, loose, 0, 0, h.comm},        {"MPI_COMM_NULL", 1, v, 0, 0, MPI_COMM_NULL},
      {"count -1", -1, v, 0, 0, h.comm},                {"MPI_DATATYPE_NULL", 1, MPI_DATATYPE_NULL, 0, 0, h.comm},
      {"rank past the group", 1, v, 5, 0, h.comm},      {"rank -5", 1, v, -5, 0, h.comm},
      {"tag -1", 1, v, 0, -1, h.comm},                  {"MPI_ANY_TAG", 1, v, 0, MPI_ANY_TAG, h.comm},
      {"tag past MPI_TAG_UB", 1, v, 0, big_tag, h.comm}, {"count -1 and rank 5", -1, v, 5, 0, h.comm},
      {"not committed, to MPI_PROC_NULL", 1, loose, MPI_PROC_NULL, 0, h.comm},
  };
  for (const Bad &c : sends) {
    INFO(c.what);
    SAME_AS_LIBRARY(MPI_Send(g, c.count, c.type, c.peer, c.tag, c.comm),
                    PMPI_Send(l, c.count, c.type, c.peer, c.tag, c.comm));
    SAME_AS_LIBRARY(MPI_Ssend(g, c.count, c.type, c.peer, c.tag, c.comm),
                    PMPI_Ssend(l, c.count, c.type, c.peer, c.tag, c.comm));
    // Deferred sends: TEMPI posts the message later, so it must check now.
    SAME_AS_LIBRARY(MPI_Isend(g, c.count, c.type, c.peer, c.tag, c.comm, &req),
                    PMPI_Isend(l, c.count, c.type, c.peer, c.tag, c.comm, &lreq));
    SAME_AS_LIBRARY(MPI_Send_init(g, c.count, c.type, c.peer, c.tag, c.comm, &req),
                    PMPI_Send_init(l, c.count, c.type, c.peer, c.tag, c.comm, &lreq));
    CHECK(req == MPI_REQUEST_NULL);
  }
  SAME_AS_LIBRARY(MPI_Isend(g, 1, v, 0, 0, h.comm, nullptr), PMPI_Isend(l, 1, v, 0, 0, h.comm, nullptr));

  const std::vector<Bad> recvs = {
      {"not committed", 1, loose, 0, 0, h.comm},          {"MPI_COMM_NULL", 1, v, 0, 0, MPI_COMM_NULL},
      {"count -1", -1, v, 0, 0, h.comm},                  {"source past the group", 1, v, 5, 0, h.comm},
      {"source -7", 1, v, -7, 0, h.comm},                 {"tag -5", 1, v, 0, -5, h.comm},
      {"tag past MPI_TAG_UB", 1, v, MPI_ANY_SOURCE, big_tag, h.comm},
      {"not committed, any source and tag", 1, loose, MPI_ANY_SOURCE, MPI_ANY_TAG, h.comm},
  };
  for (const Bad &c : recvs) {
    INFO(c.what);
    SAME_AS_LIBRARY(MPI_Recv(g, c.count, c.type, c.peer, c.tag, c.comm, MPI_STATUS_IGNORE),
                    PMPI_Recv(l, c.count, c.type, c.peer, c.tag, c.comm, MPI_STATUS_IGNORE));
    SAME_AS_LIBRARY(MPI_Irecv(g, c.count, c.type, c.peer, c.tag, c.comm, &req),
                    PMPI_Irecv(l, c.count, c.type, c.peer, c.tag, c.comm, &lreq));
    SAME_AS_LIBRARY(MPI_Recv_init(g, c.count, c.type, c.peer, c.tag, c.comm, &req),
                    PMPI_Recv_init(l, c.count, c.type, c.peer, c.tag, c.comm, &lreq));
    SAME_AS_LIBRARY(MPI_Sendrecv(g, 1, v, 0, 0, g, c.count, c.type, c.peer, c.tag, c.comm, MPI_STATUS_IGNORE),
                    PMPI_Sendrecv(l, 1, v, 0, 0, l, c.count, c.type, c.peer, c.tag, c.comm, MPI_STATUS_IGNORE));
    CHECK(req == MPI_REQUEST_NULL);
  }
  SAME_AS_LIBRARY(MPI_Mrecv(g, 1, v, nullptr, MPI_STATUS_IGNORE), PMPI_Mrecv(l, 1, v, nullptr, MPI_STATUS_IGNORE));

  CHECK(b.unchanged());
  CHECK(tempi::requests().empty());
  MPI_Type_free(&loose);
  MPI_Type_free(&v);
}

TEST_CASE("completion calls with bad arrays reject what the library rejects while TEMPI tracks requests",
          "[errors]") {
  Handlers h;
  Buf gpu(Where::Gpu, kBytes);
  gpu.fill(kPoison);
  MPI_Datatype v = vector2d();
  MPI_Request mine = MPI_REQUEST_NULL;  // a GPU receive TEMPI tracks, completed at the end
  REQUIRE(MPI_Irecv(gpu.get(), 1, v, 0, 7, h.comm, &mine) == MPI_SUCCESS);
  REQUIRE_FALSE(tempi::requests().empty());

  MPI_Request reqs[2] = {mine, MPI_REQUEST_NULL};
  int flag = 0, index = 0, outcount = 0, indices[2];
  // MPI_Wait and MPI_Request_free on NULL are for the library to report (through
  // MPI_COMM_WORLD's handler: there is no request to name a communicator).
  SAME_AS_LIBRARY(MPI_Waitall(-1, reqs, MPI_STATUSES_IGNORE), PMPI_Waitall(-1, reqs, MPI_STATUSES_IGNORE));
  SAME_AS_LIBRARY(MPI_Waitall(2, nullptr, MPI_STATUSES_IGNORE), PMPI_Waitall(2, nullptr, MPI_STATUSES_IGNORE));
  SAME_AS_LIBRARY(MPI_Testall(2, reqs, nullptr, MPI_STATUSES_IGNORE), PMPI_Testall(2, reqs, nullptr, MPI_STATUSES_IGNORE));
  SAME_AS_LIBRARY(MPI_Wait(nullptr, MPI_STATUS_IGNORE), PMPI_Wait(nullptr, MPI_STATUS_IGNORE));
  SAME_AS_LIBRARY(MPI_Test(reqs, nullptr, MPI_STATUS_IGNORE), PMPI_Test(reqs, nullptr, MPI_STATUS_IGNORE));
  SAME_AS_LIBRARY(MPI_Testany(2, reqs, nullptr, &flag, MPI_STATUS_IGNORE),
                  PMPI_Testany(2, reqs, nullptr, &flag, MPI_STATUS_IGNORE));
  SAME_AS_LIBRARY(MPI_Testany(-2, reqs, &index, &flag, MPI_STATUS_IGNORE),
                  PMPI_Testany(-2, reqs, &index, &flag, MPI_STATUS_IGNORE));
  SAME_AS_LIBRARY(MPI_Testsome(2, reqs, nullptr, indices, MPI_STATUSES_IGNORE),
                  PMPI_Testsome(2, reqs, nullptr, indices, MPI_STATUSES_IGNORE));
  SAME_AS_LIBRARY(MPI_Testsome(2, reqs, &outcount, nullptr, MPI_STATUSES_IGNORE),
                  PMPI_Testsome(2, reqs, &outcount, nullptr, MPI_STATUSES_IGNORE));
  SAME_AS_LIBRARY(MPI_Request_get_status(mine, nullptr, MPI_STATUS_IGNORE),
                  PMPI_Request_get_status(mine, nullptr, MPI_STATUS_IGNORE));
  SAME_AS_LIBRARY(MPI_Request_free(nullptr), PMPI_Request_free(nullptr));
  CHECK(reqs[0] == mine);

  // The tracked receive still completes, with its data.
  Buf src(Where::Gpu, kBytes);
  src.upload(pattern(kBytes, 3));
  REQUIRE(MPI_Send(src.get(), 1, v, 0, 7, h.comm) == MPI_SUCCESS);
  REQUIRE(MPI_Wait(&mine, MPI_STATUS_IGNORE) == MPI_SUCCESS);
  const Layout l{v, 1};
  const std::vector<char> poison(kBytes, kPoison);
  CHECK(first_difference(gpu.download(), expected(l, l, 3, -1, &poison)) == "");
  CHECK(tempi::requests().empty());
  MPI_Type_free(&v);
}

TEST_CASE("a GPU request TEMPI tracks, twice in one completion call, is refused with the requests untouched",
          "[errors]") {
  // MPI makes a request twice in one array erroneous. TEMPI's answer is MPI_ERR_REQUEST
  // through the request's communicator, every request left as it was. Without it, the wait
  // forms hang on a deferred send's generalized request (TEMPI completes it only after the
  // library's call), and MPICH aborts on a request it completed and freed twice.
  Handlers h;
  Buf src(Where::Gpu, kBytes), dst(Where::Gpu, kBytes);
  src.upload(pattern(kBytes, 4));
  dst.fill(kPoison);
  MPI_Datatype v = vector2d();
  MPI_Request recv = MPI_REQUEST_NULL, send = MPI_REQUEST_NULL;  // both tracked, completed at the end
  REQUIRE(MPI_Irecv(dst.get(), 1, v, rank(), 8, h.comm, &recv) == MPI_SUCCESS);
  REQUIRE(MPI_Isend(src.get(), 1, v, rank(), 8, h.comm, &send) == MPI_SUCCESS);
  REQUIRE_FALSE(tempi::requests().empty());

  const std::vector<std::vector<MPI_Request>> arrays = {
      {recv, recv}, {send, send}, {send, MPI_REQUEST_NULL, recv, send}, {recv, send, MPI_REQUEST_NULL, recv}};
  for (const std::vector<MPI_Request> &array : arrays) {
    std::vector<MPI_Request> reqs = array;
    const int n = int(reqs.size());
    std::vector<MPI_Status> st(reqs.size());
    std::vector<int> indices(reqs.size());
    int flag = 0, index = 0, outcount = 0;
    const Outcome refused{MPI_ERR_REQUEST, 1, 0};
    INFO(n << " requests");
    CHECK(outcome([&] { return MPI_Testall(n, reqs.data(), &flag, st.data()); }) == refused);
    CHECK(outcome([&] { return MPI_Testany(n, reqs.data(), &index, &flag, st.data()); }) == refused);
    CHECK(outcome([&] { return MPI_Testsome(n, reqs.data(), &outcount, indices.data(), st.data()); }) == refused);
    CHECK(outcome([&] { return MPI_Waitall(n, reqs.data(), MPI_STATUSES_IGNORE); }) == refused);
    CHECK(outcome([&] { return MPI_Waitany(n, reqs.data(), &index, MPI_STATUS_IGNORE); }) == refused);
    CHECK(outcome([&] { return MPI_Waitsome(n, reqs.data(), &outcount, indices.data(), MPI_STATUSES_IGNORE); }) ==
          refused);
    CHECK(reqs == array);
  }

  // Both still complete, once each, with the data.
  MPI_Request both[2] = {recv, send};
  REQUIRE(MPI_Waitall(2, both, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
  CHECK(both[0] == MPI_REQUEST_NULL);
  CHECK(both[1] == MPI_REQUEST_NULL);
  const Layout l{v, 1};
  const std::vector<char> poison(kBytes, kPoison);
  CHECK(first_difference(dst.download(), expected(l, l, 4, -1, &poison)) == "");
  CHECK(tempi::requests().empty());
  MPI_Type_free(&v);
}
