// Which way packed GPU data moves in a point-to-point call (DESIGN.md, "Moving packed
// data"). The choice lives behind choose_transfer() alone, so that a measured system
// profile can replace the built-in rule without touching the callers.
#pragma once

#include <cstdint>

#include "config.hpp"

namespace tempi {

struct Transfer {
  Method method;  // never Auto
  int64_t chunk;  // bytes per pipeline chunk; >= the message size when not pipelined
};

// `requested` is TEMPI_METHOD or its runtime override. Device needs a CUDA-aware MPI;
// requested without one, the staged method is used (the caller says so once).
// `contiguous`: the GPU data is one run, so packing is a plain copy. `batched`: the
// message is one of many in flight (a nonblocking call), whose GPU work is issued and
// waited for together, so a method's fixed costs are shared.
Transfer choose_transfer(Method requested, bool cuda_aware, int64_t bytes, bool contiguous, const Config &cfg,
                         bool batched = false);

const char *to_string(Method m);

}  // namespace tempi
