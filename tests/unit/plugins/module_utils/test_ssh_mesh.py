# -*- coding: utf-8 -*-
# Unit tests of module_utils/_ssh_mesh.py (module sparkops.specdec.ssh_mesh_keys): the pure parts (the cluster-user
# check, the blocks, blockinfile's bytes) and the node state against a temporary HOME and host key directory, owned
# by the user running the tests (root=that user, so no root is needed), with the real ssh-keygen.

from __future__ import annotations

import os
import pwd
import shutil
import stat
import tempfile

import pytest

from ansible_collections.sparkops.specdec.plugins.module_utils import _ssh_mesh as m

ME = pwd.getpwuid(os.geteuid()).pw_name
KEYGEN = shutil.which("ssh-keygen")
needs_keygen = pytest.mark.skipif(not KEYGEN, reason="needs OpenSSH's ssh-keygen")

HOST_PUB = "ssh-ed25519 AAAAnode1 root@spark-1"
MESH_PUB = "ssh-ed25519 AAAAmesh1 spark@spark-1 sparkops-mesh"
CONT_PUB = "ssh-ed25519 AAAAcont1 trtllm-container@spark-1"
CMESH_PUB = "ssh-ed25519 AAAAcmesh1"


def ident(n, mesh=True, container=True, cmesh=True, addresses=None):
    return {"user": "spark", "home": "/home/spark", "host": "ssh-ed25519 AAAAnode%s h" % n,
            "mesh": "ssh-ed25519 AAAAmesh%s spark@spark-%s" % (n, n) if mesh else "",
            "container": "ssh-ed25519 AAAAcont%s" % n if container else "",
            "container_mesh": "ssh-ed25519 AAAAcmesh%s root@x" % n if cmesh else "",
            "addresses": addresses or ["192.168.100.1%s" % (int(n) - 1), "192.168.101.1%s" % (int(n) - 1)]}


# --- pure parts ---------------------------------------------------------------------------------------------------------

def test_same_user():
    m.same_user({"spark-1": "spark", "spark-2": "spark"}, "spark_nodes")
    with pytest.raises(m.MeshError, match=r"differs between nodes \(spark-1: spark, spark-2: dgx\)"):
        m.same_user({"spark-1": "spark", "spark-2": "dgx"}, "spark_nodes")
    with pytest.raises(m.MeshError, match="spark-2 of group spark_nodes did not run the mesh"):
        m.same_user({"spark-1": "spark", "spark-2": ""}, "spark_nodes")


def test_blocks_of_two_nodes():
    members = {"spark-1": ident("1"), "spark-2": ident("2")}
    out = m.mesh_blocks("spark-1", members, "id_ed25519_sparkops", 2233)
    blocks = out["blocks"]
    assert list(blocks) == ["authorized_keys", "known_hosts_sparkops", "config"]
    assert blocks["authorized_keys"] == "ssh-ed25519 AAAAmesh1 spark@spark-1\nssh-ed25519 AAAAmesh2 spark@spark-2"
    assert blocks["known_hosts_sparkops"].splitlines() == [
        "192.168.100.10,192.168.101.10 ssh-ed25519 AAAAnode1",
        "[192.168.100.10]:2233,[192.168.101.10]:2233 ssh-ed25519 AAAAcont1",
        "192.168.100.11,192.168.101.11 ssh-ed25519 AAAAnode2",
        "[192.168.100.11]:2233,[192.168.101.11]:2233 ssh-ed25519 AAAAcont2",
    ]
    assert blocks["config"].splitlines() == [
        "Host 192.168.100.10 192.168.101.10 192.168.100.11 192.168.101.11",
        "    IdentityFile ~/.ssh/id_ed25519_sparkops",
        "    IdentitiesOnly yes",
        "    UserKnownHostsFile ~/.ssh/known_hosts_sparkops",
    ]
    assert out["peers"] == ["192.168.100.11", "192.168.101.11"]
    # The containers' files: their own mesh keys, each from its node's addresses; never the cluster user's key.
    assert out["container"] == {
        "authorized_keys": 'restrict,from="192.168.100.10,192.168.101.10" ssh-ed25519 AAAAcmesh1 trtllm-mesh@spark-1\n'
                           'restrict,from="192.168.100.11,192.168.101.11" ssh-ed25519 AAAAcmesh2 trtllm-mesh@spark-2\n',
        "known_hosts": "[192.168.100.10]:2233,[192.168.101.10]:2233 ssh-ed25519 AAAAcont1\n"
                       "[192.168.100.11]:2233,[192.168.101.11]:2233 ssh-ed25519 AAAAcont2\n"}
    assert not any("AAAAmesh" in text for text in out["container"].values())
    assert m.mesh_blocks("spark-2", members, "k", 2233)["peers"] == ["192.168.100.10", "192.168.101.10"]


