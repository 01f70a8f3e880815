# -*- coding: utf-8 -*-
"""specdec_plan refuses a TP=2 deployment whose nodes hold different images under the same name (the image facts
trtllm_container publishes per node, trtllm_container_image_info.id)."""

from __future__ import annotations

import types

from ansible_collections.sparkops.specdec.plugins.action import specdec_plan
from ansible_collections.sparkops.specdec.plugins.module_utils import _container

IMAGE = "nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc12"


class HostVars(dict):
    def raw_get(self, host):
        return {k: v for k, v in self[host].items() if k != "trtllm_container_image_info"}


def run(ids):
    task = types.SimpleNamespace(args={"topology": "two_sparks"}, check_mode=False, diff=False, async_val=0,
                                 action="sparkops.specdec.specdec_plan")
    connection = types.SimpleNamespace(_shell=types.SimpleNamespace(tmpdir=None))
    action = specdec_plan.ActionModule(task, connection, None, None, None, None)
    hostvars = HostVars()
    for index, host in enumerate(("spark-1", "spark-2")):
        hostvars[host] = {"ansible_host": "10.0.0.%d" % (index + 1), "trtllm_container_image": IMAGE}
        if ids.get(host):
            hostvars[host]["trtllm_container_image_info"] = {"name": IMAGE, "id": ids[host]}
    task_vars = {"inventory_hostname": "spark-1", "groups": {"spark_head": ["spark-1"], "spark_workers": ["spark-2"]},
                 "ansible_play_hosts_all": ["spark-1", "spark-2"], "hostvars": hostvars}
    return action.run(task_vars=task_vars)


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
