#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: fabric_cabling
short_description: Check a deployment's QSFP cabling for its layout from the link state its nodes published (controller-side)
version_added: 0.3.0
description:
  - An action plugin, run on the controller; it contacts no host. The deploy play
    (C(playbooks/plays/spark_deploy.yml), imported by C(two_sparks.yml) and C(spark_cluster.yml)) runs it right after
    the C(netplan_qsfp) role, before the SSH mesh and the container.
  - V(direct) and V(switch) need the same physical QSFP port on every Spark (NCCL needs matching interfaces). V(ring)
    needs all four logical interfaces of every Spark Up (port 0 of each Spark cabled to port 1 of the next) and each
    cable's two ends, once addressed, in one subnet (a crossed cable shows there). Facts from NVIDIA's runbooks
    (C(connect-two-sparks), C(connect-three-sparks), C(multi-sparks-through-switch); docs/layouts.md).
  - The decisions are in C(module_utils/_layout.py) (C(cabling_problems)). Each problem is one line; the task fails
    with them, before anything of the mesh, the container or the server changes.
author:
  - sparkops maintainers (@sparkops)
options:
  layout:
    description: The deployment's layout as the plan resolved it (C(preflight_plan.plan.layout)); V(auto) or empty is
      V(direct).
    type: str
  nodes:
    description: The deployment's nodes in their fabric order (C(netplan_qsfp_nodes); a ring's S1, S2, S3).
    type: list
    elements: str
    required: true
  fabric:
    description: Node -> the C(netplan_qsfp_fabric) it published (C(port), the cabled port, and C(links), the link state
      of every ConnectX-7 interface from M(sparkops.specdec.nccl_interface_info)). A node without one is one line.
    type: dict
    required: true
extends_documentation_fragment:
  - sparkops.specdec.attributes
  - sparkops.specdec.attributes.info_module
  - sparkops.specdec.attributes.action
seealso:
  - module: sparkops.specdec.nccl_interface_info
  - module: sparkops.specdec.netplan_fabric
"""

EXAMPLES = r"""
- name: Check the cabling of the deployment's layout (same port on every node; a ring's four links)
  sparkops.specdec.fabric_cabling:
    layout: "{{ preflight_plan.plan.layout }}"
    nodes: "{{ netplan_qsfp_nodes }}"
    fabric: "{{ dict(netplan_qsfp_nodes | zip(netplan_qsfp_nodes | map('extract', hostvars, 'netplan_qsfp_fabric'))) }}"
"""

RETURN = r"""
layout:
  description: The layout checked (V(direct), V(ring) or V(switch)).
  returned: always
  type: str
problems:
  description: One line per cabling problem; empty when the nodes are cabled as the layout needs.
  returned: always
  type: list
  elements: str
"""
