#!/bin/bash
# Session 21: neighbor-persistent at n = 128 again (the final tree), three runs, MPICH, MPS.
set -uo pipefail
T0=$SECONDS
[ -d /opt/c2/usr/share/pkgconfig ] || { mkdir -p /opt/c2 && dpkg -x .gpu-host/debs/catch2_*.deb /opt/c2; sed -i 's|^prefix=/usr$|prefix=/opt/c2/usr|; s|=/usr/|=/opt/c2/usr/|g' /opt/c2/usr/share/pkgconfig/catch2.pc; }
export PKG_CONFIG_PATH=/opt/c2/usr/share/pkgconfig:${PKG_CONFIG_PATH:-}
nvidia-smi -L; date -u
source .gpu-host/use-mpich.sh .gpu-host/debs >/dev/null
L=$(command -v mpiexec.hydra || command -v mpiexec)
meson setup build-m -Dmpi=mpich -Dgpu_arch=90 -Dmpiexec="$L" > /tmp/sm.log 2>&1 && ninja -C build-m tools/tempi_halo > /tmp/bm.log 2>&1 || { tail -n 20 /tmp/sm.log /tmp/bm.log; exit 1; }
echo "built at $((SECONDS-T0))s"
nvidia-cuda-mps-control -d 2>/dev/null
for r in 1 2 3; do for n in 32 128; do
  echo "n=$n run $r: $(timeout 60 $L -n 2 build-m/tools/tempi_halo --n $n --iters 200 --variants neighbor-persistent,neighbor < /dev/null 2>&1 | grep -E '^neighbor' | awk '{print $1, $2, $3, $4}' | tr '\n' ' ')"
done; done
echo quit | nvidia-cuda-mps-control 2>/dev/null
