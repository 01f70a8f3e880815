# -*- coding: utf-8 -*-
# netplan_fabric and networks someone else set up (issue 24, item 3): adopt a compliant foreign plan (write nothing),
# take it over with consent (back up, replace, roll back), never stack two plans. The fake node is
# test_netplan_fabric's. The foreign files are the cited sources' own, with the interfaces of the test's port.

from __future__ import annotations

import os

from ansible_collections.sparkops.specdec.plugins.module_utils import _netplan
# node is the fake-node fixture (pytest finds it by name here).
from ansible_collections.sparkops.specdec.tests.unit.plugins.modules.test_netplan_fabric import (  # noqa: F401 pylint: disable=unused-import
    OURS_10, PAIR, args, node, run_fail, run_ok)

# NVIDIA Sync's Cluster Assistant: "the relevant part of /etc/netplan/99-nvidia-sync-cluster.yaml" on a tested pair
# (github.com/madalin-dogaru/DeepSeek-V4-Flash-Vision-2x-DGX-Spark, README.md, "1. Verify the cluster fabric"); the
# cable is in port 0 there.
PORT0 = ["enp1s0f0np0", "enP2p1s0f0np0"]
SYNC = """network:
  version: 2
  renderer: NetworkManager
  ethernets:
    enp1s0f0np0:
      dhcp4: false
      mtu: 9000
      addresses: [10.100.32.1/24] # use .2 on the worker
    enP2p1s0f0np0:
      dhcp4: false
      mtu: 9000
      addresses: [10.100.33.1/24] # use .2 on the worker
"""
# eugr/spark-vllm-docker docs/NETWORKING.md: the CX-7 entries its setup-cluster.sh writes to
# /etc/netplan/98-spark-vllm-docker.yaml ("MTU 9000, static IPv4, DHCP disabled, and no link-local addresses"), in the
# form of that page's own netplan example for spark (port 1).
EUGR = """network:
  version: 2
  ethernets:
    enp1s0f1np1:
      dhcp4: no
      dhcp6: no        # Explicitly disable DHCPv6
      link-local: []   # Restrict link-local addresses to static IPv4 only
      mtu: 9000
      addresses: [192.168.177.11/24]
    enP2p1s0f1np1:
      dhcp4: no
      dhcp6: no
      link-local: []
      mtu: 9000
      addresses: [192.168.178.11/24]
"""
# NVIDIA's connect-two-sparks steps write the same path as this role (/etc/netplan/40-cx7.yaml), Node 1.
NVIDIA_40 = """network:
  version: 2
  ethernets:
    enp1s0f1np1:
      addresses:
        - 192.168.100.10/24
      dhcp4: no
    enP2p1s0f1np1:
      addresses:
        - 192.168.101.10/24
      dhcp4: no
"""


def _put(node, name, text):
    path = os.path.join(os.path.dirname(node.netplan_file), name)
    with open(path, "w") as handle:
        handle.write(text)
    os.chmod(path, 0o600)
    return path


def _files(node):
    return sorted(os.listdir(os.path.dirname(node.netplan_file)))


def test_sync_plan_is_adopted_and_nothing_written(node):
    for name in PORT0:
        node.links[name].update(up=True, inet=[])
    node.links["enp1s0f0np0"]["inet"] = ["10.100.32.1/24"]
    node.links["enP2p1s0f0np0"]["inet"] = ["10.100.33.1/24"]
    sync = _put(node, "99-nvidia-sync-cluster.yaml", SYNC)
    result = run_ok(args(node, interfaces=PORT0, port=0, _ansible_diff=True))
    assert result["changed"] is False and result["ownership"] == "adopt" and result["file"] == "adopted"
    assert result["adopted"] == sync
    assert result["addresses"] == ["10.100.32.1/24", "10.100.33.1/24"] and result["ips"] == ["10.100.32.1", "10.100.33.1"]
    assert result["foreign_plans"] == [{"path": sync, "source": "NVIDIA Sync's Cluster Assistant"}]
    assert _files(node) == ["99-nvidia-sync-cluster.yaml"] and node.changing_calls() == []
    assert result["diff"] == [] and not os.path.exists(node.checkpoint)


def test_eugr_plan_is_adopted(node):
    _put(node, "98-spark-vllm-docker.yaml", EUGR)
    result = run_ok(args(node, _ansible_check_mode=True))
    assert result["ownership"] == "adopt" and result["addresses"] == ["192.168.177.11/24", "192.168.178.11/24"]
    assert result["foreign_plans"][0]["source"] == "eugr/spark-vllm-docker's setup-cluster.sh"


