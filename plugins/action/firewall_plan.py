# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Action plugin of sparkops.specdec.firewall_plan: controller-side, no host is contacted.

Turns what the specdec_server role read on a node (ufw, its status and user rules, the Ansible
connection) into the ufw rules to add and delete; module_utils/_firewall.py decides. The
documentation is in plugins/modules/firewall_plan.py.
"""

from __future__ import annotations

from ansible.errors import AnsibleError
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

from ansible_collections.sparkops.specdec.plugins.plugin_utils import _action
from ansible_collections.sparkops.specdec.plugins.module_utils import _firewall

_ARGS = frozenset(("state", "probe", "ssh_connection", "networks", "port", "consent", "fabric_interfaces",
                   "fabric_addresses", "container_ssh_port", "management_peers", "deployment", "two_nodes",
                   "check_only"))


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        args = _action.task_args(self, _ARGS)
        state = args.get("state", "present")
        if state not in ("present", "absent"):
            raise AnsibleError("firewall_plan: state must be present or absent, not %r" % state)
        probe = args.get("probe") or {}
        if not isinstance(probe, dict) or "stdout" not in probe:
            raise AnsibleError("firewall_plan: probe must be the registered result of the role's ufw probe")
        host = task_vars.get("inventory_hostname", "this node")
        inputs = _firewall.parse_probe(probe.get("stdout"))
        inputs.update(ssh_connection=args.get("ssh_connection") or "",
                      ansible_port=task_vars.get("ansible_port") or task_vars.get("ansible_ssh_port") or 22)
        if state == "absent":
            plan = _firewall.plan_remove(host, inputs)
        else:
            if args.get("port") in (None, ""):
                raise AnsibleError("firewall_plan: port (the endpoint's, specdec_server_port) is required")
            try:
                consent = boolean(args.get("consent", False), strict=True)
                two_nodes = boolean(args.get("two_nodes", False), strict=True)
                check_only = boolean(args.get("check_only", False), strict=True)
            except TypeError as exc:
                raise AnsibleError("firewall_plan: consent, two_nodes and check_only must be true or false (%s)" % exc)
            inputs.update(networks=args.get("networks") or [], port=args["port"], consent=consent,
                          fabric_interfaces=args.get("fabric_interfaces") or [],
                          fabric_addresses=args.get("fabric_addresses") or [],
                          container_ssh_port=args.get("container_ssh_port") or 0,
                          management_peers=args.get("management_peers") or [],
                          deployment=args.get("deployment") or "default", two_nodes=two_nodes,
                          check_only=check_only)
            plan = _firewall.plan_apply(host, inputs)
            if plan["errors"]:
                result.update(failed=True, changed=False, msg=" ".join(plan["errors"]), errors=plan["errors"])
                return result
            if check_only:
                result.update(changed=False, errors=[], client=plan["client"], ssh_port=plan["ssh_port"],
                              msg="the firewall rules can be applied on %s" % host)
                return result
        diff = plan.pop("diff")
        result.update(plan, changed=plan["pending"])
        if self._task.diff or task_vars.get("ansible_diff_mode"):
            result["diff"] = diff
        return result
