#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: playbook_check
short_description: Check a run's playbook variables and host selection before any host is contacted (controller-side)
version_added: 0.3.0
description:
  - An action plugin, run on the controller; it contacts no host. The collection's playbooks run it first, once, in a
    play on C(all:localhost) (a play whose C(hosts) match nothing is skipped, so the check lives in one that runs).
  - The playbook variables (C(single_spark_host), C(preflight_topology), C(fleet_*), C(teardown_*), C(confirm),
    C(status_*), C(diagnose_*), C(preflight_*); declared once, with types and choices, in
    C(plugin_utils/_settings.py) PLAYBOOK_SETTINGS) are checked like role options. A wrong type or an unknown choice
    is one line; a name with a known prefix that is no variable of the collection, or a name close to a playbook
    variable (C(single_spark_hots), C(fleet_deployment)), is one line naming the known one. Other variables pass.
  - The host selection. When the playbook's own play would match no host in this run (the selector names no host of
    the inventory, or C(--limit) leaves out all of them, or leaves out C(localhost) for fleet.yml), the run fails with
    one line naming why and what to pass, instead of ending green having done nothing.
author:
  - sparkops maintainers (@sparkops)
options:
  selector:
    description: The variable or group that names the play's hosts, for the message (e.g. C(single_spark_host)).
    type: str
  pattern:
    description: The play's C(hosts) pattern as templated. Without it only the variables are checked.
    type: str
  matched:
    description: The inventory's hosts of I(pattern) without C(--limit), C(query('ansible.builtin.inventory_hostnames', pattern)).
    type: list
    elements: str
  play_hosts:
    description: The hosts this run may use, C(ansible_play_hosts_all) of a play on C(all:localhost).
    type: list
    elements: str
  limit:
    description: C(ansible_limit), for the message.
    type: str
  skip:
    description: Playbook variables whose values a later task of the playbook checks and records itself (fleet.yml's
      C(fleet_*), which M(sparkops.specdec.fleet_deploy) reports in its C(set_stats)); their names still count as known.
    type: list
    elements: str
    default: []
extends_documentation_fragment:
  - sparkops.specdec.attributes
  - sparkops.specdec.attributes.info_module
  - sparkops.specdec.attributes.action
seealso:
  - module: sparkops.specdec.specdec_plan
"""

EXAMPLES = r"""
- name: Check the playbook variables and that this run selects a host (no host is contacted)
  hosts: all:localhost
  gather_facts: false
  tasks:
    - name: Check the playbook variables and the host selection
      sparkops.specdec.playbook_check:
        selector: single_spark_host
        pattern: "{{ single_spark_host | default('spark_head') }}"
        matched: "{{ query('ansible.builtin.inventory_hostnames', single_spark_host | default('spark_head')) }}"
        play_hosts: "{{ ansible_play_hosts_all }}"
        limit: "{{ ansible_limit | default(omit) }}"
      run_once: true
"""

RETURN = r"""
problems:
  description: One line per problem ("variable - problem - fix"); empty when the run may go on.
  returned: always
  type: list
  elements: str
"""
