#!/bin/bash
# Mode 3 under CUDA-aware Open MPI: is it the binding (mpirun binds each rank to one core for
# np <= 2, so TEMPI's open-launch closer thread shares the core with the rank)?
set -uo pipefail
T0=$SECONDS
top=${OUT:-/tmp/out}; out=/tmp/s20h; rm -rf $out; mkdir -p $out
trap 'tar czf "$top/s20h.tgz" -C /tmp s20h' EXIT
source .gpu-host/use-openmpi.sh .gpu-host/ompi >/dev/null
b=bgo
[ -x $b/tools/bench_pack_sequence ] || { meson setup bh -Dmpi=openmpi -Dtests=false -Dgpu_arch=90 -Dmpiexec="$(command -v mpirun)" > /tmp/so.log 2>&1; ninja -C bh tools/bench_pack_sequence > /tmp/bo.log 2>&1; b=bh; }
echo "built at $((SECONDS-T0))s ($b)"
nvidia-cuda-mps-control -d 2>/dev/null
L="$(command -v mpirun) --allow-run-as-root --oversubscribe"
for round in 1 2; do
  for bind in "" "--bind-to none"; do
    for mode in 2 3; do
      TEMPI_PROFILE=none TEMPI_DEFER_PACK=$mode timeout 60 $L $bind --report-bindings -n 2 $b/tools/bench_pack_sequence --gpus 1 < /dev/null > $out/seq-$round-${bind// /}-$mode.txt 2>&1
      echo "round $round bind '${bind:-default}' mode $mode: $(grep -E '^mpi-datatypes|^fused-kernel' $out/seq-$round-${bind// /}-$mode.txt | head -2 | awk '{printf "%s %s %s; ", $1, $2, $5}') parts: $(grep -E '^mpi-datatypes' $out/seq-$round-${bind// /}-$mode.txt | sed -n 2p)"
    done
  done
done
grep -h "bound to\|not bound" $out/seq-1--2.txt $out/seq-1---bind-tonone-2.txt 2>/dev/null | head -4
echo quit | nvidia-cuda-mps-control
