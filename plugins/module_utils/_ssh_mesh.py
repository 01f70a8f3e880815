# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""PRIVATE: the SSH mesh of a node (module sparkops.specdec.ssh_mesh). Node-side, stdlib only. Not a public API.

Keys out (``Mesh.keys``): ~/.ssh of the cluster user, the container host key directory and its mesh directory
(created, or their owner and mode fixed), the empty directory Docker leaves where the container host key belongs
(removed), the missing keys (created, never replaced), and this node's public identity.

Trust in (``Mesh.trust``): from every member's identity, our marked blocks in ~/.ssh/authorized_keys,
~/.ssh/known_hosts_sparkops and ~/.ssh/config (written exactly as ansible.builtin.blockinfile with the marker
``# {mark} sparkops.specdec ssh_mesh`` writes them, mode 0600) and the containers' authorized_keys and known_hosts
(whole files, ours alone).

Absent (``Mesh.absent``): our marked blocks, and the container mesh files (authorized_keys, known_hosts, the
containers' key, then the mesh directory if it is empty). The cluster user's mesh key and the pinned container host
key stay (a user's key is never removed; a redeploy reuses them).

Every refusal is one line (MeshError), raised before any change.
"""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import subprocess
import tempfile

from ansible_collections.sparkops.specdec.plugins.module_utils._netplan import addresses_in_subnets

# The peers' pinned host keys live in a file of their own, named by the mesh's Host block as the only user
# known-hosts file for the peers' addresses: a stale or re-keyed entry elsewhere cannot vouch for a peer.
KNOWN_HOSTS = "known_hosts_sparkops"
NODE_HOST_KEY = "/etc/ssh/ssh_host_ed25519_key.pub"
CONTAINER_HOST_KEY = "ssh_host_ed25519_key"
# The container mesh: a directory of the host key directory (root, 0700) mounted read-only as the container root's
# ~/.ssh, holding exactly the container's own mesh key (MESH_KEY, no .pub: its public half is read with ssh-keygen -y),
# authorized_keys (the deployment members' container mesh keys, each usable only from its node's fabric addresses)
# and known_hosts (the members' container host keys on their fabric addresses and the container port).
MESH_DIR = "mesh"
MESH_KEY = "id_ed25519"
MESH_FILES = ("authorized_keys", "known_hosts", MESH_KEY)
MARKER = "# {mark} sparkops.specdec ssh_mesh"
USER_FILES = ("authorized_keys", KNOWN_HOSTS, "config")
# Owner of the host key directory, its mesh directory and the container files (tests use their own user).
ROOT = "root"


class MeshError(ValueError):
    """A one-line refusal about the mesh (user, nodes, keys, paths)."""


# ---------------------------------------------------------------------------------------------
# Pure parts
# ---------------------------------------------------------------------------------------------

def same_user(users, group):
    """Raise MeshError unless every node of the mesh has the same cluster user; users: host -> user ('' or None: the
    node did not publish one)."""
    missing = [h for h, u in users.items() if not u]
    if missing:
        raise MeshError("ssh_mesh: %s of group %s did not run the mesh (not in this play, e.g. --limit); the mesh needs "
                        "every node of the group." % (", ".join(missing), group))
    if len(set(users.values())) > 1:
        raise MeshError("The cluster user differs between nodes (%s). MPI and the runbook need the same user name on both "
                        "Sparks: set ssh_mesh_user or ansible_user." % ", ".join("%s: %s" % hu for hu in users.items()))


def blockinfile(original, block, present=True, marker=MARKER):
    """The bytes ansible.builtin.blockinfile writes (insertafter EOF, no extra newlines) for ``original`` (bytes, or
    None when the file is missing) and ``block`` (text); an empty block (or present=False) removes ours."""
    lines = original.splitlines(True) if original else []
    marker0 = (marker.replace("{mark}", "BEGIN") + "\n").encode()
    marker1 = (marker.replace("{mark}", "END") + "\n").encode()
    data = block.encode()
    if present and data:
        if not data.endswith(b"\n"):
            data += b"\n"
        blocklines = [marker0] + data.splitlines(True) + [marker1]
    else:
        blocklines = []
    n0 = n1 = None
    for i, line in enumerate(lines):
        if line == marker0:
            n0 = i
        if line == marker1:
            n1 = i
    if None in (n0, n1):
        n0 = len(lines)
    elif n0 < n1:
        lines[n0:n1 + 1] = []
    else:
        lines[n1:n0 + 1] = []
        n0 = n1
    if n0 > 0 and not lines[n0 - 1].endswith(b"\n"):
        lines[n0 - 1] += b"\n"
    lines[n0:n0] = blocklines
    return b"".join(lines)


def _type_and_key(line):
    return " ".join(str(line).split()[0:2])


def check_members(members, me):
    """members: host -> published identity (mesh order). Raise MeshError for a member without one."""
    if not isinstance(members, dict) or me not in members:
        raise MeshError("ssh_mesh: %s is not a member of the mesh it was given (%s); list it in ssh_mesh_hosts."
                        % (me, ", ".join(members or {})))
    for host, ident in members.items():
        if not isinstance(ident, dict) or not ident.get("host") or not ident.get("addresses"):
            raise MeshError("ssh_mesh: %s did not publish its mesh identity (not in this play?); run the mesh on every "
                            "node of the mesh." % host)


def _address(value):
    """The address of an identity entry: an IP address, or one with its prefix length (192.168.0.1/24)."""
    return str(value).split("/", 1)[0]


def peers_to_verify(me, members):
    """The addresses of the other members to verify passwordless SSH on, in mesh order.

    Every address of every peer, except where this node's and a peer's entries carry prefix lengths (the fabric
    addresses of netplan_qsfp_fabric.addresses): then only the peer's addresses in one of this node's subnets, the
    links they share. A ring's neighbours share one cable (two of their four subnets); the other two addresses of a
    neighbour are on its cable to the third node, which this node has no route to. A peer sharing no subnet is verified
    on its bare addresses (a management address, the way to the Spark opposite this one in an accepted 4-node ring),
    else on all its addresses, so that its verification fails and names them rather than passing by testing nothing.
    """
    # A bare address is a subnet of one address: it shares no link with another node's.
    mine = members[me].get("addresses") or []
    peers = []
    for host, ident in members.items():
        if host == me:
            continue
        entries = [str(a) for a in ident.get("addresses") or []]
        bare = [a for a in entries if "/" not in a]
        peers += addresses_in_subnets(entries, mine) or bare or [_address(a) for a in entries]
    return peers


def mesh_blocks(me, members, key_name, ssh_port):
    """The marked blocks of one node's ~/.ssh and the peer addresses to verify.

    members: host -> identity (user, addresses, mesh, host, container, container_mesh public keys), in mesh order.
    An address may carry its prefix length (192.168.0.1/24): the blocks hold the address alone, and the peers to
    verify are the addresses on the links this node shares with each peer (peers_to_verify).
    Returns {'blocks': {file name: block}, 'peers': [address, ...], 'container': {file name: content}}.
    A key that is not there (check mode on a new node) is left out.
    """
    trusted, pinned, everyone = [], [], []
    c_trusted, c_pinned = [], []
    for host, ident in members.items():
        addresses = [_address(a) for a in ident.get("addresses") or []]
        everyone += addresses
        ports = ",".join("[%s]:%s" % (a, ssh_port) for a in addresses)
        if ident.get("mesh"):
            trusted.append(ident["mesh"])
        if ident.get("host"):
            pinned.append("%s %s" % (",".join(addresses), _type_and_key(ident["host"])))
        if ident.get("container"):
            pinned.append("%s %s" % (ports, _type_and_key(ident["container"])))
            c_pinned.append("%s %s" % (ports, _type_and_key(ident["container"])))
        if ident.get("container_mesh"):
            # Usable only from that node, for commands only (no forwarding, no pty; OpenMPI starts its daemons with a
            # plain ssh command); this node's own key too (mpirun may ssh to its own node).
            c_trusted.append('restrict,from="%s" %s trtllm-mesh@%s' % (",".join(addresses),
                                                                       _type_and_key(ident["container_mesh"]), host))
    config = "\n".join([
        "Host %s" % " ".join(everyone),
        "    IdentityFile ~/.ssh/%s" % key_name,
        "    IdentitiesOnly yes",
        "    UserKnownHostsFile ~/.ssh/%s" % KNOWN_HOSTS,
    ])
    return {
        "blocks": {"authorized_keys": "\n".join(trusted), KNOWN_HOSTS: "\n".join(pinned), "config": config},
        "peers": peers_to_verify(me, members),
        "container": {"authorized_keys": "\n".join(c_trusted) + "\n", "known_hosts": "\n".join(c_pinned) + "\n"},
    }


def _first_line(data):
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else str(data or "")
    lines = text.splitlines()
    return lines[0].strip() if lines else ""


# ---------------------------------------------------------------------------------------------
# The node
# ---------------------------------------------------------------------------------------------

class Mesh(object):
    """The mesh state of one node. check: plan and report only; diff: collect before/after of what changes.

    user: the cluster user; name: this node's inventory name (key comments); host_key_dir: the container host key
    directory; key_name: the cluster user's mesh key file name in ~/.ssh. ``root`` (owner of the host key
    directory), ``node_host_key`` and ``home`` (else the user's from the passwd database) are parameters so that tests
    run without root.
    """

    def __init__(self, user, name, host_key_dir, key_name, check=False, diff=False, root=None, node_host_key=None,
                 home=None):
        try:
            pw = pwd.getpwnam(user)
        except KeyError:
            raise MeshError("ssh_mesh_user: %s has no entry in the passwd database of %s; create the user on every node "
                            "or set ssh_mesh_user to one that exists." % (user, name)) from None
        home = home or pw.pw_dir
        if not home or not home.startswith("/"):
            raise MeshError("ssh_mesh: user %s has no home in the passwd database of %s; give it one." % (user, name))
        root = root or ROOT
        try:
            rpw = pwd.getpwnam(root)
        except KeyError:
            raise MeshError("ssh_mesh: no user %s on %s." % (root, name)) from None
        self.user, self.name, self.uid, self.gid, self.home = user, name, pw.pw_uid, pw.pw_gid, home.rstrip("/")
        self.ruid, self.rgid = rpw.pw_uid, rpw.pw_gid
        self.key_dir = str(host_key_dir).rstrip("/")
        self.mesh_dir = "%s/%s" % (self.key_dir, MESH_DIR)
        self.ssh_dir = "%s/.ssh" % self.home
        self.key_name = key_name
        self.node_host_key = node_host_key or NODE_HOST_KEY
        self.check, self.want_diff = check, diff
        self.changes = []
        self.diffs = []

    # --- helpers ---------------------------------------------------------------------------------

    def _note(self, what, path, before=None, after=None):
        self.changes.append("%s %s" % (what, path))
        if self.want_diff:
            self.diffs.append({"before_header": path, "after_header": path, "before": before or "",
                               "after": after or ""})

    @contextlib.contextmanager
    def as_user(self):
        """File operations in the cluster user's ~/.ssh run with its identity (as the role's blockinfile did with
        become_user): a link there cannot make root write elsewhere."""
        if os.geteuid() != 0 or self.uid == 0:
            yield
            return
        groups = os.getgroups()
        os.setgroups(os.getgrouplist(self.user, self.gid))
        os.setegid(self.gid)
        os.seteuid(self.uid)
        try:
            yield
        finally:
            os.seteuid(0)
            os.setegid(0)
            os.setgroups(groups)

    def _run_as(self, argv, uid, gid):
        kwargs = {}
        if os.geteuid() == 0 and uid != 0:
            kwargs = {"user": uid, "group": gid, "extra_groups": os.getgrouplist(self.user, gid)}
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, check=False, **kwargs)
        except OSError as exc:
            raise MeshError("ssh_mesh: %s failed on %s: %s; install openssh-client." % (argv[0], self.name, exc)) from None
        if proc.returncode != 0:
            raise MeshError("ssh_mesh: %s failed on %s (rc %d): %s"
                            % (" ".join(argv), self.name, proc.returncode, " ".join(proc.stderr.split())[:300]))
        return proc.stdout

    @staticmethod
    def _describe(st):
        try:
            owner = pwd.getpwuid(st.st_uid).pw_name
        except KeyError:
            owner = str(st.st_uid)
        try:
            group = grp.getgrgid(st.st_gid).gr_name
        except KeyError:
            group = str(st.st_gid)
        return "directory %04o %s:%s\n" % (st.st_mode & 0o7777, owner, group)

    def _ensure_dir(self, path, uid, gid=None):
        """A directory of uid (and gid, when given), mode 0700: created, or its owner and mode fixed."""
        owner = pwd.getpwuid(uid).pw_name
        try:
            st = os.stat(path)  # ~/.ssh may be a link to a directory: its target is checked
        except FileNotFoundError:
            self._note("create", path, "absent\n", "directory 0700 %s\n" % owner)
            if not self.check:
                os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
                os.mkdir(path, 0o700)
                os.chown(path, uid, gid if gid is not None else self._gid_of(uid))
                os.chmod(path, 0o700)
            return
        if (st.st_mode & 0o7777) != 0o700 or st.st_uid != uid or (gid is not None and st.st_gid != gid):
            self._note("fix", path, self._describe(st), "directory 0700 %s\n" % owner)
            if not self.check:
                os.chown(path, uid, gid if gid is not None else -1)
                os.chmod(path, 0o700)

    @staticmethod
    def _gid_of(uid):
        return pwd.getpwuid(uid).pw_gid

    def _key(self, path, uid, gid, comment, drop_pub=False):
        """The public key of the key at path; created (as uid) when its private key is missing, never replaced.
        '' when it would be created in check mode."""
        if os.path.lexists(path):
            if drop_pub:  # no .pub is kept beside it: its public half from the private key
                return _first_line(self._run_as(["ssh-keygen", "-y", "-f", path], uid, gid))
            try:
                with open(path + ".pub", "rb") as handle:
                    return _first_line(handle.read())
            except OSError:
                return ""
        self._note("create key", path, "absent\n", "ed25519 key (%s)\n" % comment)
        if self.check:
            return ""
        self._run_as(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", path], uid, gid)
        with open(path + ".pub", "rb") as handle:
            pub = _first_line(handle.read())
        if drop_pub:
            os.unlink(path + ".pub")  # the container mesh directory holds the private key only
        return pub

    # --- keys out --------------------------------------------------------------------------------

    def keys(self):
        """Directories, keys, and this node's identity (public keys; '' for a key check mode did not create)."""
        try:
            with open(self.node_host_key, "rb") as handle:
                host_pub = _first_line(handle.read())
        except OSError:
            host_pub = ""
        if not host_pub:
            raise MeshError("ssh_mesh: %s has no ed25519 host key for its sshd (%s); the mesh pins it. Create it "
                            "(ssh-keygen -A) and re-run." % (self.name, self.node_host_key))
        container_key = "%s/%s" % (self.key_dir, CONTAINER_HOST_KEY)
        docker_dir = os.path.isdir(container_key) and not os.path.islink(container_key)
        if docker_dir and os.listdir(container_key):
            raise MeshError("ssh_mesh: %s on %s is a directory with files in it, where the container sshd host key "
                            "belongs; move it away (it is not ours) and re-run." % (container_key, self.name))
        for path in (self.ssh_dir, self.key_dir, self.mesh_dir):
            if os.path.lexists(path) and not os.path.isdir(path):
                raise MeshError("ssh_mesh: %s on %s is not a directory; move it away and re-run." % (path, self.name))
        # Before any change: every refusal above.
        self._ensure_dir(self.ssh_dir, self.uid)
        self._ensure_dir(self.key_dir, self.ruid, self.rgid)
        self._ensure_dir(self.mesh_dir, self.ruid, self.rgid)
        if docker_dir:
            # Docker creates a missing bind-mount source as a directory (a container started before the key existed):
            # an empty one is ours to remove, then the key is created.
            self._note("remove the empty directory Docker left at", container_key, "empty directory\n", "absent\n")
            if not self.check:
                os.rmdir(container_key)
        pubs = {"mesh": self._key("%s/%s" % (self.ssh_dir, self.key_name), self.uid, self.gid,
                                  "%s@%s sparkops-mesh" % (self.user, self.name))}
        if docker_dir and self.check:  # the directory is still there: the key would be created after it goes
            self._note("create key", container_key, "absent\n", "ed25519 key (trtllm-container@%s)\n" % self.name)
            pubs["container"] = ""
        else:
            pubs["container"] = self._key(container_key, self.ruid, self.rgid, "trtllm-container@%s" % self.name)
        pubs["container_mesh"] = self._key("%s/%s" % (self.mesh_dir, MESH_KEY), self.ruid, self.rgid,
                                           "trtllm-mesh@%s" % self.name, drop_pub=True)
        return dict(user=self.user, home=self.home, host=host_pub, mesh_dir=self.mesh_dir, **pubs)

    # --- trust in --------------------------------------------------------------------------------

    def _user_file(self, name, block, present=True):
        path = "%s/%s" % (self.ssh_dir, name)
        with self.as_user():
            real = os.path.realpath(path)
            try:
                with open(real, "rb") as handle:
                    original = handle.read()
                mode = os.stat(real).st_mode & 0o7777
            except FileNotFoundError:
                if not present:
                    return
                original, mode = None, None
            new = blockinfile(original, block, present)
            changed = new != original
            if changed:
                self._note("write" if present else "remove our block from", path,
                           (original or b"").decode("utf-8", "replace"), new.decode("utf-8", "replace"))
            fix_mode = present and mode is not None and mode != 0o600
            if fix_mode and not changed:
                self._note("set mode 0600 of", path, "mode %04o\n" % mode, "mode 0600\n")
            if self.check or not (changed or fix_mode):
                return
            if changed:
                self._write(real, new, 0o600 if present else (mode if mode is not None else 0o600))
            else:
                os.chmod(real, 0o600)

    @staticmethod
    def _write(path, data, mode, owner=None):
        directory = os.path.dirname(path)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".sparkops-mesh.")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            if owner is not None:
                os.chown(tmp, owner[0], owner[1])
            os.chmod(tmp, mode)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def _container_file(self, name, content, mode):
        path = "%s/%s" % (self.mesh_dir, name)
        data = content.encode()
        try:
            with open(path, "rb") as handle:
                original = handle.read()
            st = os.stat(path)
        except FileNotFoundError:
            original, st = None, None
        changed = original != data
        attrs = st is not None and ((st.st_mode & 0o7777) != mode or st.st_uid != self.ruid or st.st_gid != self.rgid)
        if changed:
            self._note("write", path, (original or b"").decode("utf-8", "replace"), content)
        elif attrs:
            self._note("fix owner and mode of", path, "mode %04o\n" % (st.st_mode & 0o7777), "mode %04o\n" % mode)
        if self.check:
            return
        if changed:
            self._write(path, data, mode, (self.ruid, self.rgid))
        elif attrs:
            os.chown(path, self.ruid, self.rgid)
            os.chmod(path, mode)

    def trust(self, members, key_name, ssh_port):
        """Our blocks in ~/.ssh and the container mesh files from the members' identities; the peers to verify."""
        check_members(members, self.name)
        plan = mesh_blocks(self.name, members, key_name, ssh_port)
        for path in (self.ssh_dir, self.mesh_dir):
            if not os.path.isdir(path) and not self.check:
                raise MeshError("ssh_mesh: %s on %s is missing; run the mesh's keys step first." % (path, self.name))
        for name in USER_FILES:
            self._user_file(name, plan["blocks"][name])
        self._container_file("authorized_keys", plan["container"]["authorized_keys"], 0o600)
        self._container_file("known_hosts", plan["container"]["known_hosts"], 0o644)
        return plan

    # --- absent ----------------------------------------------------------------------------------

    def absent(self):
        """Our blocks and the container mesh files go; the user's key and the container host key stay."""
        if os.path.isdir(self.ssh_dir):
            for name in USER_FILES:
                self._user_file(name, "", present=False)
        ours = MESH_FILES + (MESH_KEY + ".pub",)
        for name in ours:
            path = "%s/%s" % (self.mesh_dir, name)
            if not os.path.lexists(path):
                continue
            before = "private key\n"
            if name != MESH_KEY:
                with contextlib.suppress(OSError), open(path, "rb") as handle:
                    before = handle.read().decode("utf-8", "replace")
            self._note("remove", path, before, "absent\n")
            if not self.check:
                os.unlink(path)
        if os.path.isdir(self.mesh_dir) and not os.path.islink(self.mesh_dir):
            if not [n for n in os.listdir(self.mesh_dir) if n not in ours]:  # nothing of someone else's in it
                self._note("remove", self.mesh_dir, "directory\n", "absent\n")
                if not self.check:
                    os.rmdir(self.mesh_dir)
