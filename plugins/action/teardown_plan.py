# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Action plugin of sparkops.specdec.teardown_plan: controller-side, no host is contacted.

Turns what playbooks/teardown.yml read on every node into the plan of each node (what is
removed) and the confirmation message; plugin_utils/_teardown.py decides. The documentation is
in plugins/modules/teardown_plan.py.
"""

from __future__ import annotations

import datetime

from ansible.errors import AnsibleError
from ansible.module_utils.common.text.converters import to_text
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

from ansible_collections.sparkops.specdec.plugins.plugin_utils import _action
from ansible_collections.sparkops.specdec.plugins.plugin_utils import _preflight, _teardown

_ARGS = frozenset(("probes", "confirm", "remove_models", "remove_netplan", "remove_state", "remove_mesh", "mesh",
                   "container", "netplan_file"))


def _host_setting(hostvars, host, name):
    """A host's value of a setting, else the role's default."""
    try:
        if host in hostvars and name in hostvars[host]:
            return hostvars[host][name]
    except Exception:  # an undefined inventory value: the role's default applies
        pass
    return _action.spec_default(name)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        args = _action.task_args(self, _ARGS)
        if not args.get("container"):
            raise AnsibleError("teardown_plan: container (the engine container's name) is required")
        flags = {}
        for name in ("remove_models", "remove_netplan", "remove_state", "remove_mesh"):
            try:
                flags[name] = boolean(args.get(name, False), strict=True)
            except TypeError as exc:
                raise AnsibleError("teardown_plan: %s must be true or false (%s)" % (name, exc))
        remove_models, remove_netplan = flags["remove_models"], flags["remove_netplan"]
        remove_state, remove_mesh = flags["remove_state"], flags["remove_mesh"]
        mesh = args.get("mesh") or {}
        if not isinstance(mesh, dict):
            raise AnsibleError("teardown_plan: mesh must map each inventory name to its registered ssh_mesh_keys read "
                               "(got %s)" % type(mesh).__name__)
        # One time for the whole teardown: every state file it marks says the same torn_down_at.
        now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()
        check_mode = bool(self._task.check_mode or task_vars.get("ansible_check_mode"))
        hosts = list(task_vars.get("ansible_play_hosts_all") or [task_vars.get("inventory_hostname")])
        hostvars = task_vars.get("hostvars") or {}
        probes = args.get("probes") or {}
        nodes = {}
        for host in hosts:
            if host not in probes:
                continue
            apply = boolean(_host_setting(hostvars, host, "netplan_qsfp_apply") or False, strict=False)
            method = to_text(_host_setting(hostvars, host, "netplan_qsfp_apply_method") or "netplan")
            options = {
                "container": to_text(args["container"]),
                "netplan_file": to_text(args.get("netplan_file") or _action.spec_default("netplan_qsfp_file") or ""),
                "remove_models": remove_models,
                "remove_netplan": remove_netplan,
                "remove_state": remove_state,
                "remove_mesh": remove_mesh,
                "mesh": mesh.get(host),
                "now": now,
                "check_mode": check_mode,
                "management": _host_setting(hostvars, host, "ansible_host") or host,
                "netplan_apply": apply and method == "netplan",
            }
            nodes[host] = _teardown.plan_node(host, _preflight.merge_probe(probes[host]), options)
        proceed, msg = _teardown.plan_message(hosts, nodes, args.get("confirm"), check_mode, remove_models,
                                              remove_netplan, remove_state, remove_mesh)
        result.update(changed=False, nodes=nodes, proceed=proceed, confirmed=_teardown.confirmed(args.get("confirm")),
                      msg=msg, torn_down_at=now)
        return result
