# -*- coding: utf-8 -*-
"""The tuned value (plugin_utils/_plan.py check_tuned, apply_tuned, new_state) and its precedence: an inventory
setting > the tuned value > the preset; only for the engine, target and draft it was measured on."""

from __future__ import annotations

import copy

from ansible_collections.sparkops.specdec.plugins.plugin_utils import _plan

TARGET = "sparkops-lab/Qwen2.5-Coder-1.5B-Instruct-GGUF"
DRAFT = "sparkops-lab/Qwen2.5-Coder-0.5B-Instruct-GGUF"
TUNED = {"engine": "llamacpp", "target_model": TARGET, "draft_model": DRAFT, "method": "draft_target",
         "max_draft_len": 2, "reason": "draft length 2: ..."}
COMMITS = {TARGET: "1" * 40, DRAFT: "2" * 40}


def dep(**settings):
    s = {"specdec_engine": "llamacpp"}
    s.update(settings)
    return {"id": "spark-1", "topology": "single_spark", "members": ["spark-1"], "head": "spark-1",
            "engine": "llamacpp", "image": "img", "preset": "auto", "settings": s, "addresses": {}}


def plan(tuned=None, **settings):
    built = _plan.build_plan(dep(**settings), commits=COMMITS, image_id="sha256:" + "7" * 64, tuned=tuned)
    assert not built["errors"], built["errors"]
    return built["plan"]


def test_without_tuned_the_preset_serves():
    p = plan()
    assert p["max_draft_len"] == 4 and p["method"] == "draft_target"
    assert p["sources"] == {"method": "preset", "max_draft_len": "preset"} and p["tuned"]["applied"] is False


def test_tuned_wins_over_the_preset_and_changes_the_fingerprint():
    p = plan(TUNED)
    assert p["max_draft_len"] == 2 and p["sources"]["max_draft_len"] == "tuned" and p["tuned"]["applied"]
    assert p["launch"]["argv"][p["launch"]["argv"].index("--spec-draft-n-max") + 1] == "2"
    assert p["fingerprint"] != plan()["fingerprint"]
    # The same plan as an explicit setting of 2: a plain deploy after the tuner serves the same launch spec.
    assert p["fingerprint"] == plan(specdec_server_max_draft_len=2)["fingerprint"]


def test_inventory_setting_wins_over_tuned():
    p = plan(TUNED, specdec_server_max_draft_len=3)
    assert p["max_draft_len"] == 3 and p["sources"]["max_draft_len"] == "inventory"
    assert p["tuned"]["applied"] is False and "specdec_server_max_draft_len" in p["tuned"]["why"]


def test_tuned_none_turns_speculation_off_unless_the_method_is_set():
    none = dict(TUNED, method="none", max_draft_len=None)
    p = plan(none)
    assert p["method"] == "none" and p["max_draft_len"] is None and p["draft_model"] is None
    assert "-md" not in p["launch"]["argv"] and p["sources"]["method"] == "tuned"
    p = plan(none, specdec_server_method="draft_target")
    assert p["method"] == "draft_target" and p["max_draft_len"] == 4 and p["sources"]["method"] == "inventory"


def test_tuned_none_serves_none_beside_the_inventorys_draft_settings():
    """The tuner's pick none is no method none of the inventory's: the inventory's draft model and draft length stay
    for the day a method is set (or the pick changes), and the deploy is not refused for them."""
    none = dict(TUNED, method="none", max_draft_len=None)
    p = plan(none, specdec_server_draft_model=DRAFT, specdec_server_max_draft_len=3)
    assert p["method"] == "none" and p["sources"]["method"] == "tuned" and p["draft_model"] is None
    p = plan(none, specdec_server_draft_revision="2" * 40, specdec_server_draft_file="qwen2.5-coder-0.5b-instruct-q8_0.gguf")
    assert p["method"] == "none" and [m["role"] for m in p["models"]] == ["target"]


def test_tuned_for_another_model_or_engine_is_ignored_with_the_reason():
    p = plan(dict(TUNED, target_model="other/model"))
    assert p["max_draft_len"] == 4 and not p["tuned"]["applied"] and "other/model" in p["tuned"]["why"]
    p = plan(dict(TUNED, draft_model="other/draft"))
    assert p["max_draft_len"] == 4 and "other/draft" in p["tuned"]["why"]
    p = plan(dict(TUNED, engine="trtllm"))
    assert p["max_draft_len"] == 4 and not p["tuned"]["applied"]


def test_unusable_tuned_records_are_ignored_and_named():
    for bad, word in ((dict(TUNED, max_draft_len=0), "max_draft_len"), (dict(TUNED, method="medusa"), "method"),
                      ({"method": "none"}, "missing"), (dict(TUNED, method="none"), "null")):
        assert any(word in line for line in _plan.check_tuned(bad)), bad
        p = plan(bad)
        assert p["max_draft_len"] == 4 and not p["tuned"]["applied"] and "not usable" in p["tuned"]["why"]
    assert _plan.check_tuned(TUNED) == []
    assert _plan.check_tuned(dict(TUNED, method="none", max_draft_len=None)) == []


def test_new_state_keeps_the_tuned_record_across_restarts():
    p = plan(TUNED)
    state = _plan.new_state(p, {"schema_version": 1, "tuned": copy.deepcopy(TUNED)}, "t1")
    assert state["tuned"] == TUNED and state["running"]["max_draft_len"] == 2
    again = _plan.new_state(plan(TUNED, specdec_server_max_draft_len=3), state, "t2")
    assert again["tuned"] == TUNED and again["running"]["max_draft_len"] == 3
    assert _plan.new_state(p, {}, "t")["tuned"] is None


def test_the_plan_names_the_preset_method():
    assert plan(specdec_server_method="none")["preset_method"] == "draft_target"


def test_new_state_keeps_the_fabric_baseline_across_starts():
    # The fabric test's baseline (module fabric_test) stays in the state file until a new layout's test replaces it.
    fabric = {"layout": "direct", "nodes": ["spark-1", "spark-2"], "hosts": ["192.168.100.10", "192.168.100.11"],
              "busbw": 22.9611, "measured_at": "2026-11-28T06:00:00Z"}
    state = _plan.new_state(plan(TUNED), {"schema_version": 1, "fabric": copy.deepcopy(fabric)}, "t1")
    assert state["fabric"] == fabric
    assert _plan.new_state(plan(TUNED, specdec_server_max_draft_len=3), state, "t2")["fabric"] == fabric
    # None recorded: no key (a state file without a baseline stays byte for byte as before).
    assert "fabric" not in _plan.new_state(plan(TUNED), {}, "t")
