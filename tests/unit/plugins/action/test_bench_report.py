# -*- coding: utf-8 -*-
"""sparkops.specdec.specdec_bench_report and plugin_utils/_bench_report.py on a synthetic llama.cpp sweep:
load-generator results as specdec_loadgen returns them (bursty chunk times, llama.cpp metrics text before
and after each run, in the format of tests/unit/fixtures/bench/llamacpp-metrics-*.txt). The synthetic
engine reproduces the lab's CPU case (../shared/reference/real-engine.md): ~90 % acceptance but
speculation slower than plain decoding at concurrency 1. Plots are checked to exist and be PNGs;
what they show was checked by eye when they were written."""

from __future__ import annotations

import csv
import json
import random
from unittest import mock

import pytest

from ansible_collections.sparkops.specdec.plugins.action import specdec_bench_report
from ansible_collections.sparkops.specdec.plugins.plugin_utils import _bench_report

POINTS = ("none", 1, 2, 4, 8)
ACCEPT = 0.9  # per-position acceptance probability, chained


def metrics_text(drafts, draft_tokens, per_pos):
    lines = []
    for name, value in (("spec_decode_num_draft_tokens_total", draft_tokens),
                        ("spec_decode_num_accepted_tokens_total", sum(per_pos)),
                        ("spec_decode_num_drafts_total", drafts)):
        lines += ["# HELP llamacpp:%s x" % name, "# TYPE llamacpp:%s counter" % name, "llamacpp:%s %d" % (name, value)]
    if per_pos:
        lines += ["# TYPE llamacpp:spec_decode_num_accepted_tokens_per_pos_total counter"]
        lines += ['llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="%d"} %d' % (i, v)
                  for i, v in enumerate(per_pos)]
    return "\n".join(lines) + "\n"


def one_run(point, concurrency, rng, state, n_requests=4, tokens=64):
    """A specdec_loadgen-shaped result; state carries the server's counters between runs of one server."""
    k = 0 if point == "none" else point
    # Seconds per step on 2 CPU cores: verifying k+1 tokens is compute-bound and the draft is only 1.5x cheaper.
    step = 0.030 + 0.045 * k
    slow = rng.uniform(0.95, 1.08) * (1 + 0.15 * (concurrency - 1))
    requests = []
    before = metrics_text(state["drafts"], state["draft"], state["pos"])
    for i in range(n_requests):
        times, now, produced = [], 0.15 * slow, 0
        while produced < tokens:
            accepted = 0
            while accepted < k and rng.random() < ACCEPT:
                accepted += 1
            if k:
                state["drafts"] += 1
                state["draft"] += k
                for p in range(accepted):
                    state["pos"][p] += 1
            burst = min(accepted + 1, tokens - produced)
            for b in range(burst):
                times.append(now + b * 0.00004)
            produced += burst
            now += step * slow
        requests.append({"index": i, "prompt_id": str(i % 2), "ok": True, "error": None, "send_time": 0.0,
                         "ttft": times[0], "chunk_times": times, "e2e": times[-1] + 0.001, "output_tokens": tokens,
                         "prompt_tokens": 30, "finish_reason": "length", "text": "x " * tokens, "timings": None})
    wall = max(r["e2e"] for r in requests) * n_requests / concurrency
    after = metrics_text(state["drafts"], state["draft"], state["pos"])
    return {"requests": requests, "wall_seconds": wall, "metrics_before": before if k else None,
            "metrics_after": after if k else None,
            "node": {"cpu_pressure_before": "some avg10=0.10 avg60=0 avg300=0 total=1\n",
                     "cpu_pressure_after": "some avg10=%.2f avg60=0 avg300=0 total=2\n" % rng.uniform(0, 5),
                     "mem_available_bytes_before": 8 << 30, "mem_available_bytes_after": 8 << 30}}


def synthetic_runs(seed=1, repeats=3, concurrencies=(1, 4)):
    rng = random.Random(seed)
    runs = []
    for block in range(repeats):
        order = list(POINTS)
        rng.shuffle(order)
        for point in order:
            state = {"drafts": 0, "draft": 0, "pos": [0] * (0 if point == "none" else point)}  # a fresh server
            for conc in concurrencies:
                runs.append({"point": point, "concurrency": conc, "prompt_set": "short", "block": block,
                             "loadgen": one_run(point, conc, rng, state)})
    return runs


