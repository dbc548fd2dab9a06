#!/bin/bash
# One GPU round for the block-list kernels and contiguous runs (issue 11, issue 19), under
# MPICH: builds only what it runs, then bench_pack's block-list table, the block-list
# tests, the variants (below), the transpose point-to-point test on two ranks sharing the GPU, the table again
# (the spread between two runs), the 2^31-byte tests, the pack tests of every shape,
# compute-sanitizer memcheck on the block-list test, the strided rows (no-regression
# check), and Nsight Compute's DRAM figures for the block-list kernels of a few rows. Each step gets what is left of a 570 s
# budget (one call of the device tool), the important ones first. Tables and CSV go to
# $OUT (or ./gpu-out), the logs into $OUT/blocklist-logs.tgz.
#   bash tools/gpu/blocklist_round.sh        (env: STRIDED=quick|full|0, NCU_ROWS="name ...", NCU_DETAIL=row,
#     VARIANTS="name=sed-script|...": also builds a copy of the tree whose cuda/blocklist.cu
#     (or VARIANT_FILE) the sed script edits, and runs the block-list test and table with it,
#     e.g. VARIANTS='steps1=s/kSteps = 2;/kSteps = 1;/'; VARIANT_TEST=0 skips their test)
set -uo pipefail
top=${OUT:-gpu-out}
logs=$top/blocklist-logs
mkdir -p "$logs"
deadline=$((SECONDS + ${BUDGET:-570}))
# Runs "$@" with at most $1 seconds, less if the round's budget has less left.
step() {
  local limit=$1 left=$((deadline - SECONDS - 5))
  shift
  [ $left -lt $limit ] && limit=$left
  if [ $limit -le 0 ]; then echo "skipped (out of time): $*"; return 124; fi
  timeout $limit "$@"
}
source .gpu-host/use-mpich.sh .gpu-host/debs
launcher=$(command -v mpiexec.hydra || command -v mpiexec)
[ -d /opt/c2/usr/share/pkgconfig ] || { mkdir -p /opt/c2 && dpkg -x .gpu-host/debs/catch2_*.deb /opt/c2; sed -i 's|^prefix=/usr$|prefix=/opt/c2/usr|; s|=/usr/|=/opt/c2/usr/|g' /opt/c2/usr/share/pkgconfig/catch2.pc; }
export PKG_CONFIG_PATH=/opt/c2/usr/share/pkgconfig:${PKG_CONFIG_PATH:-}
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader
b=build-blocklist
meson setup $b -Dmpi=mpich -Dgpu_arch=90 -Dmpiexec="$launcher" > "$logs/setup.log" 2>&1 || { tail -20 "$logs/setup.log"; exit 1; }
step 300 ninja -C $b tests/gpu/test_gpu_blocklist tests/gpu/test_gpu_pack tests/gpu/test_gpu_p2p tools/bench_pack \
  > "$logs/build.log" 2>&1 || { grep -A5 error "$logs/build.log" | head -40; exit 1; }
echo "built at ${SECONDS}s"

bench() {  # $1: which run
  echo "--- bench_pack, block lists and contiguous runs ($1)"
  step 150 $b/tools/bench_pack --rows blocklist --blocklist-csv "$top/bench_pack-blocklist-$1.csv" > "$logs/bench-blocklist-$1.txt" 2>&1
  echo "exit $?"; cat "$logs/bench-blocklist-$1.txt"
}
variants() {  # the VARIANTS, each beside this tree's figures
  IFS='|' read -ra variants <<< "${VARIANTS:-}"
  for v in "${variants[@]}"; do
    name=${v%%=*}
    echo "--- variant $name: ${v#*=}"
    vt=/tmp/variant-$name
    rm -rf $vt && mkdir -p $vt && tar --exclude='./build-*' --exclude=./.gpu-host -cf - . | tar -xf - -C $vt
    sed -i "${v#*=}" $vt/${VARIANT_FILE:-cuda/blocklist.cu}
    (cd $vt && meson setup $b -Dmpi=mpich -Dgpu_arch=90 -Dmpiexec="$launcher" > /dev/null 2>&1 &&
      step 200 ninja -C $b tests/gpu/test_gpu_blocklist tools/bench_pack > "$logs/build-$name.log" 2>&1) ||
      { grep -A5 error "$logs/build-$name.log" | head -20; continue; }
    if [ "${VARIANT_TEST:-1}" = 1 ]; then
      step 120 $vt/$b/tests/gpu/test_gpu_blocklist "~[large]" > "$logs/test-$name.log" 2>&1
      echo "test exit $?"; grep -E "test cases|FAILED" "$logs/test-$name.log" | head -3
    fi
    step 120 $vt/$b/tools/bench_pack --rows blocklist --blocklist-csv "$top/bench_pack-blocklist-$name.csv" \
      > "$logs/bench-blocklist-$name.txt" 2>&1
    echo "bench exit $?"; grep -A20 "^object  " "$logs/bench-blocklist-$name.txt"
  done
}

