# -*- coding: utf-8 -*-
# The fabric test's parser and verdicts (issue 24, item 4): plugin_utils/_fabric_test.py. The log is a real
# recorded run (its source is named in the fixture's first lines).

from __future__ import annotations

import pathlib

import pytest

from ansible_collections.sparkops.specdec.plugins.plugin_utils import _fabric_test

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "nccl_tests"
LOG = (FIXTURES / "all_gather_perf_gb10_direct.log").read_text()
PAIR = ["spark-1", "spark-2"]


def test_parses_the_recorded_gb10_run():
    parsed = _fabric_test.parse(LOG)
    assert parsed["version"] == "2.18.5" and parsed["nccl_library"] == "22809"
    assert parsed["ranks"] == [{"rank": 0, "host": "promaxgb10-4c75", "device": 0},
                               {"rank": 1, "host": "promaxgb10-4c99", "device": 0}]
    assert parsed["rows"] == [{
        "size": 17179869184, "count": 2147483648, "type": "float", "redop": "none", "root": "-1",
        "out_of_place": {"time_us": 374425.0, "algbw": 45.88, "busbw": 22.94, "wrong": 0},
        "in_place": {"time_us": 373792.0, "algbw": 45.96, "busbw": 22.98, "wrong": 0}}]
    assert parsed["out_of_bounds"] == 0 and parsed["avg_busbw"] == 22.9611 and parsed["concluded"] is True


def test_mpirun_prefixed_lines_are_read():
    prefixed = "\n".join("[1,0]<stdout>:" + line for line in LOG.splitlines())
    assert _fabric_test.parse(prefixed)["avg_busbw"] == 22.9611


def test_the_recorded_pair_passes_the_direct_threshold():
    verdict = _fabric_test.classify({"rc": 0, "stdout": LOG}, "direct", PAIR)
    assert verdict == {"status": "pass", "busbw": 22.9611, "threshold": 21.875, "message": None}


def test_thresholds_per_layout():
    assert _fabric_test.threshold("direct", 2) == 21.875
    assert _fabric_test.threshold("switch", 4) == 21.875
    assert _fabric_test.threshold("ring", 3) == 10.0
    assert _fabric_test.threshold("ring", 4) is None


def test_below_the_runbook_figure_fails_naming_nodes_and_figure():
    slow = LOG.replace("# Avg bus bandwidth    : 22.9611", "# Avg bus bandwidth    : 11.4805")
    verdict = _fabric_test.classify({"rc": 0, "stdout": slow}, "direct", PAIR)
    assert verdict["status"] == "fail" and verdict["busbw"] == 11.4805
    assert verdict["message"].startswith("The fabric test on spark-1, spark-2 measured 11.48 GB/s bus bandwidth, "
                                         "below the 21.875 GB/s")
    # The same figure passes a 3-node ring (10 GB/s), whose runbook asks less.
    ring = slow.replace("#  Rank  1 Group", "#  Rank  2 Group  0 Pid  1 on s3 device  0 [000f:01:00] NVIDIA GB10\n"
                        "#  Rank  1 Group")
    assert _fabric_test.classify({"rc": 0, "stdout": ring}, "ring", ["s1", "s2", "s3"])["status"] == "pass"


def test_baseline_drop_warns():
    verdict = _fabric_test.classify({"rc": 0, "stdout": LOG}, "direct", PAIR, baseline=30.0)
    assert verdict["status"] == "warn" and "below 80% of the 30.00 GB/s recorded before" in verdict["message"]
    assert _fabric_test.classify({"rc": 0, "stdout": LOG}, "direct", PAIR, baseline=24.0)["status"] == "pass"


def test_missing_nccl_library():
    stderr = ("/opt/nccl-tests/build/all_gather_perf: error while loading shared libraries: libnccl.so.2: cannot open "
              "shared object file: No such file or directory\n")
    verdict = _fabric_test.classify({"rc": 127, "stdout": "", "stderr": stderr}, "direct", PAIR)
    assert verdict["status"] == "missing_library"
    assert verdict["message"].startswith("The fabric test cannot start on spark-1, spark-2: libnccl.so.2: cannot open "
                                         "shared object file")


def test_missing_tool():
    verdict = _fabric_test.classify({"rc": 127, "stdout": "", "stderr": "bash: all_gather_perf: command not found\n"},
                                    "switch", PAIR)
    assert verdict["status"] == "missing_tool" and "install nccl-tests" in verdict["message"]


def test_hang():
    head = LOG.split("# Out of bounds")[0]
    verdict = _fabric_test.classify({"rc": None, "stdout": head, "timed_out": True, "timeout": 10}, "direct", PAIR)
    assert verdict["status"] == "hang"
    assert verdict["message"].startswith("The fabric test (all_gather_perf, 2 ranks on spark-1, spark-2) did not finish "
                                         "within 10 s")


@pytest.mark.parametrize("mutate,fragment", [
    (lambda t: t.split("# Out of bounds")[0], "no '# Avg bus bandwidth' line"),
    (lambda t: t.replace("22.94       0", "22.94       3").replace("values : 0 OK", "values : 3 FAILED"),
     "3 wrong values"),
    (lambda t: t.replace("#  Rank  1 Group  0 Pid  30808 on promaxgb10-4c99 device  0 [000f:01:00] NVIDIA GB10\n", ""),
     "1 ranks reported, 2 nodes in the deployment"),
])
def test_failures(mutate, fragment):
    verdict = _fabric_test.classify({"rc": 0, "stdout": mutate(LOG)}, "direct", PAIR)
    assert verdict["status"] == "fail" and fragment in verdict["message"], verdict
    assert "\n" not in verdict["message"]
