"""tests/bench/fleet_bench.py: interleaving, figures, and its refusal to report a failed run."""
from __future__ import annotations

import importlib.util
import pathlib
import stat
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "bench"))
_SPEC = importlib.util.spec_from_file_location("fleet_bench", ROOT / "tests" / "bench" / "fleet_bench.py")
fleet_bench = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(fleet_bench)


def test_rounds_alternate_which_kind_runs_first():
    assert [fleet_bench.order(i) for i in (1, 2, 3)] == [["pair", "fleet"], ["fleet", "pair"], ["pair", "fleet"]]


def test_summary_medians_spread_and_ratios():
    figures = fleet_bench.summary({"pair": [100.0, 120.0, 110.0], "fleet": [150.0, 180.0, 160.0]})
    assert figures["pair"] == {"seconds": [100.0, 120.0, 110.0], "median": 110.0, "min": 100.0, "max": 120.0}
    assert figures["fleet"]["median"] == 160.0
    assert figures["ratio_of_medians"] == round(160.0 / 110.0, 2)
    assert figures["ratio_per_round"] == [1.5, 1.5, round(160 / 110, 2)]


def _stand_in(tmp_path, rc):
    """A checkout whose .venv/bin/ansible-playbook records its argv and prints a json-callback document."""
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    script = bin_dir / "ansible-playbook"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$@" >> {tmp_path}/argv\n'
        'echo \'{"plays": [], "stats": {"spark-1": {"changed": 2}}}\'\n'
        'echo "stand-in stderr" >&2\n'
        f"exit {rc}\n", encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return tmp_path


def test_a_run_is_timed_and_its_output_kept(tmp_path):
    repo = _stand_in(tmp_path, 0)
    logs = tmp_path / "logs"
    logs.mkdir()
    seconds, doc = fleet_bench.playbook(str(repo), {"PATH": "/usr/bin:/bin"}, fleet_bench.KINDS["fleet"], "r1-fleet", str(logs))
    assert seconds >= 0
    assert doc["stats"]["spark-1"]["changed"] == 2
    argv = (tmp_path / "argv").read_text(encoding="utf-8")
    assert argv.startswith("-i inventories/lab/fleet.yml playbooks/fleet.yml -e fleet_log_dir=")
    assert (logs / "r1-fleet.stderr").read_text(encoding="utf-8") == "stand-in stderr\n"


def test_a_failed_run_stops_the_bench(tmp_path, capsys):
    repo = _stand_in(tmp_path, 2)
    with pytest.raises(SystemExit) as exc:
        fleet_bench.playbook(str(repo), {"PATH": "/usr/bin:/bin"}, fleet_bench.KINDS["pair"], "r1-pair", None)
    assert "exited 2" in str(exc.value)
    assert "stand-in stderr" in capsys.readouterr().err
