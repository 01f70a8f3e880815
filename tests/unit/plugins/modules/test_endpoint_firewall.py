# -*- coding: utf-8 -*-
# Unit tests for sparkops.specdec.endpoint_firewall: main() runs against a fake ufw (tests/unit/plugins/modules/
# fake_ufw.py, on PATH as `ufw`; it writes ufw's user rules files as ufw 0.36.2 of the lab node does) with ufw's files
# and the marker in a temporary directory: plan + apply, a second call unchanged, check mode, diff, absent, refusals
# before any change, and rules applied by today's firewall_plan + community.general.ufw converge unchanged.

from __future__ import annotations

import importlib
import json
import os
import shutil
import sys

import pytest

from ansible.module_utils import basic

from ansible_collections.sparkops.specdec.plugins.module_utils import _firewall
from ansible_collections.sparkops.specdec.plugins.modules import endpoint_firewall
from ansible_collections.sparkops.specdec.tests.unit.plugins.modules.conftest import module_outcome
from ansible_collections.sparkops.specdec.tests.unit.plugins.module_utils import test_firewall as tf

TAG = "sparkops-specdec:spark-1"


class Node(object):
    """ufw's state and the calls made to it."""

    def __init__(self, tmp_path):
        self.dir = tmp_path / "ufw"
        self.bin = tmp_path / "bin"
        self.dir.mkdir()
        self.bin.mkdir()
        self.state = tmp_path / "state"
        self.state.mkdir()
        self.marker = str(self.state / "firewall-ufw-enabled.json")

    def install(self):
        target = self.bin / "ufw"
        with open(target, "w") as out:
            out.write("#!%s\n" % sys.executable)
            with open(os.path.join(os.path.dirname(__file__), "fake_ufw.py")) as src:
                out.write(src.read())
        os.chmod(target, 0o755)

    def set(self, active=False, tuples="", enabled=None):
        v4 = [t for t in tuples.splitlines() if t and "::/0" not in t]
        v6 = [t for t in tuples.splitlines() if t and "::/0" in t]
        (self.dir / "user.rules").write_text("".join(t + "\n" for t in v4))
        (self.dir / "user6.rules").write_text("".join(t + "\n" for t in v6))
        if active:
            (self.dir / "active").write_text("")
        if enabled is not None:
            (self.dir / "ufw.conf").write_text("ENABLED=%s\n" % ("yes" if enabled else "no"))

    def tuples(self):
        out = []
        for name in ("user.rules", "user6.rules"):
            path = self.dir / name
            out.extend(path.read_text().splitlines() if path.exists() else [])
        return out

    def calls(self):
        path = self.dir / "calls"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def changes(self):
        return [c for c in self.calls() if c != ["status", "verbose"]]

    def active(self):
        return (self.dir / "active").exists()


@pytest.fixture
def node(monkeypatch, tmp_path):
    fake = Node(tmp_path)
    fake.install()
    monkeypatch.setenv("FAKE_UFW_DIR", str(fake.dir))
    monkeypatch.setenv("PATH", "%s:%s" % (fake.bin, os.environ.get("PATH", "")))
    monkeypatch.delenv("SSH_CONNECTION", raising=False)
    monkeypatch.setattr(endpoint_firewall, "USER_RULES", (str(fake.dir / "user.rules"), str(fake.dir / "user6.rules")))
    monkeypatch.setattr(endpoint_firewall, "UFW_CONF", str(fake.dir / "ufw.conf"))
    # get_bin_path also looks in the sbin directories: only the fake's directory holds ufw here.
    real = basic.AnsibleModule.get_bin_path

    def get_bin_path(self, arg, required=False, opt_dirs=None):
        if arg == "ufw":
            found = shutil.which("ufw", path=os.environ["PATH"].split(":")[0])
            return found
        return real(self, arg, required, opt_dirs)

    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", get_bin_path)
    return fake


def present_args(node, **over):
    args = {"networks": ["192.168.250.1/32"], "port": 8355, "consent": True, "fabric_interfaces": tf.FABRIC_IFS,
            "fabric_addresses": tf.FABRIC_ADDRS, "container_ssh_port": 2233, "deployment": "spark-1",
            "two_nodes": True, "ssh_connection": tf.SSH, "marker": node.marker, "node_name": "spark-1"}
    args.update(over)
    return args


def run(args, check=False, diff=False):
    return module_outcome(endpoint_firewall, args, check=check, diff=diff)


