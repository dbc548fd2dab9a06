#!/bin/bash
# Session 23, one GPU, two ranks under MPS: tempi-measure (full) then the bench_p2p grid with the
# profile just written (predictions now printed per point), under ${MPI:-cuda-openmpi}.
set -uo pipefail
T0=$SECONDS
for mpi in ${MPIS:-cuda-openmpi}; do (
top=${OUT:-/tmp/out}; out=/tmp/s23a-$mpi${TAG:-}; rm -rf $out; mkdir -p $out
trap 'tar czf "$top/s23a-$mpi${TAG:-}.tgz" -C /tmp s23a-$mpi${TAG:-}' EXIT
{ nvidia-smi -L; date -u; git log --oneline -1 2>/dev/null; } > $out/device.txt; cat $out/device.txt
if [ $mpi = cuda-openmpi ]; then source .gpu-host/use-openmpi.sh .gpu-host/ompi >/dev/null; impl=openmpi; L="$(command -v mpirun) --allow-run-as-root --oversubscribe"
else source .gpu-host/use-mpich.sh .gpu-host/debs >/dev/null; impl=mpich; L=$(command -v mpiexec.hydra || command -v mpiexec); fi
b=bm-$mpi
[ -f $b/build.ninja ] || meson setup $b -Dmpi=$impl -Dtests=false -Dgpu_arch=90 -Dmpiexec="${L%% *}" > /tmp/s-$mpi.log 2>&1 || { tail -20 /tmp/s-$mpi.log; exit 1; }
ninja -C $b tools/tempi-measure tools/bench_p2p tools/tempi_halo > /tmp/b-$mpi.log 2>&1 || { grep -A8 error /tmp/b-$mpi.log | head -30; exit 1; }
echo "built at $((SECONDS-T0))s"
nvidia-cuda-mps-control -d 2>/dev/null && echo "MPS on"
p=$out/profile-$mpi.json
if [ -n "${PROFILE:-}" ]; then cp "$PROFILE" $p; else
timeout 220 $L -n 2 $b/tools/tempi-measure --output $p > $out/measure.txt 2> $out/measure.err; echo "measure exit $? at $((SECONDS-T0))s"
grep -E "predicted within|Decision" $out/measure.txt; fi
python3 -c "
import json;p=json.load(open('$p'))
w=p['mpi_host']; print('mpi_host', [ (int(b),round(s*1e6,1)) for b,s in zip(w['bytes'],w['seconds'])][5:])
for w in p.get('mpi_device',[])[:1]: print('mpi_device', [ (int(b),round(s*1e6,1)) for b,s in zip(w['bytes'],w['seconds'])][:7])
print('launch %.1f sync %.1f' % (p['launch_s']*1e6, p['sync_s']*1e6))"
TEMPI_PROFILE=$p timeout $((570-(SECONDS-T0))) $L -n 2 $b/tools/bench_p2p --max-bytes 16777216 --csv $out/p2p.csv > $out/p2p.txt 2>&1; echo "p2p exit $? at $((SECONDS-T0))s"
grep -E "^predicted within|^  outside|^auto" $out/p2p.txt | tail -40
); done
echo quit | nvidia-cuda-mps-control 2>/dev/null
echo "done at $((SECONDS-T0))s"
