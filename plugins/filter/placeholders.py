# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""PRIVATE filter of the inventory preflight (playbooks/preflight_inventory.yml): values left as placeholders.

- ``hostvars[inventory_hostname] | sparkops.specdec.placeholders(inventory_hostname)``: one line per variable of the
  host whose value (or a string anywhere inside it: list items, dict values) starts with ``SET-``, the prefix of every
  value the example inventories (inventories/example) ask the user to set (e.g. ``SET-management-address-of-spark-1``).
  Such a value cannot be a real address, user or token; the preflight stops on it, naming the variable and the host,
  before anything contacts a host. A variable whose value cannot be templated is left to the checks that use it.
- The input is the host's own variables, not ``hostvars``: the filter reads no other host. ``hostvars[host]`` is the
  host's inventory, group and host vars, facts and extra vars, each templated only when read (so one broken value is
  skipped, not fatal); it holds ``inventory_hostname``, which must be ``host`` (hostvars itself, or another host's
  variables, is an error). The ``vars`` magic variable would not do: it also holds ``hostvars``, every host's.
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


def placeholders(variables, host):
    fix = "pass hostvars[inventory_hostname], the host's own variables"
    if not isinstance(variables, Mapping):
        raise AnsibleFilterError("placeholders: expected the variables of %s, got %s: %s." % (host, type(variables).__name__, fix))
    name = None
    if "inventory_hostname" in variables:  # hostvars itself has no host of that name (and would give an Undefined)
        try:
            name = variables["inventory_hostname"]
        except Exception:  # pylint: disable=broad-except  # cannot be templated: not one host's variables either
            name = None
    if not isinstance(name, str) or name != host:
        raise AnsibleFilterError("placeholders: expected the variables of %s, got %s: %s." % (
            host, "those of %s" % name if isinstance(name, str) else "a mapping without inventory_hostname (hostvars?)",
            fix))
    return find(variables, host)


class FilterModule(object):
    def filters(self):
        return {"placeholders": placeholders}
