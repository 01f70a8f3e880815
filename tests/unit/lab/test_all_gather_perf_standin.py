"""The lab's STAND-IN for nccl-tests' all_gather_perf (tests/lab/images/engine/all_gather_perf) prints the format of a
real run: from the recorded two-Spark log's own figures it renders that log byte for byte (the log lost its trailing
spaces in the Markdown it was copied from: lines are compared without them), and the collection's parser and verdicts
read its output at the figure the lab sets. Under two real MPI ranks (the venv's mpirun) only rank 0 prints, one
``#  Rank`` line per rank; ``hang`` waits until it is killed.
"""

import importlib.util
import os
import shutil
import subprocess
import sys
from importlib.machinery import SourceFileLoader
from pathlib import Path

import pytest

from ansible_collections.sparkops.specdec.plugins.module_utils import _fabric_test

STANDIN = Path(__file__).resolve().parents[2] / "lab" / "images" / "engine" / "all_gather_perf"
LOG_FILE = Path(__file__).resolve().parents[1] / "plugins" / "fixtures" / "nccl_tests" / "all_gather_perf_gb10_direct.log"
LOG = [line for line in LOG_FILE.read_text().splitlines() if not line.startswith("sparkops-fixture:")]
RUNBOOK = ["-b", "16G", "-e", "16G", "-f", "2"]
MPIRUN = shutil.which("mpirun", path=os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]))


def _load():
    loader = SourceFileLoader("sparkops_all_gather_perf_standin", str(STANDIN))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
    loader.exec_module(module)
    return module


agp = _load()


def _has_mpi4py():
    return subprocess.run([sys.executable, "-c", "import mpi4py"], capture_output=True, check=False).returncode == 0


def test_renders_the_recorded_log_from_its_own_figures():
    device = ((0x000F, 0x01, 0x00), "NVIDIA GB10")
    ranks = [agp.rank_line(0, 37755, "promaxgb10-4c75", device), agp.rank_line(1, 30808, "promaxgb10-4c99", device)]
    lines = agp.render(agp.parse_args(RUNBOOK), ranks, 2, lambda size: [374425, 373792])
    assert [line.rstrip() for line in lines] == LOG


def test_a_lab_figure_reads_back_as_that_figure_and_its_verdict():
    ranks = [agp.rank_line(0, 11, "spark-1"), agp.rank_line(1, 12, "spark-2")]
    for busbw, status in ((22.9611, "pass"), (11.48, "fail")):
        opts = agp.parse_args(RUNBOOK)
        text = "\n".join(agp.render(opts, ranks, 2, lambda size: [agp.time_for(size, 2, busbw)] * 2))
        parsed = _fabric_test.parse(text)
        assert parsed["avg_busbw"] == pytest.approx(busbw, abs=1e-4)
        assert [r["host"] for r in parsed["ranks"]] == ["spark-1", "spark-2"]
        assert [r["size"] for r in parsed["rows"]] == [17179869184]
        verdict = _fabric_test.classify({"rc": 0, "stdout": text}, "direct", ["spark-1", "spark-2"])
        assert verdict["status"] == status, verdict


def test_sizes_and_options():
    assert agp.parse_size("16G") == 17179869184 and agp.parse_size("8M") == 8388608 and agp.parse_size("64") == 64
    assert agp.sizes(agp.parse_args(["-b", "1M", "-e", "8M", "-f", "2"])) == [1048576, 2097152, 4194304, 8388608]
    with pytest.raises(SystemExit, match="invalid option '-z'"):
        agp.parse_args(["-z", "1"])


@pytest.mark.parametrize("value, message", [("fast", "neither a figure in GB/s nor hang"), ("0", "above 0")])
def test_a_bad_lab_figure_is_refused(monkeypatch, value, message):
    monkeypatch.setenv(agp.BUSBW_ENV, value)
    with pytest.raises(SystemExit, match=message):
        agp.figure()


def test_hang_prints_the_header_and_waits_until_killed():
    env = dict(os.environ, SPARKOPS_STANDIN_BUSBW="hang")
    env.pop("OMPI_COMM_WORLD_SIZE", None)
    with pytest.raises(subprocess.TimeoutExpired) as caught:
        subprocess.run([sys.executable, str(STANDIN)] + RUNBOOK, capture_output=True, text=True, timeout=3, env=env,
                       check=False)
    out = caught.value.stdout.decode() if isinstance(caught.value.stdout, bytes) else caught.value.stdout
    assert "# Using devices" in out and "# Avg bus bandwidth" not in out
    verdict = _fabric_test.classify({"rc": 124, "stdout": out, "timed_out": True, "timeout": 3}, "direct", ["spark-1"])
    assert verdict["status"] == "hang"


@pytest.mark.skipif(MPIRUN is None or not _has_mpi4py(), reason="needs mpirun and mpi4py (requirements-test.txt)")
def test_two_mpi_ranks_print_once_with_a_rank_line_each():
    env = dict(os.environ, SPARKOPS_STANDIN_BUSBW="11.48", OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_btl_vader_single_copy_mechanism="none",
               OMPI_MCA_btl_tcp_if_include="lo")
    run = subprocess.run([MPIRUN, "--oversubscribe", "--bind-to", "none", "-np", "2", sys.executable, str(STANDIN)]
                         + RUNBOOK, capture_output=True, text=True, timeout=120, env=env, check=False)
    assert run.returncode == 0, run.stderr
    parsed = _fabric_test.parse(run.stdout)
    assert [r["rank"] for r in parsed["ranks"]] == [0, 1] and run.stdout.count("# Avg bus bandwidth") == 1
    assert parsed["avg_busbw"] == pytest.approx(11.48, abs=1e-4) and parsed["concluded"] is True
