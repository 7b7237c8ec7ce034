#!/usr/bin/env bash
# A SHELL for make that times each recipe line: its wall, user and system seconds (its
# children's included), when it started, and its exit status, one line each in $STEP_LOG
# (default .cache/make-steps.log). Where `make test`'s time goes (docs/development.md):
#   STEP_T0=$(date +%s) make test SHELL="$PWD/bench/make_steps.sh"
#   sort -k2 -n -r .cache/make-steps.log | head     # the most user CPU first
log=${STEP_LOG:-.cache/make-steps.log}
t0=${STEP_T0:-$(date +%s)}
start=$(date +%s.%N)
times=$(mktemp)
/usr/bin/time -f "%e %U %S" -o "$times" /bin/bash "$@"
rc=$?
mkdir -p "$(dirname "$log")"
awk -v s="$start" -v t0="$t0" -v rc="$rc" -v cmd="$(echo "${@: -1}" | tr '\n' ' ' | cut -c1-160)" \
    '{ printf "%s %s %s start=%.0f exit=%s | %s\n", $1, $2, $3, s - t0, rc, cmd }' "$times" >> "$log"
rm -f "$times"
exit $rc
