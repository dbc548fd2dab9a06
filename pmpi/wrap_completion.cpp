// Every call that can complete a request. While TEMPI tracks no request they forward
// at once; otherwise the tracked entries among the call's requests are taken out of
// the table first, and after the call each one whose handle the MPI library set to
// MPI_REQUEST_NULL is completed (a receive is unpacked) and the rest go back.
#include <vector>

#include "forward.hpp"
#include "requests.hpp"
#include "runtime.hpp"

namespace tempi {

namespace {

bool tracking() { return active() && !requests().empty(); }

class Taken {
 public:
  Taken(int n, MPI_Request *reqs) : reqs_(reqs) {
    requests().progress_detached();
    if (requests().empty()) return;
    for (int i = 0; i < n; ++i)
      if (std::unique_ptr<Pending> p = requests().take(reqs[i])) entries_.push_back({i, reqs[i], std::move(p)});
  }
  Taken(const Taken &) = delete;
  Taken &operator=(const Taken &) = delete;

  ~Taken() {
    for (Entry &e : entries_) {
      if (!e.pending) continue;
      if (reqs_[e.index] == MPI_REQUEST_NULL) {
        MPI_Status none{};  // completed on an error path that gave no status: release only
        complete(std::move(e.pending), none, MPI_ERR_OTHER);
      } else {
        requests().add(e.handle, std::move(e.pending));
      }
    }
  }

  bool any() const { return !entries_.empty(); }

  // Request `index` completed in the call with `status` and its error `err` (a no-op
  // when it is not tracked or the MPI library did not complete it).
  int finish(int index, const MPI_Status &status, int err) {
    for (Entry &e : entries_)
      if (e.index == index && e.pending && reqs_[index] == MPI_REQUEST_NULL)
        return complete(std::move(e.pending), status, err);
    return MPI_SUCCESS;
  }

  // MPI_Request_get_status found request `index` complete: its data must be in place
  // now, but the request lives until a completion call frees it.
  int finish_early(int index, const MPI_Status &status) {
    for (Entry &e : entries_)
      if (e.index == index && e.pending) return finish_recv(e.pending->in, status, MPI_SUCCESS);
    return MPI_SUCCESS;
  }

 private:
  struct Entry {
    int index;
    MPI_Request handle;
    std::unique_ptr<Pending> pending;
  };
  MPI_Request *reqs_;
  std::vector<Entry> entries_;
};

// Statuses the multi-request calls can write, even when the user ignores them.
MPI_Status *statuses_for(MPI_Status *user, int n, std::vector<MPI_Status> &local) {
  if (user != MPI_STATUSES_IGNORE) return user;
  local.resize(size_t(n > 0 ? n : 1));
  return local.data();
}

// This request's error in a call that returned `err`.
int error_of(int err, const MPI_Status &st) { return err == MPI_ERR_IN_STATUS ? st.MPI_ERROR : err; }

int first_error(int mpi_err, int tempi_err) { return mpi_err != MPI_SUCCESS ? mpi_err : tempi_err; }

}  // namespace

}  // namespace tempi

using namespace tempi;

