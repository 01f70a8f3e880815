#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: specdec_wheel_cache
short_description: Fetch a node platform's Python wheels once into the controller's cache, safe under concurrent runs
version_added: 0.2.0
description:
  - An action plugin, run on the controller; it contacts no host. The C(specdec_server) role calls it when
    C(specdec_server_wheel_dir) is unset, to fill C(<specdec_server_controller_cache_dir>/wheels/<version>/<platform>)
    with C(pip download --only-binary=:all:) of O(requirement) and pip itself for the node's platform (O(target)).
  - A directory that holds the C(.complete) mark is left alone (changed=false). Otherwise the action takes an
    exclusive lock on C(<path>.lock), looks again (another run may have filled it meanwhile), runs C(pip download)
    into a temporary directory next to O(path), writes the mark there and renames the directory into place. Several
    C(ansible-playbook) runs at once (C(playbooks/fleet.yml)) and the forks of one run therefore download once and
    never see a half-filled directory; a killed download leaves only a temporary directory, removed by the next one.
  - A failed download is one line naming C(specdec_server_controller_cache_dir), pip's last line and the fix; O(path)
    is left as it was.
author:
  - sparkops maintainers (@sparkops)
options:
  path:
    description: The cache directory for the node's platform (absolute path on the controller).
    type: path
    required: true
  target:
    description: The node's wheel platform, the result of the C(sparkops.specdec.node_wheel_target) filter.
    type: dict
    required: true
  requirement:
    description: The exact pin to fetch (C(specdec_server_hf_hub_requirement), e.g. V(huggingface_hub==2.4.0)).
    type: str
    required: true
  python:
    description: The controller Python that runs C(pip download); default C(ansible_playbook_python).
    type: path
  timeout:
    description: Seconds C(pip download) may take before the download fails.
    type: int
    default: 1800
extends_documentation_fragment:
  - sparkops.specdec.attributes
  - sparkops.specdec.attributes.action
attributes:
  check_mode:
    support: full
    details: Reports changed when the directory is not complete yet and fetches nothing.
  diff_mode:
    support: none
    details: No file content to show.
  idempotent:
    support: full
    details: A complete cache directory is left alone.
seealso:
  - module: sparkops.specdec.hf_download
"""

EXAMPLES = r"""
- name: Fetch the wheels for the node's platform once into the controller's cache
  sparkops.specdec.specdec_wheel_cache:
    path: "{{ cache }}/wheels/{{ target.version }}/{{ target.key }}"
    target: "{{ target }}"
    requirement: huggingface_hub==2.4.0
    python: "{{ ansible_playbook_python }}"
"""

RETURN = r"""
path:
  description: The cache directory; complete (it holds C(.complete) and the wheels) unless in check mode.
  returned: always
  type: str
  sample: /home/me/.cache/sparkops-specdec/wheels/2.4.0/cp311-manylinux_2_36_x86_64
"""
