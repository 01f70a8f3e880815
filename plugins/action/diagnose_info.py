# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Action plugin of sparkops.specdec.diagnose_info (documentation: plugins/modules/diagnose_info.py).

Runs the node-side module (read-only) without the secrets, then removes secrets from everything it returned
(_secrets.Redactor) before the result leaves this plugin: the raw output is never registered or displayed.
"""

from __future__ import annotations

import json

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.sparkops.specdec.plugins.module_utils import _diagnose, _secrets
from ansible_collections.sparkops.specdec.plugins.plugin_utils import _action

MODULE = "sparkops.specdec.diagnose_info"
_ARGS = frozenset(("container", "state_dir", "netplan_files", "log_lines", "secrets"))


def secrets_of(value):
    """The non-empty secrets of the task's secrets option (a string or a list)."""
    try:
        return _diagnose.secret_values(value)
    except ValueError as exc:
        raise AnsibleActionFail("%s: %s." % (MODULE, exc)) from None


def redact_result(raw, secrets):
    """The module's result with secrets removed: node_items (and its deprecated name items, removed in 1.0.0),
    missing and msg; count of values replaced."""
    redactor = _secrets.Redactor(secrets)
    out = {"changed": False}
    raw_items = raw.get("node_items", raw.get("items")) or {}
    items = redactor.data(raw_items)
    out["node_items"] = items
    out["items"] = items
    out["missing"] = ["%s (%s)" % (name, got.get("reason", "")) for name, got in sorted(items.items())
                      if isinstance(got, dict) and got.get("status") == "missing"]
    before = json.dumps(raw_items).count(_secrets.MASK)
    out["redacted"] = max(json.dumps(items).count(_secrets.MASK) - before, 0)
    if raw.get("failed"):
        out["failed"] = True
        out["msg"] = redactor.text(raw.get("msg") or "diagnose_info failed on the node")
    return out


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = _action.task_args(self, _ARGS)
        secrets = secrets_of(args.pop("secrets", None))
        raw = self._execute_module(module_name=MODULE, module_args=args, task_vars=task_vars)
        if raw.get("unreachable"):
            return dict(result, unreachable=True, msg=_secrets.Redactor(secrets).text(raw.get("msg", "")))
        result.update(redact_result(raw, secrets))
        return result