def gate_outputs():
    base = [{"prompt_id": str(i), "text": " ".join("w%d" % j for j in range(80))} for i in range(4)]
    spec = [dict(b) for b in base]
    spec[3]["text"] = spec[3]["text"].replace("w70", "other")
    return base, spec


def make(args):
    task = mock.MagicMock()
    task.args = args
    task.check_mode = False
    task.async_val = 0
    task.action = "specdec_bench_report"
    return specdec_bench_report.ActionModule(task, mock.MagicMock(), mock.MagicMock(), loader=None, templar=None,
                                             shared_loader_obj=None)


def test_report_on_a_synthetic_sweep(tmp_path):
    base, spec = gate_outputs()
    args = {"runs": synthetic_runs(), "output_dir": str(tmp_path / "out"), "engine": "llamacpp",
            "objective": {"concurrency": 1}, "gate": {"baseline": base, "speculative": spec},
            "metadata": {"engine": "llama.cpp (synthetic)",
                         "visits": [{"point": "4", "block": 0, "action": "none"},
                                    {"point": "none", "block": 0, "action": "restart"}]}}
    result = make(args).run(task_vars={})
    assert not result.get("failed"), result.get("msg")
    assert result["tuner"]["pick"] == "none"
    assert "no speculation" in result["msg"]
    assert result["search"]["measured"] == ["none", 1, 4] and result["search"]["cost_ratio"] == pytest.approx(0.6)
    assert result["search"]["within_spread"] is True
    assert result["gate"]["passed"] and result["gate"]["counts"]["late"] == 1
    assert result["headline"]["pick"] == "none"
    assert result["ansible_stats"]["data"]["specdec_benchmark"]["gate_passed"] is True
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    for run in report["runs"]:
        if run["point"] != "none":
            assert run["draft_tokens"] > 0
            assert run["per_position_sum"] == run["accepted_tokens"] and run["per_position_sum_ok"] is True
            assert 0.5 < run["acceptance_rate"] <= 1.0  # chained 0.9 per position: lower for long drafts
    assert len(report["raw"]) == len(args["runs"]) and "metrics_after" in report["raw"][1]["loadgen"]
    assert set(report["plots"]) == set(_bench_report.PLOTS)
    series = report["plots"]["throughput_vs_draft"]["series"][0]
    assert series["draft_length"] == [1, 2, 4, 8] and series["baseline_tokens_per_second"] > max(
        series["tokens_per_second_median"])
    for name in _bench_report.PLOTS:
        assert (tmp_path / "out" / (name + ".png")).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = list(csv.DictReader((tmp_path / "out" / "runs.csv").open()))
    assert len(rows) == len(args["runs"]) and rows[0]["output_tokens_per_second"]
    summary = list(csv.DictReader((tmp_path / "out" / "summary.csv").open()))
    assert len(summary) == len(POINTS) * 2
    md = (tmp_path / "out" / "report.md").read_text()
    assert "| draft 4 | 3 |" in md and "Pick: **none**" in md and "## Correctness gate" in md
    assert "- visits: draft 4 (no restart), none (restart)" in md.splitlines()
    assert report["metadata"]["visits"][1]["action"] == "restart"


def test_failed_gate_fails_the_task(tmp_path):
    base, spec = gate_outputs()
    spec[0]["text"] = "totally different"
    result = make({"runs": synthetic_runs(repeats=1, concurrencies=(1,)), "output_dir": str(tmp_path),
                   "gate": {"baseline": base, "speculative": spec}, "plots": False}).run(task_vars={})
    assert result["failed"] and result["msg"].startswith("correctness gate FAILED")
    assert (tmp_path / "report.json").exists() and not (tmp_path / "itl_distribution.png").exists()


def test_standin_run_fails_with_the_reason(tmp_path):
    runs = synthetic_runs(repeats=1, concurrencies=(1,))
    runs[0]["loadgen"]["metrics_after"] = 'sparkops_lab_standin_info{standin_for="trtllm-serve"} 1\n'
    result = make({"runs": runs, "output_dir": str(tmp_path), "plots": False}).run(task_vars={})
    assert result["failed"] and "STAND-IN" in result["msg"] and "meaningless" in result["msg"]


