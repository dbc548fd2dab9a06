#!/bin/bash
# Self messages through host memory (built-in rules, 3d11994) against the tree before (5da2083),
# CUDA-aware Open MPI, two ranks on one H200 under MPS: bench_pack_sequence and tempi_halo.
set -uo pipefail
T0=$SECONDS
top=${OUT:-/tmp/out}; out=/tmp/s20f; rm -rf $out; mkdir -p $out
trap 'tar czf "$top/s20f.tgz" -C /tmp s20f' EXIT
{ nvidia-smi -L; date -u; } > $out/device.txt
source .gpu-host/use-openmpi.sh .gpu-host/ompi >/dev/null
rm -rf old && tar xzf .probe/old.tgz
L="$(command -v mpirun) --allow-run-as-root --oversubscribe"
for t in new old; do
  src=.; [ $t = old ] && src=old
  ( cd $src && meson setup build-f -Dmpi=openmpi -Dtests=false -Dgpu_arch=90 -Dmpiexec="$(command -v mpirun)" > /tmp/s-$t.log 2>&1 && ninja -C build-f tools/bench_pack_sequence tools/tempi_halo > /tmp/b-$t.log 2>&1 ) &
done
wait
[ -x build-f/tools/tempi_halo ] && [ -x old/build-f/tools/tempi_halo ] || { tail -20 /tmp/b-*.log; exit 1; }
echo "built at $((SECONDS-T0))s"
nvidia-cuda-mps-control -d
for round in 1 2; do
  for t in new old; do
    b=build-f; [ $t = old ] && b=old/build-f
    for mode in 0 2; do
      echo "--- $t round $round TEMPI_DEFER_PACK=$mode"
      TEMPI_PROFILE=none TEMPI_DEFER_PACK=$mode timeout 60 $L -n 2 $b/tools/bench_pack_sequence --gpus 1 --csv $out/seq-$t-mode$mode.csv < /dev/null 2>&1 | grep -E "^mpi-datatypes|^fused-kernel|wrong|FAIL" | grep -v verify | head -2
    done
    for n in 32 128; do
      echo "--- $t round $round halo n=$n"
      TEMPI_PROFILE=none timeout 60 $L -n 2 $b/tools/tempi_halo --n $n --iters 50 --variants tempi,persistent,neighbor,hand-fused --csv $out/halo-$t.csv < /dev/null 2>&1 | grep -E "^(tempi|persistent|neighbor|hand-fused) |wrong|FAIL" | grep -v verify | head -4
    done
  done
done
echo quit | nvidia-cuda-mps-control
echo "done at $((SECONDS-T0))s"
