# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
#
# PRIVATE to the sparkops.specdec collection. Not a public API; names and messages may change in any release.
"""The fabric test before serving (issue 24, item 4), as pure functions: no I/O, no Ansible.

Every NVIDIA multi-Spark runbook ends its network set-up with nccl-tests' ``all_gather_perf -b 16G -e 16G -f 2``
over ``mpirun -np N -H ip1:1,...`` and a pass figure (docs/layouts.md):

* ``# Avg bus bandwidth`` >= 21.875 GB/s (175 Gb/s) for ``direct`` and ``switch``, >= 10 GB/s (80 Gb/s) for the
  3-node ``ring`` (NVIDIA/dgx-spark-playbooks ``nvidia/playbook-nccl``, ``nvidia/connect-three-sparks``);
* ``libnccl.so.2: cannot open shared object file`` means NCCL is not installed (built) on every node.

The output format is nccl-tests' (``src/common.cu``): a header of ``#`` lines (``# nccl-tests version``, ``# Using
devices``, one ``#  Rank  N Group ... on HOST device ...`` line per rank), one row per size with the out-of-place
then the in-place ``time algbw busbw #wrong`` columns, ``# Out of bounds values : N OK|FAILED`` and ``# Avg bus
bandwidth    : X``. The unit tests read a real recorded log (tests/unit/plugins/fixtures/nccl_tests/).

Running the test (mpirun over the SSH mesh, from the host for vLLM containers) is not wired into a playbook yet.
"""

from __future__ import annotations

import re

# Pass figures of NVIDIA's runbooks, bus bandwidth in GB/s (the ``# Avg bus bandwidth`` unit).
THRESHOLDS = {"direct": 21.875, "switch": 21.875, "ring": 10.0}
# The command the runbooks run (16 GB buffers: never while a server of the deployment holds the unified memory).
ARGS = ("-b", "16G", "-e", "16G", "-f", "2")
STATUSES = ("pass", "warn", "fail", "hang", "missing_library", "missing_tool")

_RANK = re.compile(r"^#\s*Rank\s+(\d+)\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)\s+device\s+(\d+)")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*([0-9.eE+-]+)")
_OOB = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)\s*(\S*)")
_VERSION = re.compile(r"^#\s*nccl-tests version\s+(\S+)(?:\s+.*nccl-library=(\d+))?")
_MISSING_LIB = re.compile(r"(libnccl[^:\s]*\.so[.0-9]*): cannot open shared object file")


def _number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def _half(tokens):
    """One side's ``time algbw busbw #wrong`` columns."""
    return {"time_us": _number(tokens[0]), "algbw": _number(tokens[1]), "busbw": _number(tokens[2]),
            "wrong": int(tokens[3]) if tokens[3].isdigit() else None}


def parse(text):
    """nccl-tests output -> ``{version, nccl_library, ranks: [{rank, host, device}], rows: [{size, count, type, redop,
    root, out_of_place: {time_us, algbw, busbw, wrong}, in_place: {...}}], out_of_bounds, avg_busbw, concluded}``.

    Lines mpirun prefixes with ``[1,0]<stdout>:`` are read without the prefix; other lines (warnings, our fixture
    notes) are skipped. ``avg_busbw`` is None when the ``# Avg bus bandwidth`` line is missing (the run did not end).
    """
    out = {"version": None, "nccl_library": None, "ranks": [], "rows": [], "out_of_bounds": None, "avg_busbw": None,
           "concluded": False}
    for raw in (text or "").splitlines():
        line = re.sub(r"^\[\d+,\d+\]<std(?:out|err)>:", "", raw).rstrip()
        match = _VERSION.match(line)
        if match:
            out["version"], out["nccl_library"] = match.group(1), match.group(2)
            continue
        match = _RANK.match(line)
        if match:
            out["ranks"].append({"rank": int(match.group(1)), "host": match.group(2), "device": int(match.group(3))})
            continue
        match = _OOB.match(line)
        if match:
            out["out_of_bounds"] = int(match.group(1))
            continue
        match = _AVG.match(line)
        if match:
            out["avg_busbw"] = _number(match.group(1))
            continue
        if line.startswith("# Collective test concluded"):
            out["concluded"] = True
            continue
        if line.startswith("#"):
            continue
        tokens = line.split()
        # size count type redop root + 2 x (time algbw busbw #wrong); older releases print no root column.
        if len(tokens) in (12, 13) and tokens[0].isdigit() and tokens[1].isdigit():
            root = tokens[4] if len(tokens) == 13 else None
            rest = tokens[5:] if len(tokens) == 13 else tokens[4:]
            out["rows"].append({"size": int(tokens[0]), "count": int(tokens[1]), "type": tokens[2], "redop": tokens[3],
                                "root": root, "out_of_place": _half(rest[:4]), "in_place": _half(rest[4:8])})
    return out


