#!/bin/bash
# A change that must not change behaviour or speed, judged on one GPU machine in one run:
# builds this tree and a baseline tree (a tarball of an earlier commit, BASE, default
# .gpu-host/base.tgz, made with `git archive --format=tar.gz -o .gpu-host/base.tgz COMMIT core
# cuda pmpi tools tests meson.build meson_options.txt packaging subprojects LICENSE README.md
# 'docs/*.md'`) against MPICH, then runs tools/tempi_halo (two ranks, under MPS where one GPU
# is shared) and tools/bench_pack from both, taking turns ROUNDS times, so that each ratio to
# its own baseline can be compared between the trees. Tables to $OUT (or ./gpu-out).
#   STEPS: build (both trees), suite (this tree's gpu suite), bench (the rounds); default all.
set -uo pipefail
top=${OUT:-gpu-out}
mkdir -p "$top"
steps=${STEPS:-build,suite,bench}
rounds=${ROUNDS:-2}
source .gpu-host/use-mpich.sh .gpu-host/debs
[ -d /opt/c2/usr/share/pkgconfig ] || { mkdir -p /opt/c2 && dpkg -x .gpu-host/debs/catch2_*.deb /opt/c2;
  sed -i 's|^prefix=/usr$|prefix=/opt/c2/usr|; s|=/usr/|=/opt/c2/usr/|g' /opt/c2/usr/share/pkgconfig/catch2.pc; }
export PKG_CONFIG_PATH=/opt/c2/usr/share/pkgconfig:${PKG_CONFIG_PATH:-}
launcher=$(command -v mpiexec.hydra || command -v mpiexec)
nvidia-smi -L | tee "$top/device.txt"; date -u | tee -a "$top/device.txt"
if [ "$(nvidia-smi -L | wc -l)" -lt 2 ]; then
  nvidia-cuda-mps-control -d 2> /dev/null && echo "MPS on (two ranks share the GPU)" | tee -a "$top/device.txt"
fi
if [[ $steps == *build* ]]; then
  rm -rf /tmp/base && mkdir -p /tmp/base && tar xzf "${BASE:-.gpu-host/base.tgz}" -C /tmp/base
  meson setup build-new -Dmpi=mpich -Dgpu_arch=90 -Dbenchmarks=true -Dmpiexec="$launcher" > "$top/setup-new.log" 2>&1 ||
    { tail -20 "$top/setup-new.log"; exit 1; }
  meson setup /tmp/base/build -Dmpi=mpich -Dgpu_arch=90 -Dtests=false -Dmpiexec="$launcher" > "$top/setup-base.log" 2>&1 ||
    { tail -20 "$top/setup-base.log"; exit 1; }
  ninja -C build-new > "$top/build-new.log" 2>&1 || { grep -E "error" -A5 "$top/build-new.log" | head -40; exit 1; }
  ninja -C /tmp/base/build tools/tempi_halo tools/bench_pack > "$top/build-base.log" 2>&1 ||
    { grep -E "error" -A5 "$top/build-base.log" | head -40; exit 1; }
  echo "== built both trees"
fi
if [[ $steps == *suite* ]]; then
  meson test -C build-new --suite gpu --print-errorlogs > "$top/gpu-suite.txt" 2>&1
  grep -E "^ *[0-9]+/[0-9]+ |^Ok:|^Fail:|^Skipped:" "$top/gpu-suite.txt" | grep -vE " OK " 
  grep -E "^Ok:|^Fail:|^Skipped:" "$top/gpu-suite.txt"
fi
if [[ $steps == *bench* ]]; then
  for r in $(seq 1 "$rounds"); do
    for tree in base new; do
      b=build-new; [ $tree = base ] && b=/tmp/base/build
      for n in 32 64 128; do
        echo "== round $r, $tree tree, tempi_halo n=$n" | tee -a "$top/halo-$tree.txt"
        $launcher -n 2 $b/tools/tempi_halo --n $n --iters 50 --warmup 10 \
          --variants tempi,persistent,neighbor,neighbor-persistent,hand-fused-faces,host-copy \
          --csv "$top/halo-$tree.csv" >> "$top/halo-$tree.txt" 2>&1
      done
      echo "== round $r, $tree tree, bench_pack" | tee -a "$top/pack-$tree.txt"
      $launcher -n 1 $b/tools/bench_pack --quick --csv "$top/pack-$tree-r$r.csv" >> "$top/pack-$tree.txt" 2>&1
    done
  done
  echo "== done"
fi
