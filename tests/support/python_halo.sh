#!/bin/bash
# python_halo.sh MPI_NAME PRELOAD HALO_PY MPIEXEC [MPIEXEC_ARGS...]: runs tools/python/halo.py
# on 2 ranks under mpi4py with TEMPI's preload library (PRELOAD, built against MPI_NAME:
# "Open MPI" or "MPICH") on each rank; passes when every cell is right and the program
# reports TEMPI interposed over that MPI. Skips (77) where no python3 imports mpi4py, or
# where mpi4py is built over another MPI than TEMPI (the preload library works only
# over the library it was built against).
mpi_name=$1 preload=$2 halo=$3
shift 3
python=""
for p in python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null && "$p" -c 'import mpi4py' 2>/dev/null; then python=$(command -v "$p"); break; fi
done
if [ -z "$python" ]; then
  echo "SKIP: no python3 imports mpi4py (Debian: apt-get install python3-mpi4py)"
  exit 77
fi
# Which MPI mpi4py is built over, without starting MPI (MPI_Get_library_version may be
# called before MPI_Init).
library=$("$python" -c 'import mpi4py; mpi4py.rc.initialize = False; from mpi4py import MPI
print(MPI.Get_library_version().split(chr(0))[0].splitlines()[0].split(",")[0])' 2>&1)
case "$library" in
  *"$mpi_name"*) ;;
  *)
    case "$library" in *"Open MPI"*) option=-Dmpi=openmpi ;; *MPICH*) option=-Dmpi=mpich ;; *) option="-Dmpi=" ;; esac
    echo "SKIP: $python's mpi4py is built over $library, this TEMPI over $mpi_name (configure TEMPI with $option for mpi4py's MPI)"
    exit 77
    ;;
esac
out=$("$@" -n 2 env LD_PRELOAD="$preload" "$python" "$halo" --n 8 --iters 3 --warmup 1 --csv /dev/null 2>&1)
rc=$?
printf '%s\n' "$out"
[ "$rc" -eq 0 ] || { echo "FAIL: halo.py exited $rc"; exit 1; }
printf '%s\n' "$out" | grep -q '^every cell right$' || { echo "FAIL: halo.py did not check every cell"; exit 1; }
printf '%s\n' "$out" | grep -q "^  TEMPI  *TEMPI [0-9.]* preload library over $mpi_name.*: every call it wraps reaches it" ||
  { echo "FAIL: halo.py does not see TEMPI interposed over $mpi_name"; exit 1; }
exit 0
