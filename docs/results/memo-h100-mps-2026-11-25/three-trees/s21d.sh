#!/bin/bash
# Session 21: three trees side by side, MPICH, two ranks under MPS on one GPU: old (before the
# memo), memo (564272a), new (memo + prepared moves). .probe/memo.patch and .probe/prep.patch.
set -uo pipefail
T0=$SECONDS
top=${OUT:-/tmp/out}; out=/tmp/s21d; mkdir -p $out
trap 'tar czf "$top/s21d.tgz" -C /tmp s21d' EXIT
[ -d /opt/c2/usr/share/pkgconfig ] || { mkdir -p /opt/c2 && dpkg -x .gpu-host/debs/catch2_*.deb /opt/c2; sed -i 's|^prefix=/usr$|prefix=/opt/c2/usr|; s|=/usr/|=/opt/c2/usr/|g' /opt/c2/usr/share/pkgconfig/catch2.pc; }
export PKG_CONFIG_PATH=/opt/c2/usr/share/pkgconfig:${PKG_CONFIG_PATH:-}
{ nvidia-smi -L; date -u; } > $out/device.txt; cat $out/device.txt
source .gpu-host/use-mpich.sh .gpu-host/debs >/dev/null
launcher=$(command -v mpiexec.hydra || command -v mpiexec)
here=$PWD
for t in mid old; do rm -rf /tmp/$t && mkdir /tmp/$t && cp -r core cuda pmpi tools tests subprojects meson.build meson_options.txt docs packaging LICENSE README.md /tmp/$t/; done
(cd /tmp/mid && patch -R -p1 < $here/.probe/prep.patch > /dev/null) && (cd /tmp/old && patch -R -p1 < $here/.probe/prep.patch > /dev/null && patch -R -p1 < $here/.probe/memo.patch > /dev/null) || { echo "patch failed"; exit 1; }
(meson setup build-n -Dmpi=mpich -Dgpu_arch=90 -Dmpiexec="$launcher" > /tmp/sn.log 2>&1 && ninja -C build-n > /tmp/bn.log 2>&1) &
for t in mid old; do (cd /tmp/$t && meson setup build -Dmpi=mpich -Dgpu_arch=90 -Dmpiexec="$launcher" > /tmp/s$t.log 2>&1 && ninja -C build tools/tempi_halo tools/bench_alltoallw > /tmp/b$t.log 2>&1) & done
wait
[ -x build-n/tools/tempi_halo ] && [ -x /tmp/old/build/tools/tempi_halo ] && [ -x /tmp/mid/build/tools/tempi_halo ] || { for f in /tmp/sn.log /tmp/bn.log /tmp/smid.log /tmp/bmid.log /tmp/sold.log /tmp/bold.log; do echo "== $f"; tail -n 15 $f; done; exit 1; }
echo "built at $((SECONDS-T0))s"
nvidia-cuda-mps-control -d 2>/dev/null
for t in test_gpu_zero_copy test_gpu_zero_copy_p2p test_gpu_coll; do
  timeout 120 $launcher -n 2 build-n/tests/gpu/$t < /dev/null > $out/$t.log 2>&1; echo "$t exit $?: $(grep -E 'All tests|test cases' $out/$t.log | tail -1)"
done
timeout 120 $launcher -n 4 build-n/tests/gpu/test_gpu_zero_copy < /dev/null > $out/zc4.log 2>&1; echo "zero_copy 4 ranks exit $?: $(grep -E 'All tests|test cases' $out/zc4.log | tail -1)"
if command -v compute-sanitizer > /dev/null; then for tool in memcheck racecheck; do
  timeout 200 $launcher -n 2 compute-sanitizer --tool $tool build-n/tests/gpu/test_gpu_zero_copy "repeated calls*" < /dev/null > $out/sanitizer-$tool.log 2>&1; echo "$tool exit $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|All tests' $out/sanitizer-$tool.log | sort | uniq -c | tr '\n' ' ')"; done; fi
echo "tests at $((SECONDS-T0))s"
for round in 1 2; do for n in 32 64 128; do for v in old mid new; do
  case $v in old) b=/tmp/old/build;; mid) b=/tmp/mid/build;; new) b=build-n;; esac
  timeout 90 $launcher -n 2 $b/tools/tempi_halo --n $n --iters 100 --variants neighbor,neighbor-persistent --csv $out/halo-$v.csv < /dev/null > $out/halo-$v-$n-$round.txt 2>&1
  echo "$v n=$n round $round: $(grep -E '^neighbor' $out/halo-$v-$n-$round.txt | head -2 | awk '{print $1, $2}' | tr '\n' ' ') $(grep -c ' 0  ' $out/halo-$v-$n-$round.txt) rows with 0 wrong"
done; done; done
for n in 6 8 16; do for v in old mid new; do
  case $v in old) b=/tmp/old/build;; mid) b=/tmp/mid/build;; new) b=build-n;; esac
  echo "$v alltoallw N=$n: $(timeout 60 $launcher -n 2 $b/tools/bench_alltoallw --n $n --iters 300 --csv $out/a2aw-$v.csv < /dev/null 2>&1 | grep -E '^(tempi|hand)|FAIL|PASS' | awk '{print $1, $2}' | tr '\n' ' ')"
done; done
echo quit | nvidia-cuda-mps-control 2>/dev/null
echo "done at $((SECONDS-T0))s"
