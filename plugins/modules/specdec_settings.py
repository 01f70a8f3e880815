#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: specdec_settings
short_description: Resolve this node's settings as Ansible does, for the plan (controller-side)
version_added: 0.3.0
description:
  - An action plugin, run on the controller; it contacts no host. Run it on every node of a deployment, registered as
    C(specdec_settings), right before M(sparkops.specdec.specdec_plan), which reads the registered result of every
    member node and nothing else of a host.
  - Each node's settings are resolved in that node's own task context, so every precedence level Ansible knows counts,
    that is role defaults, inventory, group and host vars, play C(vars:), role, include and task vars, and extra vars
    (C(-e)). The plan and the roles therefore see the same values.
  - A setting is a variable the collection's roles declare in C(meta/argument_specs.yml) (or a playbook setting such as
    C(preflight_topology)). A variable that is no setting but would be taken for one (a misspelt name or prefix, a
    removed name) is returned by name only, for the plan to report. Results the roles publish are neither.
  - The result holds the HF token and the API key; run it with C(no_log) (the collection's playbooks and roles do).
author:
  - sparkops maintainers (@sparkops)
options: {}
extends_documentation_fragment:
  - sparkops.specdec.attributes
  - sparkops.specdec.attributes.info_module
  - sparkops.specdec.attributes.action
seealso:
  - module: sparkops.specdec.specdec_plan
"""

EXAMPLES = r"""
- name: Resolve this node's settings for the plan
  sparkops.specdec.specdec_settings:
  no_log: true
  register: specdec_settings

- name: Check every setting and the deployment
  sparkops.specdec.specdec_plan:
    topology: two_sparks
  run_once: true
"""

RETURN = r"""
settings:
  description: Setting name -> its value as Ansible resolves it on this node (templated, not yet checked).
  returned: always
  type: dict
misnamed:
  description: Variables of this node that are no setting but look like one (misspelt, removed), by name.
  returned: always
  type: list
  elements: str
errors:
  description: One line per setting whose value cannot be evaluated (an undefined variable), scrubbed of the token.
  returned: always
  type: list
  elements: str
"""
