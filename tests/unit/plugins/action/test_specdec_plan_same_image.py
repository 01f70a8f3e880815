# -*- coding: utf-8 -*-
"""specdec_plan refuses a TP=2 deployment whose nodes hold different images under the same name (the image facts
trtllm_container publishes per node, trtllm_container_image_info.id)."""

from __future__ import annotations

from ansible_collections.sparkops.specdec.plugins.module_utils import _container
from ansible_collections.sparkops.specdec.tests.unit.plugins.action.specdec_plan_pair import PAIR, run_pair

IMAGE = "nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc12"


def run(ids):
    hosts = {}
    for host in PAIR:
        hosts[host] = {"trtllm_container_image": IMAGE}
        if ids.get(host):
            hosts[host]["trtllm_container_image_info"] = {"name": IMAGE, "id": ids[host]}
    return run_pair(hosts)


def test_different_image_ids_are_refused_with_both_named():
    result = run({"spark-1": "sha256:" + "a" * 64, "spark-2": "sha256:" + "b" * 64})
    line = [e for e in result["msg"].splitlines()
            if "trtllm_container_image: the nodes of this deployment hold different images under %s" % IMAGE in e]
    assert result["failed"] and len(line) == 1
    assert "(spark-1: sha256:%s, spark-2: sha256:%s)" % ("a" * 64, "b" * 64) in line[0]
    assert "pin it by digest" in line[0]
    # The trtllm_container role's line without its "Nothing was changed" (the plan's header says so for the run).
    assert line[0] == "- " + _container.same_image_problem(
        {"spark-1": "sha256:" + "a" * 64, "spark-2": "sha256:" + "b" * 64}, IMAGE, consequence="")


def test_same_image_or_missing_facts_pass_this_check():
    for ids in ({"spark-1": "sha256:" + "a" * 64, "spark-2": "sha256:" + "a" * 64}, {"spark-1": "sha256:" + "a" * 64},
                {}):
        result = run(ids)
        assert "hold different images" not in result.get("msg", ""), ids
