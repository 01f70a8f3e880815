#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: netplan_fabric
short_description: Static addresses on the ConnectX-7 QSFP pair of a DGX Spark, with a management guard, checkpoint and rollback
version_added: 0.2.0
description:
  - Runs on the node, as root (C(become)). One call of O(state=present) plans the netplan file for the two logical
    interfaces of the cabled QSFP port, checks that the change cannot touch the management connection, records a
    checkpoint, writes and validates the file, and applies it. A later call with O(state=rollback) puts back exactly
    what the checkpoint recorded. The C(netplan_qsfp) role calls it once per run (and once more, only in its rescue,
    to roll back).
  - B(Plan.) The addresses are O(addresses), or derived from the addressing scheme and the node's index
    (O(scheme), O(link_subnets), O(host_offset), O(single_subnet), O(single_host_offset), O(node_index),
    O(node_count)), as the C(netplan_qsfp) role documents them. The file O(path) names only the pair, carries the
    mark C(Managed by sparkops.specdec), is owned by root with mode C(0600).
  - B(Management guard, before any change.) The management connection is found from O(management_addresses)
    (C(ansible_host)), the server address of E(SSH_CONNECTION) (read from the module's environment or, when C(sudo)
    dropped it, from its parent processes), the interfaces holding those addresses (C(ip -j addr show)) and the
    interface of the default IPv4 route (C(ip -j -4 route show default)). The module fails, changing nothing, when
    the selected pair includes one of those interfaces, or a planned subnet overlaps one of their IPv4 subnets or
    contains a management address.
  - B(Ownership.) An existing O(path) without the mark is not replaced unless O(take_over=true); a replaced file is
    kept next to it as C(<path>.<pid>.<timestamp>~) when O(backup=true) (netplan reads only C(*.yaml)).
  - B(Plans someone else wrote.) Every C(*.yaml) of the directory of O(path) is read (PyYAML, which netplan itself
    needs); a file without the mark that addresses a ConnectX-7 interface is a foreign plan (NVIDIA Sync's
    C(99-nvidia-sync-cluster.yaml), eugr's C(98-spark-vllm-docker.yaml), NVIDIA's own C(40-cx7.yaml); ours and theirs
    are told apart by the mark, never by the name). One foreign plan that gives each of O(interfaces) one static IPv4
    address, each in its own subnet, is B(adopted), its addresses are returned and nothing is written, applied or
    checkpointed. With O(take_over=true) every foreign plan is moved aside as C(<file>.<pid>.<timestamp>~) and ours
    written (with O(apply_method=ip) their addresses on O(interfaces) are removed too); the checkpoint records them and
    a rollback puts them back. Anything else (a plan that cannot be adopted, two plans, ours beside theirs) fails
    before any change, so two plans for the same interfaces are never left in place.
  - B(Validation.) A new content is checked with C(netplan generate --root-dir <tmp>) (the file alone in a temporary
    root) before anything is written, when C(netplan) is installed; otherwise a warning says it was not validated.
  - B(Apply) (O(apply=true)). O(apply_method=netplan) runs C(netplan apply) when the file changed.
    O(apply_method=ip) works live on the pair only (lost on reboot, the runbook's alternative); it adds the missing
    planned addresses, removes the addresses on the pair that this module's older configuration had set (the
    addresses of the previous marked file, and of the last checkpoint unless it was rolled back) and the plan no
    longer has, and sets the pair's links up. Addresses someone else put on the pair are left alone.
  - B(Checkpoint.) Before the first change, the previous file (content, owner, group, mode, or its absence) and the
    IPv4 addresses and admin state of the pair are written as JSON to O(checkpoint_path) (mode C(0600)), then
    updated with what was done (file written, backup, C(netplan apply) run, addresses applied). A run that changes
    nothing writes no checkpoint and leaves the last one in place.
  - B(Rollback) (O(state=rollback)). Restores the file (or removes it when there was none), runs C(netplan apply)
    again when the checkpoint's run had, then adds, deletes and sets down or up addresses and links on exactly the two
    interfaces of the checkpoint until they match it, removes the backup the run made, reads the pair again and
    compares. Every step is tried even when an earlier one failed; the module fails, listing what is left, when the
    result differs from the checkpoint. A checkpoint already rolled back is left alone (V(changed=false)).
author:
  - sparkops maintainers (@sparkops)
