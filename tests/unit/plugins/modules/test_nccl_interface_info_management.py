# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""sparkops.specdec.nccl_interface_info with management_interface (specdec_nccl_bootstrap: management_interface):
what it reads of the interface (sysfs, ip -j addr show, ip -j route get of each peer) and its one-line failure,
before any change (playbooks/two_sparks.yml runs it with port none)."""

from __future__ import annotations

import json

import pytest

from ansible.module_utils import basic

from ansible_collections.sparkops.specdec.plugins.modules import nccl_interface_info
from ansible_collections.sparkops.specdec.tests.unit.plugins.modules.conftest import ModuleFailed, run_module

IP = "/usr/sbin/ip"


def _inet(cidr):
    address, prefix = cidr.split("/")
    return {"family": "inet", "local": address, "prefixlen": int(prefix)}


def _addr(**links):
    return json.dumps([{"ifname": name, "addr_info": [_inet(a) for a in addrs]} for name, addrs in links.items()])


@pytest.fixture
def node(tmp_path, monkeypatch):
    """A node with eth0 (the lab's management interface, up, 192.168.250.11/24) and lo; routes by peer address."""
    net = tmp_path / "class" / "net"
    for name, state in (("eth0", "up"), ("lo", "unknown"), ("wlP9s9", "down")):
        (net / name).mkdir(parents=True)
        (net / name / "operstate").write_text(state + "\n")
        (net / name / "carrier").write_text("1\n" if state == "up" else "0\n")
    state = {"addr": _addr(eth0=["192.168.250.11/24"], lo=["127.0.0.1/8"], wlP9s9=[]),
             "routes": {"192.168.250.12": "eth0"}, "calls": []}

    def run_command(self, args, *a, **kw):
        state["calls"].append(list(args))
        if args[:3] == [IP, "-j", "addr"]:
            return 0, state["addr"], ""
        if args[:4] == [IP, "-j", "route", "get"]:
            dev = state["routes"].get(args[4])
            if not dev:
                return 2, "", "RTNETLINK answers: Network is unreachable"
            return 0, json.dumps([{"dst": args[4], "dev": dev}]), ""
        raise AssertionError("unexpected command %r" % (args,))

    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, arg, required=False, opt_dirs=None:
                        IP if arg == "ip" else None)
    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    state["sysfs"] = str(tmp_path)
    return state


def _args(node, **over):
    args = {"source": "sysfs", "sysfs_root": node["sysfs"], "port": "none", "management_interface": "eth0",
            "management_address": "192.168.250.11", "management_peers": {"spark-2": "192.168.250.12"},
            "node": "spark-1"}
    args.update(over)
    return args


def test_the_lab_management_interface_passes_and_selects_no_port(node):
    result = run_module(nccl_interface_info, _args(node))
    assert result["management"] == {"interface": "eth0", "exists": True, "up": True, "ipv4": ["192.168.250.11/24"],
                                    "routes": {"192.168.250.12": "eth0"}, "problems": []}
    assert "selected_port" not in result and result["changed"] is False
    assert [IP, "-j", "route", "get", "192.168.250.12"] in node["calls"]


def test_a_missing_interface_fails_with_one_line_naming_the_setting(node):
    with pytest.raises(ModuleFailed) as failed:
        run_module(nccl_interface_info, _args(node, management_interface="enP7s7"))
    msg = failed.value.result["msg"]
    assert msg.startswith("specdec_nccl_management_interface: spark-1 has no interface enP7s7 (its interfaces: eth0, "
                          "wlP9s9); ")
    assert "\n" not in msg and failed.value.result["management"]["exists"] is False


def test_a_down_interface_and_one_that_neither_carries_nor_routes_fail(node):
    with pytest.raises(ModuleFailed) as down:
        run_module(nccl_interface_info, _args(node, management_interface="wlP9s9"))
    assert down.value.result["msg"].startswith("specdec_nccl_management_interface: wlP9s9 of spark-1 is down, ")
    node["routes"] = {}
    with pytest.raises(ModuleFailed) as neither:
        run_module(nccl_interface_info, _args(node, management_address="203.0.113.7"))
    assert ("carries neither 203.0.113.7 (the address Ansible uses) nor the route to its peers (spark-2 "
            "192.168.250.12 no route)") in neither.value.result["msg"]
    # Through a jump host: not the address, but the route to every peer.
    node["routes"] = {"192.168.250.12": "eth0"}
    assert run_module(nccl_interface_info, _args(node, management_address="203.0.113.7"))["management"]["problems"] == []
    # Engine vllm: the address itself.
    with pytest.raises(ModuleFailed) as vllm:
        run_module(nccl_interface_info, _args(node, management_address="203.0.113.7", management_address_required=True))
    assert "does not carry 203.0.113.7, the node's ansible_host" in vllm.value.result["msg"]


def test_without_management_interface_nothing_of_it_is_read(node):
    result = run_module(nccl_interface_info, {"source": "sysfs", "sysfs_root": node["sysfs"], "port": "none"})
    assert "management" not in result
    assert not [c for c in node["calls"] if "route" in c]
