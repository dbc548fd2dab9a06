#!/bin/bash
# Launch cost on this host: alone without MPS, alone under MPS, two processes at once under MPS.
set -uo pipefail
top=${OUT:-/tmp/out}; out=/tmp/s22i; mkdir -p $out
trap 'tar czf "$top/s22i.tgz" -C /tmp s22i' EXIT
{ nvidia-smi -L; date -u; nproc; } > $out/device.txt; cat $out/device.txt
nvcc -O2 -arch=sm_90 -o /tmp/launch .probe/launch.cu || exit 1
echo "== alone, no MPS"; /tmp/launch 104 | tee $out/alone.txt
nvidia-cuda-mps-control -d; sleep 1
echo "== alone, MPS"; /tmp/launch 104 | tee $out/mps-alone.txt
echo "== two at once, MPS"; /tmp/launch 104 > $out/mps-two-a.txt & /tmp/launch 104 > $out/mps-two-b.txt; wait; cat $out/mps-two-a.txt
echo quit | nvidia-cuda-mps-control
echo "== two at once, no MPS"; sleep 1; /tmp/launch 104 > $out/two-a.txt & /tmp/launch 104 > $out/two-b.txt; wait; cat $out/two-a.txt