options:
  state:
    description:
      - V(present) plans, guards, checkpoints, writes, validates and applies.
      - V(rollback) restores the checkpoint at O(checkpoint_path).
    type: str
    choices: [present, rollback]
    default: present
  interfaces:
    description:
      - The two logical interfaces of the cabled QSFP port, logical 1 then logical 2 (RV(sparkops.specdec.nccl_interface_info#module:selected_interfaces)).
      - Required with O(state=present). Nothing outside them is ever changed.
    type: list
    elements: str
  port:
    description: The physical QSFP port, named in the file's header comment only.
    type: int
  addresses:
    description:
      - The address of each interface as C(ADDRESS/PREFIX), in the order of O(interfaces).
      - When empty, derived from the scheme options and O(node_index).
    type: list
    elements: str
    default: []
  scheme:
    description:
      - V(per_link_subnets) gives interface I(i) host O(host_offset) + O(node_index) in O(link_subnets)[I(i)].
      - V(single_subnet) gives interface 1 host O(single_host_offset) + O(node_index) and interface 2 host
        O(single_host_offset) + O(node_count) + O(node_index), both in O(single_subnet).
    type: str
    choices: [per_link_subnets, single_subnet]
    default: per_link_subnets
  link_subnets:
    description: The subnet of logical link 1 and of logical link 2 (V(per_link_subnets)).
    type: list
    elements: str
    default: [192.168.100.0/24, 192.168.101.0/24]
  host_offset:
    description: Host part of node 0 in each link subnet (V(per_link_subnets)).
    type: int
    default: 10
  single_subnet:
    description: The one subnet of V(single_subnet).
    type: str
    default: 192.168.200.0/24
  single_host_offset:
    description: Host part of node 0's first interface (V(single_subnet)).
    type: int
    default: 12
  node_index:
    description: This node's index in its fabric group (0 for the first node).
    type: int
    default: 0
  node_count:
    description: Number of nodes in the fabric group (V(single_subnet) places the second interfaces after the first ones).
    type: int
    default: 2
  layout:
    description:
      - The fabric layout (C(specdec_layout)). V(direct) is two Sparks on one cable, addressed by the scheme options.
      - V(ring) takes the four logical interfaces of both ports in O(interfaces) (order C(enp1s0f0np0),
        C(enP2p1s0f0np0), C(enp1s0f1np1), C(enP2p1s0f1np1)); without O(addresses), NVIDIA's ring plan from
        O(ring_subnets), O(node_index) and O(node_count) (two subnets per cable; the cable's lower node gets host 1,
        the higher host 2).
      - V(switch) gives node I(i) host O(switch_host_offset) + I(i) in each of O(link_subnets) (NVIDIA's switch plan,
        192.168.100.N and 192.168.101.N).
    type: str
    choices: [direct, ring, switch]
    default: direct
    version_added: 0.3.0
  ring_subnets:
    description: The ring's subnets, two per cable in the order of the cable's (lower, higher) node pair (V(ring)).
    type: list
    elements: str
    default: [192.168.0.0/24, 192.168.1.0/24, 192.168.2.0/24, 192.168.3.0/24, 192.168.4.0/24, 192.168.5.0/24,
              192.168.6.0/24, 192.168.7.0/24]
    version_added: 0.3.0
  switch_host_offset:
    description: Host part of node 0 in each link subnet on a switch (V(switch)); NVIDIA's runbook numbers nodes from 1.
    type: int
    default: 1
    version_added: 0.3.0
  path:
    description: The netplan file this module owns; a C(.yaml) file directly under C(/etc/netplan) for netplan to read it.
    type: path
    default: /etc/netplan/40-cx7.yaml
  take_over:
    description:
      - Replace an existing O(path) that does not carry the mark (a backup is kept when O(backup=true)), and move aside
        every other plan without the mark that addresses a ConnectX-7 interface (kept as a backup, put back by a
        rollback). Without it, one compliant foreign plan is adopted as it is.
    type: bool
    default: false
  backup:
    description: Keep a timestamped copy of a file that is replaced, next to it. A rollback removes the copy its run made.
    type: bool
    default: true
  apply:
    description: Apply the addresses. V(false) writes and validates the file only.
    type: bool
    default: false
  apply_method:
    description:
      - V(netplan) runs C(netplan apply) when the file changed (persistent).
      - V(ip) adds the missing addresses, removes the stale ones of this module's older configuration and sets the links
        up, live with C(ip) (lost on reboot).
    type: str
    choices: [netplan, ip]
    default: netplan
  management_addresses:
    description:
      - Addresses of the management connection to protect, usually C(ansible_host). Values that are not IP addresses
        (host names) are ignored. The server address of E(SSH_CONNECTION) and the default route are always added.
    type: list
    elements: str
    default: []
  checkpoint_path:
    description: JSON file of the checkpoint (its directory is created with mode C(0700)).
    type: path
    default: /var/lib/sparkops/netplan_qsfp/checkpoint.json
  checkpoint_id:
    description:
      - With O(state=rollback), roll back only if the checkpoint file is this one (RV(checkpoint.id) of the run to undo);
        fails when a later run replaced it.
    type: str
extends_documentation_fragment:
  - sparkops.specdec.attributes
  - sparkops.specdec.attributes.platform
attributes:
  check_mode:
    support: full
    details: Plans, guards and validates as in a normal run and reports what would change; writes nothing, no checkpoint.
  diff_mode:
    support: full
    details: The netplan file before and after, and the pair's live addresses before and after with O(apply_method=ip).
  idempotent:
    support: full
  platform:
    details: Linux with iproute2 (C(ip -j)); netplan for O(apply_method=netplan) and for validation.
notes:
  - "Sources of the netplan format: the netplan YAML reference (U(https://netplan.readthedocs.io/en/stable/netplan-yaml/):
    C(network.version: 2), C(ethernets.<interface>.dhcp4), C(ethernets.<interface>.addresses)) and NVIDIA's
    connect-two-sparks steps of the DGX Spark playbooks, whose C(/etc/netplan/40-cx7.yaml) this file replaces;
    C(netplan generate --root-dir) and C(netplan apply) from netplan's manual pages."
  - "Addresses and link state come from iproute2's JSON (C(ip -j addr show): C(ifname), C(flags), C(addr_info[].family),
    C(local), C(prefixlen)); a link is up when its C(flags) contain C(UP) (admin state)."
  - "Errors a user can meet (each one line; those marked I(before any change) leave the node untouched):
    O(interfaces) not two distinct names, or one of them missing on the host (before any change);
    O(addresses) not one IPv4 C(ADDRESS/PREFIX) per interface, a network or broadcast address, an address given
    twice, or a scheme that cannot be derived (before any change);
    C(ip) not installed, or C(ip -j addr show) failing or not printing JSON (before any change);
    the management guard: the pair includes the management interface, or a planned subnet overlaps a management
    subnet or contains a management address (before any change; the message names the fix);
    O(path) exists without the mark and O(take_over=false) (before any change);
    C(netplan generate) rejects the planned file (before any change; its error is shown);
    O(path) or O(checkpoint_path) cannot be written;
    C(netplan apply), C(ip addr add/del) or C(ip link set) failing (the result has V(changed=true) and
    RV(checkpoint), so a rollback can restore it);
    with O(state=rollback): no checkpoint at O(checkpoint_path), an unreadable or foreign checkpoint, a checkpoint
    replaced by a later run (O(checkpoint_id)), or a rollback that could not restore everything (the message lists
    the file's state, the pair's addresses before and now, and the errors; restore those by hand with C(ip addr
    add/del) on the pair only)."
  - The module never touches an interface outside O(interfaces). With V(netplan), C(netplan apply) re-applies every
    file under C(/etc/netplan), as it always does.
