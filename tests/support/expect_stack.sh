#!/bin/sh
# Runs a test command whose program stacks TEMPI above tests/support/counting_tool.cpp;
# passes when the command passes, TEMPI started, and on every rank the tool saw one
# MPI_Init, one MPI_Finalize and some sends: both tools were in the call path.
out=$(TEMPI_LOG_LEVEL=info "$@" 2>&1)
rc=$?
printf '%s\n' "$out"
[ "$rc" -eq 0 ] || exit "$rc"
printf '%s\n' "$out" | grep -q '^\[tempi [0-9]*\] info: active' || { echo "FAIL: TEMPI did not start"; exit 1; }
tool=$(printf '%s\n' "$out" | grep '^\[counting tool\]')
[ -n "$tool" ] || { echo "FAIL: the counting tool did not report (its MPI_Finalize was not called)"; exit 1; }
if printf '%s\n' "$tool" | grep -v 'MPI_Init 1 ' | grep -q .; then echo "FAIL: MPI_Init did not reach the tool once"; exit 1; fi
if printf '%s\n' "$tool" | grep -q 'MPI_Send 0 MPI_Isend 0 '; then echo "FAIL: no send reached the tool"; exit 1; fi
exit 0
