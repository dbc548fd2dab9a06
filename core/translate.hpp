// Translation of an MPI type description to the IR (TEMPI paper section 3.1, plus
// the irregular constructors). The result has the same bytes in the same order as
// the MPI typemap; it is not simplified (see canonicalize.hpp).
#pragma once

#include <optional>

#include "ir.hpp"
#include "type_desc.hpp"

namespace tempi {

// Empty when the type uses something TEMPI does not model (an unsupported
// combiner, or a named type whose data is not one dense run, such as MPI_SHORT_INT).
std::optional<Type> translate(const TypeDesc &desc);

}  // namespace tempi
