# -*- coding: utf-8 -*-
# Unit tests of "who may call the endpoint" (issue 12, item 7) in the PRIVATE module_utils _plan and _settings:
# the API key (llama-server --api-key-file, fingerprint, restart on a change, refused for trtllm), the bind address
# words loopback and management (resolved, and the address our own calls use), and the exposure the preflight warns
# about.

from __future__ import annotations

import json

import pytest

from ansible_collections.sparkops.specdec.plugins.plugin_utils import _plan, _settings
from ansible_collections.sparkops.specdec.tests.unit.plugins.plugin_utils import test_plan as tp

KEY = "lab-api-key-0123456789abcdef"
OTHER = "lab-api-key-fedcba9876543210"
LLAMA_COMMITS = {"sparkops-lab/Qwen2.5-Coder-1.5B-Instruct-GGUF": "1" * 40,
                 "sparkops-lab/Qwen2.5-Coder-0.5B-Instruct-GGUF": "2" * 40}


def llama(settings=None, addresses=None, commits=None):
    base = {"specdec_engine": "llamacpp", "trtllm_container_image": "sparkops-lab/llamacpp-server:test",
            "specdec_state_dir": "/var/lib/sparkops/specdec"}
    base.update(settings or {})
    dep = _plan.deployment_from_inventory(base, "single_spark", ["spark-1"], "spark-1",
                                          {"spark-1": "192.168.250.11"} if addresses is None else addresses)
    return _plan.build_plan(dep, commits=dict(LLAMA_COMMITS) if commits is None else commits)


def llama_plan(settings=None, **kw):
    out = llama(settings, **kw)
    assert out["errors"] == []
    return out["plan"]


# ------------------------------------------------------------------ API key
def test_key_is_a_file_flag_and_a_fingerprint_never_the_key():
    plan = llama_plan({"specdec_api_key": KEY})
    argv = plan["argv"]
    assert argv[argv.index("--api-key-file") + 1] == "/var/lib/sparkops/specdec/api-key"
    # Before --host/--port (the plan's flags), after the model flags.
    assert argv.index("--api-key-file") < argv.index("--host")
    assert plan["api_key"]["file"] == "/var/lib/sparkops/specdec/api-key"
    assert plan["api_key"]["fingerprint"].startswith("pbkdf2-sha256:")
    assert plan["launch"]["api_key"] == plan["api_key"]["fingerprint"]
    state = _plan.new_state(plan, None, "2026-11-24T01:00:00+00:00")
    assert state["running"]["launch"]["api_key"] == plan["api_key"]["fingerprint"]
    # The key appears nowhere in the plan or the state file.
    assert KEY not in json.dumps(plan) and KEY not in json.dumps(state)


def test_no_key_no_flag_and_the_launch_spec_of_before():
    plan = llama_plan()
    assert "--api-key-file" not in plan["argv"] and "--api-key" not in plan["argv"]
    assert plan["api_key"] is None and "api_key" not in plan["launch"]
    # The fingerprint of a keyless launch is what it was before keys existed (no restart after an upgrade).
    assert plan["fingerprint"] == _plan.fingerprint(plan["launch"])


def test_fingerprint_depends_on_key_and_deployment():
    a = _plan.api_key_fingerprint(KEY, "spark-1")
    assert a == _plan.api_key_fingerprint(KEY, "spark-1")
    assert a != _plan.api_key_fingerprint(OTHER, "spark-1")
    assert a != _plan.api_key_fingerprint(KEY, "spark-2")
    assert _plan.api_key_fingerprint("", "spark-1") is None
    assert KEY not in a


def test_changed_key_is_a_change_that_needs_consent():
    old = llama_plan({"specdec_api_key": KEY})
    state = _plan.new_state(old, None, "2026-11-24T01:00:00+00:00")
    assert _plan.decide(state, old, True, False)["action"] == "none"
    for settings in ({"specdec_api_key": OTHER}, {"specdec_api_key": ""}):
        new = llama_plan(settings)
        assert new["fingerprint"] != old["fingerprint"]
        refused = _plan.decide(state, new, True, False)
        assert refused["action"] == "refuse" and "api_key" in refused["reason"]
        assert _plan.decide(state, new, True, True)["action"] == "restart"
    # Adding a key to a keyless server too.
    bare = llama_plan()
    assert _plan.decide(_plan.new_state(bare, None, "t"), old, True, False)["action"] == "refuse"


