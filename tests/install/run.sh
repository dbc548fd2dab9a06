#!/bin/bash
# Installs the build into scratch trees (meson install --destdir): the whole install, and
# `--tags devel` alone. Against each it builds the consumers every way docs/using.md
# gives ("Linking"): from gcc with pkg-config (tempi alone, either order with mpich, with
# the MPI library's flags before TEMPI's on the line, --static), the plain gcc line, the
# --wrap archive, MPICH's mpicc/mpicxx/mpifort (pkg-config and -profile=) and
# find_package(TEMPI). Each must link from the installed files alone and run with TEMPI
# in its call path (TEMPI_LOG_LEVEL=info says "active"). It also checks what the whole
# install holds: the four programs in bin/, the libraries and link files, the user docs
# without docs/results/, the benchmarks only under libexec/tempi/ and only when built.
# Usage: run.sh BUILD_DIR PREFIX LIBDIR SYSCONFDIR MPIEXEC CUDA_LIBDIR|'' benchmarks|no-benchmarks
#               fortran|no-fortran [CMAKE]
set -euo pipefail
build=$1 prefix=$2 libdir=$3 sysconfdir=$4 mpiexec=$5 cuda_libdir=$6 benchmarks=$7 fortran=$8 cmake=${9:-}
src=$(cd "$(dirname "$0")" && pwd)
work=$build/tests/install-check
rm -rf "$work" && mkdir -p "$work"

failed=0
fail() { echo "FAIL: $*"; failed=1; }
# run NAME PROGRAM: two ranks; passes when the program says ok and TEMPI started.
run() {
  local out
  if ! out=$(TEMPI_LOG_LEVEL=info "$mpiexec" -n 2 "./$2" 2>&1); then
    printf '%s\n' "$out"; fail "$1: the program failed"; return
  fi
  if ! grep -q ': ok' <<< "$out" || ! grep -q '^\[tempi [0-9]*\] info: active' <<< "$out"; then
    printf '%s\n' "$out"; fail "$1: no result, or TEMPI was not in the call path"; return
  fi
  echo "ok: $1"
}
# build NAME COMMAND...; MPICH's wrappers only warn about a -profile= they cannot find.
build() {
  local name=$1 out; shift
  if ! out=$("$@" 2>&1) || { [[ $name == *profile* ]] && grep -q 'not found' <<< "$out"; }; then
    printf '%s\n' "$out"; fail "$name: does not build: $*"; return 1
  fi
}
# link NAME COMMAND...: builds ./NAME with COMMAND -o NAME, then runs it.
link() {
  local name=$1; shift
  build "$name" "$@" -o "$name" && run "$tree: $name" "$name" || true
}

