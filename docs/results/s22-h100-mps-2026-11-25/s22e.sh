#!/bin/bash
# Session 22: three trees taking turns on the halo: base (393b7a8), +tables (fused-launch
# descriptions in device memory), +memo (kept decisions, completion lookup). The new tree's
# gpu point-to-point tests first.
set -uo pipefail
T0=$SECONDS
top=${OUT:-/tmp/out}; out=/tmp/s22e; mkdir -p $out
trap 'tar czf "$top/s22e.tgz" -C /tmp s22e' EXIT
[ -d /opt/c2/usr/share/pkgconfig ] || { mkdir -p /opt/c2 && dpkg -x .gpu-host/debs/catch2_*.deb /opt/c2; sed -i 's|^prefix=/usr$|prefix=/opt/c2/usr|; s|=/usr/|=/opt/c2/usr/|g' /opt/c2/usr/share/pkgconfig/catch2.pc; }
export PKG_CONFIG_PATH=/opt/c2/usr/share/pkgconfig:${PKG_CONFIG_PATH:-}
{ nvidia-smi -L; date -u; } > $out/device.txt; cat $out/device.txt
M="source .gpu-host/use-mpich.sh .gpu-host/debs"
rm -rf /tmp/t1 /tmp/t0 && cp -r . /tmp/t1 && (cd /tmp/t1 && git apply -R .probe/memo22.patch) && cp -r /tmp/t1 /tmp/t0 && (cd /tmp/t0 && git apply -R .probe/tables.patch) || exit 1
(eval $M >/dev/null; meson setup build-m -Dmpi=mpich -Dgpu_arch=90 -Dmpiexec="$(command -v mpiexec.hydra || command -v mpiexec)" > /tmp/sm.log 2>&1 && ninja -C build-m tools/tempi_halo tests/gpu/test_gpu_p2p tests/gpu/test_gpu_storm tests/gpu/test_gpu_zero_copy_p2p > /tmp/bm.log 2>&1) &
for t in t0 t1; do (cd /tmp/$t; eval $M >/dev/null; meson setup build-m -Dmpi=mpich -Dgpu_arch=90 -Dtests=false > /tmp/s$t.log 2>&1 && ninja -C build-m tools/tempi_halo > /tmp/b$t.log 2>&1) & done
wait
[ -x build-m/tools/tempi_halo ] && [ -x /tmp/t0/build-m/tools/tempi_halo ] && [ -x /tmp/t1/build-m/tools/tempi_halo ] && [ -x build-m/tests/gpu/test_gpu_p2p ] || { for f in /tmp/sm.log /tmp/bm.log /tmp/st0.log /tmp/bt0.log /tmp/bt1.log; do echo "== $f"; tail -n 12 $f; done; exit 1; }
echo "built at $((SECONDS-T0))s"
nvidia-cuda-mps-control -d 2>/dev/null
MX=$(eval $M >/dev/null; command -v mpiexec.hydra || command -v mpiexec)
for cfg in "A=1" "TEMPI_METHOD=staged" "TEMPI_TEST_DEVICES=1 TEMPI_TEST_THREADS=1"; do
  (eval $M >/dev/null; env $cfg TEMPI_TEST_DEVICES=1 timeout 150 $MX -n 2 build-m/tests/gpu/test_gpu_p2p > $out/test_gpu_p2p-${cfg%%=*}.log 2>&1; echo "test_gpu_p2p [$cfg] exit $?: $(grep -E 'All tests|test cases' $out/test_gpu_p2p-${cfg%%=*}.log | tail -1)")
done
for t in test_gpu_storm test_gpu_zero_copy_p2p; do
  (eval $M >/dev/null; TEMPI_TEST_DEVICES=1 timeout 150 $MX -n 2 build-m/tests/gpu/$t > $out/$t.log 2>&1; echo "$t exit $?: $(grep -E 'All tests|test cases' $out/$t.log | tail -1)")
done
echo "tests at $((SECONDS-T0))s"
V=tempi,zero-copy-p2p,persistent,neighbor
for round in 1 2; do
  for n in 32 64 128; do
    for tree in t0 t1 new; do
      dir=$PWD; [ $tree != new ] && dir=/tmp/$tree
      (eval $M >/dev/null; timeout 60 $MX -n 2 $dir/build-m/tools/tempi_halo --n $n --iters 100 --variants $V --csv $out/halo-$tree.csv < /dev/null > $out/halo-$tree-$n-$round.txt 2>&1)
      echo "$tree n=$n r$round: $(grep -E '^(tempi|zero-copy-p2p|persistent|neighbor) ' $out/halo-$tree-$n-$round.txt | head -4 | awk '{print $1, $2}' | tr '\n' ' ') ok: $(grep -c 'cells checked / 0 wrong' $out/halo-$tree-$n-$round.txt)/4 | post/wait tempi: $(grep -E '^tempi ' $out/halo-$tree-$n-$round.txt | tail -1 | awk '{print $2, $3}')"
    done
  done
done
echo quit | nvidia-cuda-mps-control 2>/dev/null
echo "done at $((SECONDS-T0))s"
