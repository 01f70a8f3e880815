# -*- coding: utf-8 -*-
# Unit tests of the modules sparkops.specdec.diagnose_info (what it reads on a node, read-only; missing programs,
# container and files recorded as items, never a failure; its argument errors) and sparkops.specdec.secret_scan
# (a canary planted in a temp tree in each form is reported with its kind and path).

from __future__ import annotations

import json
import os

import pytest

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.sparkops.specdec.plugins.modules import diagnose_info, secret_scan
from ansible_collections.sparkops.specdec.tests.unit.plugins.module_utils.test_secret_find import CANARY, SPECIAL, planted
from ansible_collections.sparkops.specdec.tests.unit.plugins.modules.test_preflight_info import Exit, Fail, Node, _raise

INSPECT = [{"Id": "c1", "Config": {"Env": ["PATH=/bin", "NCCL_SOCKET_IFNAME=enp1s0f1np1", "UCX_NET_DEVICES=enp1s0f1np1"]}}]


@pytest.fixture
def node(monkeypatch):
    fake = Node(bins=("docker", "ip"))
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", fake.get_bin_path)
    monkeypatch.setattr(basic.AnsibleModule, "run_command", fake.run_command)
    monkeypatch.setattr(basic.AnsibleModule, "exit_json", _raise(Exit))
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", _raise(Fail))
    return fake


def run(args, exc=Exit):
    with patch_module_args(args):
        with pytest.raises(exc) as info:
            diagnose_info.main()
    return info.value.args[0]


@pytest.fixture
def state(tmp_path):
    sd = tmp_path / "state"
    (sd / "deployments").mkdir(parents=True)
    (sd / "openmpi-hostfile").write_text("192.168.100.10 slots=1\n192.168.100.11 slots=1\n")
    (sd / "server.log").write_text("".join("log %d\n" % i for i in range(500)))
    (sd / "deployments" / "spark-1.json").write_text(json.dumps({"schema_version": 1}))
    (sd / "deployments" / "broken.json").write_text("{not json")
    netplan = tmp_path / "40-cx7.yaml"
    netplan.write_text("# Managed by sparkops.specdec (netplan_qsfp)\nnetwork: {version: 2}\n")
    return sd, netplan


def test_collects_every_item_read_only(node, state):
    sd, netplan = state
    node.outputs = [
        (lambda a: a[:3] == ["docker", "container", "inspect"], (0, json.dumps(INSPECT), "")),
        (lambda a: a[:2] == ["docker", "info"], (0, json.dumps({"Runtimes": {"runc": {}}, "DefaultRuntime": "runc"}), "")),
        (lambda a: a[:2] == ["docker", "version"], (0, json.dumps({"Client": {"Version": "26.1"}}), "")),
        (lambda a: a[:2] == ["docker", "logs"], (0, "out line\n", "sshd: waiting for 192.168.100.10\n")),
        (lambda a: a[:2] == ["ip", "-j"], (0, json.dumps([{"ifname": "lo"}]), "")),
    ]
    out = run({"state_dir": str(sd), "netplan_files": [str(netplan), "/nonexistent/other.yaml"], "log_lines": 3})
    items = out["node_items"]
    assert out["changed"] is False and set(items) == set(diagnose_info._diagnose.ITEMS)
    # items: node_items' deprecated name (removed in 1.0.0), the same mapping meanwhile.
    assert out["items"] == items
    assert {n for n, i in items.items() if i["status"] == "ok"} == set(items) - {"nvidia_runtime", "ibdev2netdev"}
    assert out["missing"] == ["nvidia_runtime (no nvidia runtime in docker info, no nvidia-ctk or nvidia-smi)",
                              "ibdev2netdev (ibdev2netdev: command not found)"]
    assert items["container_inspect"]["content"]["Id"] == "c1"
    assert items["container_env"]["content"] == {"NCCL_SOCKET_IFNAME": "enp1s0f1np1", "UCX_NET_DEVICES": "enp1s0f1np1"}
    assert "sshd: waiting" in items["container_log"]["content"]
    assert items["server_log"]["content"] == "log 497\nlog 498\nlog 499\n"
    assert items["hostfile"]["content"].startswith("192.168.100.10 slots=1")
    assert items["netplan"]["content"] == {"40-cx7.yaml": netplan.read_text()}
    assert "written by sparkops.specdec: 40-cx7.yaml" in items["netplan"]["source"]
    assert items["state"]["content"] == {"spark-1.json": {"schema_version": 1}, "broken.json": "{not json"}
    assert items["os"]["content"]["uname"]["system"]
    assert items["ip_addr"]["content"] == [{"ifname": "lo"}]
    # Only reading commands ran.
    assert sorted(c[:2] for c in node.calls) == [["docker", "container"], ["docker", "info"], ["docker", "logs"],
                                                 ["docker", "version"], ["ip", "-j"]]


