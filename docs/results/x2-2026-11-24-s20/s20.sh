#!/bin/bash
# Session 20, the two-H200 machine: PHASE=a|b|c (see the cases below). Builds build-s20m (MPICH) and
# build-s20o (CUDA-aware Open MPI) once; a later phase on a warm machine reuses them.
set -uo pipefail
T0=$SECONDS
phase=${PHASE:-a}
top=${OUT:-/tmp/out}; out=/tmp/s20$phase; mkdir -p $out
trap 'tar czf "$top/s20$phase.tgz" -C /tmp s20$phase' EXIT
[ -d /opt/c2/usr/share/pkgconfig ] || { mkdir -p /opt/c2 && dpkg -x .gpu-host/debs/catch2_*.deb /opt/c2; sed -i 's|^prefix=/usr$|prefix=/opt/c2/usr|; s|=/usr/|=/opt/c2/usr/|g' /opt/c2/usr/share/pkgconfig/catch2.pc; }
export PKG_CONFIG_PATH=/opt/c2/usr/share/pkgconfig:${PKG_CONFIG_PATH:-}
{ nvidia-smi -L; nvidia-smi topo -m | head -4; date -u; } > $out/device.txt
nccl_opt=$(sed -n '/^nccl_option()/,/^}/p' tools/gpu/halo_round.sh > /tmp/nf.sh; source /tmp/nf.sh; nccl_option)
echo "nccl: $nccl_opt"
O="source .gpu-host/use-openmpi.sh .gpu-host/ompi"; M="source .gpu-host/use-mpich.sh .gpu-host/debs"
if [ ! -x build-s20m/tools/tempi_halo ] || [ ! -x build-s20o/tools/tempi_halo ]; then
(eval $M >/dev/null; meson setup build-s20m -Dmpi=mpich -Dgpu_arch=90 $nccl_opt -Dmpiexec="$(command -v mpiexec.hydra || command -v mpiexec)" > /tmp/sm.log 2>&1 && ninja -C build-s20m > /tmp/build-s20m.log 2>&1) &
(eval $O >/dev/null; meson setup build-s20o -Dmpi=openmpi -Dgpu_arch=90 $nccl_opt -Dmpiexec="$(command -v mpirun)" -Dmpiexec_args="--allow-run-as-root --oversubscribe" > /tmp/so.log 2>&1 && ninja -C build-s20o > /tmp/build-s20o.log 2>&1) &
wait
fi
[ -x build-s20m/tools/tempi_halo ] && [ -x build-s20o/tools/tempi_halo ] || { tail -5 /tmp/sm.log /tmp/so.log; grep -h -B2 -A8 "error" /tmp/build-s20m.log /tmp/build-s20o.log | head -40; exit 1; }
grep -h "NCCL" /tmp/sm.log /tmp/so.log | head -2
echo "built at $((SECONDS-T0))s"
ok() { [ $((SECONDS-T0)) -lt ${1:-540} ]; }
each() {  # body per MPI: mpi b launcher margs
  for mpi in mpich cuda-openmpi; do
    ( if [ $mpi = mpich ]; then eval $M >/dev/null; b=build-s20m; launcher=$(command -v mpiexec.hydra || command -v mpiexec); margs="";
      else eval $O >/dev/null; b=build-s20o; launcher=$(command -v mpirun); margs="--allow-run-as-root --oversubscribe"; fi
      "$@" )
  done
}
case $phase in
a)  # issues 16, 20: the halo main job with every variant; large messages; the FFT transpose
  halo() { for n in 32 64 128; do ok 300 || break; echo "--- $mpi halo n=$n"
      timeout 90 $launcher $margs -n 2 $b/tools/tempi_halo --n $n --iters 50 --csv $out/halo-$mpi.csv < /dev/null > $out/halo-$mpi-$n.txt 2>&1
      grep -E "^(tempi|zero|neighbor|persistent|hand|fused|library|host)|wrong|FAIL" $out/halo-$mpi-$n.txt | grep -v verify; done; }
  each halo; echo "halo at $((SECONDS-T0))s"
  large() { ok 420 || return; echo "--- $mpi bench_large"; timeout 100 $launcher $margs -n 2 $b/tools/bench_large --csv $out/large-$mpi.csv < /dev/null > $out/large-$mpi.txt 2>&1; tail -14 $out/large-$mpi.txt; }
  each large; echo "large at $((SECONDS-T0))s"
  a2a() { for n in 6 8 256; do for ipc in auto off; do ok 540 || return; echo "--- $mpi alltoallw N=$n IPC=$ipc"
      TEMPI_IPC=$ipc timeout 60 $launcher $margs -n 2 $b/tools/bench_alltoallw --n $n --csv $out/a2aw-$ipc-$mpi.csv < /dev/null 2>&1 | grep -E "^(tempi|library|hand|per rank|peer)|FAIL|PASS"; done; done; }
  each a2a ;;
