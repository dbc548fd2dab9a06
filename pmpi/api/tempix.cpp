// The calls of tempi.h.
#include "tempi.h"

#include <mpi.h>
#include <strings.h>

#include "base/stats.hpp"
#include "log.hpp"
#include "p2p/messages.hpp"
#include "zero_copy/zero_copy_p2p.hpp"

extern "C" int TEMPIX_Set_method(const char *method) {
  using tempi::Method;
  for (Method m : {Method::Auto, Method::Device, Method::OneShot, Method::Staged})
    if (method && !strcasecmp(method, tempi::to_string(m))) {
      tempi::set_requested_method(m);
      return MPI_SUCCESS;
    }
  TEMPI_LOG(Error, "TEMPIX_Set_method: unknown method \"%s\" (auto, device, oneshot or staged)",
            method ? method : "(null)");
  return MPI_ERR_ARG;
}

extern "C" int TEMPIX_Comm_enable_zero_copy(MPI_Comm comm, int enable, int *enabled) {
  return tempi::p2p_enable(comm, enable != 0, enabled);
}

extern "C" int TEMPIX_Counter(const char *name, unsigned long long *value) {
  uint64_t v = 0;
  const bool known = tempi::read_counter(name, v);
  if (value) *value = known ? v : 0;
  if (known && value) return MPI_SUCCESS;
  TEMPI_LOG(Error, "TEMPIX_Counter: %s", !value ? "value is NULL" : "no counter of that name (docs/using.md, \"Counters\")");
  return MPI_ERR_ARG;
}
