# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""PRIVATE filters of the specdec_server role: the wheels a node gets (the logic is in plugin_utils/_wheels.py).

- ``ansible_facts | sparkops.specdec.node_wheel_target(libc, requirement)``: the node's wheel platform (architecture,
  Python, glibc, manylinux tags), the pinned version and a cache key, from the node's facts and
  ``getconf GNU_LIBC_VERSION``.
- ``file_names | sparkops.specdec.node_wheels(target, requirement, setting, directory)``: the wheels of a
  controller directory the node can install, and the pip wheel it runs.

A refusal fails the task that uses the filter, before the task changes anything, with a one-line message.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.sparkops.specdec.plugins.plugin_utils import _wheels


def node_wheel_target(facts, libc, requirement):
    facts = facts or {}
    python = facts.get("python") or {}
    version = python.get("version") or {}
    if isinstance(version, dict):
        version = "%s.%s" % (version.get("major"), version.get("minor"))
    try:
        target = _wheels.wheel_target(facts.get("architecture"), version, libc)
        target["version"] = _wheels.pinned_version(requirement)
    except _wheels.WheelError as exc:
        raise AnsibleFilterError(str(exc)) from None
    target["interpreter"] = python.get("executable") or "/usr/bin/python3"
    return target


def node_wheels(names, target, requirement, setting="specdec_server_wheel_dir", directory=""):
    try:
        return _wheels.select_wheels(names, target, requirement, setting, directory)
    except _wheels.WheelError as exc:
        raise AnsibleFilterError(str(exc)) from None


class FilterModule(object):
    def filters(self):
        return {
            "node_wheel_target": node_wheel_target,
            "node_wheels": node_wheels,
        }