# routes TREE: every route against the tree installed under $work/TREE.
routes() {
  tree=$1
  local root=$work/$tree$prefix lib etc
  case $libdir in /*) lib=$work/$tree$libdir ;; *) lib=$root/$libdir ;; esac
  case $sysconfdir in /*) etc=$work/$tree$sysconfdir ;; *) etc=$root/$sysconfdir ;; esac
  mkdir -p "$work/$tree-bin" && cd "$work/$tree-bin"
  export PKG_CONFIG_PATH=$lib/pkgconfig
  local c=$src/consumer.c cuda=()
  [ -n "$cuda_libdir" ] && cuda=(-L"$cuda_libdir" -lcudart_static)

  # gcc, no MPI compiler wrapper: pkg-config's Requires brings mpi.h and the MPI library.
  link gcc_pkgconfig gcc "$c" $(pkg-config --cflags --libs tempi)
  link gcc_pkgconfig_mpich_first gcc "$c" $(pkg-config --cflags --libs mpich tempi)
  link gcc_pkgconfig_tempi_first gcc "$c" $(pkg-config --cflags --libs tempi mpich)
  link gcc_mpich_flags_first gcc "$c" $(pkg-config --cflags --libs mpich) $(pkg-config --cflags --libs tempi)
  link gcc_pkgconfig_static gcc "$c" $(pkg-config --cflags --libs --static tempi)
  # The plain line of docs/using.md, "Linking".
  local archive=(-L"$lib" -Wl,--whole-archive -ltempi_pmpi -Wl,--no-whole-archive
                 -Wl,--require-defined=tempi_archive_linked)
  link gcc_plain gcc "$c" -I"$root/include" -I"$(pkg-config --variable=includedir mpich)" "${archive[@]}" -lmpich \
    "${cuda[@]}" -lstdc++ -lm -ldl -lpthread -lrt
  link gcc_plain_mpich_first gcc "$c" -I"$root/include" -I"$(pkg-config --variable=includedir mpich)" -lmpich \
    "${archive[@]}" "${cuda[@]}" -lstdc++ -lm -ldl -lpthread -lrt
  link mpicc_plain mpicc "$c" -I"$root/include" "${archive[@]}" "${cuda[@]}" -lstdc++ -lm -ldl -lpthread -lrt
  # The --wrap archive (above another PMPI tool): its options file must be installed too.
  link gcc_wrap gcc "$c" $(pkg-config --cflags tempi) $(pkg-config --variable=wrap_libs tempi) $(pkg-config --libs mpich)

  # MPICH's wrappers with pkg-config, from C, C++ and Fortran.
  local flags; flags=$(pkg-config --cflags --libs tempi)
  link mpicc_pkgconfig mpicc "$c" $flags
  link mpicxx_pkgconfig mpicxx "$src/consumer.cpp" $flags
  [ "$fortran" = fortran ] && link mpifort_pkgconfig mpifort "$src/consumer.f90" $flags

  # MPICH's -profile=, from C (gcc underneath), C++ and Fortran.
  local profile=$etc/mpich/tempi
  link mpicc_profile mpicc -profile="$profile" "$c"
  link mpicxx_profile mpicxx -profile="$profile" "$src/consumer.cpp"
  [ "$fortran" = fortran ] && link mpifort_profile mpifort -profile="$profile" "$src/consumer.f90"

  # find_package(TEMPI): C (gcc), C++ and Fortran.
  if [ -n "$cmake" ]; then
    local with_fortran=OFF programs=(c c_mpi_first cpp)
    [ "$fortran" = fortran ] && with_fortran=ON programs+=(f90)
    if build "$tree: cmake-configure" "$cmake" -S "$src" -B cmake -DCMAKE_PREFIX_PATH="$root" -DCMAKE_BUILD_TYPE=Release \
         -DTEMPI_TEST_FORTRAN=$with_fortran && build "$tree: cmake-build" "$cmake" --build cmake; then
      for p in "${programs[@]}"; do run "$tree: find_package(TEMPI), $p" "cmake/consumer_$p"; done
    fi
  else
    echo "CMake part not run: no cmake (CI installs it)"
  fi
  [ "$fortran" = fortran ] || echo "Fortran consumers not built: no gfortran (CI installs it)"
  cd "$work"
}

# contents TREE EXPECTED...: the files of the tree, docs aside, are exactly EXPECTED.
contents() {
  local tree=$1; shift
  local got want
  got=$(cd "$work/$tree" && find . -type f | sed 's|^\.||' | { grep -v "^$prefix/share/doc/tempi/" || true; } | sort)
  want=$(printf '%s\n' "$@" | sort)
  if [ "$got" != "$want" ]; then
    diff <(echo "$want") <(echo "$got") | sed 's/^/  /'; fail "$tree: the installed files differ from the list (< expected, > installed)"
  else
    echo "ok: $tree: installs $# files besides the docs"
  fi
}

case $libdir in /*) L=$libdir ;; *) L=$prefix/$libdir ;; esac
case $sysconfdir in /*) E=$sysconfdir ;; *) E=$prefix/$sysconfdir ;; esac
devel=("$prefix/include/tempi.h" "$prefix/include/tempi_mpix.h" "$L/libtempi_pmpi.a" "$L/libtempi_pmpi_wrap.a" "$L/tempi-wrap.opts"
       "$L/pkgconfig/tempi.pc" "$L/cmake/TEMPI/TEMPIConfig.cmake" "$L/cmake/TEMPI/TEMPIConfigVersion.cmake"
       "$E/mpich/tempi.conf")
bench=()
if [ "$benchmarks" = benchmarks ]; then
  bench=("$prefix/libexec/tempi/bench_commit")
  [ -n "$cuda_libdir" ] && for b in bench_pack bench_p2p bench_pack_sequence bench_call bench_alltoallw bench_large; do
    bench+=("$prefix/libexec/tempi/$b")
  done
fi

meson install -C "$build" --no-rebuild --quiet --destdir "$work/full" > "$work/full.log"
contents full "${devel[@]}" "${bench[@]}" "$L/libtempi_preload.so" \
  "$prefix/bin/tempi-info" "$prefix/bin/tempi-measure" "$prefix/bin/tempi_demo" "$prefix/bin/tempi_halo"
docs=$work/full$prefix/share/doc/tempi
for f in LICENSE README.md docs/using.md docs/environment.md; do
  [ -f "$docs/$f" ] || fail "full: $f is not installed"
done
[ ! -e "$docs/docs/results" ] || fail "full: docs/results/ is installed (raw data stays in the repository)"
echo "ok: full: $(find "$docs" -type f | wc -l) documentation files, no docs/results/"
routes full

meson install -C "$build" --no-rebuild --quiet --tags devel --destdir "$work/devel" > "$work/devel.log"
contents devel "${devel[@]}"
routes devel
exit $failed
