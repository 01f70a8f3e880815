# -*- coding: utf-8 -*-
"""sparkops.specdec.specdec_bench_plan: one line per bad setting (the role's names), the round's schedule,
and the estimate from the probe request's speed."""

from __future__ import annotations

import json
from unittest import mock

import pytest

from ansible_collections.sparkops.specdec.plugins.action import specdec_bench_plan
from ansible_collections.sparkops.specdec.plugins.filter import bench
from ansible_collections.sparkops.specdec.plugins.plugin_utils import _plan, _tune

GOOD = {"mode": "sweep", "points": ["none", 1, 2, 4], "repeats": 2, "seed": 0, "objective": {"concurrency": 1,
        "prompt_set": "short"}, "concurrency": [1, 4], "prompt_sets": ["short", "long"], "num_requests": 8,
        "max_tokens": 128}


def run(**over):
    task = mock.MagicMock()
    task.args = dict(GOOD, **over)
    task.check_mode = False
    task.async_val = 0
    task.action = "specdec_bench_plan"
    action = specdec_bench_plan.ActionModule(task, mock.MagicMock(), mock.MagicMock(), loader=None, templar=None,
                                             shared_loader_obj=None)
    return action.run(task_vars={})


def test_a_sweep_round_with_its_estimate():
    probe = {"requests": [{"e2e": 4.0, "output_tokens": 128}]}  # 32 tok/s
    got = run(probe=probe, restart_seconds=60, current_point="4")
    assert not got.get("failed"), got.get("msg")
    assert len(got["schedule"]) == 8 and got["done"] is False
    assert got["segments"][0]["runs"] == [{"concurrency": 1, "prompt_set": "short"},
                                          {"concurrency": 4, "prompt_set": "short"},
                                          {"concurrency": 1, "prompt_set": "long"},
                                          {"concurrency": 4, "prompt_set": "long"}]
    est = got["estimate"]
    assert est["probe_tokens_per_second"] == pytest.approx(32.0)
    # per run: ceil(8/1)*128/32 = 32 s at c=1, ceil(8/4)*128/32 = 8 s at c=4 -> mean 20 s
    assert est["run_seconds"] == pytest.approx(20.0) and est["runs"] == 32
    assert est["seconds"] == pytest.approx(est["restarts"] * 60 + 32 * 20.0)
    assert "~" in got["msg"] and "min" in got["msg"]


def test_the_served_point_opens_the_round_and_the_one_left_serving_closes_it():
    tune = dict(mode="tune", points=["none", 2], probes=[2], repeats=1, concurrency=[1], prompt_sets=["short"],
                objective={"concurrency": 1, "prompt_set": "short"}, spec_method="ngram", restart_seconds=60)
    for seed in range(8):
        # Draft-target 3 serves (no point of an ngram benchmark); ngram 2 is what it leaves serving: none first.
        got = run(seed=seed, served={"method": "draft_target", "max_draft_len": 3},
                  final_served={"method": "ngram", "max_draft_len": "2"}, **tune)
        assert not got.get("failed"), got.get("msg")
        assert [e["point"] for e in got["schedule"]] == ["none", 2]
        assert got["estimate"]["restarts"] == 2
        # ngram 2 serves and is left serving: measured first, in place (one restart, to none; the restore is the
        # role's).
        got = run(seed=seed, served={"method": "ngram", "max_draft_len": 2},
                  final_served={"method": "ngram", "max_draft_len": 2}, **tune)
        assert [e["point"] for e in got["schedule"]] == [2, "none"] and got["estimate"]["restarts"] == 1


@pytest.mark.parametrize("over, setting", [
    ({"mode": "grid"}, "specdec_benchmark_mode"),
    ({"points": ["none", "none"]}, "specdec_benchmark_points"),
    ({"points": ["x"]}, "specdec_benchmark_points"),
    ({"points": [40]}, "specdec_benchmark_points"),
    ({"concurrency": [0]}, "specdec_benchmark_concurrency"),
    ({"prompt_sets": []}, "specdec_benchmark_prompt_sets"),
    ({"repeats": 0}, "specdec_benchmark_repeats"),
    ({"objective": {"concurrency": 8, "prompt_set": "short"}}, "specdec_benchmark_objective.concurrency"),
    ({"objective": {"concurrency": 1}}, "specdec_benchmark_objective.prompt_set"),
    ({"objective": {"concurrency": 1, "prompt_set": "short", "ttft_p90_max": -1}}, "ttft_p90_max"),
    ({"mode": "tune", "points": [1, 2]}, "add none"),
])
def test_bad_settings_are_named_before_anything_runs(over, setting):
    got = run(**over)
    assert got["failed"] and setting in got["msg"] and "nothing was changed" in got["msg"]


