// The CUDA runtime's and driver's answers about pointers (pointers.cpp), shared by cuda/.
#pragma once

#include <cuda.h>  // types of the driver's pointer queries, reached through cudart
#include <cuda_runtime_api.h>

#include <cstdint>

namespace tempi {

// A driver function of CUDA 12's interface, reached through cudart (TEMPI does not link
// the driver library); null where the driver has none.
void *driver_entry(const char *name);

using PointerAttributesFn = CUresult (*)(unsigned, CUpointer_attribute *, void **, CUdeviceptr);
PointerAttributesFn pointer_attributes_fn();

// The bytes [lo, hi) of the allocation that holds `ptr`, as the driver maps it; an empty
// range where the driver does not know the address.
void allocation_range(const void *ptr, uint64_t &lo, uint64_t &hi);

// cudaPointerGetAttributes, answered from this thread's memo inside a PointerScope. False
// when the runtime does not know the address (pageable host memory).
bool attributes(const void *ptr, cudaPointerAttributes &out);
// Backend::remember_pointers: scopes nest; the memo empties when the outermost ends.
void remember_pointers(bool on);

}  // namespace tempi
