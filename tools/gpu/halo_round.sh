#!/bin/bash
# Halo timing round: both MPI libraries, n = 32, 64, 128, auto and oneshot, parts of an exchange;
# then, per n, tempi beside the hand-fused and fused-nccl baselines in one run (ratios to
# fused-nccl in the table; fused-nccl needs two GPUs for its 2 ranks, else it says skipped).
# NCCL: the CUDA root's where it has one, else the python package's (PyTorch's nvidia-nccl),
# passed as -Dnccl_root (docs/using.md, "NCCL for tempi_halo").
#   env: VARIANTS (default tempi,host-copy), NCCL_VARIANTS (default tempi,hand-fused,fused-nccl),
#        HALO8=0 skips the 8-rank run, P2P=1 adds bench_p2p
set -uo pipefail
top=${OUT:-gpu-out}
mkdir -p "$top"
# -Dnccl_root=DIR for the python package's NCCL, or nothing where the CUDA root has NCCL
# (meson's own search finds that one) or no NCCL is found at all (fused-nccl then says so).
nccl_option() {
  local nvcc cuda r h
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  cuda=$(dirname "$(dirname "$(readlink -f "$nvcc")")")
  if [ -f "$cuda/include/nccl.h" ] && ls "$cuda"/lib64/libnccl.so* > /dev/null 2>&1; then return; fi
  r=$(python3 -c "import nvidia.nccl as m; print(list(m.__path__)[0])" 2> /dev/null)
  if [ -z "$r" ] || [ ! -f "$r/include/nccl.h" ]; then  # another layout of the nvidia wheels
    h=$(python3 -c "import nvidia; print(list(nvidia.__path__)[0])" 2> /dev/null)
    [ -n "$h" ] && h=$(find "$h" -name nccl.h -path "*/include/*" 2> /dev/null | head -1)
    r=${h:+$(dirname "$(dirname "$h")")}
  fi
  [ -n "$r" ] && [ -f "$r/include/nccl.h" ] && echo "-Dnccl_root=$r"
}
nccl_opt=$(nccl_option)
echo "NCCL: ${nccl_opt:-no -Dnccl_root, meson searches pkg-config, the CUDA root and the default paths}; NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-unset, tempi_halo sets 0}"
for mpi in mpich cuda-openmpi; do
  ( case $mpi in
      mpich) source .gpu-host/use-mpich.sh .gpu-host/debs; impl=mpich; launcher=$(command -v mpiexec.hydra || command -v mpiexec); margs="" ;;
      cuda-openmpi) source .gpu-host/use-openmpi.sh .gpu-host/ompi; impl=openmpi; launcher=$(command -v mpirun); margs="--allow-run-as-root --oversubscribe" ;;
    esac
    [ -d /opt/c2/usr/share/pkgconfig ] || { mkdir -p /opt/c2 && dpkg -x .gpu-host/debs/catch2_*.deb /opt/c2; sed -i 's|^prefix=/usr$|prefix=/opt/c2/usr|; s|=/usr/|=/opt/c2/usr/|g' /opt/c2/usr/share/pkgconfig/catch2.pc; }
    export PKG_CONFIG_PATH=/opt/c2/usr/share/pkgconfig:${PKG_CONFIG_PATH:-}
    b=build-gpu-$mpi
    meson setup $b -Dmpi=$impl -Dtests=false -Dmpiexec="$launcher" $nccl_opt > /tmp/setup-$mpi.log 2>&1 || { tail -20 /tmp/setup-$mpi.log; exit 1; }
    ninja -C $b tools/tempi_halo tools/bench_p2p > /tmp/build-$mpi.log 2>&1 || { grep error -A5 /tmp/build-$mpi.log | head -30; exit 1; }
    echo "=== $mpi"
    grep -m1 "NCCL (tempi_halo only)" /tmp/setup-$mpi.log
    for n in 32 64 128; do
      for m in auto oneshot; do
        echo "--- n=$n method=$m"
        TEMPI_METHOD=$m $launcher $margs -n 2 $b/tools/tempi_halo --n $n --iters 50 --variants ${VARIANTS:-tempi,host-copy} --csv $top/halo-$mpi-$m.csv 2>&1 | grep -E "^tempi|^host-copy|^library|wrong|FAIL" | grep -v verify
      done
    done
    for n in 32 64 128; do
      echo "--- n=$n tempi against the fused baselines (hand-fused: MPI, fused-nccl: NCCL)"
      $launcher $margs -n 2 $b/tools/tempi_halo --n $n --iters 50 --variants ${NCCL_VARIANTS:-tempi,hand-fused,fused-nccl} \
        --csv $top/halo-nccl-$mpi.csv 2>&1 | tee -a $top/halo-nccl-$mpi.txt |
        grep -E "^  NCCL|^variant|^tempi|^hand-fused|^fused-nccl|wrong|FAIL|fused-nccl:" | grep -v verify
    done
    if [ "${HALO8:-1}" = 1 ]; then
      nvidia-cuda-mps-control -d 2>/dev/null && echo "--- 8 ranks, 4 per GPU, MPS on"
      $launcher $margs -n 8 $b/tools/tempi_halo --n 64 --iters 30 --variants tempi,host-copy --csv $top/halo8-$mpi.csv 2>&1 | grep -E "^tempi|^host-copy|wrong|FAIL" | grep -v verify
      echo quit | nvidia-cuda-mps-control 2>/dev/null
    fi
    if [ "${P2P:-0}" = 1 ]; then
      $launcher $margs -n 2 $b/tools/bench_p2p --quick --csv $top/p2p-$mpi.csv > $top/p2p-$mpi.txt 2>&1; tail -${P2P_LINES:-30} $top/p2p-$mpi.txt
    fi
  )
done