seealso:
  - module: sparkops.specdec.nccl_interface_info
  - name: netplan YAML reference
    description: The format of the file.
    link: https://netplan.readthedocs.io/en/stable/netplan-yaml/
  - name: NVIDIA DGX Spark playbooks (Connect two Sparks)
    description: The QSFP addressing this module automates.
    link: https://github.com/NVIDIA/dgx-spark-playbooks
"""

EXAMPLES = r"""
- name: Detect the cabled QSFP port
  sparkops.specdec.nccl_interface_info:
  register: detect

- name: Address the pair (node 0 of 2, per-link subnets) and apply with netplan
  sparkops.specdec.netplan_fabric:
    interfaces: "{{ detect.selected_interfaces }}"
    port: "{{ detect.selected_port }}"
    node_index: 0
    node_count: 2
    apply: true
    management_addresses: ["{{ ansible_host }}"]
  become: true
  register: fabric

- name: Explicit addresses, applied live with ip, taking over a hand-written file
  sparkops.specdec.netplan_fabric:
    interfaces: [enp1s0f1np1, enP2p1s0f1np1]
    port: 1
    addresses: [192.168.100.10/24, 192.168.101.10/24]
    take_over: true
    apply: true
    apply_method: ip
    management_addresses: ["{{ ansible_host }}"]
  become: true
  register: fabric

- name: Put back what the run above changed (e.g. in a rescue after a failed peer test)
  sparkops.specdec.netplan_fabric:
    state: rollback
    checkpoint_id: "{{ fabric.checkpoint.id }}"
  become: true
  when: fabric.checkpoint.id is not none
"""

RETURN = r"""
addresses:
  description: The planned address of each interface (O(state=present)).
  returned: success with O(state=present)
  type: list
  elements: str
  sample: [192.168.100.10/24, 192.168.101.10/24]
ips:
  description: The same addresses without prefix.
  returned: success with O(state=present)
  type: list
  elements: str
  sample: [192.168.100.10, 192.168.101.10]
interfaces:
  description: The interfaces planned (O(state=present)) or of the checkpoint (O(state=rollback)).
  returned: always
  type: list
  elements: str
  sample: [enp1s0f1np1, enP2p1s0f1np1]
path:
  description: The netplan file.
  returned: always
  type: str
  sample: /etc/netplan/40-cx7.yaml
file:
  description:
    - O(state=present) V(create), V(update) or V(none) (same content); V(attributes) when only owner or mode differ;
      V(adopted) when a foreign plan is used as it is.
    - O(state=rollback) V(restore), V(remove) or V(none).
  returned: success
  type: str
  sample: update
file_changed:
  description: Whether the file was (or in check mode would be) written, or its owner or mode fixed.
  returned: success with O(state=present)
  type: bool
validated:
  description: Whether C(netplan generate) checked the new content (V(null) when there was nothing new to check).
  returned: success with O(state=present)
  type: bool
backup_file:
  description: The copy of the replaced file.
  returned: when a file was replaced with O(backup=true)
  type: str
  sample: /etc/netplan/40-cx7.yaml.4242.2026-11-23@07:12:00~
netplan_apply:
  description: Whether C(netplan apply) ran (or would run).
  returned: success with O(state=present)
  type: bool
actions:
  description:
    - The live changes on the pair, as C("<interface> <address>/<prefix>") items and interface names.
    - O(state=present) C(add), C(remove), C(up) (empty unless O(apply_method=ip) and O(apply=true)); O(state=rollback)
      also C(down).
  returned: success
  type: dict
  sample: {add: [enp1s0f1np1 192.168.100.10/24], remove: [enp1s0f1np1 10.99.0.10/24], up: []}
pair_before:
  description: IPv4 addresses and up links of the pair when the module started.
  returned: success
  type: dict
  sample: {up: [enp1s0f1np1, enP2p1s0f1np1], addresses: [enp1s0f1np1 192.168.100.10/24, enP2p1s0f1np1 192.168.101.10/24]}
pair_after:
  description: The same after the run (O(state=present), check mode included, the planned state; O(state=rollback), read again).
  returned: success
  type: dict
management:
  description: The management connection the guard protected.
  returned: with O(state=present), also when the guard fails
  type: dict
  contains:
    addresses:
      description: Its addresses (IP values of O(management_addresses) and the E(SSH_CONNECTION) server).
      type: list
      elements: str
    interfaces:
      description: Interfaces holding them, and those of the default route.
      type: list
      elements: str
    networks:
      description: IPv4 subnets of those interfaces.
      type: list
      elements: str
