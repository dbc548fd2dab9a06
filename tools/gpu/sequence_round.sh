#!/bin/bash
# A short GPU round: bench_pack_sequence in the four TEMPI_DEFER_PACK modes (one GPU per
# rank, and two ranks on one GPU under MPS) and the pack-sequence and p2p tests, under
# one MPI library. Builds only what it runs.   bash tools/gpu/sequence_round.sh mpich|cuda-openmpi
set -uo pipefail
mpi=${1:-mpich}
top=${OUT:-gpu-out}
mkdir -p "$top"
case $mpi in
  mpich) source .gpu-host/use-mpich.sh .gpu-host/debs; impl=mpich; launcher=$(command -v mpiexec.hydra || command -v mpiexec); margs="" ;;
  cuda-openmpi) source .gpu-host/use-openmpi.sh .gpu-host/ompi; impl=openmpi; launcher=$(command -v mpirun); margs="--allow-run-as-root --oversubscribe" ;;
esac
[ -d /opt/c2/usr/share/pkgconfig ] || { mkdir -p /opt/c2 && dpkg -x .gpu-host/debs/catch2_*.deb /opt/c2; sed -i 's|^prefix=/usr$|prefix=/opt/c2/usr|; s|=/usr/|=/opt/c2/usr/|g' /opt/c2/usr/share/pkgconfig/catch2.pc; }
export PKG_CONFIG_PATH=/opt/c2/usr/share/pkgconfig:${PKG_CONFIG_PATH:-}
b=build-seq-$mpi
meson setup $b -Dmpi=$impl -Dmpiexec="$launcher" -Dmpiexec_args="$margs" > /tmp/setup.log 2>&1 || { tail -20 /tmp/setup.log; exit 1; }
ninja -C $b tools/bench_pack_sequence tests/gpu/test_gpu_pack_sequence tests/gpu/test_gpu_p2p > /tmp/build.log 2>&1 || { grep error -A5 /tmp/build.log | head -30; exit 1; }
for mode in 0 1 2 3; do
  for cfg in "--gpus 2" "--gpus 1"; do
    [ "$cfg" = "--gpus 1" ] && nvidia-cuda-mps-control -d 2>/dev/null
    echo "--- TEMPI_DEFER_PACK=$mode $cfg"
    TEMPI_DEFER_PACK=$mode $launcher $margs -n 2 $b/tools/bench_pack_sequence $cfg --csv "$top/seq-$mpi-mode$mode-${cfg// /}.csv" 2>&1 | grep -E "^mpi-datatypes|^fused-kernel|wrong|FAIL|identical|MPS|share" | grep -v verify
    [ "$cfg" = "--gpus 1" ] && echo quit | nvidia-cuda-mps-control 2>/dev/null
  done
done
for mode in 0 1 2 3; do TEMPI_DEFER_PACK=$mode $launcher $margs -n 2 $b/tests/gpu/test_gpu_pack_sequence 2>&1 | tail -2 | head -1; done
$launcher $margs -n 2 $b/tests/gpu/test_gpu_p2p 2>&1 | grep -E "passed|failed|FAILED" | head -5
TEMPI_TEST_THREADS=1 $launcher $margs -n 2 $b/tests/gpu/test_gpu_p2p 2>&1 | grep -E "passed|failed|FAILED" | head -5
