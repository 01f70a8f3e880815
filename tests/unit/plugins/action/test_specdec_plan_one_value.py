# -*- coding: utf-8 -*-
"""A deployment has one value per setting: specdec_plan refuses a pair whose nodes disagree on one. Settings whose
name merely contains "token" (a token count, the tiktoken files) are compared like any other; only the Hugging Face
token may differ, since each node may hold its own (the worker can copy from the head and hold none)."""

from __future__ import annotations

import pytest

from ansible_collections.sparkops.specdec.tests.unit.plugins.action.specdec_plan_pair import run_pair


def differs(result, name):
    return [x for x in result.get("msg", "").splitlines() if x.startswith("- %s: differs between" % name)]


@pytest.mark.parametrize("name, a, b", [
    ("specdec_server_max_num_tokens", 8192, 4096),
    ("specdec_server_smoke_max_tokens", 16, 32),
    ("specdec_server_tiktoken_files", ["cl100k_base.tiktoken"], ["o200k_base.tiktoken"]),
])
def test_a_token_count_or_file_list_that_differs_between_the_nodes_is_refused(name, a, b):
    result = run_pair({"spark-1": {name: a}, "spark-2": {name: b}})
    assert result.get("failed"), result
    assert differs(result, name) == ["- %s: differs between spark-1 (%s), spark-2 (%s); a deployment has one value, "
                                     "set it once for the group (e.g. in group_vars/spark_nodes.yml)." % (name, a, b)]


def test_the_same_token_count_on_both_nodes_is_accepted():
    result = run_pair({"spark-1": {"specdec_server_max_num_tokens": 4096},
                       "spark-2": {"specdec_server_max_num_tokens": 4096}})
    assert not differs(result, "specdec_server_max_num_tokens"), result.get("msg")


def test_each_node_may_hold_its_own_hugging_face_token(monkeypatch):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    result = run_pair({"spark-1": {"specdec_server_hf_token": "hf_headTokenAAAAAAAAAAAAAAAAAAAAAAAA"},
                       "spark-2": {"specdec_server_hf_token": "hf_workerTokenBBBBBBBBBBBBBBBBBBBBBB"}})
    assert not differs(result, "specdec_server_hf_token"), result.get("msg")
    assert "TokenAAAA" not in str(result) and "TokenBBBB" not in str(result)