def test_blocks_with_prefix_lengths_are_the_pairs_bytes():
    """netplan_qsfp_fabric.addresses (with /24) give a pair the same files and peers as its plain IPs."""
    plain = {"spark-1": ident("1"), "spark-2": ident("2")}
    cidr = {"spark-1": ident("1", addresses=["192.168.100.10/24", "192.168.101.10/24"]),
            "spark-2": ident("2", addresses=["192.168.100.11/24", "192.168.101.11/24"])}
    for me in plain:
        assert m.mesh_blocks(me, cidr, "k", 2233) == m.mesh_blocks(me, plain, "k", 2233)


# NVIDIA's three-node ring plan (docs/layouts.md): enp1s0f0np0, enP2p1s0f0np0, enp1s0f1np1, enP2p1s0f1np1.
RING = {
    "s1": ["192.168.0.1/24", "192.168.1.1/24", "192.168.2.1/24", "192.168.3.1/24"],
    "s2": ["192.168.4.1/24", "192.168.5.1/24", "192.168.0.2/24", "192.168.1.2/24"],
    "s3": ["192.168.2.2/24", "192.168.3.2/24", "192.168.4.2/24", "192.168.5.2/24"],
}


def test_ring_peers_are_verified_on_the_cable_they_share():
    members = {h: ident(str(i), addresses=a) for i, (h, a) in enumerate(RING.items(), 1)}
    peers = {me: m.mesh_blocks(me, members, "k", 2233)["peers"] for me in RING}
    assert peers == {"s1": ["192.168.0.2", "192.168.1.2", "192.168.2.2", "192.168.3.2"],
                     "s2": ["192.168.0.1", "192.168.1.1", "192.168.4.2", "192.168.5.2"],
                     "s3": ["192.168.2.1", "192.168.3.1", "192.168.4.1", "192.168.5.1"]}
    # Trust and pins still cover every address of every member (a rank may be reached on any of them).
    out = m.mesh_blocks("s1", members, "k", 2233)
    assert out["blocks"]["config"].splitlines()[0] == "Host " + " ".join(a.split("/", 1)[0] for v in RING.values() for a in v)
    assert 'from="192.168.4.1,192.168.5.1,192.168.0.2,192.168.1.2"' in out["container"]["authorized_keys"]


def test_a_peer_sharing_no_subnet_keeps_every_address():
    """Verified on all its addresses (and fails naming them), not skipped; plain IPs are all verified too."""
    members = {"s1": ident("1", addresses=RING["s1"]), "far": ident("2", addresses=["10.9.0.2/24", "10.9.1.2/24"]),
               "mgmt": ident("3", addresses=["10.20.0.39"])}
    assert m.mesh_blocks("s1", members, "k", 2233)["peers"] == ["10.9.0.2", "10.9.1.2", "10.20.0.39"]
    plain = {"a": ident("1", addresses=["10.20.0.37"]), "b": ident("2", addresses=["10.9.0.2/24"])}
    assert m.mesh_blocks("a", plain, "k", 2233)["peers"] == ["10.9.0.2"]


