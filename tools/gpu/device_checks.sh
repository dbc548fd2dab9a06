#!/bin/bash
# What a GPU session checks, in one call on the lent GPU machine: build against one MPI,
# run the tests, the GPU pack tests under compute-sanitizer, the demo and the
# benchmarks. Benchmark tables and CSV go to $OUT (or ./gpu-out), the logs into one
# archive there, $OUT/logs-MPI.tgz.
#   bash tools/gpu/device_checks.sh [mpich|openmpi|cuda-openmpi]
# Steps, each on unless set to 0: TESTS (all suites; TESTS=gpu runs the gpu suite only),
# SANITIZE, DEMO, BENCH (pack and commit), P2P (the ping-pong; P2P_ARGS for its options),
# LARGE (bench_large: a triangle and a transpose each way, LARGE_ARGS for its options),
# HALO (the 26-neighbour exchange at n = HALO_SIZES on 2 ranks, and n=64 on 8 ranks under MPS),
# SEQ (bench_pack_sequence: one GPU per rank, two ranks per GPU with and without MPS, each
# with TEMPI_DEFER_PACK off and on).
set -uo pipefail
mpi=${1:-mpich}
top=${OUT:-gpu-out}
out=$top/logs-$mpi
mkdir -p "$out"
trap 'tar czf "$top/logs-$mpi.tgz" -C "$top" "logs-$mpi" && rm -rf "$out"' EXIT
case $mpi in
  mpich) source .gpu-host/use-mpich.sh .gpu-host/debs ;;
  cuda-openmpi) source .gpu-host/use-openmpi.sh .gpu-host/ompi ;;
  openmpi) export MPIEXEC="mpirun --allow-run-as-root --oversubscribe" ;;
esac
margs=""
impl=mpich
launcher=$(command -v mpiexec.hydra || command -v mpiexec)
if [ "$mpi" != mpich ]; then margs="--allow-run-as-root --oversubscribe"; impl=openmpi; launcher=$(command -v mpirun); fi
# catch2's headers come with the carried MPICH debs
[ -d /opt/c2/usr/share/pkgconfig ] || { mkdir -p /opt/c2 && dpkg -x .gpu-host/debs/catch2_*.deb /opt/c2; }
sed -i 's|^prefix=/usr$|prefix=/opt/c2/usr|; s|=/usr/|=/opt/c2/usr/|g' /opt/c2/usr/share/pkgconfig/catch2.pc
export PKG_CONFIG_PATH=/opt/c2/usr/share/pkgconfig:${PKG_CONFIG_PATH:-}
nvidia-smi -L | tee "$out/device-$mpi.txt"
date -u | tee -a "$out/device-$mpi.txt"
b=build-gpu-$mpi
meson setup $b -Dmpi=$impl -Dbenchmarks=true -Dmpiexec="$launcher" -Dmpiexec_args="$margs" > "$out/setup-$mpi.log" 2>&1 || { tail -30 "$out/setup-$mpi.log"; exit 1; }
ninja -C $b > "$out/build-$mpi.log" 2>&1 || { grep -E "error" -A5 "$out/build-$mpi.log" | head -60; exit 1; }
echo "== $mpi: built"
run() { $launcher $margs "$@"; }
if [ "${DEMO:-1}" = 1 ]; then
  run -n 2 $b/tools/tempi_demo 2>&1 | tee "$out/demo-$mpi.txt"
fi
if [ "${TESTS:-1}" != 0 ]; then
  suites=""
  [ "${TESTS:-1}" = gpu ] && suites="--suite gpu"
  meson test -C $b $suites --print-errorlogs > "$out/test-$mpi.log" 2>&1
  grep -E "^ *[0-9]+/[0-9]+ |^Ok:|^Fail:|^Skipped:" "$out/test-$mpi.log"
  grep -E "FAILED|failed|REQUIRE|CHECK\(|with expansion|Abort|rror" -A3 "$out/test-$mpi.log" | head -60
fi
if [ "${SANITIZE:-1}" = 1 ]; then
  timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 $b/tests/gpu/test_gpu_pack "~[large]" \
    > "$out/sanitizer-$mpi.log" 2>&1
  echo "compute-sanitizer memcheck exit: $?"; tail -4 "$out/sanitizer-$mpi.log"
  # the word kernels read whole chunks past blocks, inside the typed allocation only
  timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 $b/tests/gpu/test_gpu_blocklist "[words]" \
    > "$out/sanitizer-words-$mpi.log" 2>&1
  echo "compute-sanitizer memcheck (word kernels) exit: $?"; tail -4 "$out/sanitizer-words-$mpi.log"
  TEMPI_METHOD=staged TEMPI_PIPELINE_THRESHOLD=1000 TEMPI_PIPELINE_CHUNK=333 timeout 300 $launcher $margs -n 2 compute-sanitizer --tool memcheck \
    --error-exitcode 9 $b/tests/gpu/test_gpu_p2p "~[large]" > "$out/sanitizer-p2p-$mpi.log" 2>&1
  echo "compute-sanitizer memcheck (p2p, 2 ranks, pipelined) exit: $?"; grep -E "ERROR SUMMARY|test cases|All tests" "$out/sanitizer-p2p-$mpi.log"
  # open launches (TEMPI_DEFER_PACK=3): the kernel that reads its objects from host memory
  for tool in memcheck synccheck; do
    TEMPI_DEFER_PACK=3 timeout 300 $launcher $margs -n 2 compute-sanitizer --tool $tool --error-exitcode 9 \
      $b/tests/gpu/test_gpu_pack_sequence > "$out/sanitizer-open-$tool-$mpi.log" 2>&1
    echo "compute-sanitizer $tool (open launches, 2 ranks) exit: $?"; grep -E "ERROR SUMMARY|test cases|All tests" "$out/sanitizer-open-$tool-$mpi.log"
  done
