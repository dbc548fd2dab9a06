#!/bin/bash
# Session 22: the tree after this session's changes, two ranks under MPS on one GPU: the gpu
# suite (MPICH), the zero-copy and point-to-point tests (CUDA-aware Open MPI), compute-sanitizer
# on the fused launches' tables (test_gpu_pack [async]) and on zero-copy point-to-point, every halo variant.
set -uo pipefail
T0=$SECONDS
top=${OUT:-/tmp/out}; out=/tmp/s22k-${PART:-1}; mkdir -p $out
trap 'tar czf "$top/s22k-${PART:-1}.tgz" -C /tmp s22k-${PART:-1}' EXIT
[ -d /opt/c2/usr/share/pkgconfig ] || { mkdir -p /opt/c2 && dpkg -x .gpu-host/debs/catch2_*.deb /opt/c2; sed -i 's|^prefix=/usr$|prefix=/opt/c2/usr|; s|=/usr/|=/opt/c2/usr/|g' /opt/c2/usr/share/pkgconfig/catch2.pc; }
export PKG_CONFIG_PATH=/opt/c2/usr/share/pkgconfig:${PKG_CONFIG_PATH:-}
{ nvidia-smi -L; date -u; } > $out/device.txt; cat $out/device.txt
here=$PWD
O="source .gpu-host/use-openmpi.sh .gpu-host/ompi"; M="source .gpu-host/use-mpich.sh .gpu-host/debs"
[ -f build-m/build.ninja ] && [ -f build-o/build.ninja ] || {
(eval $M >/dev/null; meson setup build-m -Dmpi=mpich -Dgpu_arch=90 -Dmpiexec="$(command -v mpiexec.hydra || command -v mpiexec)" > /tmp/sm.log 2>&1 && ninja -C build-m > /tmp/bm.log 2>&1) &
(eval $O >/dev/null; meson setup build-o -Dmpi=openmpi -Dgpu_arch=90 -Dmpiexec="$(command -v mpirun)" -Dmpiexec_args="--allow-run-as-root --oversubscribe" > /tmp/so.log 2>&1 && ninja -C build-o > /tmp/bo.log 2>&1) &
wait
}
(eval $M >/dev/null; ninja -C build-m > /tmp/bm2.log 2>&1) & (eval $O >/dev/null; ninja -C build-o > /tmp/bo2.log 2>&1) & wait
[ -x build-m/tools/tempi_halo ] && [ -x build-o/tools/tempi_halo ] || { for f in /tmp/sm.log /tmp/bm.log /tmp/so.log /tmp/bo.log /tmp/sp.log /tmp/bp.log; do echo "== $f"; tail -n 12 $f; done; exit 1; }
echo "built at $((SECONDS-T0))s"
nvidia-cuda-mps-control -d 2>/dev/null
if [ "${PART:-1}" = 1 ]; then
(eval $M >/dev/null; timeout 280 meson test -C build-m --suite gpu --num-processes 1 > $out/gpu-suite-mpich.txt 2>&1; echo "gpu suite (MPICH) exit $?: $(grep -E '^(Ok|Fail|Skipped|Timeout):' $out/gpu-suite-mpich.txt | tr -s ' ' | tr '\n' ' ')"; grep -E "FAIL|TIMEOUT" $out/gpu-suite-mpich.txt | head)
echo "suite at $((SECONDS-T0))s"
(eval $O >/dev/null; for t in test_gpu_zero_copy test_gpu_zero_copy_p2p test_gpu_p2p; do timeout 120 mpirun --allow-run-as-root --oversubscribe -n 2 build-o/tests/gpu/$t < /dev/null > $out/$t-ompi.log 2>&1; echo "ompi $t exit $?: $(grep -E 'All tests|test cases' $out/$t-ompi.log | tail -1)"; done)
fi
if [ "${PART:-1}" = 2 ]; then
V=tempi,persistent,zero-copy-p2p,neighbor,neighbor-persistent,hand-fused
for n in 32 64 128; do
  (eval $M >/dev/null; timeout 90 $(command -v mpiexec.hydra || command -v mpiexec) -n 2 build-m/tools/tempi_halo --n $n --iters 100 --variants $V --csv $out/halo-mpich.csv < /dev/null > $out/halo-mpich-$n.txt 2>&1)
  echo "mpich n=$n: $(grep -E '^(tempi|persistent|zero|neighbor|hand)' $out/halo-mpich-$n.txt | head -6 | awk '{print $1, $2}' | tr '\n' ' ') wrong: $(grep -c 'cells checked / 0 wrong' $out/halo-mpich-$n.txt)/6 clean"
  (eval $O >/dev/null; timeout 90 mpirun --allow-run-as-root --oversubscribe -n 2 build-o/tools/tempi_halo --n $n --iters 100 --variants ${V/,neighbor-persistent/} --csv $out/halo-ompi.csv < /dev/null > $out/halo-ompi-$n.txt 2>&1)
  echo "ompi n=$n: $(grep -E '^(tempi|persistent|zero|neighbor|hand)' $out/halo-ompi-$n.txt | head -5 | awk '{print $1, $2}' | tr '\n' ' ') wrong: $(grep -c 'cells checked / 0 wrong' $out/halo-ompi-$n.txt)/5 clean"
done
(eval $M >/dev/null; for tool in memcheck racecheck; do
  timeout 150 $(command -v mpiexec.hydra || command -v mpiexec) -n 1 compute-sanitizer --tool $tool build-m/tests/gpu/test_gpu_pack "[async]" < /dev/null > $out/sanitizer-pack-$tool.log 2>&1; echo "pack $tool exit $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|All tests|test cases' $out/sanitizer-pack-$tool.log | sort | uniq -c | tr '\n' ' ')"
  timeout 150 $(command -v mpiexec.hydra || command -v mpiexec) -n 2 compute-sanitizer --tool $tool build-m/tests/gpu/test_gpu_zero_copy_p2p < /dev/null > $out/sanitizer-zcp2p-$tool.log 2>&1; echo "zero-copy p2p $tool exit $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|All tests|test cases' $out/sanitizer-zcp2p-$tool.log | sort | uniq -c | tr '\n' ' ')"
done)
echo "sanitizers at $((SECONDS-T0))s"
fi
echo quit | nvidia-cuda-mps-control 2>/dev/null
echo "done at $((SECONDS-T0))s"
