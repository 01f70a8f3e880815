# -*- coding: utf-8 -*-
"""specdec_plan with mounts (the specdec_server role's first task passes trtllm_container_mounts, {} when unset): the
role without the trtllm_container role's host paths stops at the plan, before any change, with one line naming what is
missing and the fix, instead of a Jinja "'trtllm_container_mounts' is undefined" in its download tasks."""

from __future__ import annotations

import os

import yaml

from ansible_collections.sparkops.specdec.plugins.plugin_utils import _plan
from ansible_collections.sparkops.specdec.tests.unit.plugins.action.test_specdec_plan_engine import COMMITS, LLAMA, LLAMA_IMAGE, run

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
MOUNTS = {"user": "spark", "home": "/home/spark", "hf_cache": "/home/spark/.cache/huggingface",
          "state_dir": "/home/spark/.sparkops-specdec"}


def mount_lines(result):
    return [line for line in result.get("msg", "").splitlines() if line.startswith("- trtllm_container_mounts:")]


def test_unset_mounts_stop_the_plan_with_one_line():
    result = run(LLAMA, topology="single_spark", image=LLAMA_IMAGE, commits=COMMITS, mounts={})
    assert result["failed"] and "plan" not in result and result["changed"] is False
    assert result["msg"].startswith("Deployment spark-1: 1 problem(s), nothing was changed:")
    assert mount_lines(result) == ["- " + _plan.mounts_problem({}, "spark-1")]
    line = mount_lines(result)[0]
    assert line.startswith("- trtllm_container_mounts: is not set on spark-1;")
    assert "run that role first" in line and "user, home, hf_cache and state_dir" in line


def test_incomplete_mounts_name_the_missing_keys():
    result = run(LLAMA, topology="single_spark", image=LLAMA_IMAGE, commits=COMMITS, mounts={"user": "spark", "home": ""})
    assert result["failed"]
    assert mount_lines(result)[0].startswith("- trtllm_container_mounts: on spark-1 has no home, hf_cache, state_dir;")


def test_complete_or_unasked_mounts_pass():
    for args in ({"mounts": MOUNTS}, {}):
        result = run(LLAMA, topology="single_spark", image=LLAMA_IMAGE, commits=COMMITS, **args)
        assert not result.get("failed"), result.get("msg")
        assert result["plan"]["engine"] == "llamacpp"


def test_mounts_problem_values():
    assert _plan.mounts_problem(MOUNTS, "n") is None
    assert _plan.mounts_problem(None, "n") == _plan.mounts_problem({}, "n")
    assert _plan.mounts_problem("x", "n").startswith("trtllm_container_mounts: on n is a str, not a mapping;")
    assert _plan.mounts_problem(dict(MOUNTS, user=None), "n").startswith("trtllm_container_mounts: on n has no user;")
    assert len(_plan.mounts_problem({}, "n").splitlines()) == 1


def test_the_role_plans_with_its_mounts_before_any_other_task():
    with open(os.path.join(ROOT, "roles", "specdec_server", "tasks", "main.yml")) as handle:
        tasks = yaml.safe_load(handle)
    # First this node's settings are resolved (the plan reads them), then the plan, before any task that acts.
    assert "sparkops.specdec.specdec_settings" in tasks[0] and tasks[0]["register"] == "specdec_settings"
    first = tasks[1]["sparkops.specdec.specdec_plan"]
    assert first["mounts"].replace(" ", "") == "{{trtllm_container_mounts|default({})}}"