def test_a_four_node_ring_verifies_the_spark_opposite_on_its_management_address():
    """An accepted 4-node ring: each node's identity is its four fabric addresses and, bare, its management address
    (playbooks/plays/spark_deploy.yml). Neighbours are verified on their cable, the Spark opposite on its management
    address; the containers trust each key from the management address too (mpirun's ssh comes from there)."""
    from ansible_collections.sparkops.specdec.plugins.module_utils import _layout
    nodes = ["s1", "s2", "s3", "s4"]
    members = {h: ident(str(i + 1), addresses=_layout.ring_addresses(i, 4) + ["10.20.0.%d" % (i + 1)])
               for i, h in enumerate(nodes)}
    peers = m.mesh_blocks("s1", members, "k", 2233)["peers"]
    # Two addresses on each neighbour's cable (s2's port 1, s4's port 0), the management address of the one opposite.
    assert peers == ["192.168.0.2", "192.168.1.2", "10.20.0.3", "192.168.2.2", "192.168.3.2"]
    out = m.mesh_blocks("s1", members, "k", 2233)
    assert '10.20.0.3" ssh-ed25519 AAAAcmesh3 trtllm-mesh@s3' in out["container"]["authorized_keys"]
    assert "[10.20.0.3]:2233 ssh-ed25519 AAAAcont3" in out["container"]["known_hosts"]


def test_blocks_leave_out_keys_not_there_yet():
    out = m.mesh_blocks("spark-1", {"spark-1": ident("1", mesh=False, container=False, cmesh=False)}, "k", 2233)
    assert out["blocks"]["authorized_keys"] == ""
    assert out["blocks"]["known_hosts_sparkops"] == "192.168.100.10,192.168.101.10 ssh-ed25519 AAAAnode1"
    assert out["peers"] == []
    assert out["container"] == {"authorized_keys": "\n", "known_hosts": "\n"}


@pytest.mark.parametrize("members, text", [
    ({"spark-1": ident("1"), "spark-2": {"user": "spark"}}, "spark-2 did not publish its mesh identity"),
    ({"spark-1": ident("1"), "spark-2": {}}, "spark-2 did not publish its mesh identity"),
    ({"spark-2": ident("2")}, "spark-1 is not a member of the mesh"),
])
def test_members_without_an_identity_are_refused(members, text):
    with pytest.raises(m.MeshError, match=text):
        m.check_members(members, "spark-1")


def _real_blockinfile(tmp_path, original, block, state="present"):
    """What ansible.builtin.blockinfile writes (run in-process, as the role ran it), or None if it wrote nothing."""
    import json

    from ansible.module_utils import basic
    from ansible.module_utils.testing import patch_module_args
    from ansible.modules import blockinfile

    path = tmp_path / "f"
    if path.exists():
        path.unlink()
    if original is not None:
        path.write_bytes(original)
    args = {"path": str(path), "block": block, "marker": m.MARKER, "create": True, "state": state}
    out = {}

    def done(self, **kwargs):
        out.update(kwargs)
        raise SystemExit(0)

    with patch_module_args(args), pytest.MonkeyPatch.context() as mp:
        mp.setattr(basic.AnsibleModule, "exit_json", done)
        mp.setattr(basic.AnsibleModule, "fail_json", done)
        with pytest.raises(SystemExit):
            blockinfile.main()
    json.dumps(out, default=str)
    return path.read_bytes() if path.exists() else None


OURS = b"# BEGIN sparkops.specdec ssh_mesh\nold\n# END sparkops.specdec ssh_mesh\n"


@pytest.mark.parametrize("original", [
    None, b"", b"ssh-ed25519 AAAAuser u\n", b"ssh-ed25519 AAAAuser u", b"a\n" + OURS + b"b\n", OURS, b"a\n" + OURS,
    b"a\n# END sparkops.specdec ssh_mesh\nb\n# BEGIN sparkops.specdec ssh_mesh\nc\n",  # markers the wrong way round
    b"x\n# BEGIN sparkops.specdec ssh_mesh\ndangling\n",
])
@pytest.mark.parametrize("block", ["k1\nk2", "k1\n", ""])
@pytest.mark.parametrize("state", ["present", "absent"])
def test_blockinfile_bytes_are_ansibles(tmp_path, original, block, state):
    """The blocks are byte-identical to what the role's blockinfile tasks wrote: a pair deployed by the old role
    converges with changed=0, and a user's lines around the block stay as they are."""
    want = _real_blockinfile(tmp_path, original, block, state)
    got = m.blockinfile(original, block, state == "present")
    if want is None:  # absent on a missing file: nothing written
        assert original is None and state == "absent"
    else:
        assert got == want


# --- the node ------------------------------------------------------------------------------------------------------------

