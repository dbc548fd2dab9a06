#!/bin/bash
# Session 22, the last code (kept decisions on the heap): point-to-point tests and the halo's recall count.
set -uo pipefail
top=${OUT:-/tmp/out}; out=/tmp/s22l; mkdir -p $out
trap 'tar czf "$top/s22l.tgz" -C /tmp s22l' EXIT
[ -d /opt/c2/usr/share/pkgconfig ] || { mkdir -p /opt/c2 && dpkg -x .gpu-host/debs/catch2_*.deb /opt/c2; sed -i 's|^prefix=/usr$|prefix=/opt/c2/usr|; s|=/usr/|=/opt/c2/usr/|g' /opt/c2/usr/share/pkgconfig/catch2.pc; }
export PKG_CONFIG_PATH=/opt/c2/usr/share/pkgconfig:${PKG_CONFIG_PATH:-}
{ nvidia-smi -L; date -u; git log --oneline -1; } > $out/device.txt; cat $out/device.txt
M="source .gpu-host/use-mpich.sh .gpu-host/debs"
(eval $M >/dev/null; meson setup build-m -Dmpi=mpich -Dgpu_arch=90 > /tmp/sm.log 2>&1; ninja -C build-m tools/tempi_halo tests/gpu/test_gpu_p2p tests/gpu/test_gpu_storm > /tmp/bm.log 2>&1) || { tail -20 /tmp/bm.log; exit 1; }
nvidia-cuda-mps-control -d 2>/dev/null
MX=$(eval $M >/dev/null; command -v mpiexec.hydra || command -v mpiexec)
for cfg in "A=1" "TEMPI_TEST_THREADS=1"; do
  (eval $M >/dev/null; env $cfg TEMPI_TEST_DEVICES=1 timeout 150 $MX -n 2 build-m/tests/gpu/test_gpu_p2p > $out/p2p-${cfg%%=*}.log 2>&1; echo "test_gpu_p2p [$cfg] exit $?: $(grep -E 'All tests|test cases' $out/p2p-${cfg%%=*}.log | tail -1)")
done
(eval $M >/dev/null; TEMPI_TEST_THREADS=1 timeout 150 $MX -n 2 build-m/tests/gpu/test_gpu_storm > $out/storm.log 2>&1; echo "test_gpu_storm [threads] exit $?: $(grep -E 'All tests|test cases' $out/storm.log | tail -1)")
(eval $M >/dev/null; timeout 60 $MX -n 2 build-m/tools/tempi_halo --n 32 --iters 200 --variants tempi,zero-copy-p2p < /dev/null > $out/halo.txt 2>&1; grep -E "^(tempi|zero-copy-p2p) |kept decisions|PASS|FAIL" $out/halo.txt)
echo quit | nvidia-cuda-mps-control 2>/dev/null