def test_tune_first_round_is_the_baseline_and_the_probes():
    got = run(mode="tune", points=["none", 1, 2, 3, 4, 8], probes=[1, 4])
    assert sorted(map(str, {e["point"] for e in got["schedule"]})) == ["1", "4", "none"]


def test_progress_line_and_its_refusals():
    text = "llamacpp:spec_decode_num_draft_tokens_total %d\nllamacpp:spec_decode_num_accepted_tokens_total %d\n" \
           "llamacpp:spec_decode_num_drafts_total %d\n"
    run_ok = {"requests": [{"ok": True, "ttft": 0.2, "e2e": 2.0, "output_tokens": 40,
                            "chunk_times": [0.2, 0.3, 0.4]}], "wall_seconds": 2.0,
              "metrics_before": text % (0, 0, 0), "metrics_after": text % (40, 30, 10)}
    line = bench.bench_run_line(run_ok, "4", 1, "short", "llamacpp")
    assert line.startswith("draft 4 c=1 short: 20.0 tok/s") and "acceptance 0.75 (30/40 drafted)" in line
    zero = dict(run_ok, metrics_after=text % (0, 0, 0))
    with pytest.raises(Exception, match="draft length 4"):
        bench.bench_run_line(zero, 4, 1, "short", "llamacpp")


# --- issue 25 item 6: check mode tells the truth (same refusals as the real run, a restart time per engine) ----

SHORT = '{"prompts": ["Write a haiku about caches."]}'
LLAMA_DRAFT = "sparkops-lab/Qwen2.5-Coder-0.5B-Instruct-GGUF"


def test_the_estimate_uses_the_engines_restart_time_not_zero():
    # As check.yml calls it in check mode: no probe, no setting, a TensorRT-LLM deployment (main: 18 x 0 s, "~ 0 min").
    got = run(engine="trtllm", restart_seconds=None, repeats=3, points=["none", 1, 2, 3, 4, 8])
    assert not got.get("failed"), got.get("msg")
    est = got["estimate"]
    assert est["restart_seconds"] == 900.0 and est["restart_source"] == "default"
    assert est["restarts"] == 18 and est["seconds"] == pytest.approx(18 * 900.0)
    llama = run(engine="llamacpp", restart_seconds=None)["estimate"]
    assert (llama["restart_seconds"], llama["restart_source"]) == (60.0, "default")


def test_the_estimate_prefers_the_restart_time_measured_on_the_node():
    state = {"engine": "trtllm", "running": {"target_model": "nvidia/Qwen3-235B-A22B-FP4", "ready_seconds": 1312.5}}
    got = run(engine="trtllm", state=state, target_model="nvidia/Qwen3-235B-A22B-FP4", current_point="none")
    est = got["estimate"]
    assert (est["restart_seconds"], est["restart_source"]) == (1312.5, "measured")
    assert est["seconds"] == pytest.approx(est["restarts"] * 1312.5)
    # Measured for another target model: not this one's figure.
    other = run(engine="trtllm", state=state, target_model="Qwen/Qwen3-8B")["estimate"]
    assert (other["restart_seconds"], other["restart_source"]) == (900.0, "default")
    # The setting wins over both.
    mine = run(engine="trtllm", state=state, target_model="nvidia/Qwen3-235B-A22B-FP4", restart_seconds="420")
    assert (mine["estimate"]["restart_seconds"], mine["estimate"]["restart_source"]) == (420.0, "setting")


@pytest.mark.parametrize("over, setting", [
    ({"allow_restart": False}, "specdec_benchmark_allow_restart"),
    ({"allow_restart": "false"}, "specdec_benchmark_allow_restart"),
    ({"pinned": {"specdec_server_method": "sparkops-benchmark-point", "specdec_server_max_draft_len": 3}},
     "specdec_server_max_draft_len: set as an extra var"),
    ({"pinned": {"specdec_server_method": "none", "specdec_server_max_draft_len": "sparkops-benchmark-point"}},
     "specdec_server_method: set as an extra var"),
    ({"prompts": {"short": SHORT}}, "'long' has no file long.json"),
    ({"prompts": {"short": SHORT, "long": "{not json"}}, "long.json is not a prompt set"),
    ({"prompts": {"short": SHORT, "long": '{"prompts": []}'}}, "long.json is not a prompt set"),
    ({"restart_seconds": 0}, "specdec_benchmark_restart_seconds"),
    ({"restart_seconds": "nan"}, "specdec_benchmark_restart_seconds"),
])
def test_the_real_runs_refusals_are_made_by_the_plan_in_check_mode_too(over, setting):
    task_check = run(**over)
    assert task_check["failed"] and setting in task_check["msg"], task_check.get("msg")
    assert "othing was changed" in task_check["msg"]


