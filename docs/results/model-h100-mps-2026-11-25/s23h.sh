#!/bin/bash
# Session 23, the final tree: the whole gpu suite under MPICH (two ranks under MPS), and
# tempi-measure (full) under both libraries with the re-timing of suspect sizes.
set -uo pipefail
T0=$SECONDS
top=${OUT:-/tmp/out}; out=/tmp/s23h; rm -rf $out; mkdir -p $out
trap 'tar czf "$top/s23h.tgz" -C /tmp s23h' EXIT
[ -d /opt/c2/usr/share/pkgconfig ] || { mkdir -p /opt/c2 && dpkg -x .gpu-host/debs/catch2_*.deb /opt/c2; sed -i 's|^prefix=/usr$|prefix=/opt/c2/usr|; s|=/usr/|=/opt/c2/usr/|g' /opt/c2/usr/share/pkgconfig/catch2.pc; }
export PKG_CONFIG_PATH=/opt/c2/usr/share/pkgconfig:${PKG_CONFIG_PATH:-}
{ nvidia-smi -L; date -u; } > $out/device.txt; cat $out/device.txt
O="source .gpu-host/use-openmpi.sh .gpu-host/ompi"; M="source .gpu-host/use-mpich.sh .gpu-host/debs"
(eval $M >/dev/null; meson setup build-m -Dmpi=mpich -Dgpu_arch=90 -Dmpiexec="$(command -v mpiexec.hydra || command -v mpiexec)" > /tmp/sm.log 2>&1 && ninja -C build-m > /tmp/bm.log 2>&1) &
(eval $O >/dev/null; meson setup bo -Dmpi=openmpi -Dtests=false -Dgpu_arch=90 -Dmpiexec="$(command -v mpirun)" > /tmp/so.log 2>&1 && ninja -C bo tools/tempi-measure > /tmp/bo.log 2>&1) &
wait
[ -x build-m/tools/tempi_halo ] && [ -x bo/tools/tempi-measure ] || { for f in /tmp/sm.log /tmp/bm.log /tmp/so.log /tmp/bo.log; do echo "== $f"; grep -B2 -A10 -m3 error $f | head -30; done; exit 1; }
echo "built at $((SECONDS-T0))s"
nvidia-cuda-mps-control -d 2>/dev/null && echo "MPS on"
(eval $M >/dev/null; timeout 120 $(command -v mpiexec.hydra || command -v mpiexec) -n 2 build-m/tools/tempi-measure --output $out/profile-mpich.json > $out/measure-mpich.txt 2> $out/measure-mpich.err; echo "mpich measure exit $?: $(grep 'predicted within' $out/measure-mpich.txt)"; grep -A4 "^Disturbed" $out/measure-mpich.txt | grep -v "MPI,")
(eval $O >/dev/null; timeout 120 mpirun --allow-run-as-root --oversubscribe -n 2 bo/tools/tempi-measure --output $out/profile-ompi.json > $out/measure-ompi.txt 2> $out/measure-ompi.err; echo "ompi measure exit $?: $(grep 'predicted within' $out/measure-ompi.txt)"; grep -A4 "^Disturbed" $out/measure-ompi.txt | grep -v "MPI,")
echo "measured at $((SECONDS-T0))s"
(eval $M >/dev/null; timeout $((580-(SECONDS-T0))) meson test -C build-m --suite gpu --num-processes 1 > $out/gpu-suite-mpich.txt 2>&1; echo "gpu suite (MPICH) exit $?: $(grep -E '^(Ok|Fail|Skipped|Timeout):' $out/gpu-suite-mpich.txt | tr -s ' ' | tr '\n' ' ')"; grep -E "FAIL|TIMEOUT" $out/gpu-suite-mpich.txt | head; cp build-m/meson-logs/testlog.txt $out/testlog-mpich.txt)
grep -E "gpu_halo_fused" $out/gpu-suite-mpich.txt
echo quit | nvidia-cuda-mps-control 2>/dev/null
echo "done at $((SECONDS-T0))s"
