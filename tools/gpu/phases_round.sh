#!/bin/bash
# Where TEMPI's own time goes in the halo exchange, on one GPU machine in one call: builds
# this tree against MPICH, then runs tools/tempi_halo (two ranks, under MPS where one GPU is
# shared) with TEMPI_PHASE_TIMES=1 at each n, and once without it (the timers' own cost),
# and bench_call's floors (one launch and wait, one pointer query). Tables to $OUT (or ./gpu-out).
#   NS (default "32 64 128"), VARIANTS (default below), ITERS (default 200), STEPS (build,halo,call;
#   suite: also builds the tests and runs the gpu suite, or the tests named in TESTS, first).
set -uo pipefail
top=${OUT:-gpu-out}
mkdir -p "$top"
steps=${STEPS:-build,halo,call}
variants=${VARIANTS:-tempi,persistent,neighbor,neighbor-persistent,zero-copy-p2p,hand-fused-faces}
source .gpu-host/use-mpich.sh .gpu-host/debs
launcher=$(command -v mpiexec.hydra || command -v mpiexec)
nvidia-smi -L | tee "$top/device.txt"; date -u | tee -a "$top/device.txt"
if [ "$(nvidia-smi -L | wc -l)" -lt 2 ]; then
  nvidia-cuda-mps-control -d 2> /dev/null && echo "MPS on (two ranks share the GPU)" | tee -a "$top/device.txt"
fi
if [[ $steps == *build* ]]; then
  [[ $steps == *suite* ]] && tests=true || tests=false
  [ -d /opt/c2/usr/share/pkgconfig ] || { mkdir -p /opt/c2 && dpkg -x .gpu-host/debs/catch2_*.deb /opt/c2;
    sed -i 's|^prefix=/usr$|prefix=/opt/c2/usr|; s|=/usr/|=/opt/c2/usr/|g' /opt/c2/usr/share/pkgconfig/catch2.pc; }
  export PKG_CONFIG_PATH=/opt/c2/usr/share/pkgconfig:${PKG_CONFIG_PATH:-}
  meson setup build-gpu -Dmpi=mpich -Dgpu_arch=90 -Dbenchmarks=true -Dtests=$tests -Dmpiexec="$launcher" \
    > "$top/setup.log" 2>&1 || { tail -20 "$top/setup.log"; exit 1; }
  ninja -C build-gpu > "$top/build.log" 2>&1 || { grep -E "error" -A5 "$top/build.log" | head -40; exit 1; }
  echo "== built"
fi
if [[ $steps == *suite* ]]; then
  if [ -n "${TESTS:-}" ]; then
    meson test -C build-gpu --print-errorlogs $TESTS > "$top/suite.txt" 2>&1
  else
    meson test -C build-gpu --suite gpu --print-errorlogs > "$top/suite.txt" 2>&1
  fi
  grep -E "^ *[0-9]+/[0-9]+ " "$top/suite.txt" | grep -vE " OK " | head -30
  grep -E "^Ok:|^Fail:|^Skipped:|^Timeout:" "$top/suite.txt"
fi
if [[ $steps == *halo* ]]; then
  for n in ${NS:-32 64 128}; do
    for timed in 1 0; do
      echo "== tempi_halo n=$n TEMPI_PHASE_TIMES=$timed" | tee -a "$top/halo.txt"
      TEMPI_PHASE_TIMES=$timed $launcher -n 2 build-gpu/tools/tempi_halo --n "$n" --iters "${ITERS:-200}" \
        --warmup 20 --variants "$variants" --csv "$top/halo.csv" >> "$top/halo.txt" 2>&1
    done
  done
  grep -E "^==|^tempi |^persistent|^neighbor|^zero-copy|^hand-fused|isend" "$top/halo.txt"
fi
if [[ $steps == *call* ]]; then
  $launcher -n 1 build-gpu/tools/bench_call --iters 1000 > "$top/call.txt" 2>&1
  tail -25 "$top/call.txt"
fi
echo "== done"
