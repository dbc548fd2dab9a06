#!/bin/bash
# Zero-copy round on a host with two GPUs, both MPI libraries (issue 16): the zero-copy and
# collective tests on real GPUs (CUDA IPC), then the halo main job (MPI_Neighbor_alltoallw
# beside TEMPI's Isend/Irecv variant and the hand-fused and fused+NCCL baselines) and the FFT
# transpose (MPI_Alltoallw), each with zero-copy on (TEMPI_IPC=auto) and off.
#   bash tools/gpu/zero_copy_round.sh        (env: MPIS, NS, FFT_NS, TESTS=0 skips the tests,
#                                             SANITIZE=1 runs the 2-rank zero-copy test under
#                                             compute-sanitizer memcheck and racecheck,
#                                             MORE_TESTS="test_gpu_persistent ..." more programs
#                                             of tests/gpu, each run on 2 ranks)
set -uo pipefail
top=${OUT:-gpu-out}
mkdir -p "$top"
for mpi in ${MPIS:-mpich cuda-openmpi}; do
  ( case $mpi in
      mpich) source .gpu-host/use-mpich.sh .gpu-host/debs; impl=mpich; launcher=$(command -v mpiexec.hydra || command -v mpiexec); margs="" ;;
      cuda-openmpi) source .gpu-host/use-openmpi.sh .gpu-host/ompi; impl=openmpi; launcher=$(command -v mpirun); margs="--allow-run-as-root --oversubscribe" ;;
    esac
    [ -d /opt/c2/usr/share/pkgconfig ] || { mkdir -p /opt/c2 && dpkg -x .gpu-host/debs/catch2_*.deb /opt/c2; sed -i 's|^prefix=/usr$|prefix=/opt/c2/usr|; s|=/usr/|=/opt/c2/usr/|g' /opt/c2/usr/share/pkgconfig/catch2.pc; }
    export PKG_CONFIG_PATH=/opt/c2/usr/share/pkgconfig:${PKG_CONFIG_PATH:-}
    b=build-zc-$mpi
    meson setup $b -Dmpi=$impl -Dgpu_arch=90 -Dmpiexec="$launcher" -Dmpiexec_args="$margs" > /tmp/setup-$mpi.log 2>&1 || { tail -20 /tmp/setup-$mpi.log; exit 1; }
    more=""
    for t in ${MORE_TESTS:-}; do more="$more tests/gpu/$t"; done
    ninja -C $b tools/tempi_halo tools/bench_alltoallw tests/gpu/test_gpu_zero_copy tests/gpu/test_gpu_coll $more > /tmp/build-$mpi.log 2>&1 || { grep error -A5 /tmp/build-$mpi.log | head -30; exit 1; }
    echo "=== $mpi ($(grep -m1 'NCCL (tempi_halo only)' /tmp/setup-$mpi.log | tr -s ' '))"
    if [ "${TESTS:-1}" = 1 ]; then
      for n in 2 4; do
        echo "--- gpu_zero_copy ${n} ranks"
        TEMPI_LOG_LEVEL=info timeout 120 $launcher $margs -n $n $b/tests/gpu/test_gpu_zero_copy < /dev/null 2>&1 | grep -E "passed|failed|FAILED|zero-copy:|SKIP|error" | head -12
      done
      echo "--- gpu_coll 2 ranks (zero-copy inside)"
      TEMPI_LOG_LEVEL=info timeout 300 $launcher $margs -n 2 $b/tests/gpu/test_gpu_coll < /dev/null 2>&1 | grep -E "All tests|test cases|FAILED|zero-copy:" | head -8
      for t in ${MORE_TESTS:-}; do
        echo "--- $t 2 ranks"
        timeout 300 $launcher $margs -n 2 $b/tests/gpu/$t < /dev/null 2>&1 | grep -E "All tests|test cases|FAILED|SKIP" | head -6
      done
    fi
    if [ "${SANITIZE:-0}" = 1 ]; then
      for tool in memcheck racecheck; do
        echo "--- compute-sanitizer $tool, gpu_zero_copy 2 ranks"
        timeout 300 $launcher $margs -n 2 compute-sanitizer --tool $tool --error-exitcode 9 $b/tests/gpu/test_gpu_zero_copy \
          < /dev/null 2>&1 | grep -E "ERROR SUMMARY|Program hit|passed|failed|FAILED|Invalid|hazard" | sort | uniq -c | head -20
      done
    fi
    for n in ${NS:-32 64 128}; do
      for ipc in auto off; do
        echo "--- halo n=$n TEMPI_IPC=$ipc"
        TEMPI_IPC=$ipc $launcher $margs -n 2 $b/tools/tempi_halo --n $n --iters 50 --variants neighbor,tempi,hand-fused,fused-nccl \
          --csv $top/halo-zc-$ipc-$mpi.csv < /dev/null 2>&1 | grep -E "^(tempi|neighbor|hand|fused|variant)|wrong|FAIL|skipped" | grep -v verify
      done
    done
    for n in ${FFT_NS:-128 256}; do
      for ipc in auto off; do
        echo "--- FFT transpose N=$n, 2 ranks, TEMPI_IPC=$ipc"
        TEMPI_IPC=$ipc $launcher $margs -n 2 $b/tools/bench_alltoallw --n $n --csv $top/alltoallw-zc-$ipc-$mpi.csv < /dev/null 2>&1 | grep -E "^(tempi|library|hand|per rank)|FAIL|PASS"
      done
    done
  )
done
