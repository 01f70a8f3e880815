# -*- coding: utf-8 -*-
# Unit tests for the action plugin sparkops.specdec.specdec_plan with engine llamacpp: the inventory of one node
# (a stand-in for hostvars), the image facts as trtllm_container publishes them, and the plan it returns.

from __future__ import annotations

from ansible_collections.sparkops.specdec.tests.unit.plugins.action.specdec_plan_pair import action_for, published

LLAMA = {"specdec_engine": "llamacpp", "trtllm_container_image": "sparkops-lab/llamacpp-server:0c1e57098"}
# A llama.cpp image: no TRT_LLM_VERSION, no version label, no tensorrt_llm package, no version tag.
LLAMA_IMAGE = {"name": "sparkops-lab/llamacpp-server:0c1e57098", "id": "sha256:" + "7" * 64, "env": [], "labels": {},
               "package_version": ""}
COMMITS = {"sparkops-lab/Qwen2.5-Coder-1.5B-Instruct-GGUF": "1" * 40, "sparkops-lab/Qwen2.5-Coder-0.5B-Instruct-GGUF": "2" * 40}


def run(settings, **args):
    action = action_for(args)
    hostvars = published({"spark-1": dict(settings, ansible_host="192.168.250.11")})
    task_vars = {"inventory_hostname": "spark-1", "groups": {"spark_head": ["spark-1"]},
                 "ansible_play_hosts_all": ["spark-1"], "hostvars": hostvars}
    return action.run(task_vars=task_vars)


def test_llamacpp_image_needs_no_tensorrt_llm_version():
    result = run(LLAMA, topology="single_spark", image=LLAMA_IMAGE, commits=COMMITS)
    assert not result.get("failed"), result.get("msg")
    plan = result["plan"]
    assert plan["engine"] == "llamacpp" and plan["trtllm_version"] is None and plan["argv"][0] == "llama-server"
    assert plan["launch"]["image_id"] == LLAMA_IMAGE["id"]


def test_same_image_facts_with_trtllm_still_need_a_version():
    result = run({"trtllm_container_image": "registry.example.com/trtllm@sha256:" + "0" * 64}, topology="single_spark",
                 image=dict(LLAMA_IMAGE, name="x"), commits={})
    assert result["failed"] and "trtllm_container_trtllm_version: cannot tell the TensorRT-LLM version" in result["msg"]


def test_llamacpp_decision_and_state_after():
    result = run(LLAMA, topology="single_spark", image=LLAMA_IMAGE, commits=COMMITS, state={}, server_running=False)
    assert result["decision"]["action"] == "start"
    assert result["state_after"]["engine"] == "llamacpp"
    assert result["state_after"]["desired"]["image"] == "sparkops-lab/llamacpp-server:0c1e57098"
    assert result["state_after"]["running"]["config_text"] == ""


def test_a_deferred_restart_keeps_the_state_file_and_warns_on_the_head():
    first = run(LLAMA, topology="single_spark", image=LLAMA_IMAGE, commits=COMMITS, state={}, server_running=False)
    state = first["state_after"]
    changed = dict(LLAMA, specdec_server_max_draft_len=5)
    refused = run(changed, topology="single_spark", image=LLAMA_IMAGE, commits=COMMITS, state=state, server_running=True)
    assert refused["failed"] and refused["decision"]["action"] == "refuse"
    for consent in (False, True):
        got = run(changed, topology="single_spark", image=LLAMA_IMAGE, commits=COMMITS, state=state,
                  server_running=True, allow_restart=consent, defer_restart=True)
        assert not got.get("failed"), got.get("msg")
        assert got["decision"]["action"] == "deferred"
        assert got["state_after"] == state and got["state_after"] is not state
        assert got["plan"]["max_draft_len"] == 5
        assert [w for w in got.get("warnings", []) if w.startswith("specdec_server_defer_restart:")]
    # Nothing to defer: the same launch spec, or no server running.
    same = run(LLAMA, topology="single_spark", image=LLAMA_IMAGE, commits=COMMITS, state=state, server_running=True,
               defer_restart=True)
    assert same["decision"]["action"] == "none" and not same.get("warnings")
    stopped = run(changed, topology="single_spark", image=LLAMA_IMAGE, commits=COMMITS, state=state,
                  server_running=False, defer_restart=True)
    assert stopped["decision"]["action"] == "start" and stopped["state_after"]["running"]["max_draft_len"] == 5


VLLM = {"specdec_engine": "vllm", "trtllm_container_image": "vllm/vllm-openai:v0.28.0"}


def test_an_unreadable_vllm_version_names_why_the_read_failed():
    image = {"name": "vllm/vllm-openai:v0.28.0", "id": "sha256:" + "8" * 64, "env": [], "labels": {},
             "package_version": "", "package_version_error": "Error response from daemon: Container c1 is not running"}
    result = run(VLLM, topology="single_spark", image=image, commits={})
    assert result["failed"]
    assert ("trtllm_container_image: cannot read the vLLM version of vllm/vllm-openai:v0.28.0: python3 in the engine "
            "container failed (Error response from daemon: Container c1 is not running)") in result["msg"]
    result = run(VLLM, topology="single_spark", image=dict(image, package_version_error=None), commits={})
    assert result["failed"] and "(no vllm package metadata in the container)" in result["msg"]
