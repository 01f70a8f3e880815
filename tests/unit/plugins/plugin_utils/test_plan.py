# -*- coding: utf-8 -*-
# Unit tests for the PRIVATE module_util sparkops.specdec.plugins.plugin_utils._plan:
# deployments, presets, key spelling per TensorRT-LLM version, the merge of the user's
# options, the launch spec, the restart decision and the state file.

from __future__ import annotations

import copy

import pytest
import yaml

from ansible_collections.sparkops.specdec.plugins.plugin_utils import _plan

COMMITS = {
    "nvidia/Qwen3-235B-A22B-FP4": "a" * 40,
    "nvidia/Qwen3-235B-A22B-Eagle3": "b" * 40,
    "openai/gpt-oss-120b": "c" * 40,
    "nvidia/gpt-oss-120b-Eagle3-long-context": "d" * 40,
    "nvidia/Llama-3.3-70B-Instruct-FP4": "e" * 40,
    "nvidia/Llama-3.1-8B-Instruct-FP4": "f" * 40,
}


def dep(settings=None, members=("spark-1", "spark-2"), topology=None):
    members = list(members)
    base = {"trtllm_container_image": "nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc12",
            "specdec_state_dir": "/var/lib/sparkops/specdec",
            "specdec_container_hf_cache_dir": "/root/.cache/huggingface"}
    base.update(settings or {})
    topo = topology or ("two_sparks" if len(members) > 1 else "single_spark")
    return _plan.deployment_from_inventory(base, topo, members, members[0], {"spark-1": "10.0.0.21"})


def build(settings=None, members=("spark-1", "spark-2"), version="1.3.0rc12", commits=None, pre_download=False):
    commits = None if pre_download else (COMMITS if commits is None else commits)
    return _plan.build_plan(dep(settings, members), trtllm_version=version, version_source="test", commits=commits)


def ok(settings=None, **kw):
    out = build(settings, **kw)
    assert out["errors"] == []
    return out["plan"]


def errors(settings=None, **kw):
    out = build(settings, **kw)
    assert out["errors"], "expected an error"
    for line in out["errors"]:
        assert "\n" not in line
    return " | ".join(out["errors"])


# ------------------------------------------------------------------ presets and runbook
def test_two_sparks_preset_matches_runbook():
    plan = ok()
    assert plan["preset"] == "qwen3-235b-eagle3-tp2"
    assert plan["llm_api_options"]["speculative_config"] == {
        "decoding_type": "Eagle", "max_draft_len": 3,
        "speculative_model_dir": "/root/.cache/huggingface/sparkops-drafts/nvidia--Qwen3-235B-A22B-Eagle3"}
    assert plan["argv"][:5] == ["trtllm-serve", "nvidia/Qwen3-235B-A22B-FP4", "--backend", "pytorch", "--tp_size"]
    assert plan["port"] == 8355 and plan["endpoint"] == "http://10.0.0.21:8355/v1"
    assert [m["role"] for m in plan["models"]] == ["target", "draft"]


@pytest.mark.parametrize("method,preset,draft_type", [
    ("eagle3", "gpt-oss-120b-eagle3", "Eagle"),
    ("draft_target", "llama-3.3-70b-draft-target", "DraftTarget"),
])
def test_single_spark_presets(method, preset, draft_type):
    plan = ok({"specdec_server_method": method}, members=["spark-1"])
    assert plan["preset"] == preset
    assert plan["llm_api_options"]["speculative_config"]["decoding_type"] == draft_type
    assert plan["endpoint"] == "http://127.0.0.1:8000/v1"


def test_llama_preset_puts_kv_fraction_on_the_command_line():
    plan = ok({"specdec_server_method": "draft_target"}, members=["spark-1"])
    assert plan["argv"][plan["argv"].index("--kv_cache_free_gpu_memory_fraction") + 1] == "0.9"
    assert "free_gpu_memory_fraction" not in plan["llm_api_options"]["kv_cache_config"]


def test_method_none_has_no_draft():
    plan = ok({"specdec_server_method": "none"}, members=["spark-1"])
    assert "speculative_config" not in plan["llm_api_options"]
    assert [m["role"] for m in plan["models"]] == ["target"]
    assert plan["draft_model"] is None


def test_config_text_is_the_yaml_of_the_options():
    plan = ok({"specdec_server_llm_api_options": {"cuda_graph_config": {"batch_sizes": [1, 2]}, "x_y": "on"}})
    assert yaml.safe_load(plan["config_text"]) == plan["llm_api_options"]
    assert plan["config_text"].startswith("# Managed by sparkops.specdec")


# ------------------------------------------------------------------ spelling per version
@pytest.mark.parametrize("version,name", [
    ("1.3.0rc12", "legacy"), ("1.2.0", "legacy"), ("1.3.0rc26", "legacy"),
    ("1.3.0rc27", "current"), ("1.4.0rc1", "current"), ("1.4.0", "current"), (None, "legacy"), ("garbage", "legacy")])
def test_spelling_for(version, name):
    assert _plan.spelling_for(version)["name"] == name


