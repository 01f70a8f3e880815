#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: teardown_plan
short_description: Plan the teardown of a speculative-decoding deployment, node by node (controller-side)
version_added: 0.2.0
description:
  - An action plugin, run on the controller with C(run_once); it contacts no host. C(playbooks/teardown.yml) reads
    every node (one probe command) and this action decides what goes on each node and builds the confirmation.
  - The container (and the server in it) always goes. So does the container a pending container change kept
    (C(<container>-previous), see M(sparkops.specdec.engine_container)), but only the one its record
    C(<specdec_state_dir>/container-previous.json) names (the same container id; never another container of that
    name, which stays with a note), and that record when it is one of O(container)'s. The models this collection downloads (the drafts, the tiktoken
    files and each preset's target under the HF cache) only with O(remove_models).
  - The netplan file only with O(remove_netplan), and only if it carries the C(Managed by sparkops.specdec) mark that
    the C(netplan_qsfp) role writes; then also its addresses on the ConnectX-7 interfaces that are present now. The
    management address (the node's C(ansible_host)) is never removed.
  - "The deployment state files C(<specdec_state_dir>/deployments/<id>.json) stay: they hold the tuner's pick
    (C(tuned)) that a redeploy reuses. Each one that records a running server is rewritten (JSON, the same mode, owner
    and group) with C(running) null, the launch that ran as C(previous), and C(torn_down_at) and C(updated_at) set to
    the teardown's time, so that C(playbooks/status.yml) reports the deployment as C(torn_down), not as C(down). A file
    already marked stays as it is (a second teardown changes nothing). With O(remove_state) the state files go
    entirely, and with them the tuned picks."
  - The SSH mesh only with O(remove_mesh). C(playbooks/teardown.yml) runs M(sparkops.specdec.ssh_mesh_keys) with
    C(state=absent) in check mode on every node first (O(mesh)); the node's plan removes the mesh (the same module,
    for real) only when that read found something of ours - our marked blocks in the cluster user's
    C(~/.ssh/authorized_keys), C(~/.ssh/known_hosts_sparkops) and C(~/.ssh/config), and the container mesh files - so a
    second teardown changes nothing. The cluster user's mesh key and the pinned container host key stay.
  - Nothing is removed without O(confirm); RV(proceed) is false then and RV(msg) lists, per node, what would be
    removed. In check mode RV(proceed) is true and RV(msg) shows the plan.
author:
  - sparkops maintainers (@sparkops)
options:
  probes:
    description:
      - Inventory name -> the node's registered probe (a loop result with one item per part, C(root) and C(user)).
        Each line of a part's stdout is C(NAME<TAB>RC<TAB>base64 stdout<TAB>base64 stderr).
      - "Commands read, by name: C(state) (docker container inspect), C(netplan) (the netplan file),
        C(addrs) (C(ip -o -4 addr show)), C(kept) (docker container inspect of C(<container>-previous)), C(record)
        (the container change record), C(record_path) (its path) and C(records) (the deployment state files, one line
        each, C(PATH<TAB>MODE<TAB>OWNER<TAB>GROUP<TAB>base64 content)) in the root part; C(cache) (the HF cache path) and C(dirs) (its directories
        and those of its C(hub)) in the user part."
    type: dict
    required: true
  confirm:
    description: The C(confirm) extra var; V(yes) or V(true) (any case) confirms.
    type: raw
  remove_models:
    description: Also remove the downloaded models (C(teardown_remove_models)).
    type: bool
    default: false
  remove_netplan:
    description: Also remove our netplan file and its fabric addresses (C(teardown_remove_netplan)).
    type: bool
    default: false
  remove_state:
    description:
      - Remove the deployment state files instead of marking them torn down (C(teardown_remove_state)). The tuner's
        picks (C(tuned)) in them go too; a redeploy then starts from the inventory's settings.
    type: bool
    default: false
  remove_mesh:
    description: Also remove the SSH mesh (C(teardown_remove_mesh)); needs O(mesh).
    type: bool
    default: false
  mesh:
    description:
      - Inventory name -> the node's registered result of M(sparkops.specdec.ssh_mesh_keys) with C(state=absent) run in
        check mode (its C(changes)). Read only with O(remove_mesh); a node without a readable result keeps its mesh,
        with a note.
    type: dict
  container:
    description: Name of the engine container (C(specdec_container_name)).
    type: str
    required: true
  netplan_file:
    description: The netplan file C(netplan_qsfp) writes (C(netplan_qsfp_file)); default the role's.
    type: path