ownership:
  description:
    - Whose plan addresses the interfaces (O(state=present)). V(manage) (no foreign plan, this module's file),
      V(adopt) (one compliant foreign plan, used as it is, nothing written), V(take_over) (foreign plans replaced).
  returned: with O(state=present), also when it refuses
  type: str
  sample: adopt
foreign_plans:
  description: The files without the mark that address a ConnectX-7 interface, and who writes such a file.
  returned: with O(state=present), also when it refuses
  type: list
  elements: dict
  sample: [{path: /etc/netplan/99-nvidia-sync-cluster.yaml, source: "NVIDIA Sync's Cluster Assistant"}]
adopted:
  description: The foreign plan whose addresses were adopted (RV(file) is V(adopted)).
  returned: when RV(ownership) is V(adopt)
  type: str
  sample: /etc/netplan/99-nvidia-sync-cluster.yaml
replaced:
  description: The foreign plans moved aside (or to be moved, in check mode) besides O(path) itself.
  returned: when a file is planned (not when adopting)
  type: list
  elements: str
replaced_backups:
  description: Where the replaced foreign plans were moved.
  returned: when foreign plans were moved aside
  type: list
  elements: str
restored_plans:
  description: The foreign plans a rollback put back (O(state=rollback)).
  returned: with O(state=rollback)
  type: list
  elements: str
checkpoint:
  description: The checkpoint of this run.
  returned: always
  type: dict
  contains:
    path:
      description: O(checkpoint_path).
      type: str
    id:
      description:
        - Id of the checkpoint written by this run (O(state=present)) or rolled back (O(state=rollback)).
        - V(null) when the run wrote none (no change, or check mode).
      type: str
    status:
      description: V(applying), V(applied), V(failed), V(rolled_back) or V(rollback_incomplete).
      type: str
restored:
  description: Whether the file and the pair match the checkpoint after the rollback.
  returned: with O(state=rollback)
  type: bool
file_outcome:
  description: The file after the rollback, in words (V(unchanged), V(restored to its previous content), V(removed (there was none before))).
  returned: with O(state=rollback)
  type: str
before:
  description: The pair as the checkpoint recorded it (O(state=rollback)).
  returned: with O(state=rollback)
  type: dict
errors:
  description: Errors of the rollback steps (each step is tried).
  returned: with O(state=rollback)
  type: list
  elements: str
"""

import datetime
import grp
import json
import os
import pwd
import shutil
import tempfile

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkops.specdec.plugins.module_utils import _layout, _netplan
from ansible_collections.sparkops.specdec.plugins.module_utils._ssh_connection import ssh_connection


# Owner of the netplan file and of the checkpoint (root; the unit tests point these at their own user).
OWNER_UID = 0
OWNER_GID = 0


class CommandError(Exception):
    pass


def _ssh_connection():
    """E(SSH_CONNECTION) of this process or of the parent sudo dropped it from (module_utils/_ssh_connection), or None."""
    return ssh_connection() or None


def _now():
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)


def _read_file(path):
    """None, or {content, uid, gid, owner, group, mode} of the file."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
        st = os.stat(path)
    except FileNotFoundError:
        return None
    try:
        owner = pwd.getpwuid(st.st_uid).pw_name
    except KeyError:
        owner = str(st.st_uid)
    try:
        group = grp.getgrgid(st.st_gid).gr_name
    except KeyError:
        group = str(st.st_gid)
    return {"content": data.decode("utf-8", "surrogateescape"), "uid": st.st_uid, "gid": st.st_gid,
            "owner": owner, "group": group, "mode": "%04o" % (st.st_mode & 0o7777)}


def _write_file(path, content, uid, gid, mode):
    """Write atomically (temporary file in the same directory, then rename), with owner and mode."""
    directory = os.path.dirname(path) or "."
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o755)
    fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(content.encode("utf-8", "surrogateescape"))
        os.chown(tmp, uid, gid)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _yaml_load():
    """PyYAML's safe_load, or None when PyYAML is missing (netplan itself needs it, so a node with netplan has it)."""
    try:
        import yaml
    except ImportError:
        return None
    return yaml.safe_load


def _netplan_files(directory):
    """{path: text} of the *.yaml files netplan reads in ``directory`` (unreadable files as None)."""
    out = {}
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return out
    for name in names:
        full = os.path.join(directory, name)
        if not name.endswith(".yaml") or not os.path.isfile(full):
            continue
        found = _read_file(full)
        out[full] = found["content"] if found else None
    return out


def _backup_name(path):
    return "%s.%d.%s~" % (path, os.getpid(), _now().strftime("%Y-%m-%d@%H:%M:%S"))


def _safe_text(text):
    return None if text is None else text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


