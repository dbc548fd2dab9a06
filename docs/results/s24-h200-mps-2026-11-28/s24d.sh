#!/bin/bash
# Session 24, last call (one H200, two ranks under MPS, MPICH): tempi-measure with at least 15
# timed runs a size and two untimed ones a round (the tree after 0f70f26), two rounds of a
# single measurement and the bench_p2p grid with it.
source .gpu-host/use-mpich.sh .gpu-host/debs >/dev/null
L=$(command -v mpiexec.hydra || command -v mpiexec); o=${OUT:-/tmp/out}; T0=$SECONDS
meson setup bm -Dmpi=mpich -Dtests=false -Dgpu_arch=90 -Dmpiexec="$L" > $o/setup.log 2>&1 &&
  ninja -C bm tools/tempi-measure tools/bench_p2p > $o/build.log 2>&1 || { grep -A8 -m3 error $o/setup.log $o/build.log | head -30; exit 1; }
rm -f $o/setup.log $o/build.log
echo "built at $((SECONDS-T0))s"
nvidia-cuda-mps-control -d; date -u
for i in 1 2; do
  p=$o/profile-$i.json
  timeout 40 $L -n 2 bm/tools/tempi-measure --max-bytes 16777216 --output $p > $o/measure-$i.txt 2>&1
  echo "round $i: measure exit $? at $((SECONDS-T0))s: $(grep -E 'predicted within' $o/measure-$i.txt)"
  grep 'MPI, pinned host buffers' $o/measure-$i.txt
  TEMPI_PROFILE=$p timeout 45 $L -n 2 bm/tools/bench_p2p --max-bytes 16777216 --csv $o/p2p-$i.csv > $o/p2p-$i.txt 2>&1
  echo "  p2p exit $? at $((SECONDS-T0))s"; grep -E "^predicted within|^auto" $o/p2p-$i.txt | tail -3 | sed 's/^/  /'
done
echo quit | nvidia-cuda-mps-control
