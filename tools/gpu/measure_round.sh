#!/bin/bash
# Performance-model round (issue 9), one call on the lent GPU machine: build tempi-measure
# and tempi_halo against each MPI, measure the machine (tempi-measure --quick, or the full
# form with FULL=1), print its summary and the profile, then time the 26-neighbour halo
# exchange with auto and no profile, auto with the new profile, and each forced method,
# so that one can see whether the model picks the fastest method.
#   bash tools/gpu/measure_round.sh            # MPICH (the library on the GPU host that is not CUDA-aware)
#   MPIS="mpich cuda-openmpi" bash tools/gpu/measure_round.sh
# Knobs: FULL=1 (full measurement, a few minutes more), HALO_SIZES (default "64 128"),
# HALO_ITERS (default 50). Output: $OUT (or ./gpu-out): profile-MPI.json, measure-MPI.txt,
# halo-MPI.txt and halo-MPI.csv.
# About 4 minutes of GPU time for MPICH in the --quick form (build 2-3 min, measure under
# a minute, halo runs about a minute).
set -uo pipefail
top=${OUT:-gpu-out}
mkdir -p "$top"
nvidia-smi -L | tee "$top/device.txt"
date -u | tee -a "$top/device.txt"
for mpi in ${MPIS:-mpich}; do
  ( case $mpi in
      mpich) source .gpu-host/use-mpich.sh .gpu-host/debs; impl=mpich; launcher=$(command -v mpiexec.hydra || command -v mpiexec); margs="" ;;
      cuda-openmpi) source .gpu-host/use-openmpi.sh .gpu-host/ompi; impl=openmpi; launcher=$(command -v mpirun); margs="--allow-run-as-root --oversubscribe" ;;
      *) echo "unknown MPI $mpi (mpich or cuda-openmpi)"; exit 2 ;;
    esac
    b=build-gpu-$mpi
    meson setup $b -Dmpi=$impl -Dtests=false -Dmpiexec="$launcher" > /tmp/setup-$mpi.log 2>&1 || { tail -20 /tmp/setup-$mpi.log; exit 1; }
    ninja -C $b tools/tempi-measure tools/tempi_halo > /tmp/build-$mpi.log 2>&1 || { grep error -A5 /tmp/build-$mpi.log | head -30; exit 1; }
    echo "=== $mpi: built"
    profile=$top/profile-$mpi.json
    form=--quick
    [ "${FULL:-0}" = 1 ] && form=""
    timeout 540 $launcher $margs -n 2 $b/tools/tempi-measure $form --output "$profile" > "$top/measure-$mpi.txt" 2> "$top/measure-$mpi.err"
    rc=$?
    cat "$top/measure-$mpi.txt"
    echo "tempi-measure exit: $rc"
    [ $rc = 0 ] || { tail -20 "$top/measure-$mpi.err"; exit 1; }
    echo "--- profile ($profile)"
    cat "$profile"
    # The profile TEMPI finds at start-up (one info line on rank 0).
    TEMPI_PROFILE=$profile TEMPI_LOG_LEVEL=info $launcher $margs -n 2 $b/tools/tempi_halo --check --n 16 2>&1 | grep -m1 "profile:"
    halo() {  # label, then environment assignments
      local label=$1; shift
      env "$@" $launcher $margs -n 2 $b/tools/tempi_halo --n $n --iters ${HALO_ITERS:-50} --variants tempi \
          --csv "$top/halo-$mpi.csv" 2>&1 | tee -a "$top/halo-$mpi.txt" | grep -E "^tempi|wrong|FAIL" | grep -v verify |
        sed "s/^tempi/tempi[$label]/"
    }
    methods="oneshot staged"
    [ "$mpi" = cuda-openmpi ] && methods="device oneshot staged"
    for n in ${HALO_SIZES:-64 128}; do
      echo "--- halo n=$n"
      halo "auto, no profile" TEMPI_PROFILE=none
      halo "auto, profile" TEMPI_PROFILE=$profile
      for m in $methods; do halo "$m" TEMPI_PROFILE=none TEMPI_METHOD=$m; done
    done
  )
done