def test_regression_newer_image_renders_new_spelling():
    """Was: only the TensorRT-LLM 1.3.0rc12 spellings existed (Eagle, speculative_model_dir)."""
    plan = ok(version="1.4.0rc1")
    spec = plan["llm_api_options"]["speculative_config"]
    assert spec["decoding_type"] == "Eagle3" and "speculative_model" in spec and "speculative_model_dir" not in spec
    plan = ok({"specdec_server_method": "draft_target"}, members=["spark-1"], version="1.4.0rc1")
    assert plan["llm_api_options"]["speculative_config"]["decoding_type"] == "Draft_Target"


@pytest.mark.parametrize("kwargs,expected", [
    ({"override": "1.4.0rc1", "env": ["TRT_LLM_VERSION=1.3.0rc12"]}, ("1.4.0rc1", "trtllm_container_trtllm_version")),
    ({"env": ["PATH=/x", "TRT_LLM_VERSION=1.3.0rc12"]}, ("1.3.0rc12", "image environment TRT_LLM_VERSION")),
    ({"env": ["TRT_LLM_VERSION="], "labels": {"org.opencontainers.image.version": "1.4.0rc1-sparkops-lab-standin"}},
     ("1.4.0rc1", "image label org.opencontainers.image.version")),
    ({"package_version": "1.2.0"}, ("1.2.0", "tensorrt_llm package metadata")),
    ({}, ("1.3.0rc12", "image tag")),
])
def test_image_version_order(kwargs, expected):
    assert _plan.image_version("nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc12", **kwargs) == expected


def test_image_version_digest_has_no_tag():
    version, reason = _plan.image_version("nvcr.io/nvidia/tensorrt-llm/release@sha256:" + "0" * 64)
    assert version is None and "tag" in reason
    assert _plan.tag_of("registry:5000/x/y") is None and _plan.tag_of("registry:5000/x/y:1.2") == "1.2"


# ------------------------------------------------------------------ merge and conflicts
def test_regression_speculative_config_in_llm_api_options_is_merged():
    """Was: the second combine was not recursive and dropped the user's speculative_config."""
    plan = ok({"specdec_server_llm_api_options": {"speculative_config": {"eagle3_one_model": False},
                                                  "kv_cache_config": {"dtype": "fp8"}}})
    spec = plan["llm_api_options"]["speculative_config"]
    assert spec["eagle3_one_model"] is False and spec["max_draft_len"] == 3 and spec["decoding_type"] == "Eagle"
    expected = {"free_gpu_memory_fraction": 0.9, "enable_block_reuse": False, "dtype": "fp8"}
    assert plan["llm_api_options"]["kv_cache_config"] == expected


def test_max_draft_len_from_options_alone_is_used():
    plan = ok({"specdec_server_llm_api_options": {"speculative_config": {"max_draft_len": 2}}})
    assert plan["max_draft_len"] == 2


@pytest.mark.parametrize("settings,names", [
    ({"specdec_server_max_draft_len": 4, "specdec_server_llm_api_options": {"speculative_config": {"max_draft_len": 2}}},
     ["specdec_server_max_draft_len", "speculative_config.max_draft_len"]),
    ({"specdec_server_max_num_tokens": 512, "specdec_server_llm_api_options": {"max_num_tokens": 256}},
     ["specdec_server_max_num_tokens", "specdec_server_llm_api_options.max_num_tokens"]),
    ({"specdec_server_return_perf_metrics": True, "specdec_server_llm_api_options": {"return_perf_metrics": False}},
     ["specdec_server_return_perf_metrics", "return_perf_metrics"]),
    ({"specdec_server_kv_cache_free_gpu_memory_fraction": 0.8,
      "specdec_server_llm_api_options": {"kv_cache_config": {"free_gpu_memory_fraction": 0.7}}},
     ["specdec_server_kv_cache_free_gpu_memory_fraction", "free_gpu_memory_fraction"]),
    ({"specdec_server_llm_api_options": {"speculative_config": {"decoding_type": "Eagle3"}}},
     ["speculative_config.decoding_type", "specdec_server_method"]),
    ({"specdec_server_llm_api_options": {"speculative_config": {"speculative_model_dir": "/x"}}},
     ["speculative_config.speculative_model_dir", "specdec_server_draft_model"]),
    ({"specdec_server_extra_args": ["--port=9000"]}, ["specdec_server_extra_args", "--port"]),
    ({"specdec_server_extra_args": ["--revision", "main"]}, ["specdec_server_extra_args", "--revision"]),
])
def test_setting_given_twice_names_both(settings, names):
    text = errors(settings)
    for name in names:
        assert name in text


def test_user_kv_fraction_goes_where_the_preset_puts_it():
    plan = ok({"specdec_server_kv_cache_free_gpu_memory_fraction": 0.8})
    assert plan["llm_api_options"]["kv_cache_config"]["free_gpu_memory_fraction"] == 0.8
    assert "--kv_cache_free_gpu_memory_fraction" not in plan["argv"]


def test_return_perf_metrics_setting():
    assert ok({"specdec_server_return_perf_metrics": True})["llm_api_options"]["return_perf_metrics"] is True
    assert "return_perf_metrics" not in ok()["llm_api_options"]


