// The table of base/next.hpp, compiled once per artifact with its TEMPI_FORWARD_* mode
// (forward.hpp): each entry is where that artifact's wrappers forward the call.
#include "base/next.hpp"

#include "base/forward.hpp"

namespace tempi::next {

#if defined(TEMPI_FORWARD_DLSYM)

namespace {
// The preload library's entries look their call up at its first use, not when the
// library is loaded (its static initializers may run before the MPI library's symbols
// can be looked up); once, and thread-safe, through a function-local static.
template <class Fn>
struct FirstUse;
template <class R, class... A>
struct FirstUse<R (*)(A...)> {
  template <const char *name>
  static R call(A... a) {
    static const auto found = reinterpret_cast<R (*)(A...)>(next_symbol(name));
    return found(a...);
  }
};
}  // namespace

#define TEMPI_WRAPPED(fn)           \
  constexpr char fn##_name[] = #fn; \
  decltype(&::fn) const fn = &FirstUse<decltype(&::fn)>::call<fn##_name>;

#else

// Addresses of functions: constant-initialized, so usable from any static initializer.
#define TEMPI_WRAPPED(fn) decltype(&::fn) const fn = &TEMPI_NEXT(fn);

#endif

#include "base/wrapped.def"
#if MPI_VERSION >= 4
#include "base/wrapped_mpi4.def"
#endif
#undef TEMPI_WRAPPED

}  // namespace tempi::next