def test_the_prompt_sets_read_by_the_check_are_returned_for_the_runs():
    got = run(prompts={"short": SHORT, "long": '{"prompts": ["a", "b"]}'}, allow_restart=True,
              pinned={"specdec_server_method": "sparkops-benchmark-point",
                      "specdec_server_max_draft_len": "sparkops-benchmark-point"})
    assert not got.get("failed"), got.get("msg")
    assert got["prompts"] == {"short": ["Write a haiku about caches."], "long": ["a", "b"]}


# --- issue 25 item 2: the baseline point unsets the draft (the plan refuses a draft setting with method none) -------

_UNPINNED = {name: "sparkops-benchmark-point" for name in specdec_bench_plan.PINNED + specdec_bench_plan.UNSET_AT_NONE}


@pytest.mark.parametrize("engine, spec_method, draft, inventory", [
    ("trtllm", "eagle3", {"model": "nvidia/Qwen3-235B-A22B-Eagle3", "revision": "v2", "file": None},
     {"specdec_server_draft_model": "nvidia/Qwen3-235B-A22B-Eagle3", "specdec_server_draft_revision": "v2"}),
    ("llamacpp", "draft_target", {"model": LLAMA_DRAFT, "revision": None, "file": "qwen2.5-coder-0.5b-instruct-q8_0.gguf"},
     {"specdec_engine": "llamacpp", "specdec_server_draft_model": LLAMA_DRAFT,
      "specdec_server_draft_file": "qwen2.5-coder-0.5b-instruct-q8_0.gguf"}),
])
def test_every_point_the_role_serves_is_planned_without_errors_with_the_inventorys_draft(
        engine, spec_method, draft, inventory):
    got = run(engine=engine, spec_method=spec_method, draft=draft, points=["none", 2, 4], repeats=1)
    assert not got.get("failed"), got.get("msg")
    serves = {str(seg["point"]): seg["serve"] for seg in got["segments"]}
    assert sorted(serves) == ["2", "4", "none"]
    assert serves["none"] == {"specdec_server_method": "none", "specdec_server_max_draft_len": None,
                              "specdec_server_draft_model": None, "specdec_server_draft_revision": "main",
                              "specdec_server_draft_file": None, "specdec_server_speculative_config": {}}
    assert serves["2"] == {"specdec_server_method": spec_method, "specdec_server_max_draft_len": 2,
                           "specdec_server_draft_model": draft["model"],
                           "specdec_server_draft_revision": draft["revision"] or "main",
                           "specdec_server_draft_file": draft["file"], "specdec_server_speculative_config": {}}
    members = ["spark-1", "spark-2"] if engine == "trtllm" else ["spark-1"]
    topology = "two_sparks" if len(members) > 1 else "single_spark"
    for point, serve in serves.items():
        # As the role's include vars outrank the inventory: the point's values over the inventory's settings.
        dep = _plan.deployment_from_inventory(dict(inventory, **serve), topology, members, "spark-1")
        out = _plan.build_plan(dep, trtllm_version="1.3.0rc12", version_source="test")
        assert out["errors"] == [], (point, out["errors"])
        assert out["plan"]["method"] == serve["specdec_server_method"]
    # What the role passed for the baseline before: method none over the inventory's draft, refused by the plan.
    dep = _plan.deployment_from_inventory(dict(inventory, specdec_server_method="none"), topology, members, "spark-1")
    assert _plan.build_plan(dep, trtllm_version="1.3.0rc12", version_source="test")["errors"]


@pytest.mark.parametrize("name, value", [
    ("specdec_server_draft_model", "nvidia/Qwen3-235B-A22B-Eagle3"),
    ("specdec_server_draft_file", "qwen2.5-coder-0.5b-instruct-q8_0.gguf"),
    ("specdec_server_draft_revision", "v2"),
])
def test_a_draft_setting_given_as_an_extra_var_is_refused_when_the_points_hold_the_baseline(name, value):
    pinned = dict(_UNPINNED, **{name: value})
    got = run(pinned=pinned)
    assert got["failed"] and got["msg"].splitlines()[1] == (
        "- %s: set as an extra var (-e) or a fact, which the baseline point none cannot unset (method none refuses a "
        "draft setting); set it in the inventory instead, or remove none from specdec_benchmark_points." % name)
    # Without the baseline among the points, every point uses the draft: taken.
    assert not run(pinned=pinned, points=[1, 2]).get("failed")
    # The default revision given on the command line asks nothing of the baseline.
    assert not run(pinned=dict(_UNPINNED, specdec_server_draft_revision="main")).get("failed")


