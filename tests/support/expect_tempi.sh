#!/bin/sh
# Runs a test command with TEMPI_LOG_LEVEL=info and passes only when the command passes
# and TEMPI announced that it started: proof that the MPI calls went through TEMPI's
# wrappers (for the --wrap archive and the preload library, where a mistake in linking
# would leave TEMPI out silently).
out=$(TEMPI_LOG_LEVEL=info "$@" 2>&1)
rc=$?
printf '%s\n' "$out"
[ "$rc" -eq 0 ] || exit "$rc"
if ! printf '%s\n' "$out" | grep -q '^\[tempi [0-9]*\] info: active'; then
  echo "FAIL: TEMPI did not start: its wrappers were not in the call path"
  exit 1
fi
