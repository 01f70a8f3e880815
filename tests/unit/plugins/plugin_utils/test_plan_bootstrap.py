# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""specdec_nccl_bootstrap in the plan (issue 24 item 2): the default keeps a pair's launch spec byte for byte (its
fingerprint, so a pair deployed before re-runs changed=0); management_interface puts the management interface's
variables of module_utils/_layout.fabric_env in the launch spec (TensorRT-LLM's mpirun -x, vLLM's ranks) and makes
vLLM's --master-addr the head's management address."""

from __future__ import annotations

import pytest

from ansible_collections.sparkops.specdec.plugins.module_utils import _container, _layout, _server
from ansible_collections.sparkops.specdec.plugins.plugin_utils import _plan
from ansible_collections.sparkops.specdec.tests.unit.plugins.module_utils.test_container import settings
from ansible_collections.sparkops.specdec.tests.unit.plugins.plugin_utils.test_plan_layouts import (
    PAIR_FINGERPRINT,
    _build,
)

MGMT = {"specdec_nccl_bootstrap": "management_interface"}
TRT_KEYS = ("NCCL_SOCKET_IFNAME", "UCX_NET_DEVICES", "OMPI_MCA_btl_tcp_if_include", "OMPI_MCA_oob_tcp_if_include")
VLLM_COMMITS = {"nvidia/Qwen3.8-27B-NVFP4": "d" * 40, "z-lab/Qwen3.8-27B-DFlash2": "e" * 40}
# The vLLM pair's launch fingerprint and its worker's, from main at d044dce (before the bootstrap choice), same inputs.
VLLM_PAIR_FINGERPRINT = "f375090844730d46a387e94f964d98ee877640f44127d5b1eef85cf48723d875"
VLLM_WORKER_FINGERPRINT = "48690c1132a5aa3c093a5502aa6b986d4ad2f5c27ebf7a8419f0c3f2660fb992"


def _vllm(addresses=None, **extra):
    s = dict({"specdec_engine": "vllm", "trtllm_container_image": "vllm/vllm-openai:v0.28.0"}, **extra)
    members = ["spark-1", "spark-2"]
    dep = _plan.deployment_from_inventory(s, "two_sparks", members, members[0],
                                          {"spark-1": "10.20.0.37", "spark-2": "10.20.0.38"} if addresses is None
                                          else addresses)
    return _plan.build_plan(dep, commits=VLLM_COMMITS, vllm_version="0.32.0+cpu")


def flag(argv, name):
    return argv[argv.index(name) + 1]


@pytest.mark.parametrize("given", [{}, {"specdec_nccl_bootstrap": "fabric_interfaces"},
                                   {"specdec_nccl_bootstrap": "fabric_interfaces",
                                    "specdec_nccl_management_interface": "eth0"}])
def test_default_bootstrap_keeps_the_pairs_launch_spec_and_fingerprint(given):
    # A TensorRT-LLM pair deployed by main re-runs changed=0: same launch spec, same fingerprint, same server.sh.
    plan = _build(["spark-1", "spark-2"], **given)["plan"]
    assert plan["fingerprint"] == PAIR_FINGERPRINT
    assert not set(plan["launch"]["env"]) & set(_layout.BOOTSTRAP_ENV)
    before = _build(["spark-1", "spark-2"])["plan"]
    assert _server.render_script(plan["launch"], "/s", "c", "/s/d.json") == \
        _server.render_script(before["launch"], "/s", "c", "/s/d.json")
    # A vLLM pair too (head and worker), and its --master-addr stays the head's fabric address.
    vllm = _vllm(**given)["plan"]
    assert vllm["fingerprint"] == VLLM_PAIR_FINGERPRINT
    assert _plan.fingerprint(vllm["worker_launch"]["spark-2"]) == VLLM_WORKER_FINGERPRINT
    assert flag(vllm["argv"], "--master-addr") == "192.168.100.10"


def test_management_bootstrap_of_a_trtllm_pair_is_in_its_launch_env():
    built = _build(["spark-1", "spark-2"], **MGMT)
    assert built["errors"] == []
    plan = built["plan"]
    env = plan["launch"]["env"]
    assert {k: env[k] for k in TRT_KEYS} == dict.fromkeys(TRT_KEYS, "enP7s7")
    assert "GLOO_SOCKET_IFNAME" not in env and env["HF_HUB_OFFLINE"] == "1"
    # The one function: the same values the engine container gets (module_utils/_container.container_spec).
    container = _container.container_spec(settings(bootstrap="management_interface"))["env"]
    assert {k: container[k] for k in TRT_KEYS} == {k: env[k] for k in TRT_KEYS}
    # Another launch spec (a restart with consent), the server's argv unchanged; mpirun forwards each with -x.
    assert plan["fingerprint"] != PAIR_FINGERPRINT
    assert plan["argv"] == _build(["spark-1", "spark-2"])["plan"]["argv"]
    script = _server.render_script(plan["launch"], "/s", "c", "/s/d.json")
    for key in TRT_KEYS:
        assert "export %s=enP7s7\n" % key in script and "-x %s " % key in script
    # The interface named by specdec_nccl_management_interface.
    other = _build(["spark-1", "spark-2"], specdec_nccl_management_interface="eth0", **MGMT)["plan"]["launch"]["env"]
    assert {k: other[k] for k in TRT_KEYS} == dict.fromkeys(TRT_KEYS, "eth0")


def test_management_bootstrap_on_one_spark_changes_nothing():
    one = _build(["spark-1"], specdec_server_preset="gpt-oss-120b-eagle3", **MGMT)
    assert one["errors"] == []
    assert one["plan"]["fingerprint"] == _build(["spark-1"], specdec_server_preset="gpt-oss-120b-eagle3")["plan"][
        "fingerprint"]


def test_specdec_server_env_cannot_set_what_the_bootstrap_sets():
    built = _build(["spark-1", "spark-2"], specdec_server_env={"NCCL_SOCKET_IFNAME": "eno1"}, **MGMT)
    assert [e for e in built["errors"] if e.startswith("specdec_server_env:")] == [
        "specdec_server_env: NCCL_SOCKET_IFNAME is set by specdec_nccl_bootstrap: management_interface (enP7s7, from "
        "specdec_nccl_management_interface); remove it from specdec_server_env."]
    # With the default, the user's value stays (as before).
    assert _build(["spark-1", "spark-2"], specdec_server_env={"NCCL_SOCKET_IFNAME": "eno1"})["errors"] == []


def test_management_bootstrap_of_a_vllm_pair_master_addr_and_env():
    built = _vllm(**MGMT)
    assert built["errors"] == []
    plan = built["plan"]
    worker = plan["worker_argv"]["spark-2"]
    assert flag(plan["argv"], "--master-addr") == "10.20.0.37" and flag(worker, "--master-addr") == "10.20.0.37"
    assert plan["worker_launch"]["spark-2"]["rendezvous"] == "tcp://10.20.0.37:29501"
    env = plan["launch"]["env"]
    assert {k: v for k, v in env.items() if k in _layout.BOOTSTRAP_ENV} == {
        "NCCL_SOCKET_IFNAME": "enP7s7", "GLOO_SOCKET_IFNAME": "enP7s7"}
    assert plan["worker_launch"]["spark-2"]["env"] == env
    assert plan["fingerprint"] != VLLM_PAIR_FINGERPRINT
    # The container's (the same function) and VLLM_HOST_IP at the node's management address.
    container = _container.container_spec(settings(engine="vllm", bootstrap="management_interface",
                                                   management_address="10.20.0.37"))["env"]
    assert (container["NCCL_SOCKET_IFNAME"], container["GLOO_SOCKET_IFNAME"], container["VLLM_HOST_IP"]) == (
        "enP7s7", "enP7s7", "10.20.0.37")


def test_management_bootstrap_of_vllm_needs_the_heads_ip():
    built = _vllm({"spark-1": "spark-1.lan", "spark-2": "10.20.0.38"}, **MGMT)
    assert [e for e in built["errors"] if e.startswith("specdec_nccl_bootstrap:")] == [
        "specdec_nccl_bootstrap: management_interface makes vLLM's --master-addr the head's management address, but "
        "the ansible_host of spark-1 is 'spark-1.lan', not an IP address; set ansible_host of spark-1 to its "
        "management IPv4 address, or set specdec_nccl_bootstrap: fabric_interfaces."]
    unset = _vllm({}, **MGMT)
    assert any("the ansible_host of spark-1 is not set, not an IP address" in e for e in unset["errors"])
    # TensorRT-LLM needs no management IP in the plan: its mpirun reads the interface name.
    dep = _plan.deployment_from_inventory(dict({"trtllm_container_image": "x:1"}, **MGMT), "two_sparks",
                                          ["spark-1", "spark-2"], "spark-1", {})
    assert not [e for e in _plan.build_plan(dep)["errors"] if e.startswith("specdec_nccl_bootstrap:")]
