# -*- coding: utf-8 -*-
# Unit tests for sparkops.specdec.ssh_mesh_keys: main() against a temporary HOME (the passwd entry of the user
# running the tests, with its home moved there), host key directory and node host key; ROOT is that user, so no root
# is needed (conftest.module_outcome: the result of exit_json or fail_json).

from __future__ import annotations

import os
import pwd
import shutil

import pytest

from ansible_collections.sparkops.specdec.plugins.module_utils import _ssh_mesh
from ansible_collections.sparkops.specdec.plugins.modules import ssh_mesh_keys
from ansible_collections.sparkops.specdec.tests.unit.plugins.modules.conftest import module_outcome

ME = pwd.getpwuid(os.geteuid()).pw_name
pytestmark = pytest.mark.skipif(not shutil.which("ssh-keygen"), reason="needs OpenSSH's ssh-keygen")


class _Passwd(object):
    """pwd, with the home of ME moved to a temporary directory."""

    def __init__(self, home):
        self.home = home

    def getpwnam(self, name):
        entry = pwd.getpwnam(name)
        if name == ME:
            return pwd.struct_passwd(tuple(entry)[:5] + (self.home,) + tuple(entry)[6:])
        return entry

    def getpwuid(self, uid):
        return pwd.getpwuid(uid)


@pytest.fixture
def node(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    hostkey = tmp_path / "ssh_host_ed25519_key.pub"
    hostkey.write_text("ssh-ed25519 AAAAnode1 root@spark-1\n")
    monkeypatch.setattr(_ssh_mesh, "pwd", _Passwd(str(home)))
    monkeypatch.setattr(_ssh_mesh, "NODE_HOST_KEY", str(hostkey))
    monkeypatch.setattr(_ssh_mesh, "ROOT", ME)
    return {"home": home, "key_dir": tmp_path / "k"}


def run(node, check=False, diff=False, **args):
    args = dict({"user": ME, "name": "spark-1", "host_key_dir": str(node["key_dir"])}, **args)
    return module_outcome(ssh_mesh_keys, args, check=check, diff=diff)


PEER = {"user": ME, "home": "/h", "host": "ssh-ed25519 AAAAnode2 h", "mesh": "ssh-ed25519 AAAAmesh2 m",
        "container": "ssh-ed25519 AAAAcont2", "container_mesh": "ssh-ed25519 AAAAcmesh2", "addresses": ["10.0.0.2"]}


def test_check_then_real_then_check_then_real(node):
    """check -> real -> check -> real (as an integration target would): the first two change, the last two do not."""
    users = {"spark-1": ME, "spark-2": ME}
    first = run(node, check=True, diff=True, users=users)
    assert first["changed"] and first["identity"]["mesh"] == "" and not (node["home"] / ".ssh").exists()
    assert len(first["diff"]) == len(first["changes"]) == 6
    real = run(node, users=users)
    assert real["changed"] and real["changes"] == first["changes"]
    identity = real["identity"]
    assert identity["mesh"] == (node["home"] / ".ssh" / "id_ed25519_sparkops.pub").read_text().strip()
    assert run(node, check=True, users=users) == {"changed": False, "identity": identity, "changes": []}
    assert run(node, users=users) == {"changed": False, "identity": identity, "changes": []}

    members = {"spark-1": dict(identity, addresses=["10.0.0.1"]), "spark-2": PEER}
    trust_check = run(node, check=True, diff=True, members=members, ssh_port=2233)
    assert trust_check["changed"] and trust_check["peers"] == ["10.0.0.2"]
    assert not (node["home"] / ".ssh" / "config").exists()
    written = run(node, members=members, ssh_port=2233)
    assert written["changes"] == trust_check["changes"] and len(written["changes"]) == 5
    config = (node["home"] / ".ssh" / "config").read_text()
    assert config == ("# BEGIN sparkops.specdec ssh_mesh\nHost 10.0.0.1 10.0.0.2\n    IdentityFile ~/.ssh/id_ed25519_sparkops\n"
                      "    IdentitiesOnly yes\n    UserKnownHostsFile ~/.ssh/known_hosts_sparkops\n"
                      "# END sparkops.specdec ssh_mesh\n")
    diff = {d["after_header"]: d for d in trust_check["diff"]}
    assert diff[str(node["home"] / ".ssh" / "config")] == {
        "before_header": str(node["home"] / ".ssh" / "config"), "after_header": str(node["home"] / ".ssh" / "config"),
        "before": "", "after": config}
    assert run(node, check=True, members=members, ssh_port=2233)["changed"] is False
    assert run(node, members=members, ssh_port=2233) == {"changed": False, "peers": ["10.0.0.2"], "changes": []}


def test_absent_then_nothing(node):
    identity = run(node)["identity"]
    run(node, members={"spark-1": dict(identity, addresses=["10.0.0.1"])}, ssh_port=2233)
    checked = run(node, check=True, state="absent")
    assert checked["changed"] and (node["key_dir"] / "mesh" / "authorized_keys").exists()
    gone = run(node, state="absent")
    assert gone["changes"] == checked["changes"]
    assert not (node["key_dir"] / "mesh").exists() and (node["home"] / ".ssh" / "id_ed25519_sparkops").exists()
    assert run(node, state="absent") == {"changed": False, "changes": []}


def test_different_users_fail_in_one_line_before_any_change(node):
    out = run(node, users={"spark-1": ME, "spark-2": "dgx"}, group="ssh_mesh_hosts")
    assert out["failed"] and "\n" not in out["msg"]
    assert out["msg"].startswith("The cluster user differs between nodes (spark-1: %s, spark-2: dgx)" % ME)
    assert not (node["home"] / ".ssh").exists() and not node["key_dir"].exists()
    out = run(node, users={"spark-1": ME, "spark-2": ""}, group="ssh_mesh_hosts")
    assert "spark-2 of group ssh_mesh_hosts did not run the mesh" in out["msg"]


def test_a_member_without_identity_fails_before_any_change(node):
    identity = run(node)["identity"]
    out = run(node, members={"spark-1": dict(identity, addresses=["10.0.0.1"]), "spark-2": {}}, ssh_port=2233)
    assert out["failed"] and out["msg"].startswith("ssh_mesh: spark-2 did not publish its mesh identity")
    assert not (node["home"] / ".ssh" / "config").exists()


def test_members_need_the_port(node):
    out = run(node, members={"spark-1": PEER})
    assert out["failed"] and "ssh_port" in out["msg"]
