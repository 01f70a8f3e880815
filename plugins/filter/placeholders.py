# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""PRIVATE filter of the inventory preflight (playbooks/preflight_inventory.yml): values left as placeholders.

- ``hostvars | sparkops.specdec.placeholders(inventory_hostname)``: one line per variable of the host whose value
  (or a string anywhere inside it: list items, dict values) starts with ``SET-``, the prefix of every value the
  example inventories (inventories/example) ask the user to set (e.g. ``SET-management-address-of-spark-1``). Such a
  value cannot be a real address, user or token; the preflight stops on it, naming the variable and the host, before
  anything contacts a host. A variable whose value cannot be templated is left to the checks that use it.
"""

from __future__ import annotations

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

PREFIX = "SET-"


def _found(value, where, out, depth=0):
    """Append (where, value) for every string under ``value`` that starts with PREFIX."""
    if depth > 20:
        return
    if isinstance(value, str):
        if value.startswith(PREFIX):
            out.append((where, value))
    elif isinstance(value, Mapping):
        for key in value:
            _found(value[key], "%s.%s" % (where, key), out, depth + 1)
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _found(item, "%s[%d]" % (where, index), out, depth + 1)


def find(variables, host):
    """The placeholder lines of one host: ``variables`` maps a variable name to its value (the host's vars)."""
    out = []
    for name in sorted(variables, key=str):
        try:
            value = variables[name]
        except Exception:  # an undefined or broken template: not a placeholder; the checks that read it say why
            continue
        _found(value, str(name), out)
    return ["%s on %s: %s is the example inventory's placeholder; set the real value in your inventory "
            "(host or group vars) or with -e." % (where, host, value) for where, value in out]


def placeholders(hostvars, host):
    if not isinstance(hostvars, Mapping):
        raise AnsibleFilterError("placeholders: expected hostvars (a mapping), got %s" % type(hostvars).__name__)
    if host not in hostvars:
        raise AnsibleFilterError("placeholders: %s is not in hostvars" % host)
    return find(hostvars[host], host)


class FilterModule(object):
    def filters(self):
        return {"placeholders": placeholders}