# ------------------------------------------------------------------ revisions and launch spec
def test_regression_pinned_revision_reaches_the_server():
    """Was: the downloaded revision never reached trtllm-serve (it served whatever main resolved to)."""
    plan = ok({"specdec_server_target_revision": "v1.0"})
    assert plan["models"][0]["revision"] == "v1.0"
    argv = plan["argv"]
    assert argv[argv.index("--revision") + 1] == COMMITS["nvidia/Qwen3-235B-A22B-FP4"]
    assert plan["launch"]["models"]["nvidia/Qwen3-235B-A22B-FP4"] == "a" * 40


def test_pre_download_plan_has_no_launch():
    plan = build(pre_download=True)["plan"]
    assert plan["launch"] is None and "--revision" not in plan["argv"]


def test_missing_commit_is_an_error():
    assert "no downloaded commit" in errors(commits={"nvidia/Qwen3-235B-A22B-FP4": "a" * 40})


def test_fingerprint_changes_with_draft_len_and_commit_only():
    base = ok()["fingerprint"]
    assert ok()["fingerprint"] == base
    assert ok({"specdec_server_max_draft_len": 2})["fingerprint"] != base
    other = dict(COMMITS, **{"nvidia/Qwen3-235B-A22B-FP4": "9" * 40})
    assert ok(commits=other)["fingerprint"] != base


# ------------------------------------------------------------------ consistency
def test_regression_draft_target_with_eagle_head_on_two_sparks():
    """Was: two Sparks with method draft_target rendered DraftTarget with the EAGLE-3 head as draft."""
    text = errors({"specdec_server_method": "draft_target"})
    assert "specdec_server_draft_model" in text and "EAGLE-3 head" in text


@pytest.mark.parametrize("settings,members,name", [
    ({"specdec_server_tp_size": 1}, ["spark-1", "spark-2"], "specdec_server_tp_size"),
    ({"specdec_server_tp_size": 2}, ["spark-1"], "specdec_server_tp_size"),
    ({"specdec_server_method": "eagle4"}, ["spark-1"], "specdec_server_method"),
    ({"specdec_server_preset": "qwen-4"}, ["spark-1"], "specdec_server_preset"),
    ({"specdec_server_port": 2233}, ["spark-1", "spark-2"], "specdec_container_ssh_port"),
    ({"specdec_server_draft_model": "not an id"}, ["spark-1"], "specdec_server_draft_model"),
    ({"specdec_server_target_model": "x"}, ["spark-1"], "specdec_server_target_model"),
    ({"specdec_server_max_draft_len": 33}, ["spark-1"], "specdec_server_max_draft_len"),
    ({"specdec_engine": "sglang"}, ["spark-1"], "specdec_engine"),
    ({"specdec_server_env": {"bad name": "1"}}, ["spark-1"], "specdec_server_env"),
    ({"specdec_server_llm_api_options": "speculative_config"}, ["spark-1"], "specdec_server_llm_api_options"),
    ({"specdec_server_extra_args": "--foo"}, ["spark-1"], "specdec_server_extra_args"),
])
def test_deployment_errors(settings, members, name):
    assert name in errors(settings, members=members)


def test_head_must_be_a_member():
    d = dep()
    d["head"] = "spark-9"
    assert "specdec_head_host" in " ".join(_plan.build_plan(d, commits=COMMITS)["errors"])


def test_deployment_id_defaults_to_head():
    assert dep()["id"] == "spark-1"
    assert dep({"specdec_deployment_id": "pair-a"})["id"] == "pair-a"


# ------------------------------------------------------------------ decisions and state
def _state_for(plan, now="2026-01-01T00:00:00+00:00"):
    return _plan.new_state(plan, {}, now)


def test_decide():
    plan = ok()
    state = _state_for(plan)
    assert _plan.decide(state, plan, True, False)["action"] == "none"
    assert _plan.decide(state, plan, False, False)["action"] == "start"
    assert _plan.decide({}, plan, False, False)["action"] == "start"
    other = ok({"specdec_server_max_draft_len": 2})
    refused = _plan.decide(state, other, True, False)
    assert refused["action"] == "refuse"
    assert "max_draft_len 3 -> 2" in refused["reason"] and "config_sha256" in refused["reason"]
    assert _plan.decide(state, other, True, True)["action"] == "restart"
    assert _plan.decide({}, plan, True, False)["action"] == "refuse"
    # Deferred: another launch spec keeps running, consent or not; a server that runs the plan or none is unaffected.
    for consent in (False, True):
        deferred = _plan.decide(state, other, True, consent, defer=True)
        assert deferred["action"] == "deferred" and "max_draft_len 3 -> 2" in deferred["reason"]
    assert _plan.decide(state, plan, True, False, defer=True)["action"] == "none"
    assert _plan.decide(state, other, False, False, defer=True)["action"] == "start"


def test_regression_previous_server_comes_from_the_state_file():
    """Was: the previous server's port and model were recovered by regex from previous/server.sh."""
    first = ok()
    second = ok({"specdec_server_max_draft_len": 2, "specdec_server_port": 9000})
    s1 = _state_for(first, "t1")
    s2 = _plan.new_state(second, s1, "t2")
    assert s2["schema_version"] == 1 and s2["created_at"] == "t1" and s2["updated_at"] == "t2"
    assert s2["running"]["launch"]["port"] == 9000 and s2["previous"]["launch"]["port"] == 8355
    assert s2["previous"]["target_model"] == "nvidia/Qwen3-235B-A22B-FP4"
    assert s2["previous"]["config_text"] == first["config_text"]
    # Starting the same spec again (after a crash) keeps the older previous.
    s3 = _plan.new_state(second, s2, "t3")
    assert s3["previous"]["launch"]["port"] == 8355


