#!/bin/bash
# Session 22: the halo's point-to-point variants before (393b7a8) and after this session's
# changes (.probe/s22.patch: fused-launch tables, kept decisions, completion lookup), taking
# turns, under MPICH and the CUDA-aware Open MPI; two ranks under MPS on one GPU.
set -uo pipefail
T0=$SECONDS
top=${OUT:-/tmp/out}; out=/tmp/s22g; mkdir -p $out
trap 'tar czf "$top/s22g.tgz" -C /tmp s22g' EXIT
{ nvidia-smi -L; date -u; } > $out/device.txt; cat $out/device.txt
O="source .gpu-host/use-openmpi.sh .gpu-host/ompi"; M="source .gpu-host/use-mpich.sh .gpu-host/debs"
rm -rf /tmp/old && cp -r . /tmp/old && (cd /tmp/old && git apply -R .probe/s22.patch) || exit 1
for d in $PWD /tmp/old; do
  (cd $d; eval $M >/dev/null; meson setup build-m -Dmpi=mpich -Dgpu_arch=90 -Dtests=false > /tmp/sm-$(basename $d).log 2>&1 && ninja -C build-m tools/tempi_halo > /tmp/bm-$(basename $d).log 2>&1) &
  (cd $d; eval $O >/dev/null; meson setup build-o -Dmpi=openmpi -Dgpu_arch=90 -Dtests=false > /tmp/so-$(basename $d).log 2>&1 && ninja -C build-o tools/tempi_halo > /tmp/bo-$(basename $d).log 2>&1) &
done
wait
for d in $PWD /tmp/old; do for b in build-m build-o; do [ -x $d/$b/tools/tempi_halo ] || { echo "missing $d/$b"; tail -n 20 /tmp/*.log; exit 1; }; done; done
echo "built at $((SECONDS-T0))s"
nvidia-cuda-mps-control -d 2>/dev/null
MX=$(eval $M >/dev/null; command -v mpiexec.hydra || command -v mpiexec)
V=tempi,zero-copy-p2p,persistent
for round in 1 2 3 4; do
  for n in 32 64; do
    for tree in old new; do
      dir=$PWD; [ $tree = old ] && dir=/tmp/old
      (eval $M >/dev/null; timeout 60 $MX -bind-to core -n 2 $dir/build-m/tools/tempi_halo --n $n --iters 300 --variants $V --csv $out/halo-mpich-$tree.csv < /dev/null > $out/mpich-$tree-$n-$round.txt 2>&1)
      (eval $O >/dev/null; timeout 60 mpirun --allow-run-as-root --oversubscribe --bind-to core -n 2 $dir/build-o/tools/tempi_halo --n $n --iters 300 --variants $V --csv $out/halo-ompi-$tree.csv < /dev/null > $out/ompi-$tree-$n-$round.txt 2>&1)
      for lib in mpich ompi; do
        f=$out/$lib-$tree-$n-$round.txt
        echo "$lib $tree n=$n r$round: $(grep -E '^(tempi|zero-copy-p2p|persistent) ' $f | head -3 | awk '{print $1, $2}' | tr '\n' ' ') ok: $(grep -c 'cells checked / 0 wrong' $f)/3 | post/wait: $(grep -E '^(tempi|zero-copy-p2p) ' $f | tail -2 | awk '{print $2 "/" $3}' | tr '\n' ' ')"
      done
    done
  done
done
echo quit | nvidia-cuda-mps-control 2>/dev/null
echo "done at $((SECONDS-T0))s"
