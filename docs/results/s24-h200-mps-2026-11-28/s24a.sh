#!/bin/bash
# Session 24, call 1 (one H200, two ranks under MPS): build against MPICH with the tests,
# tempi-measure --quick --repeat 2 (the median of whole runs), then the whole gpu suite.
set -uo pipefail
T0=$SECONDS
top=${OUT:-/tmp/out}; out=/tmp/s24a; rm -rf $out; mkdir -p $out
trap 'cp build-m/meson-logs/testlog.txt $out/testlog-mpich.txt 2>/dev/null; tar czf "$top/s24a.tgz" -C /tmp s24a' EXIT
[ -d /opt/c2/usr/share/pkgconfig ] || { mkdir -p /opt/c2 && dpkg -x .gpu-host/debs/catch2_*.deb /opt/c2; sed -i 's|^prefix=/usr$|prefix=/opt/c2/usr|; s|=/usr/|=/opt/c2/usr/|g' /opt/c2/usr/share/pkgconfig/catch2.pc; }
export PKG_CONFIG_PATH=/opt/c2/usr/share/pkgconfig:${PKG_CONFIG_PATH:-}
{ nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader; date -u; git log -1 --format=%h 2>/dev/null; } > $out/device.txt; cat $out/device.txt
source .gpu-host/use-mpich.sh .gpu-host/debs >/dev/null
L=$(command -v mpiexec.hydra || command -v mpiexec)
meson setup build-m -Dmpi=mpich -Dgpu_arch=90 -Dmpiexec="$L" > $out/setup.log 2>&1 && ninja -C build-m > $out/build.log 2>&1 \
  || { grep -B2 -A10 -m3 error $out/setup.log $out/build.log | head -40; exit 1; }
echo "built at $((SECONDS-T0))s"
nvidia-cuda-mps-control -d 2>/dev/null && echo "MPS on"
timeout 150 $L -n 2 build-m/tools/tempi-measure --quick --repeat 2 --output $out/profile-quick-repeat2.json \
  > $out/measure-quick-repeat2.txt 2> $out/measure-quick-repeat2.err
echo "measure --quick --repeat 2 exit $? at $((SECONDS-T0))s"; sed -n 1,3p $out/measure-quick-repeat2.txt; grep -E 'predicted within|Decision|Profile written|^  run ' $out/measure-quick-repeat2.txt
TEMPI_PROFILE=$out/profile-quick-repeat2.json TEMPI_LOG_LEVEL=info $L -n 2 build-m/tools/tempi_halo --check --n 16 2>&1 | grep -m1 "profile:"
timeout $((570-(SECONDS-T0))) meson test -C build-m --suite gpu --num-processes 1 > $out/gpu-suite-mpich.txt 2>&1
echo "gpu suite (MPICH) exit $?: $(grep -E '^(Ok|Fail|Skipped|Timeout):' $out/gpu-suite-mpich.txt | tr -s ' ' | tr '\n' ' ')"
grep -E "FAIL|TIMEOUT" $out/gpu-suite-mpich.txt | head
echo quit | nvidia-cuda-mps-control 2>/dev/null
echo "done at $((SECONDS-T0))s"