def test_deploy_after_teardown_starts_fresh_and_keeps_the_tuned_pick():
    """teardown.yml marks the state file (running null, previous the launch that ran, torn_down_at)."""
    from ansible_collections.sparkops.specdec.plugins.plugin_utils import _teardown

    plan = ok()
    ran = dict(_state_for(plan, "t1"), tuned={"method": "eagle3", "max_draft_len": 2})
    torn = _teardown.torn_down_state(ran, "t2")
    assert torn["running"] is None and torn["previous"] == ran["running"] and torn["torn_down_at"] == "t2"
    decision = _plan.decide(torn, plan, False, False)
    assert decision == {"action": "start", "reason": "no server runs"}
    # A server answering on the port although the record was torn down is not this launch: no silent adoption.
    assert _plan.decide(torn, plan, True, False)["action"] == "refuse"
    after = _plan.new_state(plan, torn, "t3")
    assert after["running"]["fingerprint"] == plan["fingerprint"] and after["running"]["started_at"] == "t3"
    assert after["previous"] is None and "torn_down_at" not in after
    assert after["tuned"] == {"method": "eagle3", "max_draft_len": 2}
    assert after["created_at"] == "t1" and after["updated_at"] == "t3"


def test_state_is_json_serialisable_and_copied():
    import json
    plan = ok()
    state = _state_for(plan)
    json.dumps(state)
    before = copy.deepcopy(state)
    _plan.new_state(plan, state, "t")
    assert state == before


# ------------------------------------------------------------------ fabric
def test_fabric_addresses_and_checks():
    s = {}
    assert _plan.fabric_addresses(s, 1, 2) == (["192.168.100.11/24", "192.168.101.11/24"], None)
    single = {"netplan_qsfp_scheme": "single_subnet"}
    assert _plan.fabric_addresses(single, 1, 2)[0] == ["192.168.200.13/24", "192.168.200.15/24"]
    same = {"netplan_qsfp_addresses": ["192.168.100.10/24", "192.168.101.10/24"]}
    text = " ".join(_plan.check_fabric(["a", "b"], lambda h: same, {}))
    assert "a and b would both use 192.168.100.10" in text
    text = " ".join(_plan.check_fabric(["a", "b"], lambda h: {}, {"a": "192.168.100.50"}))
    assert "contains the management address 192.168.100.50" in text
    assert _plan.check_fabric(["a", "b"], lambda h: {}, {"a": "10.0.0.21", "b": "10.0.0.22"}) == []


# ------------------------------------------------------------------ run-time inputs
def test_commits_from_results_direct_and_async():
    direct = [{"commit": "a" * 40, "item": {"repo": "org/t"}}, {"failed": True, "item": {"repo": "org/d"}}]
    assert _plan.commits_from_results(direct) == {"org/t": "a" * 40}
    nested = [{"commit": "b" * 40, "item": {"ansible_job_id": "1", "item": {"repo": "org/d"}}}]
    assert _plan.commits_from_results(nested) == {"org/d": "b" * 40}


def test_parse_probe():
    plan = ok()
    state = _state_for(plan)
    import json
    text = json.dumps(state, indent=2) + "\nrunning\n"
    assert _plan.parse_probe(text, 0) == (state, True)
    assert _plan.parse_probe("null\nstopped\n", 0) == ({}, False)
    assert _plan.parse_probe("not json\nrunning\n", 0) == ({}, True)
    assert _plan.parse_probe('{"schema_version": 99}\nrunning\n', 0) == ({}, True)
    assert _plan.parse_probe("", 1) == ({}, False)


# ------------------------------------------------------------------ engine llamacpp
LLAMA_TARGET = "sparkops-lab/Qwen2.5-Coder-1.5B-Instruct-GGUF"
LLAMA_DRAFT = "sparkops-lab/Qwen2.5-Coder-0.5B-Instruct-GGUF"
LLAMA_COMMITS = {LLAMA_TARGET: "1" * 40, LLAMA_DRAFT: "2" * 40}
CACHE = "/root/.cache/huggingface"


def llama(settings=None, members=("spark-1",), commits=None, pre_download=False):
    merged = {"specdec_engine": "llamacpp", "trtllm_container_image": "sparkops-lab/llamacpp-server:test"}
    merged.update(settings or {})
    commits = None if pre_download else (LLAMA_COMMITS if commits is None else commits)
    return _plan.build_plan(dep(merged, members), commits=commits, image_id="sha256:" + "9" * 64)


def llama_ok(settings=None, **kw):
    out = llama(settings, **kw)
    assert out["errors"] == []
    return out["plan"]


def llama_errors(settings=None, **kw):
    out = llama(settings, **kw)
    assert out["errors"], "expected an error"
    for line in out["errors"]:
        assert "\n" not in line
    return " | ".join(out["errors"])


