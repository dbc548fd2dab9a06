#!/bin/bash
# Collectives round on a GPU host, both MPI libraries: every collective/persistent test case
# on its own (2 ranks), then the halo main job with its neighbourhood and persistent variants
# (n = 32, 64, 128) and the FFT transpose benchmark (2 ranks; 4 ranks under MPS).
#   bash tools/gpu/coll_bench_round.sh            (env: MPIS, NS, FFT_NS, TESTS=0 to skip tests, FFT4=0 to skip 4 ranks)
set -uo pipefail
top=${OUT:-gpu-out}
mkdir -p $top
for mpi in ${MPIS:-mpich cuda-openmpi}; do
  ( case $mpi in
      mpich) source .gpu-host/use-mpich.sh .gpu-host/debs; impl=mpich; launcher=$(command -v mpiexec.hydra || command -v mpiexec); margs="" ;;
      cuda-openmpi) source .gpu-host/use-openmpi.sh .gpu-host/ompi; impl=openmpi; launcher=$(command -v mpirun); margs="--allow-run-as-root --oversubscribe" ;;
    esac
    [ -d /opt/c2/usr/share/pkgconfig ] || { mkdir -p /opt/c2 && dpkg -x .gpu-host/debs/catch2_*.deb /opt/c2; sed -i 's|^prefix=/usr$|prefix=/opt/c2/usr|; s|=/usr/|=/opt/c2/usr/|g' /opt/c2/usr/share/pkgconfig/catch2.pc; }
    export PKG_CONFIG_PATH=/opt/c2/usr/share/pkgconfig:${PKG_CONFIG_PATH:-}
    b=build-coll-$mpi
    meson setup $b -Dmpi=$impl -Dmpiexec="$launcher" -Dmpiexec_args="$margs" > /tmp/setup-$mpi.log 2>&1 || { tail -20 /tmp/setup-$mpi.log; exit 1; }
    ninja -C $b tools/tempi_halo tools/bench_alltoallw tests/gpu/test_gpu_coll tests/gpu/test_gpu_persistent > /tmp/build-$mpi.log 2>&1 || { grep error -A5 /tmp/build-$mpi.log | head -30; exit 1; }
    echo "=== $mpi"
    if [ "${TESTS:-1}" = 1 ]; then
      bash tools/gpu/coll_diagnose.sh $mpi 2 60 2>&1 | grep -vE "^\[vm|help message|orte_base" | cut -c1-300
    fi
    for n in ${NS:-32 64 128}; do
      echo "--- halo n=$n"
      $launcher $margs -n 2 $b/tools/tempi_halo --n $n --iters 50 --csv $top/halo-coll-$mpi.csv 2>&1 | grep -E "^(tempi|library|host|neighbor|persistent)|wrong|FAIL|PASS" | grep -v verify
    done
    for n in ${FFT_NS:-128 256}; do
      echo "--- FFT transpose N=$n, 2 ranks"
      $launcher $margs -n 2 $b/tools/bench_alltoallw --n $n --csv $top/alltoallw-$mpi.csv 2>&1 | grep -E "^(tempi|library|hand|per rank)|FAIL|PASS"
    done
    if [ "${FFT4:-1}" = 1 ]; then
      nvidia-cuda-mps-control -d 2>/dev/null && echo "--- MPS on"
      echo "--- FFT transpose N=256, 4 ranks (2 per GPU)"
      $launcher $margs -n 4 $b/tools/bench_alltoallw --n 256 --csv $top/alltoallw-$mpi.csv 2>&1 | grep -E "^(tempi|library|hand|per rank)|FAIL|PASS"
      echo quit | nvidia-cuda-mps-control 2>/dev/null
    fi
  )
done
