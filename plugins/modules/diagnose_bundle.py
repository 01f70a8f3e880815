#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: diagnose_bundle
short_description: Write the support bundle of every node into one tarball on the controller (0600)
version_added: 0.2.0
description:
  - An action plugin, run on the controller with C(run_once); it contacts no host. C(playbooks/diagnose.yml) collects
    each node's items with M(sparkops.specdec.diagnose_info) and this action writes them, with the controller's
    preflight report when there is one, into one gzip tarball.
  - "Layout: C(<name>/manifest.json), C(<name>/nodes/<node>/<item file>) and C(<name>/controller/preflight-report.json),
    where C(<name>) is the tarball's file name without C(.tar.gz). The manifest lists every item of every node with its
    C(status) (V(ok), V(missing), V(error)), C(reason), C(source) and C(files), the nodes that returned nothing, and
    the C(missing) and C(errors) lists. A missing item or an unreachable node is recorded there, never a failure."
  - Everything written is redacted again here, with every form of the O(secrets) (see
    M(sparkops.specdec.diagnose_info)), also the controller's preflight report.
  - The tarball is created with mode 0600 (also while it is written) and moved into place atomically. It is written in
    check mode too (output on the controller, like the preflight report); the task never reports a change, so a second
    run of the playbook reports C(changed=0).
author:
  - sparkops maintainers (@sparkops)
options:
  nodes:
    description: Every node of the play (C(ansible_play_hosts_all)), reached or not.
    type: list
    elements: str
    required: true
  results:
    description: Node -> its registered M(sparkops.specdec.diagnose_info) result (nodes without one are recorded as not
      collected).
    type: dict
    required: true
  path:
    description:
      - The tarball's path on the controller (C(diagnose_bundle_path)); relative paths are in O(report_dir). An
        existing directory gets the default name in it. Empty means C(sparkops-diagnose-<UTC YYYYmmddTHHMMSSZ>.tar.gz)
        in O(report_dir).
    type: path
    default: ""
  preflight_report_path:
    description: The preflight report to include (C(preflight_report_path)); relative paths are in O(report_dir), where
      C(playbooks/preflight.yml) writes it. Recorded as missing when it does not exist.
    type: path
    default: preflight-report.json
  secrets:
    description: Values to remove in every form (the HF tokens of the nodes). Never returned.
    type: list
    elements: str
    default: []
extends_documentation_fragment:
  - sparkops.specdec.attributes
  - sparkops.specdec.attributes.action
  - sparkops.specdec.reports
attributes:
  check_mode:
    support: full
    details: The bundle is written in check mode too (controller output; nothing changes on a node).
  diff_mode:
    support: none
    details: No diff.
  idempotent:
    support: full
    details: Never reports a change (the bundle is controller output).
"""

EXAMPLES = r"""
- name: Write the support bundle on the controller
  sparkops.specdec.diagnose_bundle:
    nodes: "{{ ansible_play_hosts_all }}"
    results: "{{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars, 'diagnose_node'))) }}"
    path: /tmp/bundle.tar.gz
    secrets: ["{{ specdec_server_hf_token }}"]
  run_once: true
  register: diagnose_bundle
"""

RETURN = r"""
path:
  description: Absolute path of the tarball on the controller.
  returned: success
  type: str
  sample: /home/me/sparkops-diagnose-20261123T183000Z.tar.gz
nodes:
  description: Every node named in O(nodes), sorted.
  returned: success
  type: list
  elements: str
collected:
  description: The nodes whose items are in the bundle.
  returned: success
  type: list
  elements: str
missing:
  description: "The items that were not there, as C(node: item (reason)) (C(controller: ...) for the preflight report)."
  returned: success
  type: list
  elements: str
  sample: ["spark-1: ibdev2netdev (ibdev2netdev: command not found)"]
supervisor_gave_up:
  description: "State files that record a give-up of the supervisor (it stopped restarting the server after
    C(specdec_server_max_failed_starts) failed starts), as C(node: file: when, how many, the last failure)."
  returned: success
  type: list
  elements: str
errors:
  description: "Items that failed and nodes that returned nothing, as C(node: item (reason))."
  returned: success
  type: list
  elements: str
files:
  description: Number of files in the tarball (manifest included).
  returned: success
  type: int
manifest:
  description: The content of C(manifest.json).
  returned: success
  type: dict
msg:
  description: One line naming the path and the counts.
  returned: success
  type: str
"""
