#!/usr/bin/env bash
# Run one Molecule scenario (`molecule test ARGS...`), keep its whole output in .build/molecule/<scenario>.log
# (and where its time went in <scenario>.times.tsv)
# and, when it fails, write what failed (failed tasks and their messages, no colour) to
# .build/molecule/failure.txt, which `make test` prints last: CI keeps only the tail of a run.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
scenario=default
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  [ "${args[$i]}" = -s ] && scenario=${args[$((i + 1))]}
done
logs="$root/.build/molecule"
mkdir -p "$logs"
log="$logs/$scenario${SPECDEC_METHOD:+-$SPECDEC_METHOD}.log"
name="$scenario${SPECDEC_METHOD:+ (SPECDEC_METHOD=$SPECDEC_METHOD)}"
started=$(date +%s)
# stamp.py passes the output on and writes the slowest steps and each action's time to <scenario>.times.tsv.
"${MOLECULE:-molecule}" test "$@" 2>&1 | tee "$log" | python3 "$here/stamp.py" "${log%.log}.times.tsv"
rc=${PIPESTATUS[0]}
took=$(( $(date +%s) - started ))
# Each scenario's duration, here and in durations.txt (make test prints it after the last scenario).
line=$(printf '%-45s %5d s  %s' "$name" "$took" "$([ "$rc" = 0 ] && echo ok || echo "FAILED (rc $rc)")")
echo "== scenario $line"
echo "$line" >> "$logs/durations.txt"
if [ "$rc" != 0 ]; then
  {
    echo "== molecule scenario $name failed (rc $rc); whole log: $log"
    python3 "$here/failure_digest.py" "$log"
  } > "$logs/failure.txt"
fi
exit "$rc"
