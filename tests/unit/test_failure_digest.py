"""tests/ci/failure_digest.py: what `make test` prints last when a Molecule scenario fails."""

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "ci" / "failure_digest.py"
_spec = importlib.util.spec_from_file_location("failure_digest", SCRIPT)
failure_digest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(failure_digest)

LOG = """\
\x1b[36mINFO    \x1b[0m server_faults > converge: Executing
  \x1b[2m\u2502\x1b[0m TASK [Read the state]
  \x1b[2m\u2502\x1b[0m ok: [spark-1]
  \x1b[2m\u2502\x1b[0m TASK [Choose the image]
  \x1b[2m\u2502\x1b[0m [ERROR]: Task failed: the image has no sshd
  \x1b[2m\u2502\x1b[0m   and no derived image is loaded.
  \x1b[2m\u2502\x1b[0m fatal: [spark-1]: FAILED! =>
  \x1b[2m\u2502\x1b[0m     msg: the image has no sshd
  \x1b[2m\u2502\x1b[0m fatal: [spark-2]: FAILED! =>
  \x1b[2m\u2502\x1b[0m     msg: the image has no sshd
  \x1b[2m\u2502\x1b[0m
  \x1b[2m\u2502\x1b[0m TASK [Stop with a report of each node]
  \x1b[2m\u2502\x1b[0m fatal: [spark-1]: FAILED! =>
  \x1b[2m\u2502\x1b[0m     msg: stopped; spark-1 failed at Choose the image
  \x1b[2m\u2502\x1b[0m PLAY RECAP *****
"""


def test_last_failed_tasks_without_colour_or_frame():
    lines = failure_digest.digest(LOG.splitlines(True))
    assert lines == [
        "TASK [Choose the image]",
        "[ERROR]: Task failed: the image has no sshd",
        "  and no derived image is loaded.",
        "TASK [Stop with a report of each node]",
        "fatal: [spark-1]: FAILED! =>",
        "    msg: stopped; spark-1 failed at Choose the image",
    ]


def test_only_the_last_tasks_and_long_blocks_cut():
    log = "".join("TASK [t%d]\nfatal: [h]: FAILED! =>\n%s\n" % (n, "\n".join("  line %d" % i for i in range(30)))
                  for n in range(5))
    lines = failure_digest.digest(log.splitlines(True), tasks=1, block=3)
    assert lines == ["TASK [t4]", "fatal: [h]: FAILED! =>", "  line 0", "  line 1", "  ... (28 more lines)"]


def test_no_failure():
    assert failure_digest.digest(["TASK [a]\n", "ok: [h]\n"]) == []


def test_cli(tmp_path, capsys):
    log = tmp_path / "x.log"
    log.write_text(LOG, encoding="utf-8")
    assert failure_digest.main(["failure_digest.py", str(log), "1"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "TASK [Stop with a report of each node]"


def test_cli_without_failed_task_prints_the_end_of_the_log(tmp_path, capsys):
    log = tmp_path / "x.log"
    log.write_text("".join("line %d\n" % i for i in range(30)) + "\x1b[31mCRITICAL scenario not found\x1b[0m\n")
    assert failure_digest.main(["failure_digest.py", str(log)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "(no failed task; the log ends with:)"
    assert out[-1] == "CRITICAL scenario not found" and len(out) == 13
