#!/bin/bash
# Halo timing round: both MPI libraries, n = 32, 64, 128, auto and oneshot, parts of an exchange.
set -uo pipefail
top=${OUT:-gpu-out}
for mpi in mpich cuda-openmpi; do
  ( case $mpi in
      mpich) source .gpu-host/use-mpich.sh .gpu-host/debs; impl=mpich; launcher=$(command -v mpiexec.hydra || command -v mpiexec); margs="" ;;
      cuda-openmpi) source .gpu-host/use-openmpi.sh .gpu-host/ompi; impl=openmpi; launcher=$(command -v mpirun); margs="--allow-run-as-root --oversubscribe" ;;
    esac
    [ -d /opt/c2/usr/share/pkgconfig ] || { mkdir -p /opt/c2 && dpkg -x .gpu-host/debs/catch2_*.deb /opt/c2; sed -i 's|^prefix=/usr$|prefix=/opt/c2/usr|; s|=/usr/|=/opt/c2/usr/|g' /opt/c2/usr/share/pkgconfig/catch2.pc; }
    export PKG_CONFIG_PATH=/opt/c2/usr/share/pkgconfig:${PKG_CONFIG_PATH:-}
    b=build-gpu-$mpi
    meson setup $b -Dmpi=$impl -Dtests=false -Dmpiexec="$launcher" > /tmp/setup-$mpi.log 2>&1 || { tail -20 /tmp/setup-$mpi.log; exit 1; }
    ninja -C $b tools/tempi_halo tools/bench_p2p > /tmp/build-$mpi.log 2>&1 || { grep error -A5 /tmp/build-$mpi.log | head -30; exit 1; }
    echo "=== $mpi"
    for n in 32 64 128; do
      for m in auto oneshot; do
        echo "--- n=$n method=$m"
        TEMPI_METHOD=$m $launcher $margs -n 2 $b/tools/tempi_halo --n $n --iters 50 --variants ${VARIANTS:-tempi,host-copy} --csv $top/halo-$mpi-$m.csv 2>&1 | grep -E "^tempi|^host-copy|^library|wrong|FAIL" | grep -v verify
      done
    done
    if [ "${HALO8:-1}" = 1 ]; then
      nvidia-cuda-mps-control -d 2>/dev/null && echo "--- 8 ranks, 4 per GPU, MPS on"
      $launcher $margs -n 8 $b/tools/tempi_halo --n 64 --iters 30 --variants tempi,host-copy --csv $top/halo8-$mpi.csv 2>&1 | grep -E "^tempi|^host-copy|wrong|FAIL" | grep -v verify
      echo quit | nvidia-cuda-mps-control 2>/dev/null
    fi
    if [ "${P2P:-0}" = 1 ]; then
      $launcher $margs -n 2 $b/tools/bench_p2p --quick --csv $top/p2p-$mpi.csv > $top/p2p-$mpi.txt 2>&1; tail -${P2P_LINES:-30} $top/p2p-$mpi.txt
    fi
  )
done