class Fabric(object):
    def __init__(self, module):
        self.module = module
        self.p = module.params
        self.ip = None

    # ------------------------------------------------------------------ host access
    def run(self, argv, check=True):
        rc, out, err = self.module.run_command(argv)
        if check and rc != 0:
            raise CommandError("`%s` failed (rc=%d): %s" % (" ".join(argv), rc, (err or out or "").strip() or "no output"))
        return rc, out, err

    def vanished(self, result, interfaces, expected):
        """The addresses of ``expected`` (\"<interface> <cidr>\" items) no longer on the interfaces: those the kernel
        deleted with the primary address of their subnet (net.ipv4.conf.*.promote_secondaries is off by default), which
        were not ours to remove (someone else's, or one this run has just added)."""
        if not expected:
            return []
        now = _netplan.pair_state(self.links(result), interfaces)["addresses"]
        return [a for a in expected if a not in now]

    def links(self, result):
        if self.ip is None:
            self.ip = self.module.get_bin_path("ip")
        if self.ip is None:
            self.module.fail_json(msg="The iproute2 `ip` command was not found on the node; install iproute2. Nothing was "
                                      "changed.", **result)
        rc, out, err = self.module.run_command([self.ip, "-j", "addr", "show"])
        if rc != 0:
            self.module.fail_json(msg="`ip -j addr show` failed (rc=%d): %s. Nothing was changed."
                                  % (rc, (err or "").strip() or "no output"), **result)
        try:
            return _netplan.parse_links(out)
        except ValueError as exc:
            self.module.fail_json(msg="%s. Nothing was changed." % exc, **result)

    def default_route_ifaces(self):
        rc, out, err = self.module.run_command([self.ip, "-j", "-4", "route", "show", "default"])
        if rc != 0:
            self.module.warn("`ip -j -4 route show default` failed (rc=%d); the default route is not protected by the "
                             "management guard." % rc)
            return []
        return _netplan.parse_default_route(out)

    def read_checkpoint(self):
        path = self.p["checkpoint_path"]
        try:
            with open(path) as handle:
                return json.load(handle), None
        except FileNotFoundError:
            return None, "no checkpoint at %s" % path
        except (OSError, ValueError) as exc:
            return None, "the checkpoint %s cannot be read (%s)" % (path, exc)

    def write_checkpoint(self, data):
        path = self.p["checkpoint_path"]
        directory = os.path.dirname(path)
        if not os.path.isdir(directory):
            os.makedirs(directory, 0o700)
        _write_file(path, json.dumps(data, indent=2, sort_keys=True) + "\n", OWNER_UID, OWNER_GID, 0o600)

    def validate(self, content):
        """True when netplan generate accepted the content, None when netplan is not installed; fails otherwise."""
        netplan = self.module.get_bin_path("netplan")
        if netplan is None:
            self.module.warn("netplan is not installed on the node: %s was not validated with `netplan generate`."
                             % self.p["path"])
            return None
        root = tempfile.mkdtemp(prefix="sparkops-netplan-")
        try:
            os.makedirs(os.path.join(root, "etc", "netplan"))
            _write_file(os.path.join(root, "etc", "netplan", os.path.basename(self.p["path"])), content, os.getuid(),
                        os.getgid(), 0o600)
            rc, out, err = self.module.run_command([netplan, "generate", "--root-dir", root])
        finally:
            shutil.rmtree(root, ignore_errors=True)
        if rc != 0:
            return (err or out or "").strip() or "rc=%d" % rc
        return True

    # ------------------------------------------------------------------ state=present
    def planned_addresses(self, interfaces):
        layout = self.p["layout"]
        if self.p["addresses"]:
            addresses = self.p["addresses"]
        elif layout in ("ring", "switch"):
            if self.p["node_index"] < 0 or self.p["node_count"] < 2 or self.p["node_index"] >= self.p["node_count"]:
                raise _netplan.PlanError("node_index: %d is not an index of %d nodes (node_count)."
                                         % (self.p["node_index"], self.p["node_count"]))
            settings = {"netplan_qsfp_ring_subnets": self.p["ring_subnets"],
                        "netplan_qsfp_link_subnets": self.p["link_subnets"],
                        "netplan_qsfp_switch_host_offset": self.p["switch_host_offset"]}
            addresses, error = _layout.node_addresses(layout, settings, self.p["node_index"], self.p["node_count"])
            if error:
                raise _netplan.PlanError("layout %s: cannot derive the addresses (%s); check %s, or set addresses."
                                         % (layout, error, "ring_subnets" if layout == "ring" else
                                            "link_subnets and switch_host_offset"))
            if layout == "switch":
                _netplan.check_in_subnets(addresses, self.p["link_subnets"], "switch_host_offset")
        else:
            settings = {
                "netplan_qsfp_scheme": self.p["scheme"],
                "netplan_qsfp_link_subnets": self.p["link_subnets"],
                "netplan_qsfp_host_offset": self.p["host_offset"],
                "netplan_qsfp_single_subnet": self.p["single_subnet"],
                "netplan_qsfp_single_host_offset": self.p["single_host_offset"],
            }
            if self.p["node_index"] < 0 or self.p["node_count"] < 1 or self.p["node_index"] >= self.p["node_count"]:
                raise _netplan.PlanError("node_index: %d is not an index of %d nodes (node_count)."
                                         % (self.p["node_index"], self.p["node_count"]))
            addresses, error = _netplan.fabric_addresses(settings, self.p["node_index"], self.p["node_count"])
            if error:
                raise _netplan.PlanError("scheme %s: cannot derive the addresses (%s); check link_subnets / single_subnet "
                                         "and the host offsets, or set addresses." % (self.p["scheme"], error))
            if self.p["scheme"] == "per_link_subnets":
                _netplan.check_in_subnets(addresses, self.p["link_subnets"], "host_offset")
            else:
                _netplan.check_in_subnets(addresses, [self.p["single_subnet"]] * 2, "single_host_offset")
        return _netplan.check_addresses(interfaces, addresses, _layout.address_count(layout))

    def present(self):
        module, p = self.module, self.p
        interfaces = [str(i) for i in p["interfaces"] or []]
        path = p["path"]
        result = dict(changed=False, interfaces=interfaces, path=path,
                      checkpoint=dict(path=p["checkpoint_path"], id=None, status=None))
        try:
            addresses = self.planned_addresses(interfaces)
        except _netplan.PlanError as exc:
            module.fail_json(msg="%s Nothing was changed." % exc, **result)
        result.update(addresses=addresses, ips=[a.split("/", 1)[0] for a in addresses])

        links = self.links(result)
        names = [link["ifname"] for link in links]
        missing = [i for i in interfaces if i not in names]
        if missing:
            module.fail_json(msg="interfaces: %s do(es) not exist on this node (it has %s). Nothing was changed."
                             % (", ".join(missing), ", ".join(names)), **result)
        # Whose plan addresses the interfaces (issue 24): ours, one foreign plan to adopt, or theirs to take over.
        existing = _read_file(path)
        foreign = _netplan.foreign_plans(_netplan_files(os.path.dirname(path) or "."), _yaml_load())
        owner = _netplan.ownership_decision(path, existing and existing["content"], foreign, interfaces, p["take_over"])
        result.update(ownership=owner["action"],
                      foreign_plans=[{"path": f["path"], "source": f["source"]} for f in foreign])
        if owner["action"] == "refuse":
            module.fail_json(msg=owner["message"], **result)
        if owner["action"] == "adopt":
            addresses = [_netplan.split_pair(a)[1] for a in owner["adopted"]]
            result.update(addresses=addresses, ips=[a.split("/", 1)[0] for a in addresses], adopted=foreign[0]["path"])
        candidates = list(p["management_addresses"] or [])
        server = _netplan.ssh_server_address(_ssh_connection())
        if server:
            candidates.append(server)
        mgmt = _netplan.management(links, candidates, self.default_route_ifaces())
        result["management"] = mgmt
        problems = _netplan.guard(interfaces, addresses, mgmt)
        if problems:
            module.fail_json(msg=_netplan.guard_message(mgmt, problems), **result)

        if owner["action"] == "adopt":
            # Adopted as it is: its addresses are used, nothing is written, applied or checkpointed.
            before = _netplan.pair_state(links, interfaces)
            result.update(changed=False, file="adopted", file_changed=False, netplan_apply=False, validated=None,
                          actions={"add": [], "remove": [], "up": []}, pair_before=before, pair_after=before)
            if module._diff:
                result["diff"] = []
            module.exit_json(**result)
        replace = [f for f in foreign if f["path"] in owner["replace"]]
        planned_text = _netplan.render(interfaces, addresses, p["port"], p["layout"])
        decision = _netplan.file_decision(existing and existing["content"], planned_text, p["take_over"])
        if decision == "refuse":
            module.fail_json(msg=_netplan.refuse_message(path), **result)
        if decision == "none" and (existing["uid"], existing["gid"], existing["mode"]) != (OWNER_UID, OWNER_GID, "0600"):
            decision = "attributes"
        result["file"] = decision
        result["file_changed"] = decision != "none" or bool(replace)
        result["replaced"] = [f["path"] for f in replace]

        previous = self.read_checkpoint()[0]
        before = _netplan.pair_state(links, interfaces)
        planned = _netplan.pairs(interfaces, addresses)
        live = p["apply"] and p["apply_method"] == "ip"
        if live:
            ours = _netplan.ours_before(existing and existing["content"], previous)
            # Taking over: the replaced plans' addresses on the interfaces go too (never two plans' addresses).
            if owner["action"] == "take_over":
                ours += [a for a in _netplan.foreign_on_pair(foreign, interfaces) if a not in ours]
            actions = _netplan.ip_actions(before, planned, ours, interfaces)
        else:
            actions = {"add": [], "remove": [], "up": []}
        writes = decision in ("create", "update")
        netplan_apply = bool(p["apply"] and p["apply_method"] == "netplan" and (writes or replace))
        after = _netplan.after_ip(before, actions)
        changed = result["file_changed"] or not _netplan.no_actions(actions)
        result.update(changed=changed, actions=actions, netplan_apply=netplan_apply, pair_before=before,
                      pair_after=after, validated=None)
        if module._diff:
            diff = []
            if writes:
                diff.append({"before_header": path if existing else "%s (absent)" % path, "after_header": path,
                             "before": _safe_text(existing["content"]) if existing else "", "after": planned_text})
            for plan in replace:
                diff.append({"before_header": plan["path"], "after_header": "%s (moved aside as a backup)" % plan["path"],
                             "before": _safe_text((_read_file(plan["path"]) or {}).get("content")) or "", "after": ""})
            if live and not _netplan.no_actions(actions):
                diff.append({"before_header": "IPv4 addresses of %s" % ", ".join(interfaces),
                             "after_header": "IPv4 addresses of %s" % ", ".join(interfaces),
                             "before": "".join("%s\n" % a for a in sorted(before["addresses"])),
                             "after": "".join("%s\n" % a for a in sorted(after["addresses"]))})
            result["diff"] = diff
        if not changed:
            module.exit_json(**result)
        if writes:
            verdict = self.validate(planned_text)
            if verdict not in (True, None):
                module.fail_json(msg="netplan generate rejects the planned %s: %s. Nothing was changed."
                                 % (path, verdict), **dict(result, changed=False))
            result["validated"] = verdict is True
        if module.check_mode:
            module.exit_json(**result)

        now = _now()
        cid = "%s-%s" % (now.strftime("%Y%m%dT%H%M%SZ"), os.urandom(4).hex())
        checkpoint = _netplan.new_checkpoint(cid, now.isoformat(), path, existing, before, interfaces, p["apply"],
                                             p["apply_method"])
        if existing:
            checkpoint["file"].update(uid=existing["uid"], gid=existing["gid"])
        checkpoint["foreign"] = []
        for plan in replace:
            found = _read_file(plan["path"]) or {}
            checkpoint["foreign"].append({"path": plan["path"], "content": found.get("content"), "uid": found.get("uid"),
                                          "gid": found.get("gid"), "mode": found.get("mode"), "backup": None})
        try:
            self.write_checkpoint(checkpoint)
        except OSError as exc:
            module.fail_json(msg="Cannot write the checkpoint %s (%s); nothing was changed. Set checkpoint_path to a "
                                 "writable place." % (p["checkpoint_path"], exc), **dict(result, changed=False))
        result["checkpoint"] = dict(path=p["checkpoint_path"], id=cid, status=checkpoint["status"])

        step = "writing %s" % path
        try:
            if result["file_changed"]:
                if writes and existing and p["backup"]:
                    result["backup_file"] = checkpoint["backup_file"] = module.backup_local(path)
                checkpoint["file_changed"] = True
                self.write_checkpoint(checkpoint)
                if decision != "none":
                    _write_file(path, planned_text, OWNER_UID, OWNER_GID, 0o600)
                for entry in checkpoint["foreign"]:
                    step = "moving %s aside" % entry["path"]
                    entry["backup"] = _backup_name(entry["path"])
                    self.write_checkpoint(checkpoint)
                    os.rename(entry["path"], entry["backup"])
                result["replaced_backups"] = [e["backup"] for e in checkpoint["foreign"]]
            if netplan_apply:
                step = "netplan apply"
                checkpoint["netplan_applied"] = True
                self.write_checkpoint(checkpoint)
                self.run([module.get_bin_path("netplan", required=True), "apply"])
            if live:
                step = "ip"
                # Removed first: deleting the primary address of a subnet also deletes its secondary ones (the kernel,
                # promote_secondaries off by default), so a new address added first in the same subnet (a node's
                # .10 -> .1, a taken-over plan's .44 -> .4) would go with the old one.
                for item in actions["remove"]:
                    name, cidr = _netplan.split_pair(item)
                    self.run([self.ip, "addr", "del", cidr, "dev", name])
                for item in actions["add"]:
                    name, cidr = _netplan.split_pair(item)
                    self.run([self.ip, "addr", "add", cidr, "dev", name])
                for item in self.vanished(result, interfaces,
                                          [a for a in before["addresses"] if a not in actions["remove"]]):
                    name, cidr = _netplan.split_pair(item)
                    self.run([self.ip, "addr", "add", cidr, "dev", name])
                for name in actions["up"]:
                    self.run([self.ip, "link", "set", name, "up"])
        except (OSError, CommandError) as exc:
            checkpoint["status"] = _netplan.FAILED
            checkpoint["applied"]["addresses"] = planned if p["apply"] else []
            try:
                self.write_checkpoint(checkpoint)
            except OSError:
                pass
            result["checkpoint"]["status"] = checkpoint["status"]
            module.fail_json(msg="netplan_fabric failed while %s: %s. The change was partly made; roll it back with "
                                 "state=rollback (checkpoint %s at %s)." % (step, exc, cid, p["checkpoint_path"]),
                             **dict(result, changed=True))
        checkpoint["status"] = _netplan.APPLIED
        checkpoint["applied"]["addresses"] = planned if p["apply"] else []
        try:
            self.write_checkpoint(checkpoint)
        except OSError as exc:
            module.warn("Cannot update the checkpoint %s (%s)." % (p["checkpoint_path"], exc))
        result["checkpoint"]["status"] = checkpoint["status"]
        module.exit_json(**result)

    # ------------------------------------------------------------------ state=rollback
    def rollback(self):
        module, p = self.module, self.p
        result = dict(changed=False, path=p["path"], interfaces=[],
                      checkpoint=dict(path=p["checkpoint_path"], id=p["checkpoint_id"], status=None))
        checkpoint, error = self.read_checkpoint()
        problems = [error] if error else _netplan.check_checkpoint(checkpoint, p["checkpoint_id"])
        if problems:
            module.fail_json(msg="Cannot roll back: %s. Nothing was changed." % "; ".join(problems), **result)
        path = checkpoint["path"]
        interfaces = checkpoint["interfaces"]
        result.update(path=path, interfaces=interfaces, before=checkpoint["pair"],
                      checkpoint=dict(path=p["checkpoint_path"], id=checkpoint["id"], status=checkpoint.get("status")),
                      file_outcome=_netplan.file_outcome(checkpoint), errors=[])
        links = self.links(result)
        now_pair = _netplan.pair_state(links, interfaces)
        result["pair_before"] = now_pair
        if checkpoint.get("status") == _netplan.ROLLED_BACK:
            module.exit_json(restored=True, file="none", pair_after=now_pair,
                             actions={"add": [], "remove": [], "up": [], "down": []}, **result)
        current = _read_file(path)
        acts = _netplan.restore_actions(checkpoint, current and current["content"], now_pair)
        before_file = checkpoint["file"]
        attrs_differ = bool(before_file.get("existed") and current and (
            current["mode"] != before_file.get("mode") or current["uid"] != before_file.get("uid", OWNER_UID)
            or current["gid"] != before_file.get("gid", OWNER_GID)))
        backup = acts["backup"] if acts["backup"] and os.path.exists(acts["backup"]) else None
        # Plans of others that the run moved aside (take_over): back in place, as they were.
        moved = [e for e in checkpoint.get("foreign") or []
                 if (_read_file(e["path"]) or {}).get("content") != e.get("content")]
        changed = (acts["file"] != "none" or attrs_differ or bool(backup) or not _netplan.no_actions(acts)
                   or bool(moved))
        result["restored_plans"] = [e["path"] for e in moved]
        actions = {k: acts[k] for k in ("add", "remove", "up", "down")}
        result.update(changed=changed, file=acts["file"], actions=actions)
        if module._diff and acts["file"] != "none":
            result["diff"] = {"before_header": path, "after_header": path,
                              "before": _safe_text(current and current["content"]) or "",
                              "after": _safe_text(before_file.get("content")) or ""}
        if module.check_mode:
            planned_back = _netplan.after_ip(now_pair, {"add": acts["add"], "remove": acts["remove"], "up": acts["up"]})
            planned_back["up"] = [i for i in planned_back["up"] if i not in acts["down"]]
            module.exit_json(restored=None, pair_after=planned_back, **result)
        errors = []
        file_ok = True
        try:
            if acts["file"] == "restore" or attrs_differ:
                _write_file(path, before_file["content"], before_file.get("uid", OWNER_UID), before_file.get("gid", OWNER_GID),
                            int(before_file.get("mode") or "0600", 8))
            elif acts["file"] == "remove":
                os.unlink(path)
        except OSError as exc:
            file_ok = False
            errors.append("restoring %s: %s" % (path, exc))
        for entry in moved:
            try:
                if entry.get("backup") and os.path.exists(entry["backup"]) and not os.path.exists(entry["path"]):
                    os.rename(entry["backup"], entry["path"])
                else:
                    _write_file(entry["path"], entry["content"] or "", entry.get("uid", OWNER_UID),
                                entry.get("gid", OWNER_GID), int(entry.get("mode") or "0600", 8))
                    if entry.get("backup") and os.path.exists(entry["backup"]):
                        os.unlink(entry["backup"])
            except OSError as exc:
                file_ok = False
                errors.append("restoring %s: %s" % (entry["path"], exc))
        if acts["netplan_apply"]:
            try:
                self.run([module.get_bin_path("netplan", required=True), "apply"])
            except CommandError as exc:
                errors.append(str(exc))

        def ip_addr(verb, items):
            for item in items:
                name, cidr = _netplan.split_pair(item)
                try:
                    self.run([self.ip, "addr", verb, cidr, "dev", name])
                except CommandError as exc:
                    errors.append(str(exc))

        keep = [a for a in now_pair["addresses"] if a not in acts["remove"]] + list(acts["add"])
        ip_addr("del", acts["remove"])
        ip_addr("add", acts["add"])
        # What the kernel took with a deleted primary address of its subnet (see present()), put back.
        ip_addr("add", self.vanished(result, interfaces, keep))
        for state, names in (("down", acts["down"]), ("up", acts["up"])):
            for name in names:
                try:
                    self.run([self.ip, "link", "set", name, state])
                except CommandError as exc:
                    errors.append(str(exc))
        if backup and file_ok:
            try:
                os.unlink(backup)
            except OSError as exc:
                errors.append("removing the backup %s: %s" % (backup, exc))
        after = _netplan.pair_state(self.links(result), interfaces)
        final = _read_file(path)
        file_back = (final is None) if not before_file.get("existed") else (
            final is not None and final["content"] == before_file.get("content"))
        plans_back = all((_read_file(e["path"]) or {}).get("content") == e.get("content")
                         for e in checkpoint.get("foreign") or [])
        restored = file_back and plans_back and _netplan.same_pair_state(after, checkpoint["pair"]) and not errors
        checkpoint["status"] = _netplan.ROLLED_BACK if restored else _netplan.ROLLBACK_INCOMPLETE
        checkpoint["rolled_back_at"] = _now().isoformat()
        try:
            self.write_checkpoint(checkpoint)
        except OSError as exc:
            errors.append("updating the checkpoint: %s" % exc)
        result["checkpoint"]["status"] = checkpoint["status"]
        result.update(restored=restored, pair_after=after, errors=errors)
        if not restored:
            module.fail_json(msg="ROLLBACK INCOMPLETE: %s %s; the pair %s had %s and has %s now; errors: %s. Restore them "
                                 "by hand (ip addr add/del on those interfaces only)."
                                 % (path, result["file_outcome"] if file_back else "NOT restored", ", ".join(interfaces),
                                    checkpoint["pair"], after, "; ".join(errors) or "none"), **result)
        module.exit_json(**result)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", default="present", choices=["present", "rollback"]),
            interfaces=dict(type="list", elements="str"),
            port=dict(type="int"),
            addresses=dict(type="list", elements="str", default=[]),
            scheme=dict(type="str", default="per_link_subnets", choices=["per_link_subnets", "single_subnet"]),
            link_subnets=dict(type="list", elements="str", default=["192.168.100.0/24", "192.168.101.0/24"]),
            host_offset=dict(type="int", default=10),
            single_subnet=dict(type="str", default="192.168.200.0/24"),
            single_host_offset=dict(type="int", default=12),
            node_index=dict(type="int", default=0),
            node_count=dict(type="int", default=2),
            layout=dict(type="str", default="direct", choices=["direct", "ring", "switch"]),
            ring_subnets=dict(type="list", elements="str", default=list(_layout.RING_SUBNETS)),
            switch_host_offset=dict(type="int", default=_layout.SWITCH_HOST_OFFSET),
            path=dict(type="path", default="/etc/netplan/40-cx7.yaml"),
            take_over=dict(type="bool", default=False),
            backup=dict(type="bool", default=True),
            apply=dict(type="bool", default=False),
            apply_method=dict(type="str", default="netplan", choices=["netplan", "ip"]),
            management_addresses=dict(type="list", elements="str", default=[]),
            checkpoint_path=dict(type="path", default="/var/lib/sparkops/netplan_qsfp/checkpoint.json"),
            checkpoint_id=dict(type="str"),
        ),
        required_if=[("state", "present", ["interfaces"])],
        supports_check_mode=True,
    )
    fabric = Fabric(module)
    if module.params["state"] == "rollback":
        fabric.rollback()
    else:
        fabric.present()


if __name__ == "__main__":
    main()
