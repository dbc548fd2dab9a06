#!/bin/bash
# Session 20: the batched model (profile version 3) on two H200s, both MPI libraries:
# tempi-measure, the halo exchange per forced method against auto, the p2p grid.
set -uo pipefail
T0=$SECONDS
top=${OUT:-/tmp/out}; out=/tmp/s20d; rm -rf $out; mkdir -p $out
trap 'tar czf "$top/s20d.tgz" -C /tmp s20d' EXIT
{ nvidia-smi -L; date -u; git log --oneline -1; } > $out/device.txt
O="source .gpu-host/use-openmpi.sh .gpu-host/ompi"; M="source .gpu-host/use-mpich.sh .gpu-host/debs"
(eval $M >/dev/null; meson setup build-d-m -Dmpi=mpich -Dtests=false -Dgpu_arch=90 -Dmpiexec="$(command -v mpiexec.hydra || command -v mpiexec)" > /tmp/sm.log 2>&1; ninja -C build-d-m tools/tempi-measure tools/tempi_halo tools/bench_p2p > /tmp/bm.log 2>&1) &
(eval $O >/dev/null; meson setup build-d-o -Dmpi=openmpi -Dtests=false -Dgpu_arch=90 -Dmpiexec="$(command -v mpirun)" > /tmp/so.log 2>&1; ninja -C build-d-o tools/tempi-measure tools/tempi_halo tools/bench_p2p > /tmp/bo.log 2>&1) &
wait
[ -x build-d-m/tools/tempi_halo ] && [ -x build-d-o/tools/tempi_halo ] || { tail -5 /tmp/sm.log /tmp/so.log; grep -h -A8 "error" /tmp/bm.log /tmp/bo.log | head -40; exit 1; }
echo "built at $((SECONDS-T0))s"
[ "$(nvidia-smi -L | wc -l)" -lt 2 ] && nvidia-cuda-mps-control -d && echo "one GPU: MPS started"
for mpi in cuda-openmpi mpich; do
  ( if [ $mpi = mpich ]; then eval $M >/dev/null; b=build-d-m; launcher=$(command -v mpiexec.hydra || command -v mpiexec); margs="";
    else eval $O >/dev/null; b=build-d-o; launcher=$(command -v mpirun); margs="--allow-run-as-root --oversubscribe"; fi
    p=$out/profile-$mpi.json
    timeout 240 $launcher $margs -n 2 $b/tools/tempi-measure --output $p > $out/measure-$mpi.txt 2> $out/measure-$mpi.err; echo "== $mpi measure exit $?"
    grep -E "tempi-measure:|MPI,|batched|predicted within|Decision" $out/measure-$mpi.txt
    for n in 32 64 128; do
      TEMPI_PROFILE=$p timeout 90 $launcher $margs -n 2 $b/tools/tempi_halo --n $n --iters 50 --variants tempi --methods auto,oneshot,staged,device --csv $out/halo-methods-$mpi.csv < /dev/null > $out/halo-methods-$mpi-$n.txt 2>&1
      echo "n=$n: $(grep -E '^auto against' $out/halo-methods-$mpi-$n.txt) $(grep -c 'wrong' $out/halo-methods-$mpi-$n.txt) $(grep -E '^tempi\(' $out/halo-methods-$mpi-$n.txt | awk '{printf "%s %s; ", $1, $2}')"
    done
    [ $((SECONDS-T0)) -lt 420 ] && TEMPI_PROFILE=$p timeout 150 $launcher $margs -n 2 $b/tools/bench_p2p --max-bytes 16777216 --csv $out/p2p-$mpi.csv > $out/p2p-$mpi.txt 2>&1; echo "p2p exit $?"; grep -E "^predicted within|^auto" $out/p2p-$mpi.txt | tail -3
    echo "$mpi at $((SECONDS-T0))s" )
done
