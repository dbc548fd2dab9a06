#!/bin/bash
# Session 24, calls 2 and 3 (one H200, two ranks under MPS, MPICH; the build of s24a.sh still
# on the machine). Call 2: tempi-measure --repeat 3 --max-bytes 16777216, then the bench_p2p
# grid with that profile (directory call2/). Call 3 (ROUNDS=1): three rounds, each a single
# measurement and its grid, then a measurement with --repeat 3 and its grid (call3/; only
# the first eight files came back).
source .gpu-host/use-mpich.sh .gpu-host/debs >/dev/null
L=$(command -v mpiexec.hydra || command -v mpiexec); o=$OUT
nvidia-cuda-mps-control -d; date -u; T0=$SECONDS
if [ "${ROUNDS:-0}" = 0 ]; then
  timeout 300 $L -n 2 build-m/tools/tempi-measure --repeat 3 --max-bytes 16777216 --output $o/profile-mpich-repeat3.json \
    > $o/measure-mpich-repeat3.txt 2> $o/measure-mpich-repeat3.err
  echo "measure exit $? at $((SECONDS-T0))s"
  TEMPI_PROFILE=$o/profile-mpich-repeat3.json timeout 200 $L -n 2 build-m/tools/bench_p2p --max-bytes 16777216 \
    --csv $o/p2p-mpich.csv > $o/p2p-mpich.txt 2>&1
  echo "p2p exit $? at $((SECONDS-T0))s"; grep -E "^predicted within|^auto" $o/p2p-mpich.txt | tail -4
else
  for i in 1 2 3; do for r in 1 3; do
    p=$o/profile-r$r-$i.json
    timeout 100 $L -n 2 build-m/tools/tempi-measure --repeat $r --max-bytes 16777216 --output $p > $o/measure-r$r-$i.txt 2>&1
    echo "round $i repeat $r: measure exit $? at $((SECONDS-T0))s: $(grep -E 'predicted within' $o/measure-r$r-$i.txt)"
    TEMPI_PROFILE=$p timeout 100 $L -n 2 build-m/tools/bench_p2p --max-bytes 16777216 --csv $o/p2p-r$r-$i.csv > $o/p2p-r$r-$i.txt 2>&1
    echo "  p2p exit $? at $((SECONDS-T0))s"; grep -E "^predicted within|^auto" $o/p2p-r$r-$i.txt | tail -3 | sed 's/^/  /'
  done; done
fi
echo quit | nvidia-cuda-mps-control
