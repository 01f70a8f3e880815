# -*- coding: utf-8 -*-
"""make bench-tune / bench-sweep ENGINE=... (issue 23 item 4): ENGINE swaps in the lab engine's inventory, its
benchmark vars file and the target that builds it (llamacpp, the default: lab-engine; vllm: lab-vllm); any other
value stops make before anything runs. And the vLLM lab's vars file passes the benchmark's own checks: its tuner round
0 is the baseline and both draft lengths."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest
import yaml

from ansible_collections.sparkops.specdec.plugins.action import specdec_bench_plan
from ansible_collections.sparkops.specdec.plugins.plugin_utils import _tune

ROOT = pathlib.Path(__file__).resolve().parents[2]


def dry_run(*args):
    return subprocess.run(["make", "-n", "--no-print-directory", "-C", str(ROOT)] + list(args), capture_output=True,
                          text=True, check=False, timeout=120)


def playbook_line(out):
    lines = [line for line in out.splitlines() if "playbooks/benchmark.yml" in line]
    assert len(lines) == 1, out
    return lines[0]


@pytest.mark.parametrize("target, mode", [("bench-tune", "tune"), ("bench-sweep", "sweep")])
@pytest.mark.parametrize("engine, settings, vars_file, build, other_build", [
    (None, "-e @inventories/lab/llamacpp.yml", "benchmark-lab.yml", "build-llamacpp.sh", "build-vllm.sh"),
    ("llamacpp", "-e @inventories/lab/llamacpp.yml", "benchmark-lab.yml", "build-llamacpp.sh", "build-vllm.sh"),
    ("vllm", "-i inventories/lab/vllm-bench", "benchmark-vllm.yml", "build-vllm.sh", "build-llamacpp.sh"),
])
def test_engine_swaps_the_settings_the_vars_file_and_the_lab_build(target, mode, engine, settings, vars_file, build,
                                                                   other_build):
    got = dry_run(target, *(["ENGINE=%s" % engine] if engine else []))
    assert got.returncode == 0, got.stderr
    line = playbook_line(got.stdout)
    assert "-i inventories/lab/hosts.yml %s playbooks/benchmark.yml -e @inventories/lab/%s " % (settings, vars_file) in line
    assert "-e specdec_benchmark_mode=%s" % mode in line
    assert build in got.stdout and other_build not in got.stdout
    assert (ROOT / "inventories" / "lab" / vars_file).is_file()
    if engine == "vllm":
        # vllm.yml's settings are never extra vars there: they would pin every point.
        assert "inventories/lab/vllm.yml" not in line


def inventory_host(host, *sources):
    args = [os.path.join(os.path.dirname(sys.executable), "ansible-inventory")] + [a for s in sources for a in ("-i", str(ROOT / s))] + ["--host", host]
    got = subprocess.run(args, capture_output=True, text=True, check=True, timeout=120, cwd=str(ROOT))
    assert "WARNING" not in got.stderr, got.stderr
    return json.loads(got.stdout)


def test_the_vllm_bench_inventory_gives_spark_1_the_vllm_settings_as_host_vars():
    with open(ROOT / "inventories" / "lab" / "vllm.yml", encoding="utf-8") as handle:
        wanted = yaml.safe_load(handle)
    got = inventory_host("spark-1", "inventories/lab/hosts.yml", "inventories/lab/vllm-bench")
    assert {k: got.get(k) for k in wanted} == wanted
    # They win over the lab's group vars (the TensorRT-LLM stand-in image of group_vars/spark_nodes.yml).
    assert got["specdec_engine"] == "vllm" and "lab_vllm_image" in got["trtllm_container_image"]
    # As extra vars, the method, draft and draft length would pin every point: the benchmark's check refuses them.
    pinned = dict({name: "sparkops-benchmark-point" for name in specdec_bench_plan.PINNED + specdec_bench_plan.UNSET_AT_NONE},
                  **{k: v for k, v in wanted.items() if k in specdec_bench_plan.PINNED + specdec_bench_plan.UNSET_AT_NONE})
    assert sorted(k for k in pinned if pinned[k] != "sparkops-benchmark-point") == [
        "specdec_server_draft_model", "specdec_server_method"]
    assert len(specdec_bench_plan.check_pinned(pinned)) == 2


def test_an_unknown_engine_stops_make_before_anything_runs():
    got = dry_run("bench-tune", "ENGINE=trtllm")
    assert got.returncode != 0 and got.stdout == ""
    assert ("ENGINE=trtllm is not a lab engine the benchmark measures; set ENGINE=llamacpp (the default) or "
            "ENGINE=vllm") in got.stderr
    # Other targets do not read ENGINE.
    assert dry_run("help", "ENGINE=trtllm").returncode == 0


def test_the_vllm_lab_vars_pass_the_benchmarks_checks_and_tune_the_baseline_and_both_lengths():
    with open(ROOT / "roles" / "specdec_benchmark" / "defaults" / "main" / "options.yml", encoding="utf-8") as handle:
        settings = yaml.safe_load(handle)
    with open(ROOT / "inventories" / "lab" / "benchmark-vllm.yml", encoding="utf-8") as handle:
        settings.update(yaml.safe_load(handle))
    with open(ROOT / "roles" / "specdec_benchmark" / "files" / "prompts" / "short.json", encoding="utf-8") as handle:
        short = handle.read()
    args = {name: settings["specdec_benchmark_" + name] for name in (
        "points", "probes", "repeats", "seed", "objective", "concurrency", "prompt_sets", "num_requests",
        "max_tokens")}
    args.update(mode="tune", prompts={"short": short}, engine="vllm")
    assert specdec_bench_plan.check(args) == []
    round0 = _tune.plan_round("tune", args["points"], args["repeats"], args["seed"], args["objective"], args["probes"],
                              [], 0)
    assert sorted(str(e["point"]) for e in round0) == ["1", "3", "none"]
    # The gate's prompts: the short set, each sent at least once per run.
    assert args["num_requests"] >= len(json.loads(short)["prompts"])
    assert settings["specdec_benchmark_min_mem_available"] >= 4 << 30