def test_key_with_trtllm_is_one_line_naming_the_setting_and_the_fix():
    out = tp.build({"specdec_api_key": KEY})
    assert out["errors"] == [
        "specdec_api_key: trtllm-serve has no API key option; remove it for engine trtllm and restrict who "
        "reaches the endpoint with specdec_server_host (loopback or management) or a firewall, or serve with "
        "specdec_engine: llamacpp."]
    assert KEY not in json.dumps(out)
    assert tp.build({"specdec_api_key": ""})["errors"] == []


@pytest.mark.parametrize("flag", ["--api-key", "--api-key-file"])
def test_key_flags_in_extra_args_are_owned_by_the_setting(flag):
    out = llama({"specdec_server_extra_args": [flag, "/tmp/k"]})
    assert ("specdec_server_extra_args: %s is set by the plan; remove it (set specdec_api_key instead)." % flag
            in out["errors"])


@pytest.mark.parametrize("value,fragment", [
    ("Zq7xK2", "is shorter than 16 characters"),
    (KEY + "\n", "has white space, a line break"),
    ("with a space 0123456789", "has white space"),
    ("#" + KEY, "starts with #"),
    ("Bearer" + KEY, "starts with Bearer"),
    (KEY + "\u00e9", "outside visible ASCII"),
])
def test_key_shape_is_checked_and_never_shown(value, fragment):
    lines = _settings.check_settings({"specdec_api_key": value}, tp_specs())
    assert len(lines) == 1 and lines[0].startswith("specdec_api_key: the value (hidden) ")
    assert fragment in lines[0] and "openssl rand -hex 32" in lines[0]
    assert value.strip("#\n") not in lines[0] and KEY not in lines[0]


@pytest.mark.parametrize("value", ["", KEY, "0" * 64])
def test_good_keys_pass(value):
    assert _settings.check_settings({"specdec_api_key": value}, tp_specs()) == []


def test_key_setting_is_secret():
    assert _settings.looks_secret("specdec_api_key")


def tp_specs():
    from ansible_collections.sparkops.specdec.tests.unit.plugins.plugin_utils import test_settings

    return test_settings.SPECS


# ------------------------------------------------------------------ bind address
@pytest.mark.parametrize("host,bound,local_url,endpoint,exposure", [
    ("loopback", "127.0.0.1", "http://127.0.0.1:8080", "http://127.0.0.1:8080/v1", "loopback"),
    ("localhost", "localhost", "http://127.0.0.1:8080", "http://127.0.0.1:8080/v1", "loopback"),
    ("management", "192.168.250.11", "http://192.168.250.11:8080", "http://192.168.250.11:8080/v1", "address"),
    ("10.1.2.3", "10.1.2.3", "http://10.1.2.3:8080", "http://10.1.2.3:8080/v1", "address"),
    ("fd00::5", "fd00::5", "http://[fd00::5]:8080", "http://[fd00::5]:8080/v1", "address"),
    ("0.0.0.0", "0.0.0.0", "http://127.0.0.1:8080", "http://192.168.250.11:8080/v1", "open_unauthenticated"),
    ("::", "::", "http://127.0.0.1:8080", "http://192.168.250.11:8080/v1", "open_unauthenticated"),
])
def test_bind_words_resolve_and_our_calls_use_the_bound_address(host, bound, local_url, endpoint, exposure):
    plan = llama_plan({"specdec_server_host": host})
    argv = plan["argv"]
    assert argv[argv.index("--host") + 1] == bound and plan["host"] == bound
    assert plan["local_url"] == local_url and plan["endpoint"] == endpoint
    assert plan["exposure"] == exposure
    assert plan["host_word"] == (host if host in ("loopback", "management") else None)
    # The state file records where the head reaches it (the rollback's health wait and smoke test use it).
    assert _plan.new_state(plan, None, "t")["running"]["local_url"] == local_url


def test_open_bind_with_a_key_is_open_not_unauthenticated():
    assert llama_plan({"specdec_server_host": "0.0.0.0", "specdec_api_key": KEY})["exposure"] == "open"


