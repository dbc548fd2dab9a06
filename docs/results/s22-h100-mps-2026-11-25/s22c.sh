#!/bin/bash
# Session 22: fused launches from tables in device memory. The new tree's gpu tests of fused
# launches, and the halo of the tree before (HEAD without .probe/tables.patch) and after, taking turns.
set -uo pipefail
T0=$SECONDS
top=${OUT:-/tmp/out}; out=/tmp/s22c; mkdir -p $out
trap 'tar czf "$top/s22c.tgz" -C /tmp s22c' EXIT
[ -d /opt/c2/usr/share/pkgconfig ] || { mkdir -p /opt/c2 && dpkg -x .gpu-host/debs/catch2_*.deb /opt/c2; sed -i 's|^prefix=/usr$|prefix=/opt/c2/usr|; s|=/usr/|=/opt/c2/usr/|g' /opt/c2/usr/share/pkgconfig/catch2.pc; }
export PKG_CONFIG_PATH=/opt/c2/usr/share/pkgconfig:${PKG_CONFIG_PATH:-}
{ nvidia-smi -L; date -u; } > $out/device.txt; cat $out/device.txt
M="source .gpu-host/use-mpich.sh .gpu-host/debs"
rm -rf /tmp/old && cp -r . /tmp/old && (cd /tmp/old && git apply -R .probe/tables.patch) || exit 1
(eval $M >/dev/null; meson setup build-m -Dmpi=mpich -Dgpu_arch=90 -Dmpiexec="$(command -v mpiexec.hydra || command -v mpiexec)" > /tmp/sm.log 2>&1 && ninja -C build-m tools/tempi_halo tests/gpu/test_gpu_pack tests/gpu/test_gpu_zero_copy tests/gpu/test_gpu_zero_copy_p2p > /tmp/bm.log 2>&1) &
(cd /tmp/old; eval $M >/dev/null; meson setup build-m -Dmpi=mpich -Dgpu_arch=90 -Dtests=false > /tmp/so.log 2>&1 && ninja -C build-m tools/tempi_halo > /tmp/bo.log 2>&1) &
wait
[ -x build-m/tools/tempi_halo ] && [ -x /tmp/old/build-m/tools/tempi_halo ] && [ -x build-m/tests/gpu/test_gpu_pack ] || { for f in /tmp/sm.log /tmp/bm.log /tmp/so.log /tmp/bo.log; do echo "== $f"; tail -n 12 $f; done; exit 1; }
echo "built at $((SECONDS-T0))s"
nvidia-cuda-mps-control -d 2>/dev/null
MX=$(eval $M >/dev/null; command -v mpiexec.hydra || command -v mpiexec)
(eval $M >/dev/null; timeout 200 $MX -n 1 build-m/tests/gpu/test_gpu_pack > $out/test_gpu_pack.log 2>&1; echo "test_gpu_pack exit $?: $(tail -3 $out/test_gpu_pack.log | tr '\n' ' ')")
for t in test_gpu_zero_copy test_gpu_zero_copy_p2p; do
  (eval $M >/dev/null; TEMPI_TEST_DEVICES=1 timeout 150 $MX -n 2 build-m/tests/gpu/$t > $out/$t.log 2>&1; echo "$t exit $?: $(grep -E 'All tests|test cases' $out/$t.log | tail -1)")
done
echo "tests at $((SECONDS-T0))s"
V=tempi,zero-copy-p2p,neighbor,persistent
for round in 1 2; do
  for n in 32 128; do
    for tree in old new; do
      dir=$PWD; [ $tree = old ] && dir=/tmp/old
      (eval $M >/dev/null; timeout 60 $MX -n 2 $dir/build-m/tools/tempi_halo --n $n --iters 100 --variants $V < /dev/null > $out/halo-$tree-$n-$round.txt 2>&1)
      echo "$tree n=$n r$round: $(grep -E '^(tempi|zero|neighbor|persistent) ' $out/halo-$tree-$n-$round.txt | head -4 | awk '{print $1, $2}' | tr '\n' ' ') ok: $(grep -c 'cells checked / 0 wrong' $out/halo-$tree-$n-$round.txt)/4"
    done
  done
done
echo quit | nvidia-cuda-mps-control 2>/dev/null
echo "done at $((SECONDS-T0))s"
