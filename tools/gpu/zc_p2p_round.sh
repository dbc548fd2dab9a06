#!/bin/bash
# Zero-copy point-to-point round (issue 20, item 2) on the lent GPU machine, for each MPI of
# MPIS (mpich, cuda-openmpi): the zero-copy point-to-point test on real GPUs at 2 and 4 ranks,
# the 2-rank test under compute-sanitizer memcheck and racecheck (SANITIZE=0 skips), then the
# halo main job at n = NS on 2 ranks (MPS running where the ranks share a GPU) with TEMPI's
# Isend/Irecv variant beside zero-copy-p2p, MPI_Neighbor_alltoallw, the persistent variants and
# the hand-fused (and, where NCCL is found, fused+NCCL) baselines. SUITE=1 also runs the whole
# gpu suite. Logs and tables go into $OUT/zc-p2p-round.tgz.
#   MPIS="mpich" NS="32 64 128" bash tools/gpu/zc_p2p_round.sh
set -uo pipefail
final=${OUT:-gpu-out}
top=$final/zc-p2p-round
mkdir -p "$top"
trap 'tar czf "$final/zc-p2p-round.tgz" -C "$final" zc-p2p-round && rm -rf "$top"' EXIT
nvidia-smi -L | tee "$top/device.txt"
date -u | tee -a "$top/device.txt"
ngpu=$(nvidia-smi -L | wc -l)
for mpi in ${MPIS:-mpich}; do
  ( case $mpi in
      mpich) source .gpu-host/use-mpich.sh .gpu-host/debs; impl=mpich; launcher=$(command -v mpiexec.hydra || command -v mpiexec); margs="" ;;
      cuda-openmpi) source .gpu-host/use-openmpi.sh .gpu-host/ompi; impl=openmpi; launcher=$(command -v mpirun); margs="--allow-run-as-root --oversubscribe" ;;
    esac
    [ -d /opt/c2/usr/share/pkgconfig ] || { mkdir -p /opt/c2 && dpkg -x .gpu-host/debs/catch2_*.deb /opt/c2; sed -i 's|^prefix=/usr$|prefix=/opt/c2/usr|; s|=/usr/|=/opt/c2/usr/|g' /opt/c2/usr/share/pkgconfig/catch2.pc; }
    export PKG_CONFIG_PATH=/opt/c2/usr/share/pkgconfig:${PKG_CONFIG_PATH:-}
    b=build-zcp-$mpi
    [ -d $b ] || meson setup $b -Dmpi=$impl -Dgpu_arch=90 -Dmpiexec="$launcher" -Dmpiexec_args="$margs" > "$top/setup-$mpi.log" 2>&1 || { tail -20 "$top/setup-$mpi.log"; exit 1; }
    targets="tools/tempi_halo tests/gpu/test_gpu_zero_copy_p2p"
    [ "${SUITE:-0}" = 1 ] && targets=""
    ninja -C $b $targets > "$top/build-$mpi.log" 2>&1 || { grep error -A5 "$top/build-$mpi.log" | head -30; exit 1; }
    echo "== $mpi: built"
    run() { $launcher $margs "$@"; }
    for n in 2 4; do
      timeout 300 $launcher $margs -n $n $b/tests/gpu/test_gpu_zero_copy_p2p > "$top/test-$mpi-${n}ranks.log" 2>&1
      echo "test_gpu_zero_copy_p2p $n ranks ($mpi) exit: $?"; grep -E "test cases|All tests|FAILED" "$top/test-$mpi-${n}ranks.log" | head -5
    done
    if [ "${SANITIZE:-1}" = 1 ]; then
      for tool in memcheck racecheck; do
        timeout 300 $launcher $margs -n 2 compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 \
          $b/tests/gpu/test_gpu_zero_copy_p2p > "$top/sanitizer-$tool-$mpi.log" 2>&1
        echo "compute-sanitizer $tool (2 ranks, $mpi) exit: $?"; grep -E "ERROR SUMMARY|test cases|All tests" "$top/sanitizer-$tool-$mpi.log"
      done
    fi
    [ "$ngpu" -lt 2 ] && nvidia-cuda-mps-control -d 2>/dev/null && echo "MPS started (2 ranks share the GPU)"
    for n in ${NS:-32 64 128}; do
      run -n 2 $b/tools/tempi_halo --n $n --iters 50 --csv "$top/halo-$mpi.csv" 2>&1 | tee -a "$top/halo-$mpi.txt" |
        grep -E "^tempi|^zero-copy|^hand-fused|^fused-nccl|^neighbor|^persistent|wrong|FAIL|^  *n =|grid"
    done
    [ "$ngpu" -lt 2 ] && echo quit | nvidia-cuda-mps-control 2>/dev/null
    if [ "${SUITE:-0}" = 1 ]; then
      meson test -C $b --suite gpu --print-errorlogs > "$top/suite-$mpi.log" 2>&1
      grep -E "^Ok:|^Fail:|^Skipped:" "$top/suite-$mpi.log"; grep -E " FAIL |TIMEOUT" "$top/suite-$mpi.log" | head
    fi
  )
done
