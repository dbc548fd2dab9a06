#!/bin/bash
# Session 21: repeated blocking zero-copy calls (the memo). build-n: this tree; /tmp/old/build-o:
# the tree before it (.probe/memo.patch reversed). MPICH, two ranks under MPS on one GPU.
set -uo pipefail
T0=$SECONDS
top=${OUT:-/tmp/out}; out=/tmp/s21b; mkdir -p $out
trap 'tar czf "$top/s21b.tgz" -C /tmp s21b' EXIT
[ -d /opt/c2/usr/share/pkgconfig ] || { mkdir -p /opt/c2 && dpkg -x .gpu-host/debs/catch2_*.deb /opt/c2; sed -i 's|^prefix=/usr$|prefix=/opt/c2/usr|; s|=/usr/|=/opt/c2/usr/|g' /opt/c2/usr/share/pkgconfig/catch2.pc; }
export PKG_CONFIG_PATH=/opt/c2/usr/share/pkgconfig:${PKG_CONFIG_PATH:-}
{ nvidia-smi -L; date -u; } > $out/device.txt; cat $out/device.txt
source .gpu-host/use-mpich.sh .gpu-host/debs >/dev/null
launcher=$(command -v mpiexec.hydra || command -v mpiexec)
rm -rf /tmp/old && mkdir /tmp/old && cp -r core cuda pmpi tools tests subprojects meson.build meson_options.txt docs packaging LICENSE README.md /tmp/old/ && (cd /tmp/old && patch -R -p1 < $OLDPWD/.probe/memo.patch > /dev/null) || { echo "patch failed"; exit 1; }
(meson setup build-n -Dmpi=mpich -Dgpu_arch=90 -Dmpiexec="$launcher" > /tmp/sn.log 2>&1 && ninja -C build-n > /tmp/bn.log 2>&1) &
(cd /tmp/old && meson setup build-o -Dmpi=mpich -Dgpu_arch=90 -Dmpiexec="$launcher" > /tmp/so.log 2>&1 && ninja -C build-o tools/tempi_halo tools/bench_alltoallw > /tmp/bo.log 2>&1) &
wait
[ -x build-n/tools/tempi_halo ] && [ -x /tmp/old/build-o/tools/tempi_halo ] || { for f in /tmp/sn.log /tmp/bn.log /tmp/so.log /tmp/bo.log; do echo "== $f"; tail -n 15 $f; done; exit 1; }
echo "built at $((SECONDS-T0))s"
nvidia-cuda-mps-control -d 2>/dev/null
for t in test_gpu_zero_copy test_gpu_zero_copy_p2p test_gpu_coll; do
  timeout 120 $launcher -n 2 build-n/tests/gpu/$t < /dev/null > $out/$t.log 2>&1; echo "$t exit $?: $(grep -E 'All tests|test cases' $out/$t.log | tail -1)"
done
timeout 120 $launcher -n 4 build-n/tests/gpu/test_gpu_zero_copy < /dev/null > $out/zc4.log 2>&1; echo "zero_copy 4 ranks exit $?: $(grep -E 'All tests|test cases' $out/zc4.log | tail -1)"
echo "tests at $((SECONDS-T0))s"
for round in 1 2; do for n in 32 64 128; do for v in old new; do
  [ $v = old ] && b=/tmp/old/build-o || b=build-n
  echo "--- $v n=$n round $round"
  timeout 90 $launcher -n 2 $b/tools/tempi_halo --n $n --iters 100 --variants neighbor,neighbor-persistent --csv $out/halo-$v.csv < /dev/null > $out/halo-$v-$n-$round.txt 2>&1
  grep -E "^neighbor|wrong" $out/halo-$v-$n-$round.txt | grep -v verify | head -2
done; done; done
for n in 6 8 16; do for v in old new; do
  [ $v = old ] && b=/tmp/old/build-o || b=build-n
  echo "--- $v alltoallw N=$n"
  timeout 60 $launcher -n 2 $b/tools/bench_alltoallw --n $n --iters 300 --csv $out/a2aw-$v.csv < /dev/null 2>&1 | grep -E "^(tempi|hand)|FAIL|PASS"
done; done
echo quit | nvidia-cuda-mps-control 2>/dev/null
echo "done at $((SECONDS-T0))s"
