"""Pass a Molecule run's output through unchanged and time its steps (where CI time goes).

Usage: molecule test ... | python3 stamp.py TIMES.tsv
Every line is copied to stdout as it comes. A step starts at a line that opens a Molecule action
("INFO ... ➜ converge: Executing"), a play ("PLAY [") or a task ("TASK [", "RUNNING HANDLER ["),
and ends where the next one starts. TIMES.tsv gets the slowest steps (seconds, step, the action and play it
ran in), then each Molecule action's total: tests/ci/stages.sh prints nothing of it; it is read when CI time
is worked on (docs/testing.md).
"""

from __future__ import annotations

import re
import sys
import time

STEP = re.compile(r"^\s*(?:│\s*)?(TASK|RUNNING HANDLER|PLAY) \[(.*?)(?:\]|$)")
# "INFO     stop_safety ➜ converge: Executing" (Molecule 25), colours removed first.
ACTION = re.compile(r"^INFO\s+\S+ \S+ (\w+): Executing")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def main(argv):
    out = argv[1] if len(argv) > 1 else None
    steps = []  # [seconds, kind, name, action, play]
    actions = {}
    action, play, current, started = "-", "-", None, time.monotonic()
    t0 = started
    for line in sys.stdin:
        sys.stdout.write(line)
        sys.stdout.flush()
        now = time.monotonic()
        plain = ANSI.sub("", line)
        m = STEP.match(plain)
        a = ACTION.match(plain)
        new_action = a.group(1) if a else None
        if not m and not new_action:
            continue
        if current is not None:
            current[0] = now - started
            steps.append(current)
            actions[current[3]] = actions.get(current[3], 0.0) + current[0]
        started = now
        if new_action:
            action, play = new_action, "-"
            current = [0.0, "action", new_action, action, play]
            continue
        kind, name = m.group(1), m.group(2)
        if kind == "PLAY":
            play = name
        current = [0.0, kind.lower(), name, action, play]
    if current is not None:
        current[0] = time.monotonic() - started
        steps.append(current)
        actions[current[3]] = actions.get(current[3], 0.0) + current[0]
    if not out:
        return 0
    with open(out, "w", encoding="utf-8") as fh:
        fh.write("# total %.0f s\n" % (time.monotonic() - t0))
        for name, secs in sorted(actions.items(), key=lambda kv: -kv[1]):
            fh.write("action\t%.1f\t%s\n" % (secs, name))
        for secs, kind, name, act, pl in sorted(steps, key=lambda s: -s[0])[:60]:
            fh.write("%s\t%.1f\t%s\t%s\t%s\n" % (kind, secs, name, act, pl))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