def threshold(layout, nodes):
    """The runbook's pass figure (GB/s) for ``layout``; a 4-node ring has none of NVIDIA's (its own baseline only)."""
    if layout == "ring" and nodes != 3:
        return None
    return THRESHOLDS.get(layout)


def classify(result, layout, nodes, baseline=None, warn_fraction=0.8):
    """The verdict of one fabric test run: ``{status, busbw, threshold, message}``, ``message`` one line (None on pass).

    ``result``: ``{rc, stdout, stderr, timed_out, timeout}`` of the run; ``nodes``: the deployment's nodes (one rank
    each); ``baseline``: the figure recorded in the state file by an earlier pass (None: none yet); below
    ``warn_fraction`` of it is a warning. Statuses: pass, warn, fail, hang (no end within the timeout),
    missing_library (NCCL not on every node), missing_tool (no all_gather_perf).
    """
    nodes = list(nodes)
    where = ", ".join(nodes)
    text = "%s\n%s" % (result.get("stdout") or "", result.get("stderr") or "")
    parsed = parse(result.get("stdout") or "")
    need = threshold(layout, len(nodes))
    verdict = {"status": "pass", "busbw": parsed["avg_busbw"], "threshold": need, "message": None}
    if result.get("timed_out"):
        verdict.update(status="hang", message=(
            "The fabric test (all_gather_perf, %d ranks on %s) did not finish within %s s: NCCL hangs (a pip NCCL, a "
            "node whose MTU or link speed changed, a peer not answering); run it by hand with NCCL_DEBUG=INFO, check "
            "ip -d link (MTU) and ethtool (speed) on every node." % (len(nodes), where, result.get("timeout", "?"))))
        return verdict
    missing = _MISSING_LIB.search(text)
    if missing:
        verdict.update(status="missing_library", message=(
            "The fabric test cannot start on %s: %s: cannot open shared object file, NCCL is not installed on every "
            "node; install the same NCCL on each (NVIDIA's playbook-nccl builds it), or point the test at the engine "
            "image's all_gather_perf." % (where, missing.group(1))))
        return verdict
    no_tool = re.search(r"all_gather_perf: (?:command )?not found|all_gather_perf.*No such file or directory", text)
    if result.get("rc") == 127 or no_tool:
        verdict.update(status="missing_tool", message=(
            "No all_gather_perf on %s: install nccl-tests (git clone https://github.com/NVIDIA/nccl-tests; make MPI=1) "
            "or set the path of one already present; the collection never builds it during a run." % where))
        return verdict
    problems = []
    if len(parsed["ranks"]) != len(nodes):
        problems.append("%d ranks reported, %d nodes in the deployment" % (len(parsed["ranks"]), len(nodes)))
    wrong = sum((r[side]["wrong"] or 0) for r in parsed["rows"] for side in ("out_of_place", "in_place"))
    if wrong or parsed["out_of_bounds"]:
        problems.append("%d wrong values (data corrupted in transit)" % max(wrong, parsed["out_of_bounds"] or 0))
    if result.get("rc"):
        problems.append("exit status %s" % result["rc"])
    if parsed["avg_busbw"] is None:
        problems.append("no '# Avg bus bandwidth' line (the run did not complete)")
    if problems:
        verdict.update(status="fail", message="The fabric test on %s failed: %s; nothing was started." % (
            where, "; ".join(problems)))
        return verdict
    busbw = float(parsed["avg_busbw"])
    if need is not None and busbw < need:
        verdict.update(status="fail", message=(
            "The fabric test on %s measured %.2f GB/s bus bandwidth, below the %.3f GB/s NVIDIA's runbook asks of a "
            "%s layout: check each node's MTU, link speed (200 Gb/s, not 100) and NCCL_IB_HCA (both RoCE twins); "
            "nothing was started." % (where, busbw, need, layout)))
        return verdict
    if baseline and busbw < warn_fraction * float(baseline):
        verdict.update(status="warn", message=(
            "The fabric test on %s measured %.2f GB/s bus bandwidth, below %d%% of the %.2f GB/s recorded before; "
            "something on the fabric changed (MTU, link speed, cabling)." % (
                where, busbw, round(warn_fraction * 100), float(baseline))))
    return verdict
