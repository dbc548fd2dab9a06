#!/bin/bash
# Session 23: issue 9's halo on this tree: tempi-measure (full), then tempi_halo --methods (auto against
# each forced method, 3 rounds) at n = 32, 64, 128, under both libraries, two ranks under MPS.
set -uo pipefail
T0=$SECONDS
top=${OUT:-/tmp/out}; out=/tmp/s23f; rm -rf $out; mkdir -p $out
trap 'tar czf "$top/s23f.tgz" -C /tmp s23f' EXIT
{ nvidia-smi -L; date -u; } > $out/device.txt; cat $out/device.txt
nvidia-cuda-mps-control -d 2>/dev/null && echo "MPS on"
for mpi in mpich cuda-openmpi; do (
if [ $mpi = cuda-openmpi ]; then source .gpu-host/use-openmpi.sh .gpu-host/ompi >/dev/null; impl=openmpi; L="$(command -v mpirun) --allow-run-as-root --oversubscribe"; methods=auto,oneshot,staged,device
else source .gpu-host/use-mpich.sh .gpu-host/debs >/dev/null; impl=mpich; L=$(command -v mpiexec.hydra || command -v mpiexec); methods=auto,oneshot,staged; fi
b=bm-$mpi
[ -f $b/build.ninja ] || meson setup $b -Dmpi=$impl -Dtests=false -Dgpu_arch=90 -Dmpiexec="${L%% *}" > /tmp/s-$mpi.log 2>&1 || { tail -20 /tmp/s-$mpi.log; exit 1; }
ninja -C $b tools/tempi-measure tools/tempi_halo > /tmp/b-$mpi.log 2>&1 || { grep -A8 error /tmp/b-$mpi.log | head -30; exit 1; }
echo "$mpi built at $((SECONDS-T0))s"
p=$out/profile-$mpi.json
timeout 120 $L -n 2 $b/tools/tempi-measure --output $p > $out/measure-$mpi.txt 2> $out/measure-$mpi.err
echo "$mpi measure (exit $?): $(grep -E 'predicted within' $out/measure-$mpi.txt)"; grep -A3 "^Disturbed" $out/measure-$mpi.txt
for n in 32 64 128; do
  TEMPI_PROFILE=$p timeout 120 $L -n 2 $b/tools/tempi_halo --n $n --iters 50 --variants tempi --methods $methods --rounds 3 --csv $out/halo-methods-$mpi.csv < /dev/null > $out/halo-methods-$mpi-$n.txt 2>&1
  echo "$mpi n=$n (exit $?): $(grep -E '^auto against' $out/halo-methods-$mpi-$n.txt) | $(grep -E '^tempi\(' $out/halo-methods-$mpi-$n.txt | awk '{printf "%s %s; ", $1, $2}') $(grep -c '0 wrong' $out/halo-methods-$mpi-$n.txt) clean"
done
); done
echo quit | nvidia-cuda-mps-control 2>/dev/null
echo "done at $((SECONDS-T0))s"
