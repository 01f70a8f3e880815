#!/usr/bin/env bash
# `make test`: every stage CI runs, with each stage's duration and a summary at the end.
#
# The static stages (STATIC: changelog lint, ansible-lint, sanity, unit tests) need neither the lab nor each other's
# results, so they run one after the other in the background, at the lowest CPU and I/O priority, while the Molecule
# stage (MOLECULE_STAGE: it brings the lab up first) runs in the foreground: Molecule spends much of its time waiting
# on the lab (health waits, polls, container starts), which the static stages fill. Each static stage's whole output is
# in .build/stages/<stage>.log; a failed one's tail is printed at the end. SERIAL=1 runs every stage in the
# foreground, one after the other (the order of STATIC, then Molecule).
#   MAKE            the make to call (from the Makefile)
#   STATIC          static stages (default: changelog-lint lint sanity units units-newest)
# units-newest (the unit tests on the newest supported ansible-core, docs/release.md) needs a Python 3.12+; where
# none is found it is reported "not run" with the reason, in the summary, and does not fail the run.
#   MOLECULE_STAGE  the foreground stage (default: molecule)
set -uo pipefail
make=${MAKE:-make}
static=${STATIC:-changelog-lint lint sanity units units-newest}
molecule=${MOLECULE_STAGE:-molecule}
dir=.build/stages
rm -rf "$dir" && mkdir -p "$dir"
all=$(date +%s)

run_stage() {  # run_stage NAME: runs `make NAME`, writes "<rc> <seconds>" to $dir/NAME.result
  local name=$1 start rc
  start=$(date +%s)
  if [ "$name" = units-newest ] && [ -z "$($make --no-print-directory -s newest-python)" ]; then
    echo "skipped 0 no Python 3.12+ found (pyenv or python3.12/3.13 on PATH; NEWEST_PYTHON=... to choose)" > "$dir/$name.result"
    echo "== stage $name: not run: no Python 3.12+ found"
    return 0
  fi
  echo "== stage $name: started $(date -u +%H:%M:%S)"
  if $make --no-print-directory "$name"; then rc=0; else rc=$?; fi
  echo "$rc $(( $(date +%s) - start ))" > "$dir/$name.result"
  echo "== stage $name: $(( $(date +%s) - start )) s, $([ "$rc" = 0 ] && echo ok || echo "FAILED (rc $rc)")"
  return "$rc"
}

bg="" failed_static=""
if [ "${SERIAL:-0}" = 1 ]; then
  # One after the other: a failed static stage ends the run before Molecule.
  for stage in $static; do run_stage "$stage" || { failed_static=1; break; }; done
else
  echo "== static stages ($static) run in the background; their output: $dir/<stage>.log"
  (
    for stage in $static; do
      run_stage "$stage" > "$dir/$stage.log" 2>&1 || true
    done
  ) &
  bg=$!
  # Lowest priority: Molecule's timeouts are measured against the lab, not against these.
  renice -n 19 -p "$bg" >/dev/null 2>&1 || true
  ionice -c 3 -p "$bg" >/dev/null 2>&1 || true
fi
if [ -z "$failed_static" ]; then
  run_stage "$molecule" || true
fi
[ -n "$bg" ] && wait "$bg"

summary="" rc=0
for stage in $static $molecule; do
  if [ -f "$dir/$stage.result" ]; then
    read -r src took why < "$dir/$stage.result"
  else
    src=skipped took=0 why=""
  fi
  case $src in
    0) word=ok ;;
    skipped) word="not run${why:+: $why}" ;;
    *) word="FAILED (rc $src)"; rc=1 ;;
  esac
  summary+=$(printf '%-15s %5d s  %s' "$stage" "$took" "$word")$'\n'
  if [ "$src" != 0 ] && [ "$src" != skipped ] && [ -f "$dir/$stage.log" ]; then
    echo "== stage $stage failed; the end of $dir/$stage.log:"
    tail -n 60 "$dir/$stage.log"
  fi
done
[ -f "$dir/$molecule.result" ] || rc=1
if [ -s .build/molecule/durations.txt ]; then echo "== scenarios"; cat .build/molecule/durations.txt; fi
# pytest's closing line (its output is in the stage's log when it ran in the background).
for log in units units-newest; do [ -f "$dir/$log.log" ] && grep -E '^=* ?[0-9]+ (passed|failed)|^=* ?[0-9]+ .*(passed|failed).* in [0-9.]+s' "$dir/$log.log" | tail -n1; done
how="static stages in the background, beside $molecule"
[ "${SERIAL:-0}" = 1 ] && how="one after the other"
printf '== stages (%s)\n%s== total: %d s\n' "$how" "$summary" $(( $(date +%s) - all ))
# What failed in Molecule last, where a CI log's tail shows it.
if [ "$rc" != 0 ] && [ -s .build/molecule/failure.txt ]; then cat .build/molecule/failure.txt; fi
exit "$rc"
