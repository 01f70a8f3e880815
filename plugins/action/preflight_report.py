# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Action plugin of sparkops.specdec.preflight_report: controller-side, no host is contacted.

Turns the raw facts that playbooks/preflight.yml gathered on every node into one result per
check and node (plugin_utils/_preflight.py decides), writes the JSON report (mode 0600) and
returns the summary and the verdict. The documentation is in plugins/modules/preflight_report.py.
"""

from __future__ import annotations

import json

from ansible.errors import AnsibleError
from ansible.module_utils.common.text.converters import to_text
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

from ansible_collections.sparkops.specdec.plugins.plugin_utils import _action, _files, _reports
from ansible_collections.sparkops.specdec.plugins.plugin_utils import _preflight, _settings

_ARGS = frozenset(("plan", "probes", "fabric", "hf_results", "container", "ssh_port", "hf_cache_dir", "host_key_dir",
                   "usable_memory_bytes", "memory_reserve_bytes", "disk_reserve_bytes", "report_path", "report_dir",
                   "reach"))
_INT_ARGS = ("usable_memory_bytes", "memory_reserve_bytes", "disk_reserve_bytes")


def write_report(path, entries):
    """Write the report atomically, readable by its owner only (0600): it names hosts and paths."""
    return _files.write_private(path, json.dumps(entries, indent=4, sort_keys=True) + "\n", ".preflight-report.")


def _node_bool(hostvars, host, name):
    """A boolean setting of one node from its variables, else the role's declared default."""
    value = None
    try:
        if host in hostvars and name in hostvars[host]:
            value = hostvars[host][name]
    except Exception:  # an undefined inventory value: the role's default applies
        value = None
    return boolean(_action.spec_default(name) if value is None else value, strict=False)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        args = _action.task_args(self, _ARGS)
        plan = args.get("plan")
        if not isinstance(plan, dict) or not isinstance(plan.get("plan"), dict):
            raise AnsibleError("preflight_report: plan must be the registered result of sparkops.specdec.specdec_plan "
                               "(preflight_plan), with plan.models, plan.port and plan.tp_size")
        settings = {"container": to_text(args.get("container") or ""), "hf_cache_dir": to_text(args.get("hf_cache_dir") or ""),
                    "host_key_dir": to_text(args.get("host_key_dir") or "")}
        try:
            settings["ssh_port"] = int(args["ssh_port"]) if args.get("ssh_port") not in (None, "") else None
            for name in _INT_ARGS:
                if args.get(name) not in (None, ""):
                    settings[name] = int(args[name])
        except (TypeError, ValueError) as exc:
            raise AnsibleError("preflight_report: a port or byte count is not a whole number (%s)" % exc)

        hosts = list(task_vars.get("ansible_play_hosts_all") or [task_vars.get("inventory_hostname")])
        hostvars = task_vars.get("hostvars") or {}
        settings["gpus"] = {host: _node_bool(hostvars, host, "trtllm_container_gpus") for host in hosts}
        settings["download"] = {host: _node_bool(hostvars, host, "specdec_server_download") for host in hosts}

        probes = {h: _preflight.merge_probe(r) for h, r in (args.get("probes") or {}).items() if h in hosts}
        reach = args.get("reach") or {}
        if not isinstance(reach, dict):
            raise AnsibleError("preflight_report: reach must map each node to its registered reach result")
        entries = _preflight.build_checks(hosts, probes, args.get("fabric") or {}, args.get("hf_results") or [],
                                          plan, settings, unreachable=_preflight.unreachable_reasons(reach))
        passed, msg = _preflight.verdict(entries)
        try:
            path = _reports.report_path(args.get("report_path"),
                                        _settings.PLAYBOOK_SETTINGS["preflight_report_path"]["default"],
                                        args.get("report_dir"))
            result["report_path"] = write_report(_reports.ensure_dir(path, args.get("report_dir")), entries)
        except OSError as exc:
            result.update(failed=True, checks=entries, msg="preflight_report: cannot write the report %s: %s" % (path, exc))
            return result
        result.update(changed=False, checks=entries, summary=_preflight.summary(entries), passed=passed, msg=msg,
                      failed_checks=[e for e in entries if e["status"] == "fail"])
        return result
