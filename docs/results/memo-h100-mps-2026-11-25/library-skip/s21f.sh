#!/bin/bash
# Session 21: the final tree under MPICH and CUDA-aware Open MPI (two ranks under MPS on one
# GPU): the gpu suite (MPICH), the zero-copy tests (Open MPI), every halo variant; and
# neighbor-persistent before/after the library skipped (.probe/skip.patch).
set -uo pipefail
T0=$SECONDS
top=${OUT:-/tmp/out}; out=/tmp/s21f; mkdir -p $out
trap 'tar czf "$top/s21f.tgz" -C /tmp s21f' EXIT
[ -d /opt/c2/usr/share/pkgconfig ] || { mkdir -p /opt/c2 && dpkg -x .gpu-host/debs/catch2_*.deb /opt/c2; sed -i 's|^prefix=/usr$|prefix=/opt/c2/usr|; s|=/usr/|=/opt/c2/usr/|g' /opt/c2/usr/share/pkgconfig/catch2.pc; }
export PKG_CONFIG_PATH=/opt/c2/usr/share/pkgconfig:${PKG_CONFIG_PATH:-}
{ nvidia-smi -L; date -u; } > $out/device.txt; cat $out/device.txt
here=$PWD
O="source .gpu-host/use-openmpi.sh .gpu-host/ompi"; M="source .gpu-host/use-mpich.sh .gpu-host/debs"
rm -rf /tmp/prev && mkdir /tmp/prev && cp -r core cuda pmpi tools tests subprojects meson.build meson_options.txt docs packaging LICENSE README.md /tmp/prev/ && (cd /tmp/prev && patch -R -p1 < $here/.probe/skip.patch > /dev/null) || { echo "patch failed"; exit 1; }
(eval $M >/dev/null; meson setup build-m -Dmpi=mpich -Dgpu_arch=90 -Dmpiexec="$(command -v mpiexec.hydra || command -v mpiexec)" > /tmp/sm.log 2>&1 && ninja -C build-m > /tmp/bm.log 2>&1) &
(eval $O >/dev/null; meson setup build-o -Dmpi=openmpi -Dgpu_arch=90 -Dmpiexec="$(command -v mpirun)" -Dmpiexec_args="--allow-run-as-root --oversubscribe" > /tmp/so.log 2>&1 && ninja -C build-o > /tmp/bo.log 2>&1) &
(eval $M >/dev/null; cd /tmp/prev && meson setup build -Dmpi=mpich -Dgpu_arch=90 -Dmpiexec="$(command -v mpiexec.hydra || command -v mpiexec)" > /tmp/sp.log 2>&1 && ninja -C build tools/tempi_halo tools/bench_alltoallw > /tmp/bp.log 2>&1) &
wait
[ -x build-m/tools/tempi_halo ] && [ -x build-o/tools/tempi_halo ] && [ -x /tmp/prev/build/tools/tempi_halo ] || { for f in /tmp/sm.log /tmp/bm.log /tmp/so.log /tmp/bo.log /tmp/sp.log /tmp/bp.log; do echo "== $f"; tail -n 12 $f; done; exit 1; }
echo "built at $((SECONDS-T0))s"
nvidia-cuda-mps-control -d 2>/dev/null
(eval $M >/dev/null; timeout 280 meson test -C build-m --suite gpu --num-processes 1 > $out/gpu-suite-mpich.txt 2>&1; echo "gpu suite (MPICH) exit $?: $(grep -E '^(Ok|Fail|Skipped|Timeout):' $out/gpu-suite-mpich.txt | tr -s ' ' | tr '\n' ' ')"; grep -E "FAIL|TIMEOUT" $out/gpu-suite-mpich.txt | head)
echo "suite at $((SECONDS-T0))s"
(eval $O >/dev/null; for t in test_gpu_zero_copy test_gpu_zero_copy_p2p; do timeout 120 mpirun --allow-run-as-root --oversubscribe -n 2 build-o/tests/gpu/$t < /dev/null > $out/$t-ompi.log 2>&1; echo "ompi $t exit $?: $(grep -E 'All tests|test cases' $out/$t-ompi.log | tail -1)"; done)
V=tempi,persistent,zero-copy-p2p,neighbor,neighbor-persistent,hand-fused
for n in 32 64 128; do
  (eval $M >/dev/null; timeout 90 $(command -v mpiexec.hydra || command -v mpiexec) -n 2 build-m/tools/tempi_halo --n $n --iters 100 --variants $V --csv $out/halo-mpich.csv < /dev/null > $out/halo-mpich-$n.txt 2>&1)
  echo "mpich n=$n: $(grep -E '^(tempi|persistent|zero|neighbor|hand)' $out/halo-mpich-$n.txt | head -6 | awk '{print $1, $2}' | tr '\n' ' ') wrong: $(grep -c 'cells checked / 0 wrong' $out/halo-mpich-$n.txt)/6 clean"
  (eval $O >/dev/null; timeout 90 mpirun --allow-run-as-root --oversubscribe -n 2 build-o/tools/tempi_halo --n $n --iters 100 --variants ${V/,neighbor-persistent/} --csv $out/halo-ompi.csv < /dev/null > $out/halo-ompi-$n.txt 2>&1)
  echo "ompi n=$n: $(grep -E '^(tempi|persistent|zero|neighbor|hand)' $out/halo-ompi-$n.txt | head -5 | awk '{print $1, $2}' | tr '\n' ' ') wrong: $(grep -c 'cells checked / 0 wrong' $out/halo-ompi-$n.txt)/5 clean"
done
for round in 1 2; do for n in 32 64 128; do for v in prev new; do
  [ $v = prev ] && b=/tmp/prev/build || b=build-m
  (eval $M >/dev/null; timeout 90 $(command -v mpiexec.hydra || command -v mpiexec) -n 2 $b/tools/tempi_halo --n $n --iters 100 --variants neighbor,neighbor-persistent < /dev/null > $out/pers-$v-$n-$round.txt 2>&1)
  echo "$v n=$n round $round: $(grep -E '^neighbor' $out/pers-$v-$n-$round.txt | head -2 | awk '{print $1, $2}' | tr '\n' ' ')"
done; done; done
for n in 6 8 16; do for v in prev new; do
  [ $v = prev ] && b=/tmp/prev/build || b=build-m
  echo "$v alltoallw N=$n: $( (eval $M >/dev/null; timeout 60 $(command -v mpiexec.hydra || command -v mpiexec) -n 2 $b/tools/bench_alltoallw --n $n --iters 300 --csv $out/a2aw-$v.csv < /dev/null 2>&1) | grep -E '^(tempi|hand)|FAIL|PASS' | awk '{print $1, $2}' | tr '\n' ' ')"
done; done
echo quit | nvidia-cuda-mps-control 2>/dev/null
echo "done at $((SECONDS-T0))s"
