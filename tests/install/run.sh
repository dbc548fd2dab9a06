#!/bin/bash
# Installs the build into a scratch tree (meson install --destdir) and builds the C, C++
# and Fortran consumers against it each way a user would: pkg-config, find_package(TEMPI)
# and MPICH's mpicc/mpicxx/mpifort -profile=. Each must link from the installed files
# alone and run with TEMPI in its call path (TEMPI_LOG_LEVEL=info says "active").
# Usage: run.sh BUILD_DIR PREFIX LIBDIR SYSCONFDIR MPIEXEC [CMAKE]
set -euo pipefail
build=$1 prefix=$2 libdir=$3 sysconfdir=$4 mpiexec=$5 cmake=${6:-}
src=$(cd "$(dirname "$0")" && pwd)
work=$build/tests/install-check
rm -rf "$work" && mkdir -p "$work"
meson install -C "$build" --no-rebuild --quiet --destdir "$work/root" > "$work/install.log"
root=$work/root$prefix
case $libdir in /*) lib=$work/root$libdir ;; *) lib=$root/$libdir ;; esac
case $sysconfdir in /*) etc=$work/root$sysconfdir ;; *) etc=$root/$sysconfdir ;; esac
cd "$work"

failed=0
# run NAME PROGRAM: two ranks; passes when the program says ok and TEMPI started.
run() {
  local out
  if ! out=$(TEMPI_LOG_LEVEL=info "$mpiexec" -n 2 "./$2" 2>&1); then
    printf '%s\n' "$out"; echo "FAIL: $1: the program failed"; failed=1; return
  fi
  if ! grep -q ': ok' <<< "$out" || ! grep -q '^\[tempi [0-9]*\] info: active' <<< "$out"; then
    printf '%s\n' "$out"; echo "FAIL: $1: no result, or TEMPI was not in the call path"; failed=1; return
  fi
  echo "ok: $1"
}
# build NAME COMMAND...; MPICH's wrappers only warn about a -profile= they cannot find.
build() {
  local name=$1 out; shift
  if ! out=$("$@" 2>&1) || { [[ $name == profile-* ]] && grep -q 'not found' <<< "$out"; }; then
    printf '%s\n' "$out"; echo "FAIL: $name: does not build: $*"; failed=1; return 1
  fi
}

export PKG_CONFIG_PATH=$lib/pkgconfig
flags=$(pkg-config --cflags --libs tempi)
build pkg-config-c mpicc "$src/consumer.c" $flags -o c_pkgconfig && run "pkg-config, C" c_pkgconfig
build pkg-config-c++ mpicxx "$src/consumer.cpp" $flags -o cpp_pkgconfig && run "pkg-config, C++" cpp_pkgconfig
build pkg-config-fortran mpifort "$src/consumer.f90" $flags -o f90_pkgconfig && run "pkg-config, Fortran" f90_pkgconfig

profile=$etc/mpich/tempi
build profile-c mpicc -profile="$profile" "$src/consumer.c" -o c_profile && run "mpicc -profile, C" c_profile
build profile-c++ mpicxx -profile="$profile" "$src/consumer.cpp" -o cpp_profile && run "mpicxx -profile, C++" cpp_profile
build profile-fortran mpifort -profile="$profile" "$src/consumer.f90" -o f90_profile &&
  run "mpifort -profile, Fortran" f90_profile

if [ -n "$cmake" ]; then
  if build cmake-configure "$cmake" -S "$src" -B cmake -DCMAKE_PREFIX_PATH="$root" -DCMAKE_BUILD_TYPE=Release &&
     build cmake-build "$cmake" --build cmake; then
    for p in c cpp f90; do run "find_package(TEMPI), $p" "cmake/consumer_$p"; done
  fi
else
  echo "CMake part not run: no cmake (CI installs it)"
fi
exit $failed