def test_zero_drafts_names_the_run(tmp_path):
    runs = synthetic_runs(repeats=1, concurrencies=(1,))
    spec = next(r for r in runs if r["point"] == 2)
    spec["loadgen"]["metrics_after"] = spec["loadgen"]["metrics_before"]
    result = make({"runs": runs, "output_dir": str(tmp_path), "plots": False}).run(task_vars={})
    assert result["failed"] and "(draft 2, concurrency 1, prompt set short)" in result["msg"]
    assert "--spec-type draft-simple" in result["msg"]


def test_bad_arguments():
    from ansible.errors import AnsibleError
    with pytest.raises(AnsibleError, match="runs must be"):
        make({"runs": [], "output_dir": "/tmp"}).run(task_vars={})
    with pytest.raises(AnsibleError, match="objective is a dict"):
        make({"runs": [{}], "output_dir": "/tmp", "objective": {"speed": 1}}).run(task_vars={})
    with pytest.raises(AnsibleError, match="unknown option"):
        make({"runs": [{}], "output_dir": "/tmp", "colour": "red"}).run(task_vars={})


# --- the correctness gate on the sweep's own runs (gate.from_runs) -----------------------------

def test_gate_from_runs_compares_the_baseline_with_every_draft_length(tmp_path):
    runs = synthetic_runs()
    result = make({"runs": runs, "output_dir": str(tmp_path / "g"), "engine": "llamacpp", "plots": False,
                   "objective": {"concurrency": 1}, "gate": {"from_runs": True}}).run(task_vars={})
    assert not result.get("failed"), result.get("msg")
    gate = result["gate"]
    assert gate["passed"] and sorted(gate["points"]) == ["1", "2", "4", "8"]
    # The pick is none, so the gate's main comparison is the best speculative point by median.
    best = max((c for c in result["tuner"]["candidates"] if c["point"] != "none"), key=lambda c: c["median"])
    assert gate["point"] == best["point"] and gate["counts"]["match"] == 2  # prompt ids 0 and 1, first text each


def test_gate_from_runs_fails_on_an_early_divergence_and_names_the_point(tmp_path):
    runs = synthetic_runs()
    bad = next(r for r in runs if r["point"] == 4 and r["concurrency"] == 1)
    bad["loadgen"]["requests"][0]["text"] = "y " + bad["loadgen"]["requests"][0]["text"]
    result = make({"runs": runs, "output_dir": str(tmp_path / "g"), "engine": "llamacpp", "plots": False,
                   "objective": {"concurrency": 1}, "gate": {"from_runs": True}}).run(task_vars={})
    assert result["failed"] and "draft length 4" in result["msg"] and "before word 32" in result["msg"]
    assert result["gate"]["points"]["4"]["passed"] is False and result["gate"]["points"]["2"]["passed"] is True
    assert (tmp_path / "g" / "report.json").exists()  # the report is written before the gate fails the task


def test_report_files_are_private(tmp_path):
    make({"runs": synthetic_runs(repeats=1), "output_dir": str(tmp_path / "p"), "engine": "llamacpp",
          "plots": False}).run(task_vars={})
    for path in (tmp_path / "p").iterdir():
        assert path.stat().st_mode & 0o077 == 0, path


@pytest.mark.parametrize("output_dir,expected", [("specdec-benchmark", "reports/specdec-benchmark"), ("/ABS", "abs")])
def test_relative_output_dir_is_in_the_report_dir(tmp_path, monkeypatch, output_dir, expected):
    """specdec_report_dir: a relative specdec_benchmark_output_dir lands in it, an absolute one as given."""
    monkeypatch.chdir(str(tmp_path))
    out = str(tmp_path / "abs") if output_dir == "/ABS" else output_dir
    result = make({"runs": synthetic_runs(repeats=1), "output_dir": out, "engine": "llamacpp", "plots": False,
                   "report_dir": str(tmp_path / "reports")}).run(task_vars={})
    assert not result.get("failed"), result.get("msg")
    assert (tmp_path / expected / "report.json").is_file()
    assert result["files"]["json"] == str(tmp_path / expected / "report.json")


