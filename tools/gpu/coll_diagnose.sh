#!/bin/bash
# Runs every test case of the collective and persistent gpu tests on its own, with a
# time limit, under one MPI library: finds which case hangs or fails.
#   bash tools/gpu/coll_diagnose.sh mpich|cuda-openmpi [ranks] [per-case seconds]
set -uo pipefail
mpi=${1:-cuda-openmpi}; ranks=${2:-2}; limit=${3:-40}
case $mpi in
  mpich) source .gpu-host/use-mpich.sh .gpu-host/debs; impl=mpich; launcher=$(command -v mpiexec.hydra || command -v mpiexec); margs="" ;;
  cuda-openmpi) source .gpu-host/use-openmpi.sh .gpu-host/ompi; impl=openmpi; launcher=$(command -v mpirun); margs="--allow-run-as-root --oversubscribe" ;;
esac
[ -d /opt/c2/usr/share/pkgconfig ] || { mkdir -p /opt/c2 && dpkg -x .gpu-host/debs/catch2_*.deb /opt/c2; sed -i 's|^prefix=/usr$|prefix=/opt/c2/usr|; s|=/usr/|=/opt/c2/usr/|g' /opt/c2/usr/share/pkgconfig/catch2.pc; }
export PKG_CONFIG_PATH=/opt/c2/usr/share/pkgconfig:${PKG_CONFIG_PATH:-}
b=build-coll-$mpi
meson setup $b -Dmpi=$impl -Dmpiexec="$launcher" -Dmpiexec_args="$margs" > /tmp/setup.log 2>&1 || { tail -20 /tmp/setup.log; exit 1; }
ninja -C $b tests/gpu/test_gpu_coll tests/gpu/test_gpu_persistent > /tmp/build.log 2>&1 || { grep error -A5 /tmp/build.log | head -30; exit 1; }
for t in test_gpu_coll test_gpu_persistent; do
  $b/tests/gpu/$t --list-test-names-only 2>/dev/null | grep -v '^$' | grep -v 'test case' | while IFS= read -r name; do
    start=$SECONDS
    timeout -s KILL $limit $launcher $margs -n $ranks $b/tests/gpu/$t "$name" < /dev/null > /tmp/case.log 2>&1; rc=$?
    printf '%-20s rc=%-3s %4ss  %s\n' $t $rc $((SECONDS - start)) "$name"
    sed 's/\x1b\[[0-9;]*m//g' /tmp/case.log > /tmp/case.txt
    # Each failed check: the call and the variant (blocking, nonblocking + completion).
    grep -q FAILED /tmp/case.txt && awk '/FAILED/{f=1;n=0} f&&/with messages/{m=1;next} f&&m{n++; gsub(/round [0-9]+, rank [0-9]+ of [0-9]+ \(seed [0-9]+\)/,""); gsub(/random type [0-9]+/,"type"); if(n<=4) printf "    %s", $0; if(n==4){print ""; f=0;m=0}}' /tmp/case.txt | sort | uniq -c | sort -rn | head -${DETAIL:-20}
    [ $rc -ne 0 ] && grep -E "Signal:|Failing at|\[ [12]\]" /tmp/case.txt | head -4
  done
done