extern "C" {

int TEMPI_WRAPPER(MPI_Wait)(MPI_Request *request, MPI_Status *status) {
  if (!tracking()) return TEMPI_NEXT(MPI_Wait)(request, status);
  Taken t(1, request);
  if (!t.any()) return TEMPI_NEXT(MPI_Wait)(request, status);
  MPI_Status local;
  MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
  const int err = TEMPI_NEXT(MPI_Wait)(request, st);
  return first_error(err, t.finish(0, *st, err));
}

int TEMPI_WRAPPER(MPI_Test)(MPI_Request *request, int *flag, MPI_Status *status) {
  if (!tracking()) return TEMPI_NEXT(MPI_Test)(request, flag, status);
  Taken t(1, request);
  if (!t.any()) return TEMPI_NEXT(MPI_Test)(request, flag, status);
  MPI_Status local;
  MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
  const int err = TEMPI_NEXT(MPI_Test)(request, flag, st);
  return first_error(err, t.finish(0, *st, err));
}

int TEMPI_WRAPPER(MPI_Waitall)(int count, MPI_Request requests_[], MPI_Status statuses[]) {
  if (!tracking()) return TEMPI_NEXT(MPI_Waitall)(count, requests_, statuses);
  Taken t(count, requests_);
  if (!t.any()) return TEMPI_NEXT(MPI_Waitall)(count, requests_, statuses);
  std::vector<MPI_Status> local;
  MPI_Status *st = statuses_for(statuses, count, local);
  const int err = TEMPI_NEXT(MPI_Waitall)(count, requests_, st);
  int ours = MPI_SUCCESS;
  for (int i = 0; i < count; ++i) ours = first_error(ours, t.finish(i, st[i], error_of(err, st[i])));
  return first_error(err, ours);
}

int TEMPI_WRAPPER(MPI_Testall)(int count, MPI_Request requests_[], int *flag, MPI_Status statuses[]) {
  if (!tracking()) return TEMPI_NEXT(MPI_Testall)(count, requests_, flag, statuses);
  Taken t(count, requests_);
  if (!t.any()) return TEMPI_NEXT(MPI_Testall)(count, requests_, flag, statuses);
  std::vector<MPI_Status> local;
  MPI_Status *st = statuses_for(statuses, count, local);
  const int err = TEMPI_NEXT(MPI_Testall)(count, requests_, flag, st);
  int ours = MPI_SUCCESS;
  for (int i = 0; i < count; ++i) ours = first_error(ours, t.finish(i, st[i], error_of(err, st[i])));
  return first_error(err, ours);
}

int TEMPI_WRAPPER(MPI_Waitany)(int count, MPI_Request requests_[], int *index, MPI_Status *status) {
  if (!tracking()) return TEMPI_NEXT(MPI_Waitany)(count, requests_, index, status);
  Taken t(count, requests_);
  if (!t.any()) return TEMPI_NEXT(MPI_Waitany)(count, requests_, index, status);
  MPI_Status local;
  MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
  const int err = TEMPI_NEXT(MPI_Waitany)(count, requests_, index, st);
  return first_error(err, *index == MPI_UNDEFINED ? MPI_SUCCESS : t.finish(*index, *st, err));
}

int TEMPI_WRAPPER(MPI_Testany)(int count, MPI_Request requests_[], int *index, int *flag, MPI_Status *status) {
  if (!tracking()) return TEMPI_NEXT(MPI_Testany)(count, requests_, index, flag, status);
  Taken t(count, requests_);
  if (!t.any()) return TEMPI_NEXT(MPI_Testany)(count, requests_, index, flag, status);
  MPI_Status local;
  MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
  const int err = TEMPI_NEXT(MPI_Testany)(count, requests_, index, flag, st);
  return first_error(err, *flag && *index != MPI_UNDEFINED ? t.finish(*index, *st, err) : MPI_SUCCESS);
}

int TEMPI_WRAPPER(MPI_Waitsome)(int incount, MPI_Request requests_[], int *outcount, int indices[],
                                MPI_Status statuses[]) {
  if (!tracking()) return TEMPI_NEXT(MPI_Waitsome)(incount, requests_, outcount, indices, statuses);
  Taken t(incount, requests_);
  if (!t.any()) return TEMPI_NEXT(MPI_Waitsome)(incount, requests_, outcount, indices, statuses);
  std::vector<MPI_Status> local;
  MPI_Status *st = statuses_for(statuses, incount, local);
  const int err = TEMPI_NEXT(MPI_Waitsome)(incount, requests_, outcount, indices, st);
  int ours = MPI_SUCCESS;
  if (*outcount != MPI_UNDEFINED)
    for (int k = 0; k < *outcount; ++k) ours = first_error(ours, t.finish(indices[k], st[k], error_of(err, st[k])));
  return first_error(err, ours);
}

int TEMPI_WRAPPER(MPI_Testsome)(int incount, MPI_Request requests_[], int *outcount, int indices[],
                                MPI_Status statuses[]) {
  if (!tracking()) return TEMPI_NEXT(MPI_Testsome)(incount, requests_, outcount, indices, statuses);
  Taken t(incount, requests_);
  if (!t.any()) return TEMPI_NEXT(MPI_Testsome)(incount, requests_, outcount, indices, statuses);
  std::vector<MPI_Status> local;
  MPI_Status *st = statuses_for(statuses, incount, local);
  const int err = TEMPI_NEXT(MPI_Testsome)(incount, requests_, outcount, indices, st);
  int ours = MPI_SUCCESS;
  if (*outcount != MPI_UNDEFINED)
    for (int k = 0; k < *outcount; ++k) ours = first_error(ours, t.finish(indices[k], st[k], error_of(err, st[k])));
  return first_error(err, ours);
}

int TEMPI_WRAPPER(MPI_Request_get_status)(MPI_Request request, int *flag, MPI_Status *status) {
  if (!tracking()) return TEMPI_NEXT(MPI_Request_get_status)(request, flag, status);
  Taken t(1, &request);  // the handle is a copy: the request stays live and goes back
  if (!t.any()) return TEMPI_NEXT(MPI_Request_get_status)(request, flag, status);
  MPI_Status local;
  MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
  const int err = TEMPI_NEXT(MPI_Request_get_status)(request, flag, st);
  return first_error(err, err == MPI_SUCCESS && *flag ? t.finish_early(0, *st) : MPI_SUCCESS);
}

int TEMPI_WRAPPER(MPI_Request_free)(MPI_Request *request) {
  if (!tracking()) return TEMPI_NEXT(MPI_Request_free)(request);
  std::unique_ptr<Pending> p = requests().take(*request);
  if (!p) return TEMPI_NEXT(MPI_Request_free)(request);
  // TEMPI keeps the request to finish the operation later (see RequestTable::detach).
  requests().detach(*request, std::move(p));
  *request = MPI_REQUEST_NULL;
  return MPI_SUCCESS;
}

// MPI_Cancel needs no wrapper: the request is the MPI library's own, and the completion
// that follows a cancel skips the unpack (finish_recv checks MPI_Test_cancelled).

}  // extern "C"