def test_llamacpp_auto_preset_draft_target_argv():
    plan = llama_ok()
    target = "%s/hub/models--sparkops-lab--Qwen2.5-Coder-1.5B-Instruct-GGUF/snapshots/%s/" \
             "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf" % (CACHE, "1" * 40)
    draft = "%s/hub/models--sparkops-lab--Qwen2.5-Coder-0.5B-Instruct-GGUF/snapshots/%s/" \
            "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf" % (CACHE, "2" * 40)
    assert plan["preset"] == "qwen2.5-coder-1.5b-llamacpp" and plan["engine"] == "llamacpp"
    assert plan["argv"] == [
        "llama-server", "-m", target, "-md", draft, "--spec-type", "draft-simple", "--spec-draft-n-max", "4",
        "--spec-draft-n-min", "0", "--metrics", "--slots", "--alias", LLAMA_TARGET, "-c", "4096",
        "--host", "localhost", "--port", "8080"]
    assert plan["model_files"] == {"target": target, "draft": draft}
    assert plan["max_draft_len"] == 4 and plan["draft_model"] == LLAMA_DRAFT
    assert plan["endpoint"] == "http://127.0.0.1:8080/v1"
    assert plan["launch"]["models"] == LLAMA_COMMITS


def test_llamacpp_downloads_only_the_gguf_file_into_the_cache():
    models = llama_ok()["models"]
    assert models == [
        {"role": "target", "repo": LLAMA_TARGET, "revision": "main", "local_dir": None,
         "allow_patterns": ["qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"]},
        {"role": "draft", "repo": LLAMA_DRAFT, "revision": "main", "local_dir": None,
         "allow_patterns": ["qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"]}]


def test_llamacpp_serves_the_downloaded_commit():
    """The GGUF path is the snapshot of the commit the download resolved, not of the branch."""
    plan = llama_ok({"specdec_server_target_revision": "v2"}, commits={LLAMA_TARGET: "3" * 40, LLAMA_DRAFT: "4" * 40})
    assert plan["models"][0]["revision"] == "v2"
    assert "/snapshots/%s/" % ("3" * 40) in plan["argv"][2]
    assert "/snapshots/%s/" % ("4" * 40) in plan["argv"][plan["argv"].index("-md") + 1]


def test_llamacpp_pre_download_plan_has_no_launch():
    plan = llama(pre_download=True)["plan"]
    assert plan["launch"] is None and plan["fingerprint"] is None
    assert "/snapshots/<commit of main>/" in plan["argv"][2]


def test_llamacpp_method_none_has_no_draft():
    plan = llama_ok({"specdec_server_method": "none"})
    assert "-md" not in plan["argv"] and "--spec-type" not in plan["argv"]
    assert [m["role"] for m in plan["models"]] == ["target"]
    assert plan["draft_model"] is None and plan["max_draft_len"] is None
    assert set(plan["model_files"]) == {"target"}


def test_llamacpp_threads_ctx_size_and_extra_args():
    plan = llama_ok({"specdec_server_threads": 2, "specdec_server_ctx_size": 2048, "specdec_server_port": 9090,
                     "specdec_server_host": "0.0.0.0", "specdec_server_max_draft_len": 8,
                     "specdec_server_extra_args": ["--poll", "0", "--spec-draft-poll", "0"]})
    argv = plan["argv"]
    assert argv[argv.index("-t") + 1] == "2" and argv[argv.index("-c") + 1] == "2048"
    assert argv[argv.index("--spec-draft-n-max") + 1] == "8"
    assert argv[-8:] == ["--host", "0.0.0.0", "--port", "9090", "--poll", "0", "--spec-draft-poll", "0"]
    assert "-t" not in llama_ok()["argv"]


def test_llamacpp_has_no_config_file_and_no_trtllm_version():
    plan = llama_ok()
    assert plan["config_text"] == "" and plan["config_file"] is None and plan["llm_api_options"] == {}
    assert plan["config_sha256"] == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert plan["launch"]["config_sha256"] == plan["config_sha256"]
    assert plan["trtllm_version"] is None and plan["spelling"] is None
    assert "HF_HUB_OFFLINE" not in plan["rank_env"] and not plan["tiktoken"]


def test_llamacpp_fingerprint_changes_with_draft_len_file_and_commit():
    base = llama_ok()["fingerprint"]
    assert llama_ok()["fingerprint"] == base
    assert llama_ok({"specdec_server_max_draft_len": 2})["fingerprint"] != base
    assert llama_ok({"specdec_server_method": "none"})["fingerprint"] != base
    assert llama_ok({"specdec_server_target_file": "q8/model-q8_0.gguf"})["fingerprint"] != base
    assert llama_ok(commits=dict(LLAMA_COMMITS, **{LLAMA_DRAFT: "5" * 40}))["fingerprint"] != base


