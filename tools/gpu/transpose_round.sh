#!/bin/bash
# A short GPU round for permuted strided plans (issue 19): builds only what it runs
# (sm_90), runs test_gpu_transpose and test_gpu_pack, compute-sanitizer memcheck on the
# transpose test and racecheck on its small cases, then bench_pack's transposes and
# permutation, and the quick 2-D rows (which the tiled path must leave alone). Tables and
# CSV go to $OUT (or ./gpu-out); the test logs too where a test failed.
#   bash tools/gpu/transpose_round.sh
# FULL=1: the full bench_pack instead of --quick. BASE=DIR: also builds bench_pack from
# the source tree DIR (say, main) and runs it the same way just before, for a same-run
# comparison of the existing rows. NCU=1: Nsight Compute's kernel durations of the
# transposes of N = 1000 (TEMPI's tiled kernels and the hand-written ones), to tell
# kernel time from per-call host time.
set -uo pipefail
top=${OUT:-gpu-out}
logs=/tmp/transpose-logs  # copied to $top where something failed ($OUT brings back 8 files at most)
mkdir -p "$top" $logs
source .gpu-host/use-mpich.sh .gpu-host/debs
launcher=$(command -v mpiexec.hydra || command -v mpiexec)
[ -d /opt/c2/usr/share/pkgconfig ] || { mkdir -p /opt/c2 && dpkg -x .gpu-host/debs/catch2_*.deb /opt/c2; sed -i 's|^prefix=/usr$|prefix=/opt/c2/usr|; s|=/usr/|=/opt/c2/usr/|g' /opt/c2/usr/share/pkgconfig/catch2.pc; }
export PKG_CONFIG_PATH=/opt/c2/usr/share/pkgconfig:${PKG_CONFIG_PATH:-}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
b=build-transpose
meson setup $b -Dmpi=mpich -Dgpu_arch=90 -Dmpiexec="$launcher" > /tmp/setup.log 2>&1 || { tail -20 /tmp/setup.log; exit 1; }
ninja -C $b tests/gpu/test_gpu_transpose tests/gpu/test_gpu_pack tools/bench_pack > /tmp/build.log 2>&1 ||
  { grep error -A5 /tmp/build.log | head -30; exit 1; }
echo "--- test_gpu_transpose"
$launcher -n 1 $b/tests/gpu/test_gpu_transpose > "$logs/test_gpu_transpose.log" 2>&1; echo "exit $?"
tail -3 "$logs/test_gpu_transpose.log"
echo "--- test_gpu_pack"
$launcher -n 1 $b/tests/gpu/test_gpu_pack "~[large]" 2>&1 | grep -E "All tests|test cases|FAILED"
echo "--- compute-sanitizer"
timeout 240 compute-sanitizer --tool memcheck --error-exitcode 9 $b/tests/gpu/test_gpu_transpose \
  > "$logs/sanitizer-memcheck.log" 2>&1
echo "memcheck exit $?"; grep -E "ERROR SUMMARY|test cases" "$logs/sanitizer-memcheck.log"
timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 $b/tests/gpu/test_gpu_transpose "[small]" \
  > "$logs/sanitizer-racecheck.log" 2>&1
echo "racecheck exit $?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|test cases" "$logs/sanitizer-racecheck.log"
grep -qE "FAILED|failed" $logs/*.log && cp $logs/*.log "$top/"
echo "--- bench_pack"
$launcher -n 1 $b/tools/bench_pack --reorder --csv "$top/bench_pack-reorder.csv" > "$top/bench_pack-reorder.txt" 2>&1
echo "bench_pack --reorder exit $?"
sed -n '/^transposes and permutations/,$p' "$top/bench_pack-reorder.txt"
if [ "${NCU:-0}" = 1 ]; then
  # The first 1100 matching launches: the rows up to 16-byte elements at N = 1000.
  ncu --clock-control none --kernel-name regex:tiled --launch-count 1100 --metrics gpu__time_duration.sum \
    --csv --page raw $b/tools/bench_pack --reorder > "$top/ncu.csv" 2> "$logs/ncu.err"
  echo "ncu exit $?"
fi
size=--quick
[ "${FULL:-0}" = 1 ] && size=
if [ -n "${BASE:-}" ]; then
  meson setup $BASE/build-base $BASE -Dmpi=mpich -Dgpu_arch=90 -Dmpiexec="$launcher" > /tmp/setup-base.log 2>&1 &&
    ninja -C $BASE/build-base tools/bench_pack > /tmp/build-base.log 2>&1 || { echo "BASE build failed"; BASE=; }
fi
[ -n "${BASE:-}" ] && $launcher -n 1 $BASE/build-base/tools/bench_pack $size --csv "$top/bench_pack-base.csv" > "$top/bench_pack-base.txt" 2>&1
$launcher -n 1 $b/tools/bench_pack $size --csv "$top/bench_pack.csv" > "$top/bench_pack.txt" 2>&1
echo "bench_pack $size exit $?"
grep -E "^2d +vector +(8|64|512) +512 +1 +67108864 |^halo" "$top/bench_pack.txt"
