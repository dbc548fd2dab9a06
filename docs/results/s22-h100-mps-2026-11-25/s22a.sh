#!/bin/bash
# Session 22: where the time of an MPI_Isend/MPI_Irecv halo exchange goes on a GPU (an
# instrumented copy of the tree, .probe/prof.patch), two ranks under MPS on one GPU.
set -uo pipefail
T0=$SECONDS
top=${OUT:-/tmp/out}; out=/tmp/s22a; mkdir -p $out
trap 'tar czf "$top/s22a.tgz" -C /tmp s22a' EXIT
{ nvidia-smi -L; date -u; } > $out/device.txt; cat $out/device.txt
rm -rf /tmp/prof && cp -r . /tmp/prof && cd /tmp/prof && git apply .probe/prof.patch || exit 1
O="source .gpu-host/use-openmpi.sh .gpu-host/ompi"; M="source .gpu-host/use-mpich.sh .gpu-host/debs"
(eval $M >/dev/null; meson setup build-m -Dmpi=mpich -Dgpu_arch=90 -Dtests=false > /tmp/sm.log 2>&1 && ninja -C build-m tools/tempi_halo > /tmp/bm.log 2>&1) &
(eval $O >/dev/null; meson setup build-o -Dmpi=openmpi -Dgpu_arch=90 -Dtests=false > /tmp/so.log 2>&1 && ninja -C build-o tools/tempi_halo > /tmp/bo.log 2>&1) &
wait
[ -x build-m/tools/tempi_halo ] && [ -x build-o/tools/tempi_halo ] || { for f in /tmp/sm.log /tmp/bm.log /tmp/so.log /tmp/bo.log; do echo "== $f"; tail -n 12 $f; done; exit 1; }
echo "built at $((SECONDS-T0))s"
nvidia-cuda-mps-control -d 2>/dev/null
for n in 32 128; do
  for v in tempi zero-copy-p2p persistent; do
    (eval $M >/dev/null; timeout 60 $(command -v mpiexec.hydra || command -v mpiexec) -n 2 build-m/tools/tempi_halo --n $n --iters 200 --variants $v < /dev/null > $out/mpich-$v-$n.txt 2>&1)
    echo "== mpich $v n=$n"; grep -E "^$v |PROF" $out/mpich-$v-$n.txt
  done
  (eval $O >/dev/null; timeout 60 mpirun --allow-run-as-root --oversubscribe -n 2 build-o/tools/tempi_halo --n $n --iters 200 --variants tempi < /dev/null > $out/ompi-tempi-$n.txt 2>&1)
  echo "== ompi tempi n=$n"; grep -E "^tempi |PROF" $out/ompi-tempi-$n.txt
done
echo quit | nvidia-cuda-mps-control 2>/dev/null
echo "done at $((SECONDS-T0))s"