def test_llamacpp_restart_decision_and_state():
    first = llama_ok()
    state = _plan.new_state(first, {}, "t1")
    assert state["engine"] == "llamacpp" and state["desired"]["image"] == "sparkops-lab/llamacpp-server:test"
    assert state["running"]["launch"]["image_id"] == "sha256:" + "9" * 64 and state["running"]["max_draft_len"] == 4
    assert _plan.decide(state, first, True, False)["action"] == "none"
    second = llama_ok({"specdec_server_max_draft_len": 2})
    refused = _plan.decide(state, second, True, False)
    assert refused["action"] == "refuse" and "max_draft_len 4 -> 2" in refused["reason"] and "argv" in refused["reason"]
    assert _plan.decide(state, second, True, True)["action"] == "restart"
    after = _plan.new_state(second, state, "t2")
    assert after["running"]["max_draft_len"] == 2 and after["previous"]["max_draft_len"] == 4
    assert after["previous"]["config_text"] == ""


@pytest.mark.parametrize("settings,members,fragments", [
    ({"specdec_server_method": "dflash"}, ["spark-1"], ["specdec_server_method: dflash is not available with engine llamacpp"]),
    ({}, ["spark-1", "spark-2"], ["specdec_engine: llamacpp serves on one Spark only for now"]),
    ({"specdec_server_preset": "gpt-oss-120b-eagle3"}, ["spark-1"],
     ["specdec_server_preset: gpt-oss-120b-eagle3 is a preset of engine trtllm", "qwen2.5-coder-1.5b-llamacpp"]),
    ({"specdec_server_target_model": "org/other-GGUF"}, ["spark-1"],
     ["specdec_server_target_file: not set for target model org/other-GGUF"]),
    ({"specdec_server_draft_model": "org/draft-GGUF"}, ["spark-1"], ["specdec_server_draft_file: not set for draft model"]),
    ({"specdec_server_target_file": "model.safetensors"}, ["spark-1"],
     ["specdec_server_target_file: 'model.safetensors' is not a GGUF file in the repo"]),
    ({"specdec_server_method": "none", "specdec_server_draft_file": "d.gguf"}, ["spark-1"],
     ["specdec_server_draft_file: method none serves without a draft"]),
    ({"specdec_server_llm_api_options": {"max_seq_len": 4096}}, ["spark-1"],
     ["specdec_server_llm_api_options: only engine trtllm reads it"]),
    ({"specdec_server_return_perf_metrics": True}, ["spark-1"], ["specdec_server_return_perf_metrics: only engine trtllm"]),
    ({"specdec_server_max_batch_size": 4}, ["spark-1"], ["specdec_server_max_batch_size: only engine trtllm", "--parallel"]),
    ({"specdec_server_kv_cache_free_gpu_memory_fraction": 0.5}, ["spark-1"],
     ["specdec_server_kv_cache_free_gpu_memory_fraction: only engine trtllm"]),
    ({"specdec_server_extra_args": ["--draft-max", "3"]}, ["spark-1"],
     ["--draft-max was removed from llama-server", "specdec_server_max_draft_len"]),
    ({"specdec_server_extra_args": ["-md", "/x.gguf"]}, ["spark-1"], ["-md is set by the plan", "specdec_server_draft_file"]),
    ({"specdec_server_extra_args": ["--port=9000"]}, ["spark-1"], ["--port is set by the plan", "specdec_server_port"]),
    ({"specdec_server_extra_args": ["--spec-type", "ngram"]}, ["spark-1"], ["--spec-type is set by the plan"]),
    ({"specdec_server_extra_args": ["--metrics"]}, ["spark-1"], ["--metrics is set by the plan; remove it."]),
    ({"specdec_server_threads": 0}, ["spark-1"], ["specdec_server_threads: 0 is not a thread count"]),
    ({"specdec_server_ctx_size": -1}, ["spark-1"], ["specdec_server_ctx_size: -1 is not a context size"]),
])
def test_llamacpp_errors(settings, members, fragments):
    text = llama_errors(settings, members=members)
    for fragment in fragments:
        assert fragment in text


def test_llamacpp_on_two_sparks_is_one_line():
    out = llama({}, members=["spark-1", "spark-2"])
    assert out["errors"] == ["specdec_engine: llamacpp serves on one Spark only for now; use "
                             "playbooks/single_spark.yml, or specdec_engine: trtllm for two Sparks."]


@pytest.mark.parametrize("name,value", [
    ("specdec_server_target_file", "x.gguf"), ("specdec_server_draft_file", "x.gguf"),
    ("specdec_server_ctx_size", 4096), ("specdec_server_threads", 2)])
def test_llamacpp_settings_are_errors_with_trtllm(name, value):
    text = errors({name: value}, members=["spark-1"])
    assert "%s: only engine llamacpp reads it" % name in text


def test_trtllm_preset_auto_unchanged_by_engine_presets():
    assert _plan.pick_preset("auto", None, ["a"]) == "gpt-oss-120b-eagle3"
    assert _plan.pick_preset("auto", "draft_target", ["a"]) == "llama-3.3-70b-draft-target"
    assert _plan.pick_preset("auto", None, ["a", "b"]) == "qwen3-235b-eagle3-tp2"
    assert _plan.pick_preset("auto", None, ["a"], "llamacpp") == "qwen2.5-coder-1.5b-llamacpp"
    assert _plan.pick_preset("auto", "none", ["a"], "llamacpp") == "qwen2.5-coder-1.5b-llamacpp"


