#!/bin/bash
# Session 22, after the review: the tables' and kept decisions' tests, compute-sanitizer on the
# tables' test, the halo with its count of recalled decisions (MPICH and CUDA-aware Open MPI).
set -uo pipefail
T0=$SECONDS
top=${OUT:-/tmp/out}; out=/tmp/s22j; mkdir -p $out
trap 'tar czf "$top/s22j.tgz" -C /tmp s22j' EXIT
[ -d /opt/c2/usr/share/pkgconfig ] || { mkdir -p /opt/c2 && dpkg -x .gpu-host/debs/catch2_*.deb /opt/c2; sed -i 's|^prefix=/usr$|prefix=/opt/c2/usr|; s|=/usr/|=/opt/c2/usr/|g' /opt/c2/usr/share/pkgconfig/catch2.pc; }
export PKG_CONFIG_PATH=/opt/c2/usr/share/pkgconfig:${PKG_CONFIG_PATH:-}
{ nvidia-smi -L; date -u; } > $out/device.txt; cat $out/device.txt
O="source .gpu-host/use-openmpi.sh .gpu-host/ompi"; M="source .gpu-host/use-mpich.sh .gpu-host/debs"
T="tools/tempi_halo tests/gpu/test_gpu_pack tests/gpu/test_gpu_p2p tests/gpu/test_gpu_storm tests/gpu/test_gpu_zero_copy_p2p tests/gpu/test_gpu_zero_copy"
(eval $M >/dev/null; meson setup build-m -Dmpi=mpich -Dgpu_arch=90 > /tmp/sm.log 2>&1; ninja -C build-m $T > /tmp/bm.log 2>&1) &
(eval $O >/dev/null; meson setup build-o -Dmpi=openmpi -Dgpu_arch=90 > /tmp/so.log 2>&1; ninja -C build-o $T > /tmp/bo.log 2>&1) &
wait
[ -x build-m/tests/gpu/test_gpu_pack ] && [ -x build-o/tests/gpu/test_gpu_p2p ] || { tail -n 20 /tmp/sm.log /tmp/bm.log /tmp/so.log /tmp/bo.log; exit 1; }
echo "built at $((SECONDS-T0))s"
nvidia-cuda-mps-control -d 2>/dev/null
MX=$(eval $M >/dev/null; command -v mpiexec.hydra || command -v mpiexec)
(eval $M >/dev/null; timeout 200 $MX -n 1 build-m/tests/gpu/test_gpu_pack > $out/test_gpu_pack.log 2>&1; echo "test_gpu_pack exit $?: $(grep -E 'All tests|test cases' $out/test_gpu_pack.log | tail -1)"; grep -B3 -A12 FAILED $out/test_gpu_pack.log | head -40)
for cfg in "A=1" "TEMPI_METHOD=staged" "TEMPI_TEST_THREADS=1"; do
  (eval $M >/dev/null; env $cfg TEMPI_TEST_DEVICES=1 timeout 150 $MX -n 2 build-m/tests/gpu/test_gpu_p2p > $out/p2p-mpich-${cfg%%=*}.log 2>&1; echo "mpich test_gpu_p2p [$cfg] exit $?: $(grep -E 'All tests|test cases' $out/p2p-mpich-${cfg%%=*}.log | tail -1)"; grep -B3 -A12 FAILED $out/p2p-mpich-${cfg%%=*}.log | head -30)
done
for t in test_gpu_p2p test_gpu_storm test_gpu_zero_copy_p2p test_gpu_zero_copy; do
  (eval $O >/dev/null; timeout 150 mpirun --allow-run-as-root --oversubscribe -n 2 build-o/tests/gpu/$t < /dev/null > $out/$t-ompi.log 2>&1; echo "ompi $t exit $?: $(grep -E 'All tests|test cases' $out/$t-ompi.log | tail -1)"; grep -B3 -A12 FAILED $out/$t-ompi.log | head -30)
done
(eval $M >/dev/null; timeout 150 $MX -n 2 build-m/tests/gpu/test_gpu_zero_copy_p2p > $out/zcp2p-mpich.log 2>&1; echo "mpich test_gpu_zero_copy_p2p exit $?: $(grep -E 'All tests|test cases' $out/zcp2p-mpich.log | tail -1)")
echo "tests at $((SECONDS-T0))s"
for tool in memcheck racecheck; do
  (eval $M >/dev/null; timeout 150 $MX -n 1 compute-sanitizer --tool $tool build-m/tests/gpu/test_gpu_pack "repeated batches launch from descriptions kept on the device" < /dev/null > $out/sanitizer-$tool.log 2>&1; echo "tables $tool exit $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|All tests|test cases' $out/sanitizer-$tool.log | sort | uniq -c | tr '\n' ' ')")
done
echo "sanitizers at $((SECONDS-T0))s"
for n in 32 64; do
  (eval $M >/dev/null; timeout 60 $MX -n 2 build-m/tools/tempi_halo --n $n --iters 200 --variants tempi,zero-copy-p2p,persistent < /dev/null > $out/halo-mpich-$n.txt 2>&1)
  echo "mpich n=$n: $(grep -E '^(tempi|zero-copy-p2p|persistent) ' $out/halo-mpich-$n.txt | head -3 | awk '{print $1, $2}' | tr '\n' ' ') | $(grep 'kept decisions' $out/halo-mpich-$n.txt | tr '\n' ' ')"
  (eval $O >/dev/null; timeout 60 mpirun --allow-run-as-root --oversubscribe -n 2 build-o/tools/tempi_halo --n $n --iters 200 --variants tempi,zero-copy-p2p,persistent < /dev/null > $out/halo-ompi-$n.txt 2>&1)
  echo "ompi n=$n: $(grep -E '^(tempi|zero-copy-p2p|persistent) ' $out/halo-ompi-$n.txt | head -3 | awk '{print $1, $2}' | tr '\n' ' ') | $(grep 'kept decisions' $out/halo-ompi-$n.txt | tr '\n' ' ')"
done
echo quit | nvidia-cuda-mps-control 2>/dev/null
echo "done at $((SECONDS-T0))s"