fi
if [ "${SANITIZE:-1}" = 1 ] && [ -x $b/tests/gpu/test_gpu_storm ]; then
  for tool in memcheck racecheck; do
    timeout 300 $launcher $margs -n 2 compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 $b/tests/gpu/test_gpu_storm \
      > "$out/sanitizer-storm-$tool-$mpi.log" 2>&1
    echo "compute-sanitizer $tool (storm, 2 ranks) exit: $?"; grep -E "ERROR SUMMARY|test cases|All tests" "$out/sanitizer-storm-$tool-$mpi.log"
  done
fi
if [ "${SANITIZE:-1}" = 1 ] && [ -x $b/tests/gpu/test_gpu_zero_copy_p2p ]; then
  for tool in memcheck racecheck; do
    timeout 300 $launcher $margs -n 2 compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 $b/tests/gpu/test_gpu_zero_copy_p2p \
      > "$out/sanitizer-zc-p2p-$tool-$mpi.log" 2>&1
    echo "compute-sanitizer $tool (zero-copy point-to-point, 2 ranks) exit: $?"; grep -E "ERROR SUMMARY|test cases|All tests" "$out/sanitizer-zc-p2p-$tool-$mpi.log"
  done
fi
if [ "${HALO:-1}" = 1 ]; then
  for n in ${HALO_SIZES:-32 64 128}; do
    run -n 2 $b/tools/tempi_halo --n $n --iters 50 --csv "$top/halo-$mpi.csv" ${HALO_ARGS:-} 2>&1 | tee -a "$top/halo-$mpi.txt" | grep -E "^tempi|^library|^host-copy|^zero-copy|^hand-fused|^neighbor|^persistent|wrong|FAIL"
    TEMPI_METHOD=oneshot run -n 2 $b/tools/tempi_halo --n $n --iters 50 --variants tempi 2>&1 | grep -E "^tempi" | sed 's/^tempi/tempi(oneshot)/'
  done
  if [ "${HALO8:-1}" = 1 ]; then
    nvidia-cuda-mps-control -d 2>/dev/null && echo "MPS started"
    run -n 8 $b/tools/tempi_halo --n 64 --iters 30 --baseline-iters 2 --csv "$top/halo-$mpi.csv" 2>&1 | tee -a "$top/halo-$mpi.txt" | grep -E "^tempi|^library|^host-copy|wrong|FAIL|ranks"
    echo quit | nvidia-cuda-mps-control 2>/dev/null
  fi
fi
if [ "${SEQ:-1}" = 1 ] && [ -x $b/tools/bench_pack_sequence ]; then
  seq() { "$@" 2>&1 | tee -a "$top/sequence-$mpi.txt" | grep -E "^mpi-datatypes|^fused-kernel|ratio|wrong|FAIL|layout" | grep -v verify; }
  for defer in 0 1; do
    echo "--- bench_pack_sequence, one GPU per rank, TEMPI_DEFER_PACK=$defer"
    TEMPI_DEFER_PACK=$defer seq run -n 2 $b/tools/bench_pack_sequence --csv "$top/sequence-$mpi-gpu-per-rank-defer$defer.csv"
    echo "--- two ranks on one GPU, no MPS, TEMPI_DEFER_PACK=$defer"
    TEMPI_DEFER_PACK=$defer seq run -n 2 $b/tools/bench_pack_sequence --gpus 1 --iters 10 --csv "$top/sequence-$mpi-shared-defer$defer.csv"
  done
  nvidia-cuda-mps-control -d 2>/dev/null
  for defer in 0 1; do
    echo "--- two ranks on one GPU, MPS, TEMPI_DEFER_PACK=$defer"
    TEMPI_DEFER_PACK=$defer seq run -n 2 $b/tools/bench_pack_sequence --gpus 1 --csv "$top/sequence-$mpi-mps-defer$defer.csv"
  done
  echo quit | nvidia-cuda-mps-control 2>/dev/null
fi
if [ "${BENCH:-1}" = 1 ]; then
  $b/tools/bench_commit | tee "$top/bench_commit.txt"
  $b/tools/bench_pack --csv "$top/bench_pack.csv" ${BENCH_ARGS:-} > "$top/bench_pack.txt" 2>&1
  head -3 "$top/bench_pack.txt"; grep -E "^2d +vector +(8|32|64|512) +512 +1 +(1024|67108864) |^halo" "$top/bench_pack.txt"
fi
if [ "${P2P:-1}" = 1 ]; then
  run -n 2 $b/tools/bench_p2p --csv "$top/bench_p2p-$mpi.csv" ${P2P_ARGS:-} 2>&1 | tee "$top/bench_p2p-$mpi.txt"
fi
if [ "${LARGE:-1}" = 1 ]; then
  run -n 2 $b/tools/bench_large --csv "$top/bench_large-$mpi.csv" ${LARGE_ARGS:-} 2>&1 | tee "$top/bench_large-$mpi.txt" | tail -12
fi
