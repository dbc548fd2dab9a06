#!/bin/bash
# Stream-ordered communication on one GPU machine in one call: builds this tree against
# MPICH (with the tests), runs the stream tests (TESTS, default the gpu suite's stream tests;
# SUITE=1: the whole gpu suite), then tools/tempi_halo's stream variant beside neighbor,
# tempi and hand-fused-faces: two ranks at each n (NS, default "32 64 128"), under MPS where
# they share one GPU, and RANKS8=1: 8 ranks at n=32. Tables to $OUT (or ./gpu-out).
set -uo pipefail
top=${OUT:-gpu-out}
mkdir -p "$top"
variants=${VARIANTS:-neighbor,stream,tempi,hand-fused-faces}
source .gpu-host/use-mpich.sh .gpu-host/debs
launcher=$(command -v mpiexec.hydra || command -v mpiexec)
nvidia-smi -L | tee "$top/device.txt"; date -u | tee -a "$top/device.txt"
if [ "$(nvidia-smi -L | wc -l)" -lt 2 ]; then
  nvidia-cuda-mps-control -d 2> /dev/null && echo "MPS on (ranks share the GPU)" | tee -a "$top/device.txt"
fi
[ -d /opt/c2/usr/share/pkgconfig ] || { mkdir -p /opt/c2 && dpkg -x .gpu-host/debs/catch2_*.deb /opt/c2;
  sed -i 's|^prefix=/usr$|prefix=/opt/c2/usr|; s|=/usr/|=/opt/c2/usr/|g' /opt/c2/usr/share/pkgconfig/catch2.pc; }
export PKG_CONFIG_PATH=/opt/c2/usr/share/pkgconfig:${PKG_CONFIG_PATH:-}
meson setup build-gpu -Dmpi=mpich -Dgpu_arch=90 -Dbenchmarks=true -Dmpiexec="$launcher" \
  > "$top/setup.log" 2>&1 || { tail -20 "$top/setup.log"; exit 1; }
ninja -C build-gpu > "$top/build.log" 2>&1 || { grep -E "error" -A5 "$top/build.log" | head -40; exit 1; }
echo "== built"
if [ "${SUITE:-0}" = 1 ]; then
  meson test -C build-gpu --suite gpu --print-errorlogs > "$top/suite.txt" 2>&1
else
  meson test -C build-gpu --print-errorlogs ${TESTS:-gpu_streams_2ranks gpu_streams_3ranks} > "$top/suite.txt" 2>&1
fi
grep -E "^ *[0-9]+/[0-9]+ " "$top/suite.txt" | grep -vE " OK " | head -30
grep -E "^Ok:|^Fail:|^Skipped:|^Timeout:" "$top/suite.txt"
for n in ${NS:-32 64 128}; do
  echo "== tempi_halo 2 ranks n=$n" | tee -a "$top/halo.txt"
  $launcher -n 2 build-gpu/tools/tempi_halo --n "$n" --iters "${ITERS:-200}" --warmup 20 --variants "$variants" \
    --csv "$top/halo.csv" >> "$top/halo.txt" 2>&1
done
if [ "${RANKS8:-1}" = 1 ]; then
  echo "== tempi_halo 8 ranks n=32" | tee -a "$top/halo.txt"
  $launcher -n 8 build-gpu/tools/tempi_halo --n 32 --iters "${ITERS:-200}" --warmup 20 --variants "$variants" \
    --csv "$top/halo.csv" >> "$top/halo.txt" 2>&1
fi
grep -E "^==|^tempi |^stream|^neighbor|^hand-fused|PASS|FAIL" "$top/halo.txt"
echo "== done"