bench 1

echo "--- test_gpu_blocklist (without the 2^31-byte streams)"
step 200 $b/tests/gpu/test_gpu_blocklist "~[large]" > "$logs/test_gpu_blocklist.log" 2>&1
echo "exit $?"; grep -E "test cases|FAILED|skipped|SKIP" "$logs/test_gpu_blocklist.log" | head -8

variants

echo "--- test_gpu_p2p [transpose], two ranks on one GPU"
step 120 env TEMPI_TEST_DEVICES=1 $launcher -n 2 $b/tests/gpu/test_gpu_p2p "[transpose]" > "$logs/test_gpu_p2p_transpose.log" 2>&1
echo "exit $?"; grep -E "test cases|FAILED|passed" "$logs/test_gpu_p2p_transpose.log" | head -4

bench 2

echo "--- test_gpu_blocklist [large]"
step 200 $b/tests/gpu/test_gpu_blocklist "[large]" > "$logs/test_gpu_blocklist_large.log" 2>&1
echo "exit $?"; grep -E "test cases|FAILED|skipped|SKIP" "$logs/test_gpu_blocklist_large.log" | head -8

echo "--- test_gpu_pack"
step 200 $b/tests/gpu/test_gpu_pack "~[large]" > "$logs/test_gpu_pack.log" 2>&1
echo "exit $?"; grep -E "test cases|FAILED" "$logs/test_gpu_pack.log" | head -5

echo "--- compute-sanitizer memcheck, test_gpu_blocklist"
step 200 compute-sanitizer --tool memcheck --error-exitcode 9 $b/tests/gpu/test_gpu_blocklist "~[large]" \
  > "$logs/sanitizer-blocklist.log" 2>&1
echo "exit $?"; grep -E "ERROR SUMMARY|test cases|FAILED" "$logs/sanitizer-blocklist.log" | head -5

case ${STRIDED:-quick} in
  quick) opt=--quick ;;
  full) opt= ;;
  *) opt=skip ;;
esac
if [ "$opt" != skip ]; then
  echo "--- bench_pack, strided rows ${STRIDED:-quick}"
  step 200 $b/tools/bench_pack --rows strided $opt --csv "$top/bench_pack-strided.csv" > "$logs/bench-strided.txt" 2>&1
  echo "exit $? ($(grep -c . "$top/bench_pack-strided.csv") lines of CSV)"
fi

metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_bytes.sum,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,launch__registers_per_thread
for row in ${NCU_ROWS:-irregular-64B lower-triangle-4000 varying}; do
  echo "--- ncu: $row (block-list kernels and the hand-written one; per-kernel averages)"
  step 90 ncu --clock-control none --metrics $metrics -k "regex:gather|scatter|long_blocks|small_pattern|columns" -c 60 --print-summary per-kernel \
    $b/tools/bench_pack --rows blocklist --only "$row" > "$logs/ncu-$row.txt" 2>&1
  echo "exit $?"
  grep -E "^  [a-z_].*\(|gpu__time_duration|dram__bytes|dram__throughput|lts__t_bytes|warps_active|inst_executed|registers" \
    "$logs/ncu-$row.txt" | grep -v "^==" | sed 's/  */ /g' | head -40
done
if [ -n "${NCU_DETAIL:-}" ]; then  # where the kernels of one row stall, and their occupancy
  echo "--- ncu details: $NCU_DETAIL"
  step 120 ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section Occupancy \
    --section LaunchStats --section MemoryWorkloadAnalysis -k "regex:gather|scatter|long_blocks|small_pattern" -c 4 \
    $b/tools/bench_pack --rows blocklist --only "$NCU_DETAIL" > "$logs/ncu-detail.txt" 2>&1
  echo "exit $?"
  grep -vE "^==PROF==|^ *$" "$logs/ncu-detail.txt" | grep -A200 "small_pattern\|gather\|scatter" | head -150
fi
tar -czf "$top/blocklist-logs.tgz" -C "$top" blocklist-logs && rm -rf "$logs"
echo "round done at ${SECONDS}s"