def test_nvidias_own_40_cx7_is_told_apart_by_the_mark(node):
    node.write(NVIDIA_40)
    result = run_ok(args(node))
    # Same path and same addresses as ours, but no mark: theirs, adopted as it is.
    assert result["ownership"] == "adopt" and result["file"] == "adopted" and node.read() == NVIDIA_40
    node.write(OURS_10)
    assert run_ok(args(node))["ownership"] == "manage"


def test_non_compliant_plan_is_refused_before_any_change(node):
    _put(node, "99-nvidia-sync-cluster.yaml", SYNC)  # port 0, the cable is in port 1
    result = run_fail(args(node))
    assert result["msg"].startswith("%s (NVIDIA Sync's Cluster Assistant) addresses the ConnectX-7 interfaces but "
                                    "cannot be adopted for enp1s0f1np1, enP2p1s0f1np1: it does not address enp1s0f1np1"
                                    % os.path.join(os.path.dirname(node.netplan_file), "99-nvidia-sync-cluster.yaml"))
    assert "netplan_qsfp_take_over: true" in result["msg"] and result["msg"].endswith("Nothing was changed.")
    assert node.read() is None and node.changing_calls() == []


def test_ours_beside_theirs_is_never_left_stacked(node):
    node.write(OURS_10)
    _put(node, "98-spark-vllm-docker.yaml", EUGR)
    result = run_fail(args(node))
    assert "(ours) and" in result["msg"] and "stacked plan" in result["msg"]
    two = _put(node, "99-nvidia-sync-cluster.yaml", SYNC)
    os.unlink(node.netplan_file)
    assert run_fail(args(node))["msg"].startswith("2 netplan files address the ConnectX-7 interfaces")
    assert os.path.exists(two)


def test_take_over_backs_up_replaces_and_rolls_back(node):
    eugr = _put(node, "98-spark-vllm-docker.yaml", EUGR)
    node.links["enp1s0f1np1"]["inet"] = ["192.168.177.11/24"]
    node.links["enP2p1s0f1np1"]["inet"] = ["192.168.178.11/24"]
    check = run_ok(args(node, take_over=True, _ansible_check_mode=True, _ansible_diff=True))
    assert check["changed"] is True and check["ownership"] == "take_over" and check["replaced"] == [eugr]
    assert [d["after_header"] for d in check["diff"]][:2] == [node.netplan_file, "%s (moved aside as a backup)" % eugr]
    assert os.path.exists(eugr) and node.read() is None and node.changing_calls() == []

    result = run_ok(args(node, take_over=True))
    assert node.read() == OURS_10 and not os.path.exists(eugr)
    backup = result["replaced_backups"][0]
    with open(backup) as handle:
        assert handle.read() == EUGR
    # Theirs went with their file: only our addresses are on the pair (never two plans' addresses).
    assert node.pair() == sorted(["enp1s0f1np1 192.168.100.10/24", "enP2p1s0f1np1 192.168.101.10/24"])
    assert node.stored_checkpoint()["foreign"][0]["path"] == eugr

    back = run_ok({"state": "rollback", "checkpoint_path": node.checkpoint, "checkpoint_id": result["checkpoint"]["id"]})
    assert back["restored"] is True and back["restored_plans"] == [eugr]
    with open(eugr) as handle:
        assert handle.read() == EUGR
    assert not os.path.exists(backup) and node.read() is None
    assert node.pair() == sorted(["enp1s0f1np1 192.168.177.11/24", "enP2p1s0f1np1 192.168.178.11/24"])


def test_foreign_plans_reads_only_cx7_plans_without_the_mark():
    import yaml

    files = {"/etc/netplan/01-network-manager-all.yaml": "network:\n  version: 2\n  renderer: NetworkManager\n",
             "/etc/netplan/40-cx7.yaml": OURS_10, "/etc/netplan/99-nvidia-sync-cluster.yaml": SYNC,
             "/etc/netplan/50-bad.yaml": "network: [enp1s0f1np1\n"}
    found = _netplan.foreign_plans(files, yaml.safe_load)
    assert [(f["path"], f["error"] is None) for f in found] == [("/etc/netplan/50-bad.yaml", False),
                                                                ("/etc/netplan/99-nvidia-sync-cluster.yaml", True)]
    assert found[1]["interfaces"]["enP2p1s0f0np0"] == {"addresses": ["10.100.33.1/24"], "dhcp4": False}
    assert _netplan.compliance(found[1], PORT0) == []
    dhcp = {"path": "x", "source": "s", "error": None, "interfaces": {
        "enp1s0f1np1": {"addresses": [], "dhcp4": True}, "enP2p1s0f1np1": {"addresses": ["10.1.0.2/24"], "dhcp4": False}}}
    assert _netplan.compliance(dhcp, PAIR) == ["enp1s0f1np1 takes DHCP", "enp1s0f1np1 has 0 static IPv4 addresses, not one"]
