#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ssh_mesh_keys
short_description: The SSH mesh of one node - its keys out, the peers' trust in, or its removal
version_added: 0.3.0
description:
  - Runs on the node, as root (C(become)). Holds the node state of the C(ssh_mesh) role. One module for the three
    steps (rather than one per step) because they share one description of the node's files (paths, owners, modes,
    markers), and O(state=absent) must remove exactly what the other two write.
  - B(Keys out) (O(state=present) without O(members)). Before any change, checks that every node of the mesh has the
    same cluster user (O(users)), that the node sshd has an ed25519 host key, and that nothing but a directory (or an
    empty directory Docker left, at the container host key) stands where a directory or key belongs. Then ensures
    C(~/.ssh) of O(user) (owner O(user), mode 0700), O(host_key_dir) and its C(mesh) directory (root:root, 0700);
    removes the empty directory Docker creates at C(O(host_key_dir)/ssh_host_ed25519_key) when a container started
    before the key existed; creates the missing keys - the cluster user's mesh key C(~/.ssh/O(key_name)) (as that
    user), the pinned container sshd host key C(O(host_key_dir)/ssh_host_ed25519_key) and the containers' mesh key
    C(O(host_key_dir)/mesh/id_ed25519) (no C(.pub) is kept there). An existing key is never replaced. Returns this
    node's public identity (RV(identity)).
  - B(Trust in) (O(state=present) with O(members)). From every member's published identity, writes our marked blocks
    (C(# BEGIN/END sparkops.specdec ssh_mesh)) in C(~/.ssh/authorized_keys) (every member's mesh key),
    C(~/.ssh/known_hosts_sparkops) (the members' node sshd keys on their addresses and container sshd keys on
    C([address]:O(ssh_port))) and C(~/.ssh/config) (a C(Host) block of every member address with the mesh key and
    C(UserKnownHostsFile ~/.ssh/known_hosts_sparkops)), mode 0600, byte for byte as C(ansible.builtin.blockinfile)
    writes them (the rest of each file is left alone); and, as whole files of root, the containers'
    C(mesh/authorized_keys) (each member's container mesh key as C(restrict,from="<its addresses>"), mode 0600) and
    C(mesh/known_hosts) (mode 0644). Files in C(~/.ssh) are read and written with the cluster user's identity.
    Returns the peer addresses to verify (RV(peers)).
  - B(Absent) (O(state=absent)). Removes our marked blocks from the three files of C(~/.ssh), and the container mesh
    files this module creates (C(authorized_keys), C(known_hosts), the containers' key C(id_ed25519)), then the C(mesh)
    directory when nothing else is in it. The cluster user's mesh key and the pinned container host key stay (a
    user's key is never removed; a redeploy reuses them).
author:
  - sparkops maintainers (@sparkops)
options:
  state:
    description: V(present) (keys out, or trust in with O(members)) or V(absent).
    type: str
    choices: [present, absent]
    default: present
  user:
    description: The cluster user (C(ssh_mesh_user), else the user Ansible connects as); its home comes from the passwd
      database of the node.
    type: str
    required: true
  name:
    description: This node's inventory name (the comment of its new keys, and its entry in O(users) and O(members)).
    type: str
    required: true
  host_key_dir:
    description: The container host key directory (C(specdec_container_host_key_dir)).
    type: path
    required: true
  key_name:
    description: File name, in C(~/.ssh), of the cluster user's mesh key pair (C(ssh_mesh_key_name)).
    type: str
    default: id_ed25519_sparkops
  users:
    description:
      - Keys out only. The cluster user of every node of the mesh (inventory name to user; empty for a node that did
        not publish one). The module fails, changing nothing, unless they are one and the same user.
    type: dict
  group:
    description: How the messages name the mesh's node list (C(ssh_mesh_hosts) or the group).
    type: str
    default: spark_nodes
  members:
    description:
      - Trust in. Every member of the mesh (inventory name to its published identity - RV(identity) plus
        C(addresses), the addresses peers use to reach it), in the mesh's order, this node included.
      - An address may carry its prefix length (C(192.168.0.1/24)); RV(peers) then holds only each peer's addresses
        in this node's subnets (the links they share), and the files the addresses alone.
    type: dict
  ssh_port:
    description: The port of the container sshd (C(specdec_container_ssh_port)); required with O(members).
    type: int
extends_documentation_fragment:
  - sparkops.specdec.attributes
  - sparkops.specdec.attributes.platform
attributes:
  check_mode:
    support: full
    details: Checks and plans as in a normal run and reports what would change; writes nothing. A key check mode would create
      is left out of RV(identity) (empty) and so of the blocks.
  diff_mode:
    support: full
    details: Before and after of every file it writes (never a private key's content), directory and key.
  idempotent:
    support: full
  platform:
    details: Linux with OpenSSH's C(ssh-keygen).
notes:
  - "Errors a user can meet (each one line, before any change): the cluster user differs between nodes or a node of
    the mesh did not run (O(users)); O(user) not in the passwd database; no C(/etc/ssh/ssh_host_ed25519_key.pub);
    a directory with files in it where the container host key belongs; a file where a directory belongs; a member
    without an identity (O(members))."
"""

EXAMPLES = r"""
- name: Keys out (every node), after checking the cluster user of every node
  sparkops.specdec.ssh_mesh_keys:
    user: spark
    name: "{{ inventory_hostname }}"
    host_key_dir: /etc/sparkops/trtllm-ssh
    users: {spark-1: spark, spark-2: spark}
  become: true
  register: keys

- name: Trust in, from every member's published identity (set_fact ssh_mesh_identity on each)
  sparkops.specdec.ssh_mesh_keys:
    user: spark
    name: "{{ inventory_hostname }}"
    host_key_dir: /etc/sparkops/trtllm-ssh
    ssh_port: 2233
    members: "{{ dict(mesh_hosts | zip(mesh_hosts | map('extract', hostvars, 'ssh_mesh_identity'))) }}"
  become: true

- name: Remove what the mesh wrote on this node
  sparkops.specdec.ssh_mesh_keys:
    state: absent
    user: spark
    name: "{{ inventory_hostname }}"
    host_key_dir: /etc/sparkops/trtllm-ssh
  become: true
"""

RETURN = r"""
identity:
  description: Keys out. This node's public identity (C('') for a key check mode did not create).
  returned: state=present without members
  type: dict
  contains:
    user: {description: The cluster user., type: str}
    home: {description: Its home., type: str}
    mesh: {description: The cluster user's mesh public key (first line of its C(.pub)), type: str}
    host: {description: The node sshd's ed25519 public key., type: str}
    container: {description: The pinned container sshd host public key., type: str}
    container_mesh: {description: The containers' mesh public key., type: str}
    mesh_dir: {description: The container mesh directory., type: str}
  sample: {user: spark, home: /home/spark, mesh: "ssh-ed25519 AAAA... spark@spark-1 sparkops-mesh",
           host: "ssh-ed25519 AAAA... root@spark-1", container: "ssh-ed25519 AAAA... trtllm-container@spark-1",
           container_mesh: "ssh-ed25519 AAAA... trtllm-mesh@spark-1", mesh_dir: /etc/sparkops/trtllm-ssh/mesh}
peers:
  description: Trust in. The addresses of the other members, to verify (with prefix lengths given, those on the links
    this node shares with each member).
  returned: state=present with members
  type: list
  elements: str
  sample: [192.168.100.11, 192.168.101.11]
changes:
  description: What changed (or would change in check mode), one line each.
  returned: always
  type: list
  elements: str
  sample: ["create key /home/spark/.ssh/id_ed25519_sparkops", "write /home/spark/.ssh/authorized_keys"]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkops.specdec.plugins.module_utils import _ssh_mesh


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", choices=["present", "absent"], default="present"),
            user=dict(type="str", required=True),
            name=dict(type="str", required=True),
            host_key_dir=dict(type="path", required=True),
            key_name=dict(type="str", default="id_ed25519_sparkops", no_log=False),
            users=dict(type="dict"),
            group=dict(type="str", default="spark_nodes"),
            members=dict(type="dict"),
            ssh_port=dict(type="int"),
        ),
        required_by={"members": "ssh_port"},
        supports_check_mode=True,
    )
    p = module.params
    result = {"changed": False}
    try:
        if p["state"] == "present" and p["users"] is not None:
            _ssh_mesh.same_user(p["users"], p["group"])
        mesh = _ssh_mesh.Mesh(p["user"], p["name"], p["host_key_dir"], p["key_name"], check=module.check_mode,
                              diff=module._diff)
        if p["state"] == "absent":
            mesh.absent()
        elif p["members"] is not None:
            result["peers"] = mesh.trust(p["members"], p["key_name"], p["ssh_port"])["peers"]
        else:
            result["identity"] = mesh.keys()
    except _ssh_mesh.MeshError as exc:
        module.fail_json(msg=str(exc))
    except OSError as exc:
        module.fail_json(msg="ssh_mesh: %s on %s: %s" % (exc.filename or "a file", p["name"], exc.strerror or exc))
    result["changes"] = mesh.changes
    result["changed"] = bool(mesh.changes)
    if module._diff and mesh.diffs:
        result["diff"] = mesh.diffs
    module.exit_json(**result)


if __name__ == "__main__":
    main()