# Fingerprints of the trtllm launch specs before engine llamacpp existed (image id sha256:1...1, the COMMITS
# above): adding the engine must not restart any running trtllm server.
TRTLLM_FINGERPRINTS = {
    ("two", "1.3.0rc12"): "4021aced7c33ba11355523f483aacb0fd059b2d0e42a003639affd9103bd0017",
    ("two", "1.4.0rc1"): "39220819528b5ec6a791c56542047a9fd085b129b3105f2ff8e60c5a7da3a029",
    ("eagle3", "1.3.0rc12"): "c0ca6832a1519cbe5186c40db85b56efb9dae533fc01260f30775f870aed2aae",
    ("eagle3", "1.4.0rc1"): "44fcb48b1e67b1e2a7b072522b98599dbf6a248a19898933794aef5e55df4651",
    ("draft_target", "1.3.0rc12"): "618264512b894a2c2aa8a8c64ee67851c7988c0267624d11760911a42fb6fa0e",
    ("draft_target", "1.4.0rc1"): "225b7a2c072d5b8b84be2199d1d116e771740803a9c8a4cd3685acaee8245fc6",
    ("none", "1.3.0rc12"): "fa87c384953b6f235459711a318faeee1a13eb5f1a3958721fb78217576e41cb",
}


@pytest.mark.parametrize("case,version", sorted(TRTLLM_FINGERPRINTS))
def test_regression_trtllm_launch_specs_unchanged(case, version):
    if case == "two":
        d = dep()
    else:
        d = dep({"specdec_server_method": case}, ["spark-1"])
    out = _plan.build_plan(d, trtllm_version=version, version_source="test", commits=COMMITS, image_id="sha256:" + "1" * 64)
    assert out["errors"] == []
    assert out["plan"]["fingerprint"] == TRTLLM_FINGERPRINTS[(case, version)]
    assert out["plan"]["engine"] == "trtllm" and out["plan"]["config_file"] == "/var/lib/sparkops/specdec/extra-llm-api-config.yml"
    assert out["plan"]["model_files"] is None and all("allow_patterns" not in m for m in out["plan"]["models"])


# ------------------------------------------------------------------ tool-call smoke test
@pytest.mark.parametrize("settings,members,run", [
    ({"specdec_server_method": "eagle3"}, ["spark-1"], True),            # gpt-oss: auto runs it
    ({"specdec_server_method": "none", "specdec_server_preset": "gpt-oss-120b-eagle3"}, ["spark-1"], True),
    ({"specdec_server_method": "draft_target"}, ["spark-1"], False),     # Llama 3.3: auto skips it
    ({}, ["spark-1", "spark-2"], False),                                  # Qwen3 TP=2
    ({"specdec_server_tool_smoke_test": "always"}, ["spark-1", "spark-2"], True),
    ({"specdec_server_method": "eagle3", "specdec_server_tool_smoke_test": "never"}, ["spark-1"], False),
])
def test_plan_says_whether_the_tool_call_smoke_test_runs(settings, members, run):
    plan = ok(settings, members=members)
    assert plan["tool_smoke"]["run"] is run
    assert plan["tool_smoke"]["why"]


# Issue 25 item 2: explicit per-node values checked across nodes and links.
@pytest.mark.parametrize("a, b, parted", [
    # b's second link in another subnet than a's
    (["192.168.100.10/24", "192.168.101.10/24"], ["192.168.100.11/24", "192.168.102.11/24"], [2]),
    # the same subnet but another prefix length on one end of link 1
    (["10.9.0.1/30", "10.9.1.1/30"], ["10.9.0.2/24", "10.9.1.2/30"], [1]),
    # the links swapped on b
    (["192.168.100.10/24", "192.168.101.10/24"], ["192.168.101.11/24", "192.168.100.11/24"], [1, 2]),
    # b explicit, a on the default scheme (192.168.100.10/24, 192.168.101.10/24)
    (None, ["192.168.100.11/24", "10.1.1.2/24"], [2]),
])
def test_each_link_has_both_ends_in_one_subnet(a, b, parted):
    settings = {"a": {"netplan_qsfp_addresses": a} if a else {}, "b": {"netplan_qsfp_addresses": b}}
    lines = _plan.check_fabric(["a", "b"], settings.get, {})
    links = [line for line in lines if "not one subnet" in line]
    assert [int(line.split("link ")[1][0]) for line in links] == parted, lines
    assert all(line.startswith("netplan_qsfp_addresses: link ") and "\n" not in line for line in links)


@pytest.mark.parametrize("a, b", [
    (["10.9.0.1/30", "10.9.1.1/30"], ["10.9.0.2/30", "10.9.1.2/30"]),
    (["192.168.100.10/24", "192.168.101.10/24"], None),
])
def test_links_in_one_subnet_pass(a, b):
    settings = {"a": {"netplan_qsfp_addresses": a} if a else {}, "b": {"netplan_qsfp_addresses": b} if b else {}}
    assert [line for line in _plan.check_fabric(["a", "b"], settings.get, {}) if "subnet" in line] == []


