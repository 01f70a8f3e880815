#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: firewall_plan
short_description: Plan the host firewall (ufw) that admits the endpoint only from listed client networks (controller-side)
version_added: 0.2.0
description:
  - An action plugin, run on the controller for each node; it contacts no host. The C(specdec_server) role reads the node
    (the C(ufw) binary, C(ufw status verbose), the tuples of ufw's user rules files, whether this collection enabled ufw)
    and this action decides which ufw rules to add and delete, which the role then applies with
    M(community.general.ufw).
  - "O(state=present): the rules, in the order ufw must evaluate them: allow TCP to the port of the Ansible SSH
    connection (the server port of E(SSH_CONNECTION), else C(ansible_port), else 22) from anywhere; allow everything
    coming in on each fabric interface (OpenMPI and NCCL use random TCP ports); allow TCP to the container sshd port
    from the fabric subnets; allow TCP to the endpoint port from each network of O(networks); reject TCP to the
    endpoint port from anywhere else (a refused client gets a reset at once, also when ufw's default incoming policy
    is allow)."
  - Every rule carries the comment C(sparkops-specdec:<deployment>). A rule of ours that the plan no longer holds (a
    network removed from the list) is deleted; a client network added after the reject rule makes the reject rule go
    and come back last.
  - "It refuses, before any change, with one line naming the setting and the fix: a network that is not an IP network
    in CIDR form (checked with Python's ipaddress) or has host bits set; C(ufw) not installed;
    ufw inactive without O(consent) (enabling it denies every other incoming connection); the endpoint port equal to
    the SSH port; two nodes without their fabric interfaces; an existing deny or reject rule of someone else that
    matches the Ansible connection (its client address and port) and would, ahead of ours, lock Ansible out."
  - The C(specdec_server) role no longer calls it; it uses the node-side M(sparkops.specdec.endpoint_firewall), which
    reads ufw, plans with the same decisions and applies in one call. This action is deprecated (removal in 0.4.0).
  - "O(state=absent) (teardown): the rules carrying a C(sparkops-specdec) comment are deleted, and ufw is disabled
    again when this collection enabled it (the probe's marker). When ufw stays active and no other rule (nor an allow
    default) admits the Ansible connection, our SSH rule stays, and RV(kept) says so."
author:
  - sparkops maintainers (@sparkops)
deprecated:
  removed_in: 0.4.0
  why: The C(specdec_server) role no longer calls it; the node-side M(sparkops.specdec.endpoint_firewall) reads ufw,
    plans with the same decisions and applies in one call.
  alternative: Use M(sparkops.specdec.endpoint_firewall).
options:
  state:
    description: V(present) plans the rules of a deployment, V(absent) their removal.
    type: str
    choices: [present, absent]
    default: present
  probe:
    description:
      - The registered result of the role's probe, run as root; each line of its stdout is C(NAME<TAB>VALUE) with
        C(ufw) (the path of the ufw binary, empty when missing), C(status) (one line of C(ufw status verbose)),
        C(tuple) (one C(### tuple) line of ufw's user rules files) and C(marker) (V(yes) when this collection enabled
        ufw).
    type: dict
    required: true
  ssh_connection:
    description: E(SSH_CONNECTION) of the Ansible connection on the node (C(client cport server sport)); empty when unknown.
    type: str
  networks:
    description: The client networks admitted to the endpoint (C(specdec_server_allowed_networks)), CIDRs.
    type: list
    elements: str
  port:
    description: The endpoint's TCP port (the plan's C(port)). Required with O(state=present).
    type: int
  consent:
    description: Enable ufw when it is inactive (C(specdec_server_firewall_enable)).
    type: bool
    default: false
  fabric_interfaces:
    description: The node's fabric interfaces (C(netplan_qsfp_fabric.interfaces)); all traffic in on them is allowed.
    type: list
    elements: str
  fabric_addresses:
    description: The node's fabric addresses in CIDR form (C(netplan_qsfp_fabric.addresses)); their subnets may reach
      the container sshd port.
    type: list
    elements: str
  container_ssh_port:
    description: The container sshd port (C(specdec_container_ssh_port)); 0 for none (one node).
    type: int
    default: 0
  management_peers:
    description:
      - The other members' management IP addresses when NCCL, UCX and OpenMPI bootstrap over the management interface
        (C(specdec_nccl_bootstrap=management_interface)); each is admitted on every port.
    type: list
    elements: str
    default: []
  deployment:
    description: The deployment id, part of the rules' comment.
    type: str
  two_nodes:
    description: The deployment is a pair (its fabric interfaces must then be known).
    type: bool
    default: false
  check_only:
    description:
      - Only the refusals, before any role changes the node (the playbooks' firewall preflight); the fabric is not
        known yet and not required. Returns C(changed)=false, RV(client), RV(ssh_port) and RV(msg).
    type: bool
    default: false
extends_documentation_fragment:
  - sparkops.specdec.attributes
  - sparkops.specdec.attributes.action
attributes:
  check_mode:
    support: full
    details: Plans the same in check mode; the role's M(community.general.ufw) tasks then run with C(--dry-run).
  diff_mode:
    support: full
    details: Shows our rules (and whether ufw is active) before and after, one line per rule.
  idempotent:
    support: full
    details: Plans only.
notes:
  - The node's C(ansible_port) (or C(ansible_ssh_port)) is read from its variables.
  - C(changed) is true when the firewall differs from the plan, so that check mode and C(--diff) show it; the
    M(community.general.ufw) tasks after it make the change.
seealso:
  - module: sparkops.specdec.endpoint_firewall
  - module: community.general.ufw
  - module: sparkops.specdec.specdec_plan
"""

EXAMPLES = r"""
- name: Plan the firewall of this node
  sparkops.specdec.firewall_plan:
    probe: "{{ __probe }}"
    ssh_connection: "{{ __ssh.stdout }}"
    networks: [192.168.1.0/24]
    port: 8355
    consent: true
    fabric_interfaces: [enp1s0f1np1, enP2p1s0f1np1]
    fabric_addresses: [192.168.100.11/24, 192.168.101.11/24]
    container_ssh_port: 2233
    deployment: spark-1
    two_nodes: true
  register: __firewall
"""

RETURN = r"""
add:
  description: The rules to add, in order, as M(community.general.ufw) options (C(rule), C(from_ip), C(comment),
    C(delete)=false, and where needed C(proto), C(to_port), C(interface), C(direction)); C(label) describes it.
  returned: success, except with check_only
  type: list
  elements: dict
delete:
  description: Our rules to delete (to run before RV(add)), as M(community.general.ufw) options with C(delete)=true.
  returned: success, except with check_only
  type: list
  elements: dict
rules:
  description: Every rule of the plan (O(state=present)), in order, with C(action), C(proto), C(port), C(source),
    C(interface), C(why), C(comment) and C(label).
  returned: state is present and not check_only
  type: list
  elements: dict
enable:
  description: ufw is inactive and will be enabled (O(consent) was given).
  returned: state is present and not check_only
  type: bool
disable:
  description: Teardown disables ufw (this collection enabled it).
  returned: state is absent
  type: bool
remove_marker:
  description: Teardown removes the marker that this collection enabled ufw.
  returned: state is absent
  type: bool
kept:
  description: Teardown keeps these rules of ours (the SSH rule, when nothing else would admit the Ansible connection).
  returned: state is absent
  type: list
  elements: str
pending:
  description: The firewall differs from the plan (same as C(changed)).
  returned: success, except with check_only
  type: bool
client:
  description: The client address of the Ansible connection (from E(SSH_CONNECTION)), or null.
  returned: state is present
  type: str
ssh_port:
  description: The TCP port of the Ansible connection that stays open.
  returned: state is present
  type: int
msg:
  description: With O(check_only), that the rules can be applied; on failure, the refusals joined.
  returned: check_only or failure
  type: str
errors:
  description: The refusals (one line each; the task fails with them joined as RV(msg)).
  returned: failure
  type: list
  elements: str
"""