def test_gate_from_runs_a_near_tie_passes_and_every_point_has_its_table(tmp_path):
    runs = synthetic_runs()
    base = next(r for r in runs if r["point"] == "none" and r["concurrency"] == 1)
    request = base["loadgen"]["requests"][0]
    words = request["text"].split(" ")
    # The baseline's tokens (one per word, as llama-server reports them), the first with a runner-up 0.02 nats behind.
    request["tokens"] = [{"token": (w if i == 0 else " " + w), "logprob": -0.1, "top": [[(w if i == 0 else " " + w), -0.1]]}
                         for i, w in enumerate(words)]
    request["tokens"][0]["top"].append(["y", -0.12])
    bad = next(r for r in runs if r["point"] == 4 and r["concurrency"] == 1)
    bad["loadgen"]["requests"][0]["text"] = "y " + " ".join(words[1:])
    result = make({"runs": runs, "output_dir": str(tmp_path / "g"), "engine": "llamacpp", "plots": False,
                   "objective": {"concurrency": 1}, "gate": {"from_runs": True}}).run(task_vars={})
    assert not result.get("failed"), result.get("msg")
    four = result["gate"]["points"]["4"]
    assert four["passed"] and four["counts"]["tie"] == 1
    tie = next(p for p in four["prompts"] if p["status"] == "tie")["tie"]
    assert tie["baseline_token"] == words[0] and tie["speculative_token"] == "y" and tie["margin"] == 0.02
    md = (tmp_path / "g" / "report.md").read_text()
    for point in ("1", "2", "4", "8"):
        assert "### draft length %s: correctness gate passed" % point in md
    assert "| tie | 0 | `%s` | `y` | 0.020 | - |" % words[0] in md


def test_gate_from_runs_with_both_runs_log_probabilities_shows_both_margins(tmp_path):
    # vLLM reports log-probabilities for the speculative run's accepted draft tokens too: the gate checks the flip
    # from both runs and the report shows both margins.
    runs = synthetic_runs()
    base = next(r for r in runs if r["point"] == "none" and r["concurrency"] == 1)
    words = base["loadgen"]["requests"][0]["text"].split(" ")
    spec = next(r for r in runs if r["point"] == 4 and r["concurrency"] == 1)
    spec_words = ["y"] + words[1:]
    spec["loadgen"]["requests"][0]["text"] = " ".join(spec_words)

    def tokens(ws, other):
        toks = [{"token": (w if i == 0 else " " + w), "logprob": -0.1, "top": [[(w if i == 0 else " " + w), -0.1]]}
                for i, w in enumerate(ws)]
        toks[0]["top"].append([other, -0.13])
        return toks
    base["loadgen"]["requests"][0]["tokens"] = tokens(words, "y")
    spec["loadgen"]["requests"][0]["tokens"] = tokens(spec_words, words[0])
    # (The synthetic runs carry llama.cpp's counter names; the gate reads only the texts and tokens.)
    result = make({"runs": runs, "output_dir": str(tmp_path / "g"), "engine": "llamacpp", "plots": False,
                   "objective": {"concurrency": 1}, "gate": {"from_runs": True}}).run(task_vars={})
    assert not result.get("failed"), result.get("msg")
    tie = next(p for p in result["gate"]["points"]["4"]["prompts"] if p["status"] == "tie")["tie"]
    assert (tie["margin"], tie["speculative_margin"]) == (0.03, 0.03)
    assert "| tie | 0 | `%s` | `y` | 0.030 | 0.030 |" % words[0] in (tmp_path / "g" / "report.md").read_text()


def test_plots_tick_whole_draft_lengths_only(tmp_path, monkeypatch):
    # One draft length (the vLLM scenario's none and 2): its axis showed 1.900, 1.925, ... before.
    runs = [r for r in synthetic_runs() if r["point"] in ("none", 4)]
    report = _bench_report.build(runs, objective={"concurrency": 1})
    ticks = {}

    def keep(fig, plt, out_dir, name):
        ticks[name] = [[t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]] for ax in fig.axes]
        plt.close(fig)
        return str(tmp_path / name)

    monkeypatch.setattr(_bench_report, "_save", keep)
    _bench_report.draw(report, str(tmp_path))
    for name in ("throughput_vs_draft", "acceptance_by_position"):
        for axis_ticks in ticks[name]:
            assert axis_ticks and all(float(t).is_integer() for t in axis_ticks), (name, axis_ticks)
    assert ticks["throughput_vs_draft"][0] == [4.0]
