#!/bin/bash
# The open-launch binding check (a thread bound to one CPU gets mode 2's launches): CUDA-aware
# Open MPI, default binding and --bind-to none, modes 2 and 3; MPICH mode 3; the pack-sequence test.
set -uo pipefail
T0=$SECONDS
top=${OUT:-/tmp/out}; out=/tmp/s20i; rm -rf $out; mkdir -p $out
trap 'tar czf "$top/s20i.tgz" -C /tmp s20i' EXIT
[ -d /opt/c2/usr/share/pkgconfig ] || { mkdir -p /opt/c2 && dpkg -x .gpu-host/debs/catch2_*.deb /opt/c2; sed -i 's|^prefix=/usr$|prefix=/opt/c2/usr|; s|=/usr/|=/opt/c2/usr/|g' /opt/c2/usr/share/pkgconfig/catch2.pc; }
export PKG_CONFIG_PATH=/opt/c2/usr/share/pkgconfig:${PKG_CONFIG_PATH:-}
{ nvidia-smi -L; date -u; } > $out/device.txt
O="source .gpu-host/use-openmpi.sh .gpu-host/ompi"; M="source .gpu-host/use-mpich.sh .gpu-host/debs"
(eval $O >/dev/null; meson setup bio -Dmpi=openmpi -Dgpu_arch=90 -Dmpiexec="$(command -v mpirun)" -Dmpiexec_args="--allow-run-as-root --oversubscribe" > /tmp/so.log 2>&1 && ninja -C bio tools/bench_pack_sequence tests/gpu/test_gpu_pack_sequence > /tmp/bo.log 2>&1) &
(eval $M >/dev/null; meson setup bim -Dmpi=mpich -Dgpu_arch=90 -Dmpiexec="$(command -v mpiexec.hydra || command -v mpiexec)" > /tmp/sm.log 2>&1 && ninja -C bim tools/bench_pack_sequence tests/gpu/test_gpu_pack_sequence > /tmp/bm.log 2>&1) &
wait
[ -x bio/tools/bench_pack_sequence ] && [ -x bim/tools/bench_pack_sequence ] || { grep -h -A8 error /tmp/bo.log /tmp/bm.log | head -30; exit 1; }
echo "built at $((SECONDS-T0))s"
nvidia-cuda-mps-control -d
row() { echo "$1: $(grep -E '^mpi-datatypes|^fused-kernel' $2 | head -2 | awk '{printf "%s %s %s; ", $1, $2, $5}') parts: $(grep -E '^mpi-datatypes' $2 | sed -n 2p) $(grep -c 'needs\|one CPU' $2) warning(s)"; }
(eval $O >/dev/null; L="$(command -v mpirun) --allow-run-as-root --oversubscribe"
  for round in 1 2; do for bind in "" "--bind-to none"; do for mode in 2 3; do
    f=$out/seq-ompi-$round-${bind// /}-$mode.txt
    TEMPI_PROFILE=none TEMPI_DEFER_PACK=$mode timeout 60 $L $bind -n 2 bio/tools/bench_pack_sequence --gpus 1 < /dev/null > $f 2>&1
    row "ompi round $round '${bind:-bound}' mode $mode" $f
  done; done; done
  TEMPI_DEFER_PACK=3 timeout 120 $L -n 2 bio/tests/gpu/test_gpu_pack_sequence > $out/test-ompi-open.log 2>&1; echo "test ompi mode 3 (bound): exit $? $(grep -E 'All tests|test cases' $out/test-ompi-open.log | tail -1)"
  TEMPI_DEFER_PACK=3 timeout 120 $L --bind-to none -n 2 bio/tests/gpu/test_gpu_pack_sequence > $out/test-ompi-open-unbound.log 2>&1; echo "test ompi mode 3 (unbound): exit $? $(grep -E 'All tests|test cases' $out/test-ompi-open-unbound.log | tail -1)")
(eval $M >/dev/null; L=$(command -v mpiexec.hydra || command -v mpiexec)
  for mode in 2 3; do f=$out/seq-mpich-$mode.txt; TEMPI_PROFILE=none TEMPI_DEFER_PACK=$mode timeout 60 $L -n 2 bim/tools/bench_pack_sequence --gpus 1 < /dev/null > $f 2>&1; row "mpich mode $mode" $f; done
  TEMPI_DEFER_PACK=3 timeout 120 $L -n 2 bim/tests/gpu/test_gpu_pack_sequence > $out/test-mpich-open.log 2>&1; echo "test mpich mode 3: exit $? $(grep -E 'All tests|test cases' $out/test-mpich-open.log | tail -1)")
echo quit | nvidia-cuda-mps-control
echo "done at $((SECONDS-T0))s"