b)  # issue 17: the pack sequence; issue 20: 8 ranks, 4 per GPU under MPS; zero-copy tests on two GPUs
  seq() { for mode in 0 1 2 3; do for cfg in "--gpus 2" "--gpus 1"; do ok 330 || return
        [ "$cfg" = "--gpus 1" ] && nvidia-cuda-mps-control -d 2>/dev/null
        echo "--- $mpi TEMPI_DEFER_PACK=$mode $cfg"
        TEMPI_DEFER_PACK=$mode timeout 60 $launcher $margs -n 2 $b/tools/bench_pack_sequence $cfg --csv "$out/seq-$mpi-mode$mode-${cfg// /}.csv" < /dev/null 2>&1 | grep -E "^mpi-datatypes|^fused-kernel|wrong|FAIL|MPS|share" | grep -v verify
        [ "$cfg" = "--gpus 1" ] && { echo quit | nvidia-cuda-mps-control 2>/dev/null; sleep 1; }
      done; done; }
  each seq; echo "seq at $((SECONDS-T0))s"
  halo8() { ok 420 || return; nvidia-cuda-mps-control -d 2>/dev/null; echo "--- $mpi 8 ranks, 4 per GPU, MPS"
    timeout 60 $launcher $margs -n 8 $b/tools/tempi_halo --n 64 --iters 30 --variants tempi,zero-copy-p2p,neighbor,persistent,hand-fused --csv $out/halo8-$mpi.csv < /dev/null > $out/halo8-$mpi.txt 2>&1
    grep -E "^(tempi|zero|neighbor|persistent|hand)|wrong|FAIL" $out/halo8-$mpi.txt | grep -v verify; echo quit | nvidia-cuda-mps-control 2>/dev/null; sleep 1; }
  each halo8; echo "halo8 at $((SECONDS-T0))s"
  zt() { for t in test_gpu_zero_copy test_gpu_zero_copy_p2p test_gpu_coll; do ok 560 || return
      timeout 100 $launcher $margs -n 2 $b/tests/gpu/$t < /dev/null > $out/$t-$mpi.log 2>&1; echo "$mpi $t exit $?: $(grep -E 'All tests|test cases' $out/$t-$mpi.log | tail -1)"; done; }
  each zt ;;
c)  # issue 9: tempi-measure under CUDA-aware Open MPI, the p2p grid with the profile, halo per method
  m9() { [ $mpi = ${M9:-cuda-openmpi} ] || return; p=$out/profile-$mpi.json
    timeout 240 $launcher $margs -n 2 $b/tools/tempi-measure --output $p > $out/measure-$mpi.txt 2> $out/measure-$mpi.err; echo "measure exit $?"; tail -30 $out/measure-$mpi.txt
    echo "measure at $((SECONDS-T0))s"
    for n in 64 128; do ok 420 || break; TEMPI_PROFILE=$p timeout 90 $launcher $margs -n 2 $b/tools/tempi_halo --n $n --iters 50 --variants tempi --methods auto,oneshot,staged,device --csv $out/halo-methods-$mpi.csv < /dev/null > $out/halo-methods-$mpi-$n.txt 2>&1; grep -E "^tempi|auto|wrong" $out/halo-methods-$mpi-$n.txt | head -12; done
    ok 430 && TEMPI_PROFILE=$p timeout 150 $launcher $margs -n 2 $b/tools/bench_p2p --max-bytes 16777216 --csv $out/p2p-$mpi.csv > $out/p2p-$mpi.txt 2>&1; echo "p2p exit $?"; sed -n '/auto against/,$p' $out/p2p-$mpi.txt | tail -6; }
  each m9 ;;
esac
echo "done at $((SECONDS-T0))s"
