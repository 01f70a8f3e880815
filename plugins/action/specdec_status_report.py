# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Action plugin of sparkops.specdec.specdec_status_report: controller-side, no host is contacted.

Merges what playbooks/status.yml read on every node (sparkops.specdec.specdec_status_info, or the unreachable
result of a node it could not reach) into one row per deployment (module_utils/_status.py decides), writes the
JSON file (mode 0600, atomically) and returns the table, the rows and the set_stats summary. The documentation is
in plugins/modules/specdec_status_report.py.
"""

from __future__ import annotations

import datetime
import json

from ansible.errors import AnsibleError
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase

from ansible_collections.sparkops.specdec.plugins.plugin_utils import _action, _files, _inventory, _reports
from ansible_collections.sparkops.specdec.plugins.module_utils import _status

_ARGS = frozenset(("facts", "hosts", "active", "report_path", "report_dir"))
DEFAULT_REPORT = "specdec-status.json"


def write_json(path, data):
    """Write ``data`` as JSON atomically (a temporary file in the same directory, then a rename), mode 0600."""
    return _files.write_private(path, json.dumps(data, indent=2, sort_keys=True) + "\n", ".specdec-status.")


def _hosts(value, name):
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise AnsibleError("specdec_status_report: %s must be a list of inventory names, got %s" % (name, type(value).__name__))
    return [to_text(h) for h in value]


def inventory_ids(task_vars, hosts, loader):
    """host -> the deployment ids the inventory assigns it (plugin_utils/_inventory.assigned_ids), or None when the
    inventory cannot be read (no hostvars): the status then flags no deployment as out of the inventory."""
    hostvars = task_vars.get("hostvars")
    if hostvars is None:
        return None
    try:
        return _inventory.assigned_ids(task_vars.get("groups") or {}, hosts, hostvars, loader)
    except Exception:  # an inventory the fleet grouping cannot read: the status itself still reports
        return None


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        args = _action.task_args(self, _ARGS)
        facts = args.get("facts")
        if not isinstance(facts, dict):
            raise AnsibleError("specdec_status_report: facts must map each inventory name to its registered "
                               "specdec_status_info result, got %s" % type(facts).__name__)
        hosts = _hosts(args.get("hosts"), "hosts") or list(task_vars.get("ansible_play_hosts_all") or facts)
        active = _hosts(args.get("active"), "active")
        if active is None:
            active = list(task_vars.get("ansible_play_hosts") or hosts)
        rows = _status.build_rows(hosts, active, facts, inventory_ids(task_vars, hosts, getattr(self, "_loader", None)))
        now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()
        doc = _status.document(rows, now)
        serving, msg = _status.verdict(rows)
        result.update(changed=False, deployments=rows, table=_status.table(rows), summary=doc["summary"],
                      all_serving=serving, msg=msg, generated_at=now)
        path = args.get("report_path")
        try:
            path = _reports.report_path(path, DEFAULT_REPORT, args.get("report_dir"))
            result["report_path"] = write_json(_reports.ensure_dir(path, args.get("report_dir")), doc)
        except OSError as exc:
            result.update(failed=True, msg="status_report_path: cannot write %s (%s); set it to a writable file path."
                          % (path, exc))
            return result
        return result
