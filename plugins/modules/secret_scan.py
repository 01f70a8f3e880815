#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: secret_scan
short_description: Search a host's files for every form of a secret (leak audit), read-only
version_added: 0.2.0
description:
  - Searches every regular file under O(paths) and every file matching O(globs) for every form of the O(secrets) and
    says which form was found where. Forms (module_utils C(_secrets.py)) by kind are V(raw) (the value, its stripped
    value and its pieces of 6+ characters), V(escaped) (repr/JSON escapes that differ from the value), V(url)
    (URL encodings that differ), V(base64) (base64 and URL-safe base64 at any alignment, so also inside
    C(base64(user:secret)) of HTTP Basic) and V(bearer) (C(Bearer <value>)).
  - Symbolic links are not followed; sockets, FIFOs and devices are not read; other file systems under a path are
    searched. Files that cannot be read are counted, never a failure. Nothing is changed.
  - The collection's Molecule scenario C(two_nodes) uses it to prove that the lab's canary HF token is nowhere on the
    nodes after a deployment; use it the same way on your own hosts after a run.
author:
  - sparkops maintainers (@sparkops)
options:
  secrets:
    description: The values to look for (e.g. the HF token). Never returned.
    type: list
    elements: str
    required: true
  paths:
    description: Directories (searched recursively) and files to search.
    type: list
    elements: path
    default: []
  globs:
    description:
      - Shell patterns of further files to read, whatever their size says, e.g. C(/proc/[0-9]*/environ) and
        C(/proc/[0-9]*/cmdline) (the environment and the command line of every process).
    type: list
    elements: str
    default: []
  exclude:
    description:
      - Paths (and shell patterns) not to descend into or read, e.g. C(/proc), C(/sys), C(/dev). An entry of O(paths)
        itself and the files matching O(globs) are always searched.
    type: list
    elements: str
    default: []
extends_documentation_fragment:
  - sparkops.specdec.attributes
  - sparkops.specdec.attributes.info_module
  - sparkops.specdec.attributes.platform
"""

EXAMPLES = r"""
- name: Look for the HF token on the node (files, process environments and command lines)
  sparkops.specdec.secret_scan:
    secrets: ["{{ specdec_server_hf_token }}"]
    paths: [/]
    exclude: [/proc, /sys, /dev]
    globs: ["/proc/[0-9]*/environ", "/proc/[0-9]*/cmdline"]
  become: true
  register: leak

- name: Fail when it was found
  ansible.builtin.assert:
    that: leak.found == []
    fail_msg: "{{ leak.found }}"
"""

RETURN = r"""
found:
  description: The files that hold a form, sorted by path, each with C(path), C(kinds) (found kinds, in the order
    raw, escaped, url, base64, bearer) and C(offsets) (kind -> byte offset of its first match).
  returned: always
  type: list
  elements: dict
  sample: [{path: /tmp/x.log, kinds: [base64], offsets: {base64: 1042}}]
files:
  description: Number of files searched.
  returned: always
  type: int
bytes:
  description: Bytes searched (as the files' sizes say; C(/proc) files count 0).
  returned: always
  type: int
unreadable:
  description: Number of files that could not be read (permission, vanished while searched).
  returned: always
  type: int
unreadable_sample:
  description: Up to 20 of those paths.
  returned: always
  type: list
  elements: str
seconds:
  description: Wall time of the search, in seconds.
  returned: always
  type: float
"""

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkops.specdec.plugins.module_utils import _secrets


def main():
    module = AnsibleModule(
        argument_spec={
            "secrets": {"type": "list", "elements": "str", "required": True, "no_log": True},
            "paths": {"type": "list", "elements": "path", "default": []},
            "globs": {"type": "list", "elements": "str", "default": []},
            "exclude": {"type": "list", "elements": "str", "default": []},
        },
        supports_check_mode=True,
    )
    secrets = [s for s in module.params["secrets"] if s and s.strip()]
    if not secrets:
        module.fail_json(msg="secret_scan: secrets is empty: give the value(s) to look for, e.g. "
                             "[\"{{ specdec_server_hf_token }}\"].")
    if not module.params["paths"] and not module.params["globs"]:
        module.fail_json(msg="secret_scan: nothing to search: set paths (e.g. [/]) or globs.")
    start = time.monotonic()
    result = _secrets.Finder(secrets).scan_tree(module.params["paths"], module.params["exclude"], module.params["globs"])
    module.exit_json(changed=False, seconds=round(time.monotonic() - start, 3), **result)


if __name__ == "__main__":
    main()
