#!/bin/bash
# The fixed cost of one call (issues 11, 17), before and after a change, in one run on
# the lent GPU machine, under MPICH: bench_call (one rank) and bench_pack_sequence (ranks
# sharing the GPU), each under the SETTINGS compared, ROUNDS times, for this tree and,
# when OLD names another source tree, for that one too (built with this tree's
# benchmarks). Then the gpu suite on this tree (TESTS=0 skips it). Tables and logs go
# into one archive, $OUT/call-round.tgz (a call brings back few files).
#   OLD=../old bash tools/gpu/call_round.sh
set -uo pipefail
final=${OUT:-gpu-out}
top=$final/call-round
mkdir -p "$top"
trap 'tar czf "$final/call-round.tgz" -C "$final" call-round && rm -rf "$top"' EXIT
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
  (cd "$dir" && { [ -d build-call ] || meson setup build-call -Dmpi=mpich -Dbenchmarks=true -Dmpiexec="$launcher" > "$top/setup-$name.log" 2>&1; } &&
    ninja -C build-call > "$top/build-$name.log" 2>&1) || { echo "== $name: build failed"; tail -30 "$top/build-$name.log"; exit 1; }
  echo "== $name: built"
done

# Settings compared (TEMPI_WAIT has no meaning in trees older than it). MPS=1 runs
# everything under the Multi-Process Service; SEQ_RANKS ranks share the one GPU.
settings=${SETTINGS:-TEMPI_WAIT=sync TEMPI_WAIT=poll TEMPI_DEFER_PACK=1}
[ "${MPS:-0}" = 1 ] && nvidia-cuda-mps-control -d 2>/dev/null && echo "MPS started"
for round in $(seq 1 ${ROUNDS:-2}); do
  for setting in $settings; do
    for t in $trees; do
      name=${t%%:*} dir=${t#*:}
      tag=$name-${setting#TEMPI_}-r$round
      echo "--- bench_call, $name tree, $setting, round $round"
      env $setting $launcher -n 1 "$dir/build-call/tools/bench_call" --iters 3000 --csv "$top/call-$tag.csv" 2>&1 |
        tee "$top/call-$tag.txt" | tail -9
    done
  done
  for setting in $settings; do
    for t in $trees; do
      name=${t%%:*} dir=${t#*:}
      tag=$name-${setting#TEMPI_}-n${SEQ_RANKS:-2}-r$round
      echo "--- bench_pack_sequence, ${SEQ_RANKS:-2} ranks on one GPU, MPS=${MPS:-0}, $name tree, $setting, round $round"
      env $setting $launcher -n ${SEQ_RANKS:-2} "$dir/build-call/tools/bench_pack_sequence" --gpus 1 \
        --csv "$top/sequence-$tag.csv" 2>&1 | tee "$top/sequence-$tag.txt" | grep -E "^mpi-datatypes|^fused-kernel|wrong|FAIL"
    done
  done
done
[ "${MPS:-0}" = 1 ] && echo quit | nvidia-cuda-mps-control 2>/dev/null

if [ "${TESTS:-1}" != 0 ]; then
  meson test -C build-call --suite gpu --print-errorlogs > "$top/test-gpu.log" 2>&1
  grep -E "^ *[0-9]+/[0-9]+ |^Ok:|^Fail:|^Skipped:" "$top/test-gpu.log"
  grep -E "FAILED|REQUIRE|with expansion|Abort" -A3 "$top/test-gpu.log" | head -40
fi