def test_a_node_without_container_docker_programs_or_files(node, tmp_path):
    node.bins = {"docker"}
    node.outputs = [(lambda a: a[:3] == ["docker", "container", "inspect"], (1, "[]", "Error: No such container: trtllm-multinode"))]
    out = run({"state_dir": str(tmp_path / "none"), "netplan_files": [str(tmp_path / "absent.yaml")]})
    items = out["node_items"]
    for name in ("container_inspect", "container_env", "container_log", "netplan", "ibdev2netdev", "ip_addr", "hostfile",
                 "server_log", "state", "nvidia_runtime"):
        assert items[name]["status"] == "missing", (name, items[name])
    assert "No such container" in items["container_env"]["reason"]
    assert items["ip_addr"]["reason"] == "ip: command not found"
    assert items["state"]["reason"].startswith("no deployment state file")


def test_nvidia_runtime_present(node, tmp_path):
    node.bins = {"docker", "nvidia-ctk"}
    node.outputs = [
        (lambda a: a[:2] == ["docker", "info"], (0, json.dumps({"Runtimes": {"nvidia": {}, "runc": {}}}), "")),
        (lambda a: a[0] == "nvidia-ctk", (0, "NVIDIA Container Toolkit CLI version 1.17.8\n", "")),
    ]
    out = run({"state_dir": str(tmp_path)})
    got = out["node_items"]["nvidia_runtime"]
    assert got["status"] == "ok" and got["content"]["docker_runtimes"] == ["nvidia", "runc"]
    assert "1.17.8" in got["content"]["nvidia-ctk"]


def test_argument_errors(node):
    assert "set diagnose_log_lines to 0-100000" in run({"log_lines": -1}, Fail)["msg"]
    msg = run({"secrets": [CANARY]}, Fail)["msg"]
    assert "through its action plugin" in msg and CANARY not in msg


# --------------------------------------------------------------------------- secret_scan

def scan(args, exc=Exit):
    with patch_module_args(args):
        with pytest.raises(exc) as info:
            secret_scan.main()
    return info.value.args[0]


@pytest.fixture
def exits(monkeypatch):
    monkeypatch.setattr(basic.AnsibleModule, "exit_json", _raise(Exit))
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", _raise(Fail))


@pytest.mark.parametrize("token", [SPECIAL, CANARY])
def test_secret_scan_finds_each_planted_form(exits, tmp_path, token):
    for i, (name, (content, _kinds)) in enumerate(sorted(planted(token).items())):
        sub = tmp_path / ("d%d" % i)
        sub.mkdir()
        (sub / name).write_text("z" * (i * 997) + content)
    (tmp_path / "clean").write_text("no secret here")
    out = scan({"secrets": [token], "paths": [str(tmp_path)], "exclude": [str(tmp_path / "nothing")]})
    found = dict((os.path.basename(f["path"]), f["kinds"]) for f in out["found"])
    assert set(found) == set(planted(token)), found
    for name, (_content, kinds) in planted(token).items():
        if token == CANARY and name in ("escaped", "url", "url-plus"):
            kinds = ["raw"]
        assert found[name] == kinds, name
    assert out["files"] == len(planted(token)) + 1 and out["changed"] is False
    assert token not in json.dumps(out)


def test_secret_scan_argument_errors(exits, tmp_path):
    assert "secrets is empty" in scan({"secrets": [" "], "paths": [str(tmp_path)]}, Fail)["msg"]
    assert "nothing to search" in scan({"secrets": [CANARY]}, Fail)["msg"]
