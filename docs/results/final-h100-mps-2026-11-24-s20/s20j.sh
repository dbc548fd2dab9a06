#!/bin/bash
# MPICH mode 3 on the H100: binding? CPU lists of the ranks, then mode 2/3 with -bind-to none / core.
set -uo pipefail
top=${OUT:-/tmp/out}; out=/tmp/s20j; rm -rf $out; mkdir -p $out
trap 'tar czf "$top/s20j.tgz" -C /tmp s20j' EXIT
source .gpu-host/use-mpich.sh .gpu-host/debs >/dev/null
L=$(command -v mpiexec.hydra || command -v mpiexec)
b=bim
[ -x $b/tools/bench_pack_sequence ] || { meson setup bj -Dmpi=mpich -Dtests=false -Dgpu_arch=90 -Dmpiexec="$L" > /tmp/sm.log 2>&1; ninja -C bj tools/bench_pack_sequence > /tmp/bm.log 2>&1; b=bj; }
$L -n 2 sh -c 'echo "rank $PMI_RANK: $(grep Cpus_allowed_list /proc/self/status)"'
$L -bind-to none -n 2 sh -c 'echo "bind-to none rank $PMI_RANK: $(grep Cpus_allowed_list /proc/self/status)"'
nvidia-cuda-mps-control -d
row() { echo "$1: $(grep -E '^mpi-datatypes|^fused-kernel' $2 | head -2 | awk '{printf "%s %s %s; ", $1, $2, $5}') parts: $(grep -E '^mpi-datatypes' $2 | sed -n 2p)"; }
for round in 1 2; do for bind in "" "-bind-to none" "-bind-to core"; do for mode in 2 3; do
  f=$out/seq-$round-${bind// /}-$mode.txt
  TEMPI_PROFILE=none TEMPI_DEFER_PACK=$mode timeout 60 $L $bind -n 2 $b/tools/bench_pack_sequence --gpus 1 < /dev/null > $f 2>&1
  row "round $round '${bind:-default}' mode $mode" $f
done; done; done
for mode in 3; do f=$out/seq-nomps-$mode.txt; echo quit | nvidia-cuda-mps-control; sleep 1
  TEMPI_PROFILE=none TEMPI_DEFER_PACK=$mode timeout 60 $L -n 2 $b/tools/bench_pack_sequence --gpus 2 < /dev/null > $f 2>&1; row "no MPS, --gpus 2 (one GPU here) mode $mode" $f; done
