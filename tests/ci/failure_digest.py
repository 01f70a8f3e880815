"""Print what failed in an Ansible or Molecule log: each failed task's title and message, without colour.

CI keeps only the last lines of a run, where Molecule prints its recap; this finds the failures above it.
Usage: python3 failure_digest.py LOG [TASKS]
"""

import re
import sys

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
BOX = re.compile(r"^\s*[\u2500-\u257f]+\s?")  # Molecule's frame ("  │ ") before each line of Ansible output
START = re.compile(r"^(fatal: |failed: |\[ERROR\]: |ERROR! |TASK \[)")


def digest(lines, tasks=2, block=14):
    """The last ``tasks`` failed tasks of a log: each one's title and its first failure block (fatal, failed or
    [ERROR] and the lines that continue it), at most ``block`` lines each."""
    clean = [BOX.sub("", ANSI.sub("", line.rstrip("\n"))) for line in lines]
    failed, task, current = [], "", None
    for line in clean:
        if line.startswith("TASK ["):
            task, current = line, None
            continue
        if START.match(line):
            if current is None and (not failed or failed[-1][0] is not task):
                current = [line]
                failed.append((task, current))
            else:
                current = None  # the same task failing on another host, or a second block: one is enough
            continue
        if current is not None:
            if not line.strip() or line.startswith(("PLAY ", "ok: ", "changed: ", "skipping: ", "included: ")):
                current = None
                continue
            current.append(line)
    out = []
    for title, text in failed[-tasks:]:
        out.append(title or "(before any task)")
        out.extend(text[:block] + (["  ... (%d more lines)" % (len(text) - block)] if len(text) > block else []))
    return out


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8", errors="replace") as handle:
        log = handle.readlines()
    lines = digest(log, int(argv[2]) if len(argv) > 2 else 2)
    if not lines:  # no task failed (a Molecule or configuration error): the log's last lines say why
        lines = ["(no failed task; the log ends with:)"] + [line for line in (
            BOX.sub("", ANSI.sub("", raw.rstrip("\n"))) for raw in log) if line.strip()][-12:]
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