def test_fresh_node_gets_the_rules_of_today_in_order_then_ufw_enabled_and_the_marker(node):
    node.set(active=False, enabled=False)
    result = run(present_args(node))
    assert result["changed"] is True and result.get("failed") is not True
    ufw = str(node.bin / "ufw")
    assert [c[0] for c in result["commands"]] == [ufw] * 8
    assert node.changes() == [
        ["allow", "from", "any", "to", "any", "port", "22", "proto", "tcp", "comment", TAG],
        ["allow", "in", "on", "enp1s0f1np1", "from", "any", "to", "any", "comment", TAG],
        ["allow", "in", "on", "enP2p1s0f1np1", "from", "any", "to", "any", "comment", TAG],
        ["allow", "from", "192.168.100.0/24", "to", "any", "port", "2233", "proto", "tcp", "comment", TAG],
        ["allow", "from", "192.168.101.0/24", "to", "any", "port", "2233", "proto", "tcp", "comment", TAG],
        ["allow", "from", "192.168.250.1/32", "to", "any", "port", "8355", "proto", "tcp", "comment", TAG],
        ["reject", "from", "any", "to", "any", "port", "8355", "proto", "tcp", "comment", TAG],
        ["-f", "enable"],
    ]
    # What ufw holds now is exactly what community.general.ufw left on the lab node (test_firewall.APPLIED).
    assert sorted(node.tuples()) == sorted(tf.APPLIED.splitlines())
    assert node.active()
    with open(node.marker) as handle:
        assert json.load(handle) == {"enabled_by": "sparkops.specdec", "deployment": "spark-1"}
    assert oct(os.stat(node.marker).st_mode & 0o777) == "0o644"
    assert result["enable"] is True and result["client"] == "192.168.250.1" and result["ssh_port"] == 22
    assert "diff" not in result


def test_second_call_changes_nothing(node):
    node.set(active=False, enabled=False)
    run(present_args(node))
    before = node.tuples()
    calls = len(node.calls())
    again = run(present_args(node))
    assert again["changed"] is False and again["commands"] == [] and again["pending"] is False
    assert node.calls()[calls:] == [["status", "verbose"]] and node.tuples() == before


def test_a_pair_deployed_by_todays_main_converges_unchanged(node):
    # the rules firewall_plan + community.general.ufw applied, ufw enabled by us (marker written by ansible copy)
    node.set(active=True, tuples=tf.APPLIED, enabled=True)
    with open(node.marker, "w") as out:
        out.write('{"enabled_by": "sparkops.specdec", "deployment": "spark-1"}')
    result = run(present_args(node), diff=True)
    assert result["changed"] is False and node.changes() == []
    assert result["diff"]["before"] == result["diff"]["after"]


def test_check_mode_reports_and_changes_nothing(node):
    node.set(active=False, enabled=False)
    result = run(present_args(node), check=True, diff=True)
    assert result["changed"] is True and len(result["commands"]) == 8 and result["commands"][-1][1:] == ["-f", "enable"]
    assert node.changes() == [] and node.tuples() == [] and not node.active() and not os.path.exists(node.marker)
    assert result["diff"]["before"] == "ufw: inactive\n"
    assert result["diff"]["after"].splitlines()[0] == "ufw: active"
    assert "reject from any to port 8355/tcp  # %s" % TAG == result["diff"]["after"].splitlines()[-1]


def test_added_network_lands_before_the_reject(node):
    node.set(active=True, tuples=tf.APPLIED, enabled=True)
    result = run(present_args(node, networks=["10.20.0.0/16"]), diff=True)
    assert result["changed"] is True
    assert node.changes() == [
        ["delete", "allow", "from", "192.168.250.1/32", "to", "any", "port", "8355", "proto", "tcp"],
        ["delete", "reject", "from", "any", "to", "any", "port", "8355", "proto", "tcp"],
        ["allow", "from", "10.20.0.0/16", "to", "any", "port", "8355", "proto", "tcp", "comment", TAG],
        ["reject", "from", "any", "to", "any", "port", "8355", "proto", "tcp", "comment", TAG],
    ]
    v4 = [t for t in node.tuples() if "::/0" not in t]
    assert v4[-2].startswith("### tuple ### allow tcp 8355 0.0.0.0/0 any 10.20.0.0/16 in")
    assert v4[-1].startswith("### tuple ### reject tcp 8355 0.0.0.0/0 any 0.0.0.0/0 in")
    assert "192.168.250.1/32" in result["diff"]["before"] and "192.168.250.1/32" not in result["diff"]["after"]
    assert run(present_args(node, networks=["10.20.0.0/16"]))["changed"] is False


@pytest.mark.parametrize("setup,over,expected", [
    ({"ufw": False}, {}, "specdec_server_allowed_networks: ufw is not installed on spark-1;"),
    ({}, {"consent": False}, "specdec_server_allowed_networks: ufw is inactive on spark-1,"),
    ({}, {"networks": ["192.168.1.1/24"]}, "specdec_server_allowed_networks: '192.168.1.1/24' has host bits set;"),
    ({}, {"port": 22}, "specdec_server_port: 22 is also the port Ansible connects to spark-1 with (SSH)"),
    ({}, {"fabric_interfaces": []}, "specdec_server_allowed_networks: the fabric interfaces of spark-1 are unknown"),
    ({"tuples": "### tuple ### deny tcp 22 0.0.0.0/0 any 192.168.250.0/24 in"}, {},
     "specdec_server_allowed_networks: the existing ufw rule 'deny from 192.168.250.0/24 to port 22/tcp' on spark-1"),
])
def test_refusals_are_one_line_and_change_nothing(node, setup, over, expected):
    node.set(active=False, tuples=setup.get("tuples", ""), enabled=False)
    if setup.get("ufw") is False:
        os.unlink(node.bin / "ufw")
    before = node.tuples()
    result = run(present_args(node, **over))
    assert result["failed"] is True and result["changed"] is False
    assert result["msg"].startswith(expected) and "\n" not in result["msg"]
    assert node.changes() == [] and node.tuples() == before and not os.path.exists(node.marker)