# Issue 25 item 2: a setting the chosen method ignores.
@pytest.mark.parametrize("make, settings, method_fix", [
    (build, {"specdec_server_method": "none", "specdec_server_max_draft_len": 4}, "eagle3 or draft_target"),
    (llama, {"specdec_server_method": "none", "specdec_server_max_draft_len": "3"}, "draft_target"),
])
def test_a_draft_length_with_method_none_is_refused(make, settings, method_fix):
    out = make(settings)
    assert out["errors"] == [
        "specdec_server_max_draft_len: %s, but method none serves without speculation, so nothing uses it; remove it, "
        "or set specdec_server_method: %s." % (settings["specdec_server_max_draft_len"], method_fix)]


# Issue 25 item 2: a draft model (or a draft revision of its own) given with method none: nothing downloads or serves it.
@pytest.mark.parametrize("make, settings, lines", [
    (build, {"specdec_server_method": "none", "specdec_server_draft_model": "nvidia/Qwen3-235B-A22B-Eagle3"},
     ["specdec_server_draft_model: nvidia/Qwen3-235B-A22B-Eagle3, but method none serves without a draft, so nothing "
      "downloads or uses it; remove it, or set specdec_server_method: eagle3 or draft_target."]),
    (build, {"specdec_server_method": "none", "specdec_server_draft_revision": "v2"},
     ["specdec_server_draft_revision: v2, but method none serves without a draft, so nothing downloads or uses it; "
      "remove it, or set specdec_server_method: eagle3 or draft_target."]),
    (llama, {"specdec_server_method": "none", "specdec_server_draft_model": "sparkops-lab/Qwen2.5-Coder-0.5B-Instruct-GGUF",
             "specdec_server_draft_revision": "a" * 40},
     ["specdec_server_draft_model: sparkops-lab/Qwen2.5-Coder-0.5B-Instruct-GGUF, but method none serves without a "
      "draft, so nothing downloads or uses it; remove it, or set specdec_server_method: draft_target.",
      "specdec_server_draft_revision: %s, but method none serves without a draft, so nothing downloads or uses it; "
      "remove it, or set specdec_server_method: draft_target." % ("a" * 40)]),
])
def test_a_draft_model_or_revision_with_method_none_is_refused(make, settings, lines):
    assert make(settings)["errors"] == lines


def test_method_none_without_a_draft_and_a_draft_with_a_method_pass():
    assert ok({"specdec_server_method": "none", "specdec_server_draft_model": None,
               "specdec_server_draft_revision": "main"})["draft_model"] is None
    assert ok({"specdec_server_method": "none", "specdec_server_draft_model": ""})["method"] == "none"
    plan = ok({"specdec_server_draft_model": "nvidia/Qwen3-235B-A22B-Eagle3", "specdec_server_draft_revision": "v2"})
    assert [(m["role"], m["revision"]) for m in plan["models"]][1] == ("draft", "v2")


def test_method_none_without_a_draft_length_and_a_draft_length_with_a_method_pass():
    assert ok({"specdec_server_method": "none"})["method"] == "none"
    assert ok({"specdec_server_method": "none", "specdec_server_max_draft_len": None})["method"] == "none"
    assert ok({"specdec_server_max_draft_len": 4})["max_draft_len"] == 4


# Issue 25 item 2: a flag given twice, through specdec_server_extra_args and the preset (or a setting).
@pytest.mark.parametrize("extra, members, line", [
    (["--max_batch_size", "4"], ("spark-1",),
     "specdec_server_extra_args: --max_batch_size is on trtllm-serve's command line already (the preset's or "
     "specdec_server_max_batch_size); remove it from the extra args and set specdec_server_max_batch_size instead."),
    (["--log_level", "info", "--max_num_tokens=2048"], ("spark-1", "spark-2"),
     "specdec_server_extra_args: --max_num_tokens is on trtllm-serve's command line already (the preset's or "
     "specdec_server_max_num_tokens); remove it from the extra args and set specdec_server_max_num_tokens instead."),
    (["--enable_chunked_prefill"], ("spark-1", "spark-2"),
     "specdec_server_extra_args: --enable_chunked_prefill is set by extra-llm-api-config.yml too "
     "(enable_chunked_prefill: false, the preset's or specdec_server_llm_api_options), which wins over the flag; set it "
     "in one place, e.g. specdec_server_llm_api_options.enable_chunked_prefill."),
    (["--kv_cache_free_gpu_memory_fraction", "0.5"], ("spark-1", "spark-2"),
     "specdec_server_extra_args: --kv_cache_free_gpu_memory_fraction is set by extra-llm-api-config.yml too "
     "(kv_cache_config.free_gpu_memory_fraction: 0.9, the preset's or specdec_server_llm_api_options), which wins over "
     "the flag; set it in one place, e.g. specdec_server_llm_api_options.kv_cache_config.free_gpu_memory_fraction."),
])
def test_a_flag_given_twice_through_extra_args_and_the_preset_is_refused(extra, members, line):
    assert build({"specdec_server_extra_args": extra}, members=members)["errors"] == [line]


@pytest.mark.parametrize("extra, members", [
    (["--max_batch_size", "4"], ("spark-1", "spark-2")),   # the pair's preset leaves it unset
    (["--log_level", "info"], ("spark-1",)),
])
def test_a_flag_the_preset_does_not_give_passes(extra, members):
    assert build({"specdec_server_extra_args": extra}, members=members)["errors"] == []
