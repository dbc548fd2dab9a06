#!/bin/sh
# expect_output.sh -e PATTERN [-e PATTERN ...] -- COMMAND...: runs the command and passes only
# when it passes and its output (stdout and stderr) has a line matching every pattern
# (grep -E): for programs whose result is what they print, such as tempi-measure's summary.
patterns=""
while [ "$1" = "-e" ]; do
  patterns="$patterns
$2"
  shift 2
done
[ "$1" = "--" ] || { echo "usage: expect_output.sh -e PATTERN [-e PATTERN ...] -- COMMAND..."; exit 2; }
shift
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
[ "$rc" -eq 0 ] || exit "$rc"
missing=0
while IFS= read -r p; do
  [ -n "$p" ] || continue
  if ! printf '%s\n' "$out" | grep -Eq -- "$p"; then
    echo "FAIL: no line of the output matches: $p"
    missing=1
  fi
done <<EOT
$patterns
EOT
exit "$missing"