@pytest.fixture
def node(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    hostkey = tmp_path / "ssh_host_ed25519_key.pub"
    hostkey.write_text(HOST_PUB + "\n")
    paths = {"home": home, "key_dir": tmp_path / "etc" / "trtllm-ssh", "hostkey": hostkey}

    def make(check=False, diff=True, user=ME, name="spark-1"):
        return m.Mesh(user, name, str(paths["key_dir"]), "id_ed25519_sparkops", check=check, diff=diff, root=ME,
                      node_host_key=str(hostkey), home=str(home))
    make.paths = paths
    return make


def _mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


@needs_keygen
def test_keys_out_creates_dirs_and_keys_then_nothing(node):
    mesh = node()
    ident_ = mesh.keys()
    home, key_dir = node.paths["home"], node.paths["key_dir"]
    assert _mode(home / ".ssh") == _mode(key_dir) == _mode(key_dir / "mesh") == 0o700
    assert ident_["user"] == ME and ident_["home"] == str(home) and ident_["host"] == HOST_PUB
    assert ident_["mesh"] == (home / ".ssh" / "id_ed25519_sparkops.pub").read_text().strip()
    assert ident_["mesh"].endswith(" %s@spark-1 sparkops-mesh" % ME)
    assert ident_["container"] == (key_dir / "ssh_host_ed25519_key.pub").read_text().strip()
    assert ident_["container"].endswith(" trtllm-container@spark-1")
    # The container mesh directory holds the private key only; its public half is read from it.
    assert sorted(os.listdir(key_dir / "mesh")) == ["id_ed25519"]
    assert ident_["container_mesh"].split()[:2] == m._first_line(
        os.popen("ssh-keygen -y -f %s" % (key_dir / "mesh" / "id_ed25519")).read()).split()[:2]
    assert [c.split(" /")[0] for c in mesh.changes] == ["create", "create", "create", "create key", "create key",
                                                        "create key"]
    assert not any("PRIVATE KEY" in d["after"] for d in mesh.diffs)
    again = node()
    assert again.keys() == ident_ and again.changes == [] and again.diffs == []


@needs_keygen
def test_an_existing_key_is_never_replaced(node):
    node().keys()
    key = node.paths["home"] / ".ssh" / "id_ed25519_sparkops"
    before = key.read_bytes()
    (node.paths["key_dir"] / "ssh_host_ed25519_key.pub").write_text("ssh-ed25519 AAAAkept c\n")
    mesh = node()
    assert mesh.keys()["container"] == "ssh-ed25519 AAAAkept c" and mesh.changes == []
    assert key.read_bytes() == before


@needs_keygen
def test_check_mode_reports_and_writes_nothing(node):
    mesh = node(check=True)
    ident_ = mesh.keys()
    assert ident_["mesh"] == ident_["container"] == ident_["container_mesh"] == ""
    assert len(mesh.changes) == 6 and not (node.paths["home"] / ".ssh").exists()
    assert not node.paths["key_dir"].exists()
    members = {"spark-1": dict(ident_, addresses=["10.0.0.1"]), "spark-2": ident("2")}
    trust = node(check=True)
    assert trust.trust(members, "id_ed25519_sparkops", 2233)["peers"] == ["192.168.100.11", "192.168.101.11"]
    assert len(trust.changes) == 5 and not (node.paths["home"] / ".ssh").exists()


@needs_keygen
def test_fixes_owner_and_mode_of_dirs(node):
    node().keys()
    os.chmod(node.paths["home"] / ".ssh", 0o755)
    os.chmod(node.paths["key_dir"] / "mesh", 0o750)
    mesh = node()
    mesh.keys()
    assert mesh.changes == ["fix %s/.ssh" % node.paths["home"], "fix %s/mesh" % node.paths["key_dir"]]
    assert mesh.diffs[0]["before"].startswith("directory 0755 ") and mesh.diffs[0]["after"].startswith("directory 0700")
    assert _mode(node.paths["home"] / ".ssh") == 0o700


@needs_keygen
def test_empty_dir_docker_left_is_cleared_then_the_key_created(node):
    key = node.paths["key_dir"] / "ssh_host_ed25519_key"
    key.mkdir(parents=True)
    check = node(check=True)
    assert check.keys()["container"] == ""
    assert "remove the empty directory Docker left at %s" % key in check.changes and key.is_dir()
    mesh = node()
    assert mesh.keys()["container"].endswith("trtllm-container@spark-1") and key.is_file()


def test_a_dir_with_files_at_the_host_key_stops_before_any_change(node):
    key = node.paths["key_dir"] / "ssh_host_ed25519_key"
    key.mkdir(parents=True)
    (key / "x").write_text("x")
    with pytest.raises(m.MeshError, match="is a directory with files in it"):
        node().keys()
    assert not (node.paths["home"] / ".ssh").exists()


def test_no_node_host_key_stops(node):
    node.paths["hostkey"].unlink()
    with pytest.raises(m.MeshError, match=r"has no ed25519 host key for its sshd .*ssh-keygen -A"):
        node().keys()


def test_unknown_user_is_one_line():
    with pytest.raises(m.MeshError, match="^ssh_mesh_user: no-such-user-x has no entry in the passwd database of s1"):
        m.Mesh("no-such-user-x", "s1", "/k", "k")


def _deploy(node):
    """Keys out and trust in, as the role runs them, for spark-1 with spark-2's published identity."""
    mine = dict(node().keys(), addresses=["192.168.100.10", "192.168.101.10"])
    members = {"spark-1": mine, "spark-2": ident("2")}
    mesh = node()
    plan = mesh.trust(members, "id_ed25519_sparkops", 2233)
    return mine, members, mesh, plan


@needs_keygen
def test_trust_in_writes_blocks_and_container_files_then_nothing(node):
    ssh = node.paths["home"] / ".ssh"
    ssh.mkdir(mode=0o700)
    (ssh / "authorized_keys").write_text("ssh-ed25519 AAAAuser mine\n")
    os.chmod(ssh / "authorized_keys", 0o644)
    mine, members, mesh, plan = _deploy(node)
    text = (ssh / "authorized_keys").read_text()
    assert text == ("ssh-ed25519 AAAAuser mine\n# BEGIN sparkops.specdec ssh_mesh\n%s\nssh-ed25519 AAAAmesh2 spark@spark-2\n"
                    "# END sparkops.specdec ssh_mesh\n" % mine["mesh"])
    assert _mode(ssh / "authorized_keys") == _mode(ssh / "config") == _mode(ssh / "known_hosts_sparkops") == 0o600
    mesh_dir = node.paths["key_dir"] / "mesh"
    assert (mesh_dir / "authorized_keys").read_text().splitlines()[1] == (
        'restrict,from="192.168.100.11,192.168.101.11" ssh-ed25519 AAAAcmesh2 trtllm-mesh@spark-2')
    assert _mode(mesh_dir / "authorized_keys") == 0o600 and _mode(mesh_dir / "known_hosts") == 0o644
    assert sorted(os.listdir(mesh_dir)) == ["authorized_keys", "id_ed25519", "known_hosts"]
    # Diff: before and after of each file written.
    diff = {d["before_header"]: d for d in mesh.diffs}
    assert diff[str(ssh / "authorized_keys")]["before"] == "ssh-ed25519 AAAAuser mine\n"
    assert diff[str(ssh / "authorized_keys")]["after"] == text
    assert diff[str(mesh_dir / "known_hosts")]["before"] == ""
    assert plan["peers"] == ["192.168.100.11", "192.168.101.11"]
    again = node()
    again.trust(members, "id_ed25519_sparkops", 2233)
    assert again.changes == [] and again.diffs == []
    # A peer re-keyed: only its lines change.
    members["spark-2"] = dict(members["spark-2"], mesh="ssh-ed25519 AAAAnew2 spark@spark-2")
    third = node()
    third.trust(members, "id_ed25519_sparkops", 2233)
    assert third.changes == ["write %s" % (ssh / "authorized_keys")]


@needs_keygen
def test_files_the_old_role_wrote_are_left_as_they_are(node):
    """A node the old role converged (blockinfile, copy): the module finds nothing to change."""
    mine, members, mesh, plan = _deploy(node)
    ssh, mesh_dir = node.paths["home"] / ".ssh", node.paths["key_dir"] / "mesh"
    blocks = m.mesh_blocks("spark-1", members, "id_ed25519_sparkops", 2233)
    # What the old role's loop wrote: blockinfile of each block (checked against ansible's own above), copy of each file.
    for name, block in blocks["blocks"].items():
        assert (ssh / name).read_bytes() == m.blockinfile(None, block)
    assert (mesh_dir / "known_hosts").read_text() == blocks["container"]["known_hosts"]
    again = node()
    again.trust(members, "id_ed25519_sparkops", 2233)
    assert again.changes == []


@needs_keygen
def test_absent_removes_only_what_we_wrote(node):
    ssh = node.paths["home"] / ".ssh"
    ssh.mkdir(mode=0o700)
    (ssh / "config").write_text("Host example\n    User me\n")
    (ssh / "id_ed25519").write_text("a user's key\n")
    _deploy(node)
    check = node(check=True)
    check.absent()
    assert "remove %s/mesh" % node.paths["key_dir"] in check.changes and (node.paths["key_dir"] / "mesh").is_dir()
    gone = node()
    gone.absent()
    assert (ssh / "config").read_text() == "Host example\n    User me\n"
    assert (ssh / "authorized_keys").read_text() == "" and (ssh / "known_hosts_sparkops").read_text() == ""
    # The user's keys (its own and the mesh key) and the pinned container host key stay; the container mesh goes.
    assert (ssh / "id_ed25519").exists() and (ssh / "id_ed25519_sparkops").exists()
    assert (node.paths["key_dir"] / "ssh_host_ed25519_key").exists()
    assert not (node.paths["key_dir"] / "mesh").exists()
    assert not any("PRIVATE KEY" in d["before"] for d in gone.diffs)
    again = node()
    again.absent()
    assert again.changes == []


@needs_keygen
def test_absent_keeps_a_mesh_dir_with_someone_elses_file(node):
    _deploy(node)
    (node.paths["key_dir"] / "mesh" / "notes").write_text("x")
    node().absent()
    assert os.listdir(node.paths["key_dir"] / "mesh") == ["notes"]


@needs_keygen
@pytest.mark.skipif(os.geteuid() != 0, reason="switching to another user needs root")
def test_as_root_the_users_files_are_written_as_the_user():
    """Run as root for a user (nobody): its ~/.ssh and mesh key are the user's, written with its identity."""
    user = pwd.getpwnam("nobody")
    top = tempfile.mkdtemp(prefix="meshmod-")
    try:
        os.chmod(top, 0o755)
        home = os.path.join(top, "home")
        os.mkdir(home)
        os.chown(home, user.pw_uid, user.pw_gid)
        hostkey = os.path.join(top, "hostkey.pub")
        with open(hostkey, "w") as handle:
            handle.write(HOST_PUB + "\n")
        # A link in ~/.ssh to a file only root may write: followed as the user, so it is refused, not written.
        mesh = m.Mesh("nobody", "s1", os.path.join(top, "k"), "id_mesh", node_host_key=hostkey, home=home)
        mine = dict(mesh.keys(), addresses=["10.0.0.1"])
        ssh = os.path.join(home, ".ssh")
        assert os.stat(ssh).st_uid == user.pw_uid and os.stat(os.path.join(ssh, "id_mesh")).st_uid == user.pw_uid
        assert os.stat(os.path.join(top, "k", "mesh", "id_ed25519")).st_uid == 0
        m.Mesh("nobody", "s1", os.path.join(top, "k"), "id_mesh", node_host_key=hostkey, home=home).trust(
            {"s1": mine}, "id_mesh", 2233)
        assert os.stat(os.path.join(ssh, "authorized_keys")).st_uid == user.pw_uid
        protected = os.path.join(top, "root-only")
        with open(protected, "w") as handle:
            handle.write("root\n")
        os.chmod(protected, 0o600)
        os.unlink(os.path.join(ssh, "config"))
        os.symlink(protected, os.path.join(ssh, "config"))
        with pytest.raises(PermissionError):
            m.Mesh("nobody", "s1", os.path.join(top, "k"), "id_mesh", node_host_key=hostkey, home=home).trust(
                {"s1": mine}, "id_mesh", 2233)
        with open(protected) as handle:
            assert handle.read() == "root\n"
        assert os.geteuid() == 0 and os.getegid() == 0
    finally:
        shutil.rmtree(top)
