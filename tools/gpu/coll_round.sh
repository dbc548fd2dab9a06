#!/bin/bash
# The collective and persistent-request tests of the gpu suite under one MPI library.
#   bash tools/gpu/coll_round.sh mpich|cuda-openmpi
set -uo pipefail
mpi=${1:-mpich}
case $mpi in
  mpich) source .gpu-host/use-mpich.sh .gpu-host/debs; impl=mpich; launcher=$(command -v mpiexec.hydra || command -v mpiexec); margs="" ;;
  cuda-openmpi) source .gpu-host/use-openmpi.sh .gpu-host/ompi; impl=openmpi; launcher=$(command -v mpirun); margs="--allow-run-as-root --oversubscribe" ;;
esac
[ -d /opt/c2/usr/share/pkgconfig ] || { mkdir -p /opt/c2 && dpkg -x .gpu-host/debs/catch2_*.deb /opt/c2; sed -i 's|^prefix=/usr$|prefix=/opt/c2/usr|; s|=/usr/|=/opt/c2/usr/|g' /opt/c2/usr/share/pkgconfig/catch2.pc; }
export PKG_CONFIG_PATH=/opt/c2/usr/share/pkgconfig:${PKG_CONFIG_PATH:-}
b=build-coll-$mpi
meson setup $b -Dmpi=$impl -Dmpiexec="$launcher" -Dmpiexec_args="$margs" > /tmp/setup.log 2>&1 || { tail -20 /tmp/setup.log; exit 1; }
ninja -C $b tests/gpu/test_gpu_coll tests/gpu/test_gpu_persistent > /tmp/build.log 2>&1 || { grep error -A5 /tmp/build.log | head -30; exit 1; }
echo "=== $mpi"
meson test -C $b --no-rebuild --suite gpu $(meson test -C $b --list 2>/dev/null | grep -oE "gpu_(coll|persistent)[a-z_0-9]*" | sort -u) 2>&1 | grep -E "^ *[0-9]+/|Ok:|Fail:"
grep -E "FAILED|failed|with expansion" -A3 $b/meson-logs/testlog.txt | head -30
