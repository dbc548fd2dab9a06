#!/bin/bash
# Session 23: tempi-measure with the library's curves first, several runs per MPI (their check tables and
# curves), then the bench_p2p grid with the last profile.
set -uo pipefail
T0=$SECONDS
top=${OUT:-/tmp/out}; out=/tmp/s23e${TAG:-}; rm -rf $out; mkdir -p $out
trap 'tar czf "$top/s23e${TAG:-}.tgz" -C /tmp s23e${TAG:-}' EXIT
{ nvidia-smi -L; date -u; } > $out/device.txt; cat $out/device.txt
nvidia-cuda-mps-control -d 2>/dev/null && echo "MPS on"
for mpi in ${MPIS:-mpich cuda-openmpi}; do (
if [ $mpi = cuda-openmpi ]; then source .gpu-host/use-openmpi.sh .gpu-host/ompi >/dev/null; impl=openmpi; L="$(command -v mpirun) --allow-run-as-root --oversubscribe"
else source .gpu-host/use-mpich.sh .gpu-host/debs >/dev/null; impl=mpich; L=$(command -v mpiexec.hydra || command -v mpiexec); fi
b=bm-$mpi
[ -f $b/build.ninja ] || meson setup $b -Dmpi=$impl -Dtests=false -Dgpu_arch=90 -Dmpiexec="${L%% *}" > /tmp/s-$mpi.log 2>&1 || { tail -20 /tmp/s-$mpi.log; exit 1; }
ninja -C $b tools/tempi-measure tools/bench_p2p > /tmp/b-$mpi.log 2>&1 || { grep -A8 error /tmp/b-$mpi.log | head -30; exit 1; }
echo "$mpi built at $((SECONDS-T0))s"
for i in $(seq ${RUNS:-4}); do
  p=$out/profile-$mpi-$i.json
  timeout 120 $L -n 2 $b/tools/tempi-measure --output $p > $out/measure-$mpi-$i.txt 2> $out/measure-$mpi-$i.err
  echo "$mpi run $i (exit $?): $(grep -E 'predicted within' $out/measure-$mpi-$i.txt)"
  python3 -c "
import json;p=json.load(open('$p'))
w=p['mpi_host']; print('   mpi_host', [ (int(b),round(s*1e6,1)) for b,s in zip(w['bytes'],w['seconds'])][5:])"
done
TEMPI_PROFILE=$p timeout 150 $L -n 2 $b/tools/bench_p2p --max-bytes 16777216 --csv $out/p2p-$mpi.csv > $out/p2p-$mpi.txt 2>&1; echo "p2p exit $? at $((SECONDS-T0))s"
grep -E "^predicted within|^auto" $out/p2p-$mpi.txt | tail -4
); done
echo quit | nvidia-cuda-mps-control 2>/dev/null
echo "done at $((SECONDS-T0))s"
