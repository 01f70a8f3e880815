# -*- coding: utf-8 -*-
"""specdec_plan (the action, as the playbooks call it) with specdec_api_key: the plan holds the key file and a
fingerprint, never the key; a key with engine trtllm and a key that differs between the nodes of a pair are reported
without quoting it; specdec_server_host: management binds the head's ansible_host."""

from __future__ import annotations

import json

import pytest

from ansible_collections.sparkops.specdec.tests.unit.plugins.action.test_specdec_plan_secrets import run

KEY = "lab-key-Canary0123456789abcdef"
LLAMA = {"specdec_engine": "llamacpp", "trtllm_container_image": "sparkops-lab/llamacpp-server:test"}


@pytest.fixture(autouse=True)
def no_env_token(monkeypatch):
    monkeypatch.delenv("HF_TOKEN", raising=False)


def test_llamacpp_plan_has_the_key_file_and_fingerprint_not_the_key():
    result = run({"spark-1": dict(LLAMA, ansible_host="10.0.0.1", specdec_api_key=KEY,
                                  specdec_server_host="management")})
    assert not result.get("failed"), result.get("msg")
    plan = result["plan"]
    assert "--api-key-file" in plan["argv"] and plan["api_key"]["fingerprint"].startswith("pbkdf2-sha256:")
    assert plan["argv"][plan["argv"].index("--host") + 1] == "10.0.0.1" and plan["local_url"] == "http://10.0.0.1:8080"
    assert KEY not in json.dumps(result)


def test_key_with_trtllm_stops_the_plan_without_quoting_it():
    result = run({"spark-1": {"ansible_host": "10.0.0.1", "specdec_api_key": KEY}})
    assert result["failed"] and "- specdec_api_key: trtllm-serve has no API key option" in result["msg"]
    assert KEY not in json.dumps(result)


def test_malformed_key_is_reported_hidden():
    result = run({"spark-1": dict(LLAMA, ansible_host="10.0.0.1", specdec_api_key=KEY + " x")})
    assert result["failed"] and "specdec_api_key: the value (hidden) has white space" in result["msg"]
    assert KEY not in json.dumps(result)


def test_key_differing_between_a_pair_is_not_quoted():
    hosts = {"spark-1": {"ansible_host": "10.0.0.1", "specdec_api_key": KEY},
             "spark-2": {"ansible_host": "10.0.0.2", "specdec_api_key": KEY[::-1]}}
    result = run(hosts, topology="two_sparks")
    assert result["failed"]
    assert KEY not in json.dumps(result) and KEY[::-1] not in json.dumps(result)