# --- issue 23 item 4: the benchmark on engine vllm ----------------------------------------------------------------------

VLLM_TARGET, VLLM_DRAFT = "sparkops-lab/tiny-target", "sparkops-lab/tiny-draft"
VLLM_COMMITS = {VLLM_TARGET: "a" * 40, VLLM_DRAFT: "b" * 40}


def vllm_plan(settings):
    s = dict({"specdec_engine": "vllm", "trtllm_container_image": "sparkops-lab/vllm-cpu:0.32.0",
              "specdec_server_target_model": VLLM_TARGET}, **settings)
    dep = _plan.deployment_from_inventory(s, "single_spark", ["spark-1"], "spark-1")
    return _plan.build_plan(dep, commits=VLLM_COMMITS, vllm_version="0.32.0+cpu")


@pytest.mark.parametrize("spec_method, draft, extra", [
    ("draft_target", {"model": VLLM_DRAFT, "revision": None, "file": None}, {}),
    ("ngram", {"model": None, "revision": None, "file": None}, {"prompt_lookup_max": 4, "prompt_lookup_min": 1}),
])
def test_every_vllm_point_serves_num_speculative_tokens_or_no_speculative_config(spec_method, draft, extra):
    inventory = {"specdec_server_method": spec_method, "specdec_server_draft_model": draft["model"],
                 "specdec_server_max_draft_len": 4, "specdec_server_speculative_config": extra}
    got = run(engine="vllm", spec_method=spec_method, draft=dict(draft, speculative_config=extra),
              points=["none", 1, 3], repeats=1)
    assert not got.get("failed"), got.get("msg")
    serves = {str(seg["point"]): seg["serve"] for seg in got["segments"]}
    assert serves["none"]["specdec_server_speculative_config"] == {}
    assert serves["3"]["specdec_server_speculative_config"] == extra
    for point, serve in serves.items():
        out = vllm_plan(dict(inventory, **serve))
        assert out["errors"] == [], (point, out["errors"])
        argv = out["plan"]["argv"]
        if point == "none":
            assert out["plan"]["method"] == "none" and "--speculative-config" not in argv
        else:
            spec = json.loads(argv[argv.index("--speculative-config") + 1])
            assert spec["num_speculative_tokens"] == int(point) and spec["method"] == (
                "draft_model" if spec_method == "draft_target" else "ngram")
            assert {k: spec[k] for k in extra} == extra
    # What the role passed for the baseline before: method none over the inventory's extra keys, refused by the plan.
    if extra:
        before = dict(serves["none"], specdec_server_speculative_config=extra)
        assert "specdec_server_speculative_config: method none" in " ".join(vllm_plan(dict(inventory, **before))["errors"])


def test_vllm_extra_speculative_config_given_as_an_extra_var_is_refused_with_the_baseline():
    pinned = dict(_UNPINNED, specdec_server_speculative_config={"prompt_lookup_max": 4})
    got = run(pinned=pinned)
    assert got["failed"] and got["msg"].splitlines()[1] == (
        "- specdec_server_speculative_config: set as an extra var (-e) or a fact, which the baseline point none cannot "
        "unset (method none refuses a --speculative-config key); set it in the inventory instead, or remove none from "
        "specdec_benchmark_points.")
    assert not run(pinned=pinned, points=[1, 2]).get("failed")
    assert not run(pinned=dict(_UNPINNED, specdec_server_speculative_config={})).get("failed")


def test_the_vllm_estimate_uses_vllms_default_restart_time():
    est = run(engine="vllm", restart_seconds=None, repeats=1, points=["none", 1, 3])["estimate"]
    assert (est["restart_seconds"], est["restart_source"]) == (_tune.DEFAULT_RESTART_SECONDS["vllm"], "default")
    assert _tune.DEFAULT_RESTART_SECONDS["vllm"] == 900.0
    state = {"engine": "vllm", "running": {"target_model": VLLM_TARGET, "ready_seconds": 71.5}}
    mine = run(engine="vllm", state=state, target_model=VLLM_TARGET, restart_seconds=None)["estimate"]
    assert (mine["restart_seconds"], mine["restart_source"]) == (71.5, "measured")
