#!/bin/bash
# The Python user's halo (tools/python/halo.py: mpi4py with CuPy arrays, TEMPI's preload
# library on every rank) beside tools/tempi_halo with the same cells (float64, one ghost
# layer), two ranks on one GPU under MPS, n = SIZES (default 32 64 128). TEMPI is built
# against the MPI that mpi4py uses (Open MPI on the GPU hosts). Tables to $OUT (or ./gpu-out).
set -uo pipefail
top=${OUT:-gpu-out}
mkdir -p "$top"
nvidia-smi -L | tee "$top/python-device.txt"; date -u | tee -a "$top/python-device.txt"
nvidia-cuda-mps-control -d 2> /dev/null && echo "MPS on" | tee -a "$top/python-device.txt"
python3 -c "import mpi4py, cupy; print('mpi4py', mpi4py.__version__, 'cupy', cupy.__version__)" | tee -a "$top/python-device.txt"
b=build-python
meson setup $b -Dmpi=openmpi -Dtests=false -Dgpu_arch=90 > "$top/python-setup.log" 2>&1 || { tail -20 "$top/python-setup.log"; exit 1; }
ninja -C $b pmpi/libtempi_preload.so tools/tempi_halo > "$top/python-build.log" 2>&1 || { grep error -A5 "$top/python-build.log" | head -30; exit 1; }
run="mpirun --allow-run-as-root --oversubscribe -n 2"
for n in ${SIZES:-32 64 128}; do
  echo "== n=$n: Python (CuPy, TEMPI preloaded)" | tee -a "$top/python-halo.txt"
  $run -x LD_PRELOAD=$PWD/$b/pmpi/libtempi_preload.so python3 tools/python/halo.py --n $n --iters 50 --warmup 10 \
    --arrays cupy --csv "$top/python-halo-$n.csv" >> "$top/python-halo.txt" 2>&1
  echo "== n=$n: tempi_halo, same cells" | tee -a "$top/python-halo.txt"
  $run $b/tools/tempi_halo --n $n --type double --radius 1 --iters 50 --warmup 10 \
    --variants tempi,neighbor,host-copy >> "$top/python-halo.txt" 2>&1
done
grep -E "^==|^(isend-irecv|neighbor-alltoallw|host-copy|tempi|neighbor) " "$top/python-halo.txt"
