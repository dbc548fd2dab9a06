#!/bin/bash
# Robustness round on a GPU host (issue 13): builds TEMPI against MPICH, runs every
# program of the gpu suite under compute-sanitizer memcheck and racecheck, then the
# long forms of the soak and thread tests (TEMPI_TEST_SOAK=long), and prints a summary:
# one line per run with its exit status and the sanitizer's error count, and the soak
# test's figures (messages, plan cache and pool high-water marks, memory at the end).
# Logs go to $OUT/robustness (or ./gpu-out/robustness), archived as robustness.tgz.
#   bash tools/gpu/robustness_round.sh      (env: TOOLS="memcheck racecheck", LONG=0 skips the long forms,
#                                            LIMIT=seconds per sanitizer run, default 900,
#                                            GPU_ARCH=meson's gpu_arch, default 90: one
#                                            architecture builds in a third of the time)
set -uo pipefail
top=${OUT:-gpu-out}
out=$top/robustness
mkdir -p "$out"
trap 'tar czf "$top/robustness.tgz" -C "$top" robustness' EXIT
source .gpu-host/use-mpich.sh .gpu-host/debs
launcher=$(command -v mpiexec.hydra || command -v mpiexec)
# catch2's headers come with the carried MPICH debs
[ -d /opt/c2/usr/share/pkgconfig ] || { mkdir -p /opt/c2 && dpkg -x .gpu-host/debs/catch2_*.deb /opt/c2; }
sed -i 's|^prefix=/usr$|prefix=/opt/c2/usr|; s|=/usr/|=/opt/c2/usr/|g' /opt/c2/usr/share/pkgconfig/catch2.pc
export PKG_CONFIG_PATH=/opt/c2/usr/share/pkgconfig:${PKG_CONFIG_PATH:-}
nvidia-smi -L | tee "$out/device.txt"
b=build-robust-mpich
meson setup $b -Dmpi=mpich -Dgpu_arch="${GPU_ARCH:-90}" -Dmpiexec="$launcher" > "$out/setup.log" 2>&1 || { tail -30 "$out/setup.log"; exit 1; }
ninja -C $b > "$out/build.log" 2>&1 || { grep -E "error" -A5 "$out/build.log" | head -60; exit 1; }
echo "== built $b"

summary=()
# run NAME RANKS [ENV=VALUE ...] -- PROGRAM ARGS...: one run, logged; its line goes to the summary.
run() {
  local name=$1 ranks=$2; shift 2
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  local log="$out/$name.log" start=$SECONDS
  env "${envs[@]}" timeout "${LIMIT:-900}" $launcher -n "$ranks" "$@" > "$log" 2>&1
  local rc=$?
  local errors mapped
  errors=$(grep -h "ERROR SUMMARY" "$log" | awk '{s += $4} END {print s + 0}')
  # zero-copy's "resource already mapped" answer is handled (pmpi/node/peer_mapping.cpp:
  # unmap that peer's stale mappings, retry), but memcheck reports every refused API call
  mapped=$(grep -c "Program hit cudaErrorAlreadyMapped" "$log")
  local line
  line=$(printf "%-44s exit %3d  sanitizer errors %4s (%s handled 'already mapped')  %5ds" "$name" "$rc" "$errors" \
    "$mapped" $((SECONDS - start)))
  echo "$line"
  summary+=("$line")
}

# The gpu suite's programs (tests/gpu/meson.build), each under each tool. Large-object
# cases are left out under the sanitizers (they take hours there, and add no new code path).
for tool in ${TOOLS:-memcheck racecheck}; do
  cs=(compute-sanitizer --tool "$tool" --error-exitcode 9)
  [ "$tool" = racecheck ] && cs+=(--racecheck-report analysis)
  run "$tool-gpu_pack" 1 -- "${cs[@]}" $b/tests/gpu/test_gpu_pack "~[large]"
  run "$tool-gpu_p2p" 2 -- "${cs[@]}" $b/tests/gpu/test_gpu_p2p "~[large]"
  run "$tool-gpu_p2p_staged_pipelined" 2 TEMPI_METHOD=staged TEMPI_PIPELINE_THRESHOLD=65536 TEMPI_PIPELINE_CHUNK=100003 \
    -- "${cs[@]}" $b/tests/gpu/test_gpu_p2p "~[large]"
  run "$tool-gpu_p2p_threads" 2 TEMPI_TEST_THREADS=1 -- "${cs[@]}" $b/tests/gpu/test_gpu_p2p "~[large]"
  run "$tool-gpu_storm" 2 -- "${cs[@]}" --report-api-errors no $b/tests/gpu/test_gpu_storm
  for mode in 0 1 2; do
    run "$tool-gpu_pack_sequence_defer$mode" 2 TEMPI_DEFER_PACK=$mode -- "${cs[@]}" $b/tests/gpu/test_gpu_pack_sequence
  done
  run "$tool-gpu_coll" 2 -- "${cs[@]}" $b/tests/gpu/test_gpu_coll
  run "$tool-gpu_persistent" 2 -- "${cs[@]}" $b/tests/gpu/test_gpu_persistent
  run "$tool-gpu_zero_copy" 2 -- "${cs[@]}" $b/tests/gpu/test_gpu_zero_copy
  # every variant but fused-nccl: NCCL's own kernels are not ours to check
  run "$tool-gpu_halo" 2 -- "${cs[@]}" $b/tools/tempi_halo --check --require-gpu --n 8 --iters 2 \
    --variants tempi,library-alone,host-copy,neighbor,neighbor-library,persistent,hand-fused
  run "$tool-gpu_soak" 2 -- "${cs[@]}" $b/tests/gpu/test_gpu_soak --rounds 8
  run "$tool-gpu_threads" 2 -- "${cs[@]}" $b/tests/gpu/test_gpu_threads --types 20
done

if [ "${LONG:-1}" = 1 ]; then
  LIMIT=3600 run "soak-long" 2 TEMPI_TEST_SOAK=long TEMPI_LOG_LEVEL=info -- $b/tests/gpu/test_gpu_soak
  LIMIT=3600 run "threads-long" 2 TEMPI_TEST_SOAK=long -- $b/tests/gpu/test_gpu_threads
fi

echo
echo "== summary (logs in $out)"
printf '%s\n' "${summary[@]}"
grep -h "^test_soak:\|^test_threads:" "$out"/soak-long.log "$out"/threads-long.log 2>/dev/null
grep -h "plan cache\|pool\|GPU synchronizations" "$out"/soak-long.log 2>/dev/null | head -4
