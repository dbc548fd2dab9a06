#!/bin/bash
# A short GPU round for permuted strided plans (issue 19): builds only what it runs
# (sm_90), runs test_gpu_transpose and test_gpu_pack, compute-sanitizer memcheck on the
# transpose test and racecheck on its small cases, then bench_pack's transposes and
# permutation (and the quick 2-D rows, which the tiled path must leave alone). Logs and
# CSV go to $OUT (or ./gpu-out).
#   bash tools/gpu/transpose_round.sh        FULL=1 also runs the full bench_pack
set -uo pipefail
top=${OUT:-gpu-out}
mkdir -p "$top"
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
$launcher -n 1 $b/tests/gpu/test_gpu_transpose > "$top/test_gpu_transpose.log" 2>&1; echo "exit $?"
tail -3 "$top/test_gpu_transpose.log"
echo "--- test_gpu_pack"
$launcher -n 1 $b/tests/gpu/test_gpu_pack "~[large]" 2>&1 | tail -2
echo "--- compute-sanitizer"
timeout 240 compute-sanitizer --tool memcheck --error-exitcode 9 $b/tests/gpu/test_gpu_transpose \
  > "$top/sanitizer-memcheck.log" 2>&1
echo "memcheck exit $?"; grep -E "ERROR SUMMARY|test cases" "$top/sanitizer-memcheck.log"
timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 $b/tests/gpu/test_gpu_transpose "[small]" \
  > "$top/sanitizer-racecheck.log" 2>&1
echo "racecheck exit $?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|test cases" "$top/sanitizer-racecheck.log"
echo "--- bench_pack"
if [ "${FULL:-0}" = 1 ]; then
  $launcher -n 1 $b/tools/bench_pack --csv "$top/bench_pack.csv" > "$top/bench_pack.txt" 2>&1
else
  $launcher -n 1 $b/tools/bench_pack --quick --csv "$top/bench_pack.csv" > "$top/bench_pack.txt" 2>&1
fi
echo "bench_pack exit $?"
grep -E "^2d +vector +(8|64|512) +512 +1 +67108864 |^halo" "$top/bench_pack.txt"
sed -n '/^transposes and permutations/,$p' "$top/bench_pack.txt"
