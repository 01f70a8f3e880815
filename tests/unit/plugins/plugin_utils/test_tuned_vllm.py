# -*- coding: utf-8 -*-
"""The tuner's pick on engine vllm (issue 23 item 4): a recorded draft length is served as --speculative-config's
num_speculative_tokens, a pick none serves vllm serve without --speculative-config, and an inventory method or draft
length still wins (inventories/lab/vllm.yml's shape: method draft_target set, the draft length from the preset)."""

from __future__ import annotations

import json

from ansible_collections.sparkops.specdec.plugins.plugin_utils import _plan

TARGET, DRAFT = "sparkops-lab/tiny-llama-vllm", "sparkops-lab/tiny-llama-vllm-draft"
COMMITS = {TARGET: "a" * 40, DRAFT: "b" * 40}
TUNED = {"engine": "vllm", "target_model": TARGET, "draft_model": DRAFT, "method": "draft_target",
         "max_draft_len": 1, "reason": "draft length 1: ..."}
LAB = {"specdec_engine": "vllm", "trtllm_container_image": "sparkops-lab/vllm-cpu:0.32.0",
       "specdec_server_method": "draft_target", "specdec_server_target_model": TARGET,
       "specdec_server_draft_model": DRAFT, "specdec_server_max_model_len": 512}


def plan(tuned=None, **settings):
    dep = _plan.deployment_from_inventory(dict(LAB, **settings), "single_spark", ["spark-1"], "spark-1")
    built = _plan.build_plan(dep, commits=COMMITS, vllm_version="0.32.0+cpu", tuned=tuned)
    assert not built["errors"], built["errors"]
    return built["plan"]


def spec(p):
    argv = p["argv"]
    return json.loads(argv[argv.index("--speculative-config") + 1]) if "--speculative-config" in argv else None


def test_a_tuned_draft_length_is_num_speculative_tokens():
    assert spec(plan())["num_speculative_tokens"] == 3
    p = plan(TUNED)
    got = spec(p)
    assert {k: got[k] for k in ("method", "model", "revision", "num_speculative_tokens")} == {
        "method": "draft_model", "model": DRAFT, "revision": "b" * 40, "num_speculative_tokens": 1}
    assert p["sources"]["max_draft_len"] == "tuned" and p["tuned"]["applied"]
    # An inventory draft length wins (and says so).
    p = plan(TUNED, specdec_server_max_draft_len=3)
    assert spec(p)["num_speculative_tokens"] == 3 and "specdec_server_max_draft_len" in p["tuned"]["why"]


def test_a_tuned_none_is_overridden_by_the_inventorys_method():
    none = dict(TUNED, method="none", max_draft_len=None)
    p = plan(none)
    assert p["method"] == "draft_target" and spec(p)["num_speculative_tokens"] == 3
    assert p["tuned"]["applied"] is False and "specdec_server_method" in p["tuned"]["why"]
