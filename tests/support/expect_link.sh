#!/bin/bash
# expect_link.sh STATUS TEMPI_INFO PROGRAM MPIEXEC [MPIEXEC_ARGS...] -- [VAR=VALUE...]
# The link-route tests (tests/link/meson.build): runs PROGRAM on one rank at TEMPI's default
# log level with the VAR=VALUE settings (LD_PRELOAD) on the rank, then `tempi-info --check
# PROGRAM` with the same settings. Passes when the program passes, tempi-info exits with
# STATUS, and TEMPI's warning that calls bypass it (docs/using.md, "Is TEMPI linked?")
# appears in the run exactly when STATUS is 4 (linked in part or bypassed): the run and
# the check agree.
status=$1 info=$2 program=$3
shift 3
launcher=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do launcher+=("$1"); shift; done
shift
settings=("$@")
unset TEMPI_LOG_LEVEL
out=$("${launcher[@]}" -n 1 env "${settings[@]}" "$program" 2>&1)
rc=$?
printf '%s\n' "$out"
[ "$rc" -eq 0 ] || { echo "FAIL: the program failed (exit status $rc)"; exit 1; }
check=$(env "${settings[@]}" "$info" --check "$program" 2>&1)
got=$?
printf '%s\n' "$check"
[ "$got" -eq "$status" ] || { echo "FAIL: tempi-info --check exited $got, expected $status"; exit 1; }
if printf '%s\n' "$out" | grep -q '^\[tempi[^]]*\] warn: .*Is TEMPI linked?'; then warned=1; else warned=0; fi
if [ "$status" -eq 4 ] && [ "$warned" -eq 0 ]; then
  echo "FAIL: tempi-info says TEMPI is linked in part or bypassed, but the run did not warn"
  exit 1
fi
if [ "$status" -ne 4 ] && [ "$warned" -eq 1 ]; then
  echo "FAIL: the run warned that calls bypass TEMPI, but tempi-info exited $got"
  exit 1
fi
exit 0
