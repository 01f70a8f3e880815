# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Extra speculative_config keys (issue 38 item 4, plugin_utils/_spec_keys.py), through the plan's entry point
(_plan.build_plan, as the preflight's specdec_plan calls it): an unknown key, a value of the wrong type or out of
range, a key of another method, version or engine are one line naming the key; a known key with a good value plans."""

from __future__ import annotations

import json

from hypothesis import given, settings, strategies as st

from ansible_collections.sparkops.specdec.plugins.plugin_utils import _plan, _spec_keys

TARGET, DRAFT = "org/target", "org/draft"
COMMITS = {TARGET: "a" * 40, DRAFT: "b" * 40}
VLLM_SETTING = "specdec_server_speculative_config"
TRT_SETTING = "specdec_server_llm_api_options.speculative_config"
FAST = settings(max_examples=60, deadline=None)


def plan(engine, method, extra, version):
    s = {"specdec_engine": engine, "specdec_server_method": method, "specdec_server_target_model": TARGET,
         "specdec_server_draft_model": DRAFT if method in _plan.DRAFT_METHODS else None,
         "specdec_server_max_draft_len": 4,
         "trtllm_container_image": "vllm/vllm-openai:v0.28.0" if engine == "vllm" else
         "nvcr.io/nvidia/tensorrt-llm/release:%s" % version}
    if engine == "vllm":
        s[VLLM_SETTING] = extra
    else:
        s["specdec_server_llm_api_options"] = {"speculative_config": extra}
    dep = _plan.deployment_from_inventory(s, "single_spark", ["spark-1"], "spark-1")
    kw = {"vllm_version": version} if engine == "vllm" else {"trtllm_version": version}
    return _plan.build_plan(dep, commits=COMMITS, **kw)


def lines_about(built, setting, name):
    return [e for e in built["errors"] if e.startswith("%s.%s:" % (setting, name))]


ENGINES = st.sampled_from([("vllm", m, "0.32.0") for m in ("eagle3", "draft_target", "mtp", "ngram", "dflash")]
                          + [("trtllm", m, v) for m in ("eagle3", "draft_target") for v in ("1.3.0rc12", "1.4.0rc1")])
KNOWN = set(_spec_keys.VLLM_KEYS) | set(_spec_keys.VLLM_REFUSED) | set(_spec_keys.TRTLLM_KEYS) | set(
    _spec_keys.TRTLLM_REFUSED) | set(_plan.VLLM_SPEC_KEYS) | set(_plan.PLAN_OWNED_SPEC_KEYS)
NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,30}", fullmatch=True).filter(lambda n: n not in KNOWN)
VALUES = st.one_of(st.none(), st.booleans(), st.integers(-5, 100), st.floats(allow_nan=False), st.text(max_size=8))


@FAST
@given(ENGINES, NAMES, VALUES)
def test_an_unknown_key_is_one_line_naming_it(engine, name, value):
    eng, method, version = engine
    setting = VLLM_SETTING if eng == "vllm" else TRT_SETTING
    built = plan(eng, method, {name: value}, version)
    found = lines_about(built, setting, name)
    assert len(found) == 1 and "not a speculative_config key of" in found[0], built["errors"]
    assert len(built["errors"]) == 1, built["errors"]


@FAST
@given(ENGINES, st.data())
def test_an_int_key_out_of_range_or_of_another_type_is_refused(engine, data):
    eng, method, version = engine
    table = _spec_keys.TABLES[eng][0]
    ints = sorted(k for k, r in table.items() if r["type"] == "int" and r["low"] is not None
                  and (not r["methods"] or method in r["methods"]) and _spec_keys._known_in(r, _plan.parse_version(
                      version)) and k not in _plan.PLAN_OWNED_SPEC_KEYS and k != "max_draft_len")
    name = data.draw(st.sampled_from(ints))
    bad = data.draw(st.one_of(st.integers(-100, table[name]["low"] - 1), st.text(min_size=1, max_size=5),
                              st.booleans(), st.lists(st.integers(), max_size=2)))
    setting = VLLM_SETTING if eng == "vllm" else TRT_SETTING
    built = plan(eng, method, {name: bad}, version)
    assert len(lines_about(built, setting, name)) == 1, (name, bad, built["errors"])
    # (at least the draft length 4: max_total_draft_tokens counts the chain's tokens too)
    good = data.draw(st.integers(max(table[name]["low"], 4), 60))
    assert plan(eng, method, {name: good}, version)["errors"] == [], (name, good)


def test_good_extra_keys_reach_the_engine_config():
    built = plan("vllm", "ngram", {"prompt_lookup_min": 2, "prompt_lookup_max": 5, "draft_sample_method": "greedy"},
                 "0.32.0")
    assert built["errors"] == []
    spec = json.loads(built["plan"]["argv"][built["plan"]["argv"].index("--speculative-config") + 1])
    assert (spec["prompt_lookup_min"], spec["prompt_lookup_max"], spec["draft_sample_method"]) == (2, 5, "greedy")
    built = plan("trtllm", "eagle3", {"eagle3_one_model": False, "max_total_draft_tokens": 6}, "1.3.0rc12")
    assert built["errors"] == []
    assert built["plan"]["llm_api_options"]["speculative_config"]["max_total_draft_tokens"] == 6


def test_relations_methods_versions_and_the_other_engines_names():
    cases = [
        ("vllm", "ngram", {"prompt_lookup_min": 5, "prompt_lookup_max": 2}, "0.32.0", VLLM_SETTING,
         "prompt_lookup_min", "above prompt_lookup_max"),
        ("vllm", "eagle3", {"prompt_lookup_max": 3}, "0.32.0", VLLM_SETTING, "prompt_lookup_max",
         "applies only to method ngram"),
        ("vllm", "ngram", {"quantization": "fp8"}, "0.32.0", VLLM_SETTING, "quantization", "applies only to method"),
        ("vllm", "eagle3", {"max_draft_len": 3}, "0.32.0", VLLM_SETTING, "max_draft_len", "num_speculative_tokens"),
        ("vllm", "eagle3", {"synthetic_acceptance_length": 2.0}, "0.32.0", VLLM_SETTING,
         "synthetic_acceptance_length", "rejection_sample_method: synthetic"),
        ("vllm", "eagle3", {"rejection_sample_method": "synthetic", "synthetic_acceptance_rates": [0.9, 0.8]},
         "0.32.0", VLLM_SETTING, "synthetic_acceptance_rates", "has 2 entries"),
        ("vllm", "eagle3", {"rejection_sample_method": "synthtic"}, "0.32.0", VLLM_SETTING,
         "rejection_sample_method", "did you mean synthetic?"),
        ("vllm", "eagle3", {"moe_backend": "tri\u200bton"}, "0.32.0", VLLM_SETTING, "moe_backend", "U+200B"),
        ("trtllm", "eagle3", {"num_speculative_tokens": 3}, "1.3.0rc12", TRT_SETTING, "num_speculative_tokens",
         "max_draft_len"),
        ("trtllm", "draft_target", {"eagle3_one_model": True}, "1.4.0rc1", TRT_SETTING, "eagle3_one_model",
         "applies only to method eagle3"),
        ("trtllm", "eagle3", {"acceptance_window": 8}, "1.4.0rc1", TRT_SETTING, "acceptance_window",
         "names it acceptance_rate_window_size"),
        ("trtllm", "eagle3", {"acceptance_rate_window_size": 8}, "1.3.0rc12", TRT_SETTING,
         "acceptance_rate_window_size", "names it acceptance_window"),
        ("trtllm", "eagle3", {"max_total_draft_tokens": 2}, "1.3.0rc12", TRT_SETTING, "max_total_draft_tokens",
         "below the draft length 4"),
        ("trtllm", "eagle3", {"draft_len_schedule": {1: 2}}, "1.3.0rc12", TRT_SETTING, "draft_len_schedule", "add 1: 4"),
    ]
    for eng, method, extra, version, setting, name, words in cases:
        built = plan(eng, method, extra, version)
        found = lines_about(built, setting, name)
        assert len(found) == 1 and words in found[0], (extra, built["errors"])
        assert len(built["errors"]) == 1, built["errors"]
