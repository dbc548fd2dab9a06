#!/bin/bash
# Session 23: the halo with hand-fused-faces (one library message per face) beside tempi, persistent, neighbor and
# hand-fused, n = 32, 64, 128, both libraries, two ranks under MPS; and the fused variants' cell check (1-byte cells, odd extents).
set -uo pipefail
T0=$SECONDS
top=${OUT:-/tmp/out}; out=/tmp/s23g; rm -rf $out; mkdir -p $out
trap 'tar czf "$top/s23g.tgz" -C /tmp s23g' EXIT
{ nvidia-smi -L; date -u; } > $out/device.txt; cat $out/device.txt
nvidia-cuda-mps-control -d 2>/dev/null && echo "MPS on"
for mpi in mpich cuda-openmpi; do (
if [ $mpi = cuda-openmpi ]; then source .gpu-host/use-openmpi.sh .gpu-host/ompi >/dev/null; impl=openmpi; L="$(command -v mpirun) --allow-run-as-root --oversubscribe"
else source .gpu-host/use-mpich.sh .gpu-host/debs >/dev/null; impl=mpich; L=$(command -v mpiexec.hydra || command -v mpiexec); fi
b=bm-$mpi
[ -f $b/build.ninja ] || meson setup $b -Dmpi=$impl -Dtests=false -Dgpu_arch=90 -Dmpiexec="${L%% *}" > /tmp/s-$mpi.log 2>&1 || { tail -20 /tmp/s-$mpi.log; exit 1; }
ninja -C $b tools/tempi_halo > /tmp/b-$mpi.log 2>&1 || { grep -A8 error /tmp/b-$mpi.log | head -30; exit 1; }
echo "$mpi built at $((SECONDS-T0))s"
for r in 1 2; do
  timeout 100 $L -n $r $b/tools/tempi_halo --check --require-gpu --variants tempi,hand-fused,hand-fused-faces,fused-nccl --type char --n 7 --radius 3 < /dev/null > $out/check-$mpi-$r.txt 2>&1
  echo "$mpi check $r rank(s): exit $? $(grep -E '^verify' $out/check-$mpi-$r.txt | tr '\n' ' ')"
done
V=tempi,persistent,neighbor,hand-fused,hand-fused-faces
for n in 32 64 128; do
  timeout 120 $L -n 2 $b/tools/tempi_halo --n $n --iters 100 --variants $V --csv $out/halo-$mpi.csv < /dev/null > $out/halo-$mpi-$n.txt 2>&1
  echo "$mpi n=$n (exit $?): $(grep -E '^(tempi|persistent|neighbor|hand)' $out/halo-$mpi-$n.txt | head -5 | awk '{printf "%s %s; ", $1, $2}') $(grep -c '0 wrong' $out/halo-$mpi-$n.txt)/5 clean"
  grep -A8 "^variant  *post" $out/halo-$mpi-$n.txt | head -7
done
); done
echo quit | nvidia-cuda-mps-control 2>/dev/null
echo "done at $((SECONDS-T0))s"
