#!/bin/bash
# Session 20, one H200, two ranks under MPS, the final model code: CUDA-aware Open MPI measure +
# halo per method + p2p grid; pack sequences under Open MPI in the four modes; GPU tests under
# both libraries (Open MPI: the chosen eleven; MPICH: the whole gpu suite).
set -uo pipefail
T0=$SECONDS
top=${OUT:-/tmp/out}; out=/tmp/s20n; rm -rf $out; mkdir -p $out
trap 'tar czf "$top/s20n.tgz" -C /tmp s20n' EXIT
[ -d /opt/c2/usr/share/pkgconfig ] || { mkdir -p /opt/c2 && dpkg -x .gpu-host/debs/catch2_*.deb /opt/c2; sed -i 's|^prefix=/usr$|prefix=/opt/c2/usr|; s|=/usr/|=/opt/c2/usr/|g' /opt/c2/usr/share/pkgconfig/catch2.pc; }
export PKG_CONFIG_PATH=/opt/c2/usr/share/pkgconfig:${PKG_CONFIG_PATH:-}
{ nvidia-smi -L; date -u; } > $out/device.txt
O="source .gpu-host/use-openmpi.sh .gpu-host/ompi"; M="source .gpu-host/use-mpich.sh .gpu-host/debs"
(eval $M >/dev/null; meson setup bgm -Dmpi=mpich -Dgpu_arch=90 -Dmpiexec="$(command -v mpiexec.hydra || command -v mpiexec)" > /tmp/sm.log 2>&1 && ninja -C bgm > /tmp/bm.log 2>&1) &
(eval $O >/dev/null; meson setup bgo -Dmpi=openmpi -Dgpu_arch=90 -Dmpiexec="$(command -v mpirun)" -Dmpiexec_args="--allow-run-as-root --oversubscribe" > /tmp/so.log 2>&1 && ninja -C bgo > /tmp/bo.log 2>&1) &
wait
[ -x bgm/tests/gpu/test_gpu_coll ] && [ -x bgo/tests/gpu/test_gpu_coll ] || { grep -h -B2 -A8 "error" /tmp/bm.log /tmp/bo.log | head -40; exit 1; }
echo "built at $((SECONDS-T0))s"
nvidia-cuda-mps-control -d && echo "MPS on"
(eval $O >/dev/null; L="$(command -v mpirun) --allow-run-as-root --oversubscribe"
  for mode in 2 3; do TEMPI_DEFER_PACK=$mode timeout 60 $L -n 2 bgo/tools/bench_pack_sequence --gpus 1 < /dev/null > $out/seq-ompi-mode$mode.txt 2>&1; echo "mode $mode: $(grep -E '^mpi-datatypes|^fused-kernel' $out/seq-ompi-mode$mode.txt | head -2 | awk '{printf "%s %s %s; ", $1, $2, $5}')"; done
  cd bgo; timeout 240 meson test --no-rebuild --timeout-multiplier 2 gpu_zero_copy_p2p_2ranks gpu_zero_copy_p2p_4ranks gpu_zero_copy_2ranks gpu_coll_auto_4ranks gpu_persistent_auto_4ranks gpu_p2p_auto gpu_p2p_device gpu_pack gpu_transpose gpu_storm_auto gpu_persistent_auto_2ranks > $out/test-ompi.log 2>&1; cp meson-logs/testlog.txt $out/testlog-ompi.txt)
echo "ompi tests at $((SECONDS-T0))s"
(eval $M >/dev/null; cd bgm; timeout $((560-(SECONDS-T0))) meson test --no-rebuild --suite gpu --timeout-multiplier 2 > $out/test-mpich.log 2>&1; cp meson-logs/testlog.txt $out/testlog-mpich.txt)
echo "mpich suite at $((SECONDS-T0))s"
echo quit | nvidia-cuda-mps-control
grep -hE "^ *[0-9]+/[0-9]+ .*(FAIL|TIMEOUT)|^Ok:|^Fail:|^Skipped:|^Timeout:" $out/test-ompi.log $out/test-mpich.log
