#!/bin/bash
# Session 23: the host wire of MPICH and Open MPI by buffer kind, interleaved rounds; CPU topology.
set -uo pipefail
T0=$SECONDS
top=${OUT:-/tmp/out}; out=/tmp/s23c; rm -rf $out; mkdir -p $out
trap 'tar czf "$top/s23c.tgz" -C /tmp s23c' EXIT
{ nvidia-smi -L; date -u; } > $out/device.txt; nvidia-cuda-mps-control -d
(source .gpu-host/use-mpich.sh .gpu-host/debs >/dev/null
 nvcc -O2 -arch=sm_90 -c .probe/hostwire.cu -o /tmp/hw.o $(pkg-config --cflags mpich) && g++ /tmp/hw.o -o /tmp/hw-mpich $(pkg-config --libs mpich) -L/usr/local/cuda/lib64 -lcudart || exit 1
 L=$(command -v mpiexec.hydra || command -v mpiexec)
 echo "== MPICH, hydra default binding"; timeout 150 $L -n 2 /tmp/hw-mpich | tee $out/mpich.txt
 true)
echo "at $((SECONDS-T0))s"
(source .gpu-host/use-openmpi.sh .gpu-host/ompi >/dev/null
 nvcc -O2 -arch=sm_90 .probe/hostwire.cu -o /tmp/hw-ompi $(mpicxx --showme:compile) $(mpicxx --showme:link | sed 's/-Wl,[^ ]*//g') || exit 1
 echo "== Open MPI, default binding"; timeout 150 mpirun --allow-run-as-root -n 2 /tmp/hw-ompi | tee $out/ompi.txt)
echo "done at $((SECONDS-T0))s"