def test_check_only_needs_no_fabric_nor_marker_and_still_refuses(node):
    node.set(active=False, enabled=False)
    ok = run(present_args(node, check_only=True, fabric_interfaces=[], fabric_addresses=[], marker=None))
    assert ok["changed"] is False and ok["ssh_port"] == 22 and ok["client"] == "192.168.250.1" and "commands" not in ok
    refused = run(present_args(node, check_only=True, consent=False, marker=None))
    assert refused["failed"] is True and "specdec_server_firewall_enable: true" in refused["msg"]
    assert node.changes() == []


def test_marker_directory_missing_refuses_before_any_change(node):
    node.set(active=False, enabled=False)
    result = run(present_args(node, marker=str(node.state / "missing" / "m.json")))
    assert result["failed"] is True and result["msg"].startswith("marker: ") and node.changes() == []


def test_absent_removes_ours_disables_ufw_and_the_marker_then_changes_nothing(node):
    theirs = "### tuple ### allow tcp 2222 0.0.0.0/0 any 0.0.0.0/0 in"
    node.set(active=False, enabled=False, tuples=theirs)
    run(present_args(node))
    assert node.active() and os.path.exists(node.marker)
    check = run({"state": "absent", "marker": node.marker, "ssh_connection": tf.SSH}, check=True, diff=True)
    assert check["changed"] is True and check["disable"] is True and len(check["delete"]) == 7
    assert node.active() and os.path.exists(node.marker) and len(node.tuples()) == 12
    assert "ufw: inactive" in check["diff"]["after"]
    result = run({"state": "absent", "marker": node.marker, "ssh_connection": tf.SSH})
    assert result["changed"] is True and result["commands"][-1][1:] == ["-f", "disable"]
    assert node.tuples() == [theirs] and not node.active() and not os.path.exists(node.marker)
    again = run({"state": "absent", "marker": node.marker, "ssh_connection": tf.SSH})
    assert again["changed"] is False and again["commands"] == []


def test_absent_keeps_our_ssh_rule_when_ufw_stays_active_without_another_way_in(node):
    node.set(active=True, tuples=tf.APPLIED, enabled=True)  # enabled by someone else: no marker
    result = run({"state": "absent", "marker": node.marker, "ssh_connection": tf.SSH})
    assert result["kept"] == ["allow from any to port 22/tcp"] and result["disable"] is False
    assert node.active() and all(" 22 " in t for t in node.tuples()) and len(node.tuples()) == 2


def test_absent_without_ufw_removes_only_a_stale_marker(node):
    os.unlink(node.bin / "ufw")
    with open(node.marker, "w") as out:
        out.write("{}")
    result = run({"state": "absent", "marker": node.marker})
    assert result["changed"] is True and result["commands"] == [] and not os.path.exists(node.marker)
    assert run({"state": "absent", "marker": node.marker})["changed"] is False


def test_a_failing_ufw_command_fails_in_one_line(node, monkeypatch):
    node.set(active=False, enabled=False)
    monkeypatch.setenv("FAKE_UFW_FAIL", "reject")
    result = run(present_args(node))
    assert result["failed"] is True and "\n" not in result["msg"] and "rc 1" in result["msg"]
    assert len(result["commands"]) == 7 and not node.active()


def test_ssh_connection_comes_from_the_environment_or_a_parent_process(monkeypatch, tmp_path):
    monkeypatch.setenv("SSH_CONNECTION", tf.SSH)
    assert endpoint_firewall.ssh_connection() == tf.SSH
    monkeypatch.delenv("SSH_CONNECTION")
    # this test process's parents (pytest's shell) may or may not carry it; the result is one of theirs or empty
    found = endpoint_firewall.ssh_connection()
    assert found == "" or len(found.split()) == 4


def test_the_plan_runs_without_netaddr(monkeypatch):
    # the module runs on the node's system Python (stdlib only): no netaddr there
    monkeypatch.setitem(sys.modules, "netaddr", None)
    fresh = importlib.reload(_firewall)
    try:
        assert fresh.normalize_network(" 192.168.250.1 ") == ("192.168.250.1/32", None)
        assert "has host bits set" in fresh.network_problem("192.168.1.1/24", "x")
        assert fresh.source_covers("192.168.250.0/24", "192.168.250.1") is True
        assert fresh.plan_apply("spark-1", tf.inputs())["errors"] == []
    finally:
        monkeypatch.delitem(sys.modules, "netaddr")
        importlib.reload(_firewall)
