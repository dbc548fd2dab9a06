#!/bin/bash
# compute-sanitizer (memcheck, racecheck) on the two zero-copy tests, two ranks on one GPU, under
# the CUDA-aware Open MPI (never recorded before) and racecheck under MPICH.
set -uo pipefail
T0=$SECONDS
top=${OUT:-/tmp/out}; out=/tmp/s20k; rm -rf $out; mkdir -p $out
trap 'tar czf "$top/s20k.tgz" -C /tmp s20k' EXIT
[ -d /opt/c2/usr/share/pkgconfig ] || { mkdir -p /opt/c2 && dpkg -x .gpu-host/debs/catch2_*.deb /opt/c2; sed -i 's|^prefix=/usr$|prefix=/opt/c2/usr|; s|=/usr/|=/opt/c2/usr/|g' /opt/c2/usr/share/pkgconfig/catch2.pc; }
export PKG_CONFIG_PATH=/opt/c2/usr/share/pkgconfig:${PKG_CONFIG_PATH:-}
{ nvidia-smi -L; date -u; } > $out/device.txt
O="source .gpu-host/use-openmpi.sh .gpu-host/ompi"; M="source .gpu-host/use-mpich.sh .gpu-host/debs"
T="tests/gpu/test_gpu_zero_copy tests/gpu/test_gpu_zero_copy_p2p"
(eval $O >/dev/null; meson setup bko -Dmpi=openmpi -Dgpu_arch=90 -Dmpiexec="$(command -v mpirun)" -Dmpiexec_args="--allow-run-as-root --oversubscribe" > /tmp/so.log 2>&1 && ninja -C bko $T > /tmp/bo.log 2>&1) &
(eval $M >/dev/null; meson setup bkm -Dmpi=mpich -Dgpu_arch=90 -Dmpiexec="$(command -v mpiexec.hydra || command -v mpiexec)" > /tmp/sm.log 2>&1 && ninja -C bkm $T > /tmp/bm.log 2>&1) &
wait
[ -x bko/tests/gpu/test_gpu_zero_copy ] && [ -x bkm/tests/gpu/test_gpu_zero_copy ] || { grep -h -A8 error /tmp/bo.log /tmp/bm.log | head -30; exit 1; }
echo "built at $((SECONDS-T0))s"
nvidia-cuda-mps-control -d
run() {  # mpi tool test
  local L
  if [ $1 = ompi ]; then L="$(command -v mpirun) --allow-run-as-root --oversubscribe"; b=bko; else L=$(command -v mpiexec.hydra || command -v mpiexec); b=bkm; fi
  local f=$out/$1-$2-$3.log
  timeout ${4:-150} $L -n 2 compute-sanitizer --tool $2 --report-api-errors no --error-exitcode 9 $b/tests/gpu/$3 < /dev/null > $f 2>&1
  echo "$1 $2 $3: exit $? | $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $f | sort | uniq -c | tr '\n' ' ') | $(grep -E 'All tests|test cases' $f | tail -1)"
}
(eval $O >/dev/null; for t in test_gpu_zero_copy_p2p test_gpu_zero_copy; do for tool in memcheck racecheck; do [ $((SECONDS-T0)) -lt 480 ] && run ompi $tool $t; done; done)
(eval $M >/dev/null; for t in test_gpu_zero_copy_p2p test_gpu_zero_copy; do [ $((SECONDS-T0)) -lt 530 ] && run mpich racecheck $t 100; done)
echo quit | nvidia-cuda-mps-control
echo "done at $((SECONDS-T0))s"
