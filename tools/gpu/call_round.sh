#!/bin/bash
# The fixed cost of one call (issues 11, 17), before and after a change, in one run on
# the lent GPU machine, under MPICH: bench_call (one rank) and bench_pack_sequence (two
# ranks on one GPU under MPS), each with TEMPI_DEFER_PACK off and 1, for this tree and,
# when OLD names another source tree, for that one too (built with this tree's
# benchmarks). Then the gpu suite on this tree (TESTS=0 skips it). Tables to $OUT.
#   OLD=../old bash tools/gpu/call_round.sh
set -uo pipefail
top=${OUT:-gpu-out}
mkdir -p "$top"
source .gpu-host/use-mpich.sh .gpu-host/debs
launcher=$(command -v mpiexec.hydra || command -v mpiexec)
[ -d /opt/c2/usr/share/pkgconfig ] || { mkdir -p /opt/c2 && dpkg -x .gpu-host/debs/catch2_*.deb /opt/c2; }
sed -i 's|^prefix=/usr$|prefix=/opt/c2/usr|; s|=/usr/|=/opt/c2/usr/|g' /opt/c2/usr/share/pkgconfig/catch2.pc
export PKG_CONFIG_PATH=/opt/c2/usr/share/pkgconfig:${PKG_CONFIG_PATH:-}
nvidia-smi -L | tee "$top/device.txt"
date -u | tee -a "$top/device.txt"

trees="new:."
if [ -n "${OLD:-}" ]; then
  cp tools/bench_call.cpp tools/bench_call_kernels.cu tools/meson.build "$OLD/tools/"
  trees="$trees old:$OLD"
fi
for t in $trees; do
  name=${t%%:*} dir=${t#*:}
  (cd "$dir" && meson setup build-call -Dmpi=mpich -Dmpiexec="$launcher" > "$top/setup-$name.log" 2>&1 &&
    ninja -C build-call > "$top/build-$name.log" 2>&1) || { echo "== $name: build failed"; tail -30 "$top/build-$name.log"; exit 1; }
  echo "== $name: built"
done

for round in 1 2; do
  for defer in 0 1; do
    for t in $trees; do
      name=${t%%:*} dir=${t#*:}
      echo "--- bench_call, $name tree, TEMPI_DEFER_PACK=$defer, round $round"
      TEMPI_DEFER_PACK=$defer $launcher -n 1 "$dir/build-call/tools/bench_call" --iters 3000 \
        --csv "$top/call-$name-defer$defer-r$round.csv" 2>&1 | tee "$top/call-$name-defer$defer-r$round.txt" | tail -8
    done
  done
done

nvidia-cuda-mps-control -d 2>/dev/null && echo "MPS started"
for defer in 0 1; do
  for t in $trees; do
    name=${t%%:*} dir=${t#*:}
    echo "--- bench_pack_sequence, two ranks on one GPU under MPS, $name tree, TEMPI_DEFER_PACK=$defer"
    TEMPI_DEFER_PACK=$defer $launcher -n 2 "$dir/build-call/tools/bench_pack_sequence" --gpus 1 \
      --csv "$top/sequence-$name-defer$defer.csv" 2>&1 | tee "$top/sequence-$name-defer$defer.txt" |
      grep -E "^mpi-datatypes|^fused-kernel|ratio|wrong|FAIL|layout" | grep -v verify
  done
done
echo quit | nvidia-cuda-mps-control 2>/dev/null

if [ "${TESTS:-1}" != 0 ]; then
  meson test -C build-call --suite gpu --print-errorlogs > "$top/test-gpu.log" 2>&1
  grep -E "^ *[0-9]+/[0-9]+ |^Ok:|^Fail:|^Skipped:" "$top/test-gpu.log"
  grep -E "FAILED|REQUIRE|with expansion|Abort" -A3 "$top/test-gpu.log" | head -40
fi
