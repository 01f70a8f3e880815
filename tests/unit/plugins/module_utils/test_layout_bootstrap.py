# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""specdec_nccl_bootstrap on the node side (issue 24 item 2): the launch spec's bootstrap variables from
module_utils/_layout.fabric_env, the engine container's environment with either bootstrap, and the check of the
management interface before any change (module_utils/_layout.management_problems)."""

from __future__ import annotations

import json

import pytest

from ansible_collections.sparkops.specdec.plugins.module_utils import _container, _layout
from ansible_collections.sparkops.specdec.tests.unit.plugins.module_utils.test_container import settings
from ansible_collections.sparkops.specdec.tests.unit.plugins.module_utils.test_layout_env import PAIR_ENV

FIX = "or set specdec_nccl_bootstrap: fabric_interfaces."


RING_ENV = {"NCCL_IB_SUBNET_AWARE_ROUTING": "1", "NCCL_NET_PLUGIN": "none"}


def test_launch_env_is_empty_for_the_default_and_fabric_envs_management_entries_otherwise():
    for engine in ("trtllm", "vllm"):
        assert _layout.launch_env("direct", engine=engine) == {}
        assert _layout.launch_env("switch", engine=engine, nodes=4) == {}
        # A ring's own variables are in its launch spec (the state file shows them; mpirun forwards them).
        assert _layout.launch_env("ring", "fabric_interfaces", "eth0", engine=engine, nodes=3) == RING_ENV
    assert _layout.launch_env("ring", "management_interface", "eth0", nodes=4, accept_four_node_ring=True) == dict(
        RING_ENV, NCCL_ALGO="Ring", NCCL_SOCKET_IFNAME="eth0", UCX_NET_DEVICES="eth0",
        OMPI_MCA_btl_tcp_if_include="eth0", OMPI_MCA_oob_tcp_if_include="eth0")
    trt = _layout.launch_env("direct", "management_interface", "enP7s7")
    assert trt == {"NCCL_SOCKET_IFNAME": "enP7s7", "UCX_NET_DEVICES": "enP7s7", "OMPI_MCA_btl_tcp_if_include": "enP7s7",
                   "OMPI_MCA_oob_tcp_if_include": "enP7s7"}
    full = _layout.fabric_env("switch", ["enp1s0f1np1"], (), ["a", "b"], bootstrap="management_interface",
                              management_interface="enP7s7")["env"]
    assert all(full[k] == v for k, v in trt.items())
    assert _layout.launch_env("ring", "management_interface", "eth0", engine="vllm", nodes=3) == dict(
        RING_ENV, NCCL_SOCKET_IFNAME="eth0", GLOO_SOCKET_IFNAME="eth0")


def test_default_container_env_is_byte_identical_with_the_bootstrap_settings_passed():
    # The role now passes bootstrap, management_interface and management_address (roles/trtllm_container/vars): with
    # the default bootstrap the container a pair runs today is unchanged (no recreation, changed=0).
    given = settings(bootstrap="fabric_interfaces", management_interface="enP7s7", management_address="10.20.0.37")
    assert json.dumps(_container.container_spec(given)["env"]) == PAIR_ENV % ""
    vllm = dict(given, engine="vllm")
    assert _container.container_spec(vllm)["env"] == _container.container_spec(settings(engine="vllm"))["env"]


def test_management_container_env_keeps_the_hostfile_and_sshd_on_the_fabric():
    spec = _container.container_spec(settings(bootstrap="management_interface", management_interface="eth0",
                                              management_address="192.168.250.11"))
    env = spec["env"]
    for key in ("NCCL_SOCKET_IFNAME", "UCX_NET_DEVICES", "OMPI_MCA_btl_tcp_if_include", "OMPI_MCA_oob_tcp_if_include"):
        assert env[key] == "eth0"
    assert env["SSHD_LISTEN_ADDRESSES"] == "192.168.100.10 192.168.101.10"
    assert env["OMPI_MCA_orte_default_hostfile"] == "/var/lib/sparkops/specdec/openmpi-hostfile"
    assert "VLLM_HOST_IP" not in env


def _found(**over):
    base = {"exists": True, "up": True, "ipv4": ["10.20.0.37/24"], "interfaces": ["lo", "enP7s7", "wlP9s9"],
            "routes": {"10.20.0.38": "enP7s7"}}
    base.update(over)
    return base


PEERS = [("spark-2", "10.20.0.38")]


def test_management_interface_that_carries_the_address_or_routes_to_the_peers_passes():
    assert _layout.management_problems("enP7s7", "spark-1", _found(), "10.20.0.37", PEERS) == []
    # Ansible reaches the node through another address (a jump host): the route to every peer is enough.
    assert _layout.management_problems("enP7s7", "spark-1", _found(), "203.0.113.7", PEERS) == []
    assert _layout.management_problems("enP7s7", "spark-1", _found(routes={"10.20.0.38": "wlP9s9"}), "10.20.0.37",
                                       PEERS) == []


def test_management_interface_problems_are_one_line_each_naming_the_setting():
    missing = _layout.management_problems("enP7s7", "spark-1", _found(exists=False, interfaces=["lo", "eth0"]),
                                          "10.20.0.37", PEERS)
    assert missing == ["specdec_nccl_management_interface: spark-1 has no interface enP7s7 (its interfaces: eth0); set "
                       "it to the interface of the management network, the same name on every node (ip -o link show; "
                       "enP7s7 is a DGX Spark's Ethernet, wlP9s9 its Wi-Fi), " + FIX]
    down = _layout.management_problems("enP7s7", "spark-1", _found(up=False), "10.20.0.37", PEERS)
    assert down == ["specdec_nccl_management_interface: enP7s7 of spark-1 is down, and NCCL, UCX and OpenMPI bootstrap "
                    "over it (specdec_nccl_bootstrap: management_interface); bring it up with the node's management "
                    "address, set it to the interface that has it, " + FIX]
    bare = _layout.management_problems("enP7s7", "spark-1", _found(ipv4=[]), "10.20.0.37", PEERS)
    assert len(bare) == 1 and " of spark-1 has no IPv4 address, " in bare[0]
    wifi = _found(ipv4=["172.16.0.5/24"], routes={"10.20.0.38": "enP7s7"})
    elsewhere = _layout.management_problems("wlP9s9", "spark-1", wifi, "10.20.0.37",
                                            PEERS + [("spark-3", "10.20.0.39")])
    assert elsewhere == ["specdec_nccl_management_interface: wlP9s9 of spark-1 (172.16.0.5) carries neither 10.20.0.37 "
                         "(the address Ansible uses) nor the route to its peers (spark-2 10.20.0.38 via enP7s7; spark-3 "
                         "10.20.0.39 no route); set it to the interface that reaches the other Sparks (ip route get "
                         "<peer>), " + FIX]
    unread = _layout.management_problems("enP7s7", "spark-1", _found(error="the iproute2 ip command was not found"),
                                         "10.20.0.37", PEERS)
    assert unread == ["specdec_nccl_management_interface: cannot check enP7s7 on spark-1 (the iproute2 ip command was "
                      "not found); install iproute2 (ip) on the node, " + FIX]
    assert all("\n" not in line for line in missing + down + bare + elsewhere + unread)


def test_vllm_needs_the_address_on_the_interface():
    # --master-addr (the head) and VLLM_HOST_IP are the node's ansible_host: a route alone is not enough.
    assert _layout.management_problems("enP7s7", "spark-1", _found(), "10.20.0.37", PEERS, need_address=True) == []
    lines = _layout.management_problems("enP7s7", "spark-2", _found(), "10.20.0.99", PEERS, need_address=True)
    assert lines == ["specdec_nccl_management_interface: enP7s7 of spark-2 (10.20.0.37) does not carry 10.20.0.99, the "
                     "node's ansible_host, which engine vllm names in --master-addr (the head) and VLLM_HOST_IP with "
                     "specdec_nccl_bootstrap: management_interface; set ansible_host of spark-2 to its address on "
                     "enP7s7, " + FIX]


@pytest.mark.parametrize('layout,bootstrap,refused', [
    ('ring', 'fabric_interfaces', True), ('ring', None, True), ('ring', 'management_interface', False),
    ('direct', 'fabric_interfaces', False), ('switch', 'fabric_interfaces', False), (None, 'fabric_interfaces', False)])
def test_a_ring_must_bootstrap_over_the_management_interface(layout, bootstrap, refused):
    line = _layout.bootstrap_problem(layout, bootstrap)
    assert (line is not None) == refused
    if refused:
        assert line.startswith("specdec_nccl_bootstrap: a ring's Sparks reach each other only over the cable")
        assert "set specdec_nccl_bootstrap: management_interface" in line and "\n" not in line
