#!/bin/bash
# Session 23: MPICH's host wire under MPS: the probe, then tempi-measure twice (its mpi_host curve), then the probe again.
set -uo pipefail
T0=$SECONDS
top=${OUT:-/tmp/out}; out=/tmp/s23d; rm -rf $out; mkdir -p $out
trap 'tar czf "$top/s23d.tgz" -C /tmp s23d' EXIT
source .gpu-host/use-mpich.sh .gpu-host/debs >/dev/null
L=$(command -v mpiexec.hydra || command -v mpiexec); b=bm-mpich
{ nvcc -O2 -arch=sm_90 -c .probe/hostwire.cu -o /tmp/hw.o $(pkg-config --cflags mpich) && g++ /tmp/hw.o -o /tmp/hw-mpich $(pkg-config --libs mpich) -L/usr/local/cuda/lib64 -lcudart; }
[ -f $b/build.ninja ] || meson setup $b -Dmpi=mpich -Dtests=false -Dgpu_arch=90 -Dmpiexec="$L" > /tmp/s.log 2>&1
ninja -C $b tools/tempi-measure > /tmp/b.log 2>&1 || { tail /tmp/b.log; exit 1; }
nvidia-cuda-mps-control -d 2>/dev/null && echo "MPS on"
echo "== probe, MPS on"; timeout 100 $L -n 2 /tmp/hw-mpich | tee $out/probe1.txt
for i in 1 2; do
  timeout 200 $L -n 2 $b/tools/tempi-measure ${FORM:---quick} --output $out/p$i.json > $out/m$i.txt 2>&1
  python3 -c "
import json;p=json.load(open('$out/p$i.json'))
w=p['mpi_host']; print('tempi-measure $i mpi_host', [ (int(b),round(s*1e6,1)) for b,s in zip(w['bytes'],w['seconds'])][-5:])"
  grep "predicted within" $out/m$i.txt
done
echo "== probe again"; timeout 100 $L -n 2 /tmp/hw-mpich | tee $out/probe2.txt | grep -E "pinned, one|mapped"
echo quit | nvidia-cuda-mps-control 2>/dev/null
echo "done at $((SECONDS-T0))s"
