# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""How the controller-side plugins read the inventory's deployments (private).

The grouping itself is plain data in plugin_utils/_fleet.py; this module feeds it from Ansible's
hostvars, groups and the inventory's group variables.
"""

from __future__ import annotations

import datetime

from ansible_collections.sparkops.specdec.plugins.plugin_utils import _fleet

FLEET_SETTINGS = ("specdec_deployment_id", "specdec_head_host")


def candidates(groups, play_hosts):
    """Every host of the inventory in its order (groups['all'] ignores --limit), else every host named anywhere."""
    if groups.get("all"):
        return list(dict.fromkeys(list(groups["all"]) + list(play_hosts)))
    found = list(play_hosts)
    for name in sorted(groups):
        found += list(groups.get(name) or [])
    return list(dict.fromkeys(found))


def fleet_settings(hostvars, host):
    """specdec_deployment_id and specdec_head_host of ``host`` as the inventory resolves them ({} if unreadable)."""
    try:
        variables = hostvars[host]
    except Exception:  # a host the hostvars do not know (e.g. added later): it names no deployment
        return {}
    found = {}
    for name in FLEET_SETTINGS:
        try:
            value = variables.get(name)
        except Exception:  # an expression that fails: reported for the play's members by the setting checks
            value = None
        # A value YAML did not read as a string (an unquoted 1, 2026-11-27, yes) is kept: the grouping names it.
        if isinstance(value, (str, int, float, datetime.date)):
            found[name] = value
    return found


def group_vars_reader(hostvars, loader):
    """group -> the variables set on the group itself (inventory file and group_vars/), or None if unknown."""
    inventory = getattr(hostvars, "_inventory", None)
    if inventory is None or not hasattr(inventory, "groups"):
        return None
    try:
        from ansible.vars.plugins import get_vars_from_inventory_sources, get_vars_from_path
    except ImportError:  # an ansible-core without the vars plugin helpers: the inventory file's vars only
        get_vars_from_inventory_sources = get_vars_from_path = None

    try:
        basedir = loader.get_basedir() if loader is not None else None
    except Exception:  # a loader without a base directory: no playbook-side group_vars/
        basedir = None

    def read(name):
        group = inventory.groups.get(name)
        if group is None:
            return {}
        found = {}
        if get_vars_from_inventory_sources is not None and loader is not None:
            # Stage "task": where Ansible itself reads group_vars/ (the default RUN_VARS_PLUGINS=demand).
            try:
                found.update(get_vars_from_inventory_sources(loader, inventory._sources, [group], "task") or {})
                if basedir:
                    found.update(get_vars_from_path(loader, basedir, [group], "task") or {})
            except Exception:  # a vars plugin that fails is reported by Ansible itself when it loads the host
                pass
        try:
            found.update(group.get_vars() or {})
        except Exception:  # nothing readable on the group
            pass
        return {k: v for k, v in found.items() if k in FLEET_SETTINGS}
    return read


def fleet(groups, play_hosts, hostvars, loader):
    """The inventory cut into deployments (module_utils/_fleet.group_deployments), read from Ansible's variables."""
    return _fleet.group_deployments(candidates(groups, play_hosts), lambda h: fleet_settings(hostvars, h),
                                    groups, group_vars_reader(hostvars, loader))


def assigned_ids(groups, play_hosts, hostvars, loader):
    """host -> the deployment ids the inventory gives it, for every host of the inventory.

    Two ids at most: the one of the deployment fleet() makes it a member of (fleet.yml and two_sparks.yml: its
    specdec_deployment_id, or the spark_head/spark_workers pair under the head's name, or the host alone under its
    name), and the one single_spark.yml deploys it under (its own specdec_deployment_id, else its name).
    """
    found = {}
    for dep in fleet(groups, play_hosts, hostvars, loader)["deployments"]:
        for host in dep["members"]:
            found.setdefault(host, []).append(dep["id"])
    for host in candidates(groups, play_hosts):
        own = _fleet._text(fleet_settings(hostvars, host).get("specdec_deployment_id")) or host
        ids = found.setdefault(host, [])
        if own not in ids:
            ids.append(own)
    return found
