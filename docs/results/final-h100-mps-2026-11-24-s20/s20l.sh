#!/bin/bash
# The final tree: tempi-measure (quick) under the CUDA-aware Open MPI and MPICH writes a profile
# that loads (self and batched curves), tempi-info's CPU line under mpirun's binding.
set -uo pipefail
top=${OUT:-/tmp/out}; out=/tmp/s20l; rm -rf $out; mkdir -p $out
trap 'tar czf "$top/s20l.tgz" -C /tmp s20l' EXIT
{ nvidia-smi -L; date -u; } > $out/device.txt
O="source .gpu-host/use-openmpi.sh .gpu-host/ompi"; M="source .gpu-host/use-mpich.sh .gpu-host/debs"
(eval $O >/dev/null; meson setup blo -Dmpi=openmpi -Dtests=false -Dgpu_arch=90 -Dmpiexec="$(command -v mpirun)" > /tmp/so.log 2>&1 && ninja -C blo tools/tempi-measure tools/tempi-info tools/tempi_halo > /tmp/bo.log 2>&1) &
(eval $M >/dev/null; meson setup blm -Dmpi=mpich -Dtests=false -Dgpu_arch=90 -Dmpiexec="$(command -v mpiexec.hydra || command -v mpiexec)" > /tmp/sm.log 2>&1 && ninja -C blm tools/tempi-measure > /tmp/bm.log 2>&1) &
wait
[ -x blo/tools/tempi-measure ] && [ -x blm/tools/tempi-measure ] || { grep -h -A8 error /tmp/bo.log /tmp/bm.log | head; exit 1; }
nvidia-cuda-mps-control -d
(eval $O >/dev/null; L="$(command -v mpirun) --allow-run-as-root --oversubscribe"
  timeout 200 $L -n 2 blo/tools/tempi-measure --quick --output $out/profile-ompi.json > $out/measure-ompi.txt 2> $out/measure-ompi.err; echo "ompi measure exit $?"
  grep -E "MPI,|predicted|Decision|Profile written" $out/measure-ompi.txt
  grep -c '"peer": "self"' $out/profile-ompi.json
  TEMPI_PROFILE=$out/profile-ompi.json TEMPI_LOG_LEVEL=info timeout 60 $L -n 2 blo/tools/tempi_halo --n 64 --iters 30 --variants tempi --methods auto,oneshot,device < /dev/null > $out/halo-ompi.txt 2>&1
  grep -m1 "profile:" $out/halo-ompi.txt; grep "^auto against" $out/halo-ompi.txt
  $L -n 2 blo/tools/tempi-info 2>&1 | grep "CPUs:" | sort | uniq -c)
(eval $M >/dev/null; L=$(command -v mpiexec.hydra || command -v mpiexec)
  timeout 200 $L -n 2 blm/tools/tempi-measure --quick --output $out/profile-mpich.json > $out/measure-mpich.txt 2> $out/measure-mpich.err; echo "mpich measure exit $?"
  grep -E "MPI,|predicted|Profile written" $out/measure-mpich.txt)
echo quit | nvidia-cuda-mps-control