extends_documentation_fragment:
  - sparkops.specdec.attributes
  - sparkops.specdec.attributes.action
attributes:
  check_mode:
    support: full
    details: Plans the same in check mode; RV(proceed) is true and no server stop is planned.
  diff_mode:
    support: none
    details: Changes nothing on any node, so there is nothing to show.
  idempotent:
    support: full
    details: Plans only.
notes:
  - Each node's C(ansible_host), C(netplan_qsfp_apply) and C(netplan_qsfp_apply_method) are read from its variables.
seealso:
  - module: sparkops.specdec.specdec_plan
"""

EXAMPLES = r"""
- name: Plan what would be removed on every node
  sparkops.specdec.teardown_plan:
    probes: "{{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars, '__teardown_probe'))) }}"
    confirm: "{{ confirm | default('') }}"
    remove_netplan: true
    container: "{{ specdec_container_name }}"
  run_once: true
  register: teardown

- name: Ask for confirmation before removing anything
  ansible.builtin.assert:
    that: teardown.proceed
    fail_msg: "{{ teardown.msg }}"
    success_msg: "{{ teardown.msg }}"
  run_once: true
"""

RETURN = r"""
nodes:
  description: Inventory name -> what teardown removes there.
  returned: always
  type: dict
  contains:
    container:
      description: The container as found, C(exists), C(status), C(running), C(restarting), C(error).
      type: dict
    stop_server:
      description: Stop the server first (the container runs; never in check mode).
      type: bool
    previous:
      description:
        - The container kept for a pending container change and its record. C(name) (C(<container>-previous)),
          C(id) (the container id to remove, the record's), C(status), C(image) (the kept image), C(requested) (the
          image of the change), C(remove) (remove the container with that id), C(record) (the record's path),
          C(remove_record) (remove the record).
      type: dict
    state_files:
      description:
        - The deployment state files teardown changes on the node (a file already marked torn down is not listed).
          C(path), C(deployment) (its id, null when unreadable), C(action) (V(mark) rewrite it with C(state);
          V(remove) with O(remove_state)), C(state) (the torn-down state file's content; null for V(remove)),
          C(mode) (octal text such as V(0644)), C(owner), C(group) (as found).
      type: list
      elements: dict
    models:
      description: Absolute paths of the model directories to remove (empty without O(remove_models)).
      type: list
      elements: str
    netplan_file:
      description: The netplan file looked at.
      type: str
    netplan_ours:
      description: The netplan file is ours and goes (only with O(remove_netplan)).
      type: bool
    netplan_note:
      description: Why a netplan file stays, or null.
      type: str
    netplan_backups:
      description:
        - The backups of the netplan file that carry the collection's mark (netplan_fabric's C(<file>.<pid>.<time>~),
          one per content change), removed with it (only with O(remove_netplan)); a backup of another tool's plan
          stays.
      type: list
      elements: str
    addresses:
      description: Fabric addresses to remove, C(cidr) and C(dev) each; present now, never the management address.
      type: list
      elements: dict
    netplan_apply:
      description: Run C(netplan apply) after the file goes (netplan_qsfp applied it with netplan).
      type: bool
    mesh:
      description:
        - The SSH mesh. C(remove) (run M(sparkops.specdec.ssh_mesh_keys) with C(state=absent); only with O(remove_mesh)
          and when its check-mode read would change something), C(changes) (that read's lines).
      type: dict
    removals:
      description: The plan lines of the node, such as a container with its status, model directories, the netplan file,
        fabric addresses, the SSH mesh.
      type: list
      elements: str
    notes:
      description: What stays and why.
      type: list
      elements: str
proceed:
  description: Removing may start (confirmed, or check mode which only shows the plan).
  returned: always
  type: bool
confirmed:
  description: O(confirm) was given as yes or true.
  returned: always
  type: bool
torn_down_at:
  description: The teardown's time (UTC, ISO 8601), written as C(torn_down_at) and C(updated_at) in the state files it marks.
  returned: always
  type: str
  sample: "2026-11-24T08:00:00+00:00"
msg:
  description: The plan of every node; it starts with C(Nothing was removed.), C(Would remove) (check mode) or C(Removing).
  returned: always
  type: str
"""
