# -*- coding: utf-8 -*-
# The plan with layouts (issue 24): a pair's plan is byte-identical to the one before layouts, more Sparks need a
# layout, tp_size x pp_size = GPUs, a ring or switch address plan is checked deployment-wide.

from __future__ import annotations

import hashlib
import json

from ansible_collections.sparkops.specdec.plugins.plugin_utils import _plan

IMAGE = "nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc12"
COMMITS = {"nvidia/Qwen3-235B-A22B-FP4": "a" * 40, "nvidia/Qwen3-235B-A22B-Eagle3": "b" * 40,
           "openai/gpt-oss-120b": "d" * 40, "nvidia/gpt-oss-120b-Eagle3-long-context": "e" * 40}
# Recorded from main at 7b43883 (before layouts) with the same inputs: the launch fingerprint, the sha256 of the whole
# plan's JSON and of the state file written after a start.
PAIR_FINGERPRINT = "d6e12ded5a1075885b8c7b6573b0f9ff723293e8927946c66139e5b8d29df10d"
PAIR_PLAN_SHA = "f72ff84522c9e28708015f5196be57941deeefbc6b0a6fb2412b47022307cda8"
PAIR_STATE_SHA = "4d3306740fa1732270e2a2a496b4e36a352fb2a9e9019e19eeb2dcc7d0d7a70d"


def _build(members, **settings):
    base = {"trtllm_container_image": IMAGE, "specdec_server_preset": "auto"}
    base.update(settings)
    addresses = {m: "10.20.0.%d" % (37 + i) for i, m in enumerate(members)}
    dep = _plan.deployment_from_inventory(base, "two_sparks", members, members[0], addresses)
    return _plan.build_plan(dep, trtllm_version="1.3.0rc12", version_source="image tag", commits=COMMITS,
                            image_id="sha256:" + "c" * 64)


def test_pair_plan_is_byte_identical_to_before_layouts():
    built = _build(["spark-1", "spark-2"])
    assert built["errors"] == []
    plan = built["plan"]
    assert plan["layout"] == "direct" and plan["pp_size"] == 1
    assert plan["fingerprint"] == PAIR_FINGERPRINT
    # The engine vllm's fields (issue 23) are empty on a TensorRT-LLM pair.
    assert plan["speculative_config"] is None and plan["vllm_version"] is None and plan["worker_argv"] == {}
    before = {k: v for k, v in plan.items()
              if k not in ("layout", "pp_size", "speculative_config", "vllm_version", "worker_argv")}
    assert hashlib.sha256(json.dumps(before, sort_keys=True).encode()).hexdigest() == PAIR_PLAN_SHA
    state = _plan.new_state(plan, {}, "2026-11-27T00:00:00+00:00")
    assert hashlib.sha256(repr(state).encode()).hexdigest() == PAIR_STATE_SHA
    assert "--pp_size" not in plan["argv"]


def test_explicit_direct_is_the_same_pair():
    assert _build(["spark-1", "spark-2"], specdec_layout="direct")["plan"]["fingerprint"] == PAIR_FINGERPRINT


def test_one_spark_has_no_layout():
    built = _build(["spark-1"], specdec_server_preset="gpt-oss-120b-eagle3")
    assert built["errors"] == [] and built["plan"]["layout"] is None


def test_three_sparks_without_a_layout_is_one_line():
    built = _build(["s1", "s2", "s3"], specdec_server_tp_size=3)
    assert ("specdec_layout: the deployment has 3 Sparks and no layout; set specdec_layout: ring (three Sparks cabled "
            "in a ring) or switch (two to four Sparks through a switch).") in built["errors"]


def test_four_node_ring_needs_consent():
    refused = _build(["a", "b", "c", "d"], specdec_layout="ring", specdec_server_tp_size=4)
    assert any(e.startswith("specdec_layout: a 4-node ring is not an NVIDIA-supported layout") for e in refused["errors"])
    accepted = _build(["a", "b", "c", "d"], specdec_layout="ring", specdec_server_tp_size=4,
                      specdec_layout_accept_four_node_ring=True, specdec_nccl_bootstrap="management_interface")
    # Accepted: reached over the management network (each Spark's ansible_host), with NCCL_ALGO=Ring.
    assert accepted["errors"] == [] and accepted["plan"]["layout"] == "ring"
    assert accepted["plan"]["rank_env"]["NCCL_ALGO"] == "Ring"
    # A Spark without a management IP address: one line before anything changes.
    base = {"trtllm_container_image": IMAGE, "specdec_server_preset": "auto", "specdec_layout": "ring",
            "specdec_server_tp_size": 4, "specdec_layout_accept_four_node_ring": True,
            "specdec_nccl_bootstrap": "management_interface"}
    dep = _plan.deployment_from_inventory(base, "spark_cluster", ["a", "b", "c", "d"], "a",
                                          {"a": "10.20.0.37", "b": "10.20.0.38", "c": "spark-c.lan", "d": "10.20.0.40"})
    built = _plan.build_plan(dep, trtllm_version="1.3.0rc12", version_source="image tag", commits=COMMITS,
                             image_id="sha256:" + "c" * 64)
    assert built["errors"] == [
        "specdec_layout_accept_four_node_ring: the Spark opposite the head has no cable to it, so a 4-node ring is "
        "reached over the management network (mpirun's hostfile, the container sshd, the peer copies), but the "
        "ansible_host of c is not an IP address; set it to the Spark's management IP address, or use specdec_layout: "
        "switch for four Sparks."]


def test_ring_with_pipeline_parallel():
    built = _build(["s1", "s2", "s3"], specdec_layout="ring", specdec_server_tp_size=1, specdec_server_pp_size=3,
                   specdec_nccl_bootstrap="management_interface")
    assert built["errors"] == []
    argv = built["plan"]["argv"]
    assert argv[argv.index("--tp_size"):argv.index("--tp_size") + 4] == ["--tp_size", "1", "--pp_size", "3"]
    assert built["plan"]["pp_size"] == 3


def test_tp_times_pp_not_the_gpus_is_one_line():
    built = _build(["s1", "s2", "s3"], specdec_layout="ring", specdec_server_tp_size=2, specdec_server_pp_size=2)
    assert [e for e in built["errors"] if e.startswith("specdec_server_tp_size:")] == [
        "specdec_server_tp_size: tp_size 2 x pp_size 2 = 4 ranks, but deployment s1 has 3 GPU(s) (one per Spark); set "
        "specdec_server_tp_size and specdec_server_pp_size so that their product is 3, e.g. tp 3 x pp 1 or tp 1 x pp 3."]


def test_pp_size_in_extra_args_is_the_plans():
    built = _build(["spark-1", "spark-2"], specdec_server_extra_args=["--pp_size", "2"])
    assert any(e.startswith("specdec_server_extra_args: --pp_size is set by the plan") for e in built["errors"])


def test_check_fabric_uses_the_layouts_plan():
    ring = {"specdec_layout": "ring"}
    assert _plan.check_fabric(["s1", "s2", "s3"], lambda h: ring, {"s1": "10.20.0.37"}) == []
    errors = _plan.check_fabric(["s1", "s2", "s3"], lambda h: ring, {"s1": "192.168.4.20"})
    assert errors and all("contains the management address 192.168.4.20 of s1" in e for e in errors)
    # A pair keeps today's checks (a management address inside a link subnet, in today's words).
    pair = _plan.check_fabric(["a", "b"], lambda h: {}, {"a": "192.168.100.5"})
    assert pair[0].startswith("netplan_qsfp_link_subnets: fabric subnet 192.168.100.0/24 of a contains the management "
                              "address 192.168.100.5 of a")