def test_management_word_for_trtllm_two_sparks_binds_the_head_address():
    plan = tp.ok({"specdec_server_host": "management"})
    argv = plan["argv"]
    assert argv[argv.index("--host") + 1] == "10.0.0.21"
    assert plan["endpoint"] == "http://10.0.0.21:8355/v1" and plan["local_url"] == "http://10.0.0.21:8355"
    assert plan["exposure"] == "address"


@pytest.mark.parametrize("addresses,shown", [({"spark-1": "spark-1.example"}, "'spark-1.example'"), ({}, "not set")])
def test_management_word_needs_an_ip_address(addresses, shown):
    out = llama({"specdec_server_host": "management"}, addresses=addresses)
    assert out["errors"] == [
        "specdec_server_host: management binds the address Ansible reaches spark-1 at, but its ansible_host is %s, "
        "not an IP address; set ansible_host of spark-1 to its management IPv4 address, or set specdec_server_host "
        "to that address." % shown]


@pytest.mark.parametrize("value", ["loopback", "management", "0.0.0.0", "::", "10.0.0.1", "spark-1.local"])
def test_bind_words_are_valid_settings(value):
    assert _settings.check_settings({"specdec_server_host": value}, tp_specs()) == []


def test_bad_bind_address_names_the_words():
    lines = _settings.check_settings({"specdec_server_host": "every interface"}, tp_specs())
    assert len(lines) == 1 and "loopback, management" in lines[0]


@pytest.mark.parametrize("host,key,expected", [
    ("127.0.0.1", False, "loopback"), ("::1", False, "loopback"), ("127.0.0.2", False, "loopback"),
    ("10.0.0.1", False, "address"), ("0.0.0.0", True, "open"), ("0.0.0.0", False, "open_unauthenticated"),
    ("::", False, "open_unauthenticated"),
])
def test_exposure(host, key, expected):
    assert _plan.exposure(host, key) == expected


# ------------------------------------------------------------------ preflight: the endpoint open to every network
def _exposure_rows(plan_result, hosts=("spark-1", "spark-2")):
    from ansible_collections.sparkops.specdec.tests.unit.plugins.plugin_utils import test_preflight as tpf

    by_key, dummy = tpf.run(plan=plan_result, hosts=list(hosts),
                            probes={h: tpf.registered() for h in hosts})
    return {h: by_key[("endpoint_exposure", h)] for h in hosts}


def test_preflight_warns_on_the_head_when_open_without_a_key():
    # The two-Spark preset binds 0.0.0.0 (trtllm-serve, no key): the head's row warns, the worker's skips.
    out = tp.build()
    rows = _exposure_rows({"deployment": {"image": "x", "topology": "two_sparks", "head": "spark-1"}, "plan": out["plan"]})
    assert rows["spark-1"]["status"] == "warn"
    assert rows["spark-1"]["message"] == (
        "the endpoint listens on 0.0.0.0:8355 (every interface) with no API key: anyone on any network this node is on "
        "can call it (a host firewall, if any, is not checked)")
    assert "specdec_server_host: loopback" in rows["spark-1"]["fix"] and "specdec_api_key" in rows["spark-1"]["fix"]
    assert rows["spark-2"]["status"] == "skip" and rows["spark-2"]["message"] == (
        "skipped: the server listens on the head (spark-1)")


@pytest.mark.parametrize("settings,status,text", [
    ({"specdec_server_host": "::"}, "warn", "listens on [::]:8080 (every interface) with no API key"),
    ({"specdec_server_host": "0.0.0.0", "specdec_api_key": KEY}, "pass",
     "listens on 0.0.0.0:8080 (every interface) and requires the API key"),
    ({"specdec_server_host": "management"}, "pass", "listens on 192.168.250.11:8080 only"),
    ({"specdec_server_host": "management", "specdec_api_key": KEY}, "pass",
     "listens on 192.168.250.11:8080 only and requires the API key"),
    ({"specdec_server_host": "loopback"}, "pass", "listens on 127.0.0.1:8080: only the node itself can call it"),
    ({}, "pass", "listens on localhost:8080: only the node itself"),
])
def test_preflight_exposure_of_one_spark(settings, status, text):
    plan = llama_plan(settings)
    row = _exposure_rows({"deployment": {"image": "x", "topology": "single_spark", "head": "spark-1"}, "plan": plan},
                         hosts=("spark-1",))["spark-1"]
    assert row["status"] == status and text in row["message"], row
    assert KEY not in json.dumps(row)
