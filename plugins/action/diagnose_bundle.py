# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Action plugin of sparkops.specdec.diagnose_bundle (documentation: plugins/modules/diagnose_bundle.py).

Controller-side: the nodes' redacted items (diagnose_info) and the controller's preflight report, redacted again,
with manifest.json, into one .tar.gz (mode 0600). The bundle logic is in module_utils/_diagnose.py.
"""

from __future__ import annotations

import datetime
import json
import os
import time

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase

from ansible_collections.sparkops.specdec.plugins.module_utils import _diagnose, _secrets
from ansible_collections.sparkops.specdec.plugins.plugin_utils import _action, _files, _reports

_ARGS = frozenset(("nodes", "results", "path", "preflight_report_path", "secrets", "report_dir"))
# The preflight report's own default name (playbooks/preflight.yml writes it there when preflight_report_path is unset).
PREFLIGHT_REPORT = "preflight-report.json"


def preflight_item(path):
    """The controller's preflight report as an item (missing when there is none)."""
    if not path:
        return _diagnose.item("missing", "no preflight_report_path", "")
    path = os.path.abspath(os.path.expanduser(path))
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except OSError as exc:
        status = "missing" if not os.path.exists(path) else "error"
        reason = "%s: %s (run playbooks/preflight.yml to make one)" % (path, exc.strerror or exc)
        return _diagnose.item(status, reason, path)
    try:
        return _diagnose.item("ok", source=path, content=json.loads(text), fmt="json")
    except ValueError:
        return _diagnose.item("ok", source=path, content=text)


def node_items(nodes, results):
    """node -> items (None when the node returned none) and node -> reason, from the registered results."""
    out, errors = {}, {}
    for node in nodes:
        got = results.get(node)
        # node_items; items is its deprecated name (removed in 1.0.0).
        collected = got.get("node_items", got.get("items")) if isinstance(got, dict) else None
        if not isinstance(collected, dict):
            out[node] = None
            if isinstance(got, dict) and got.get("msg"):
                errors[node] = to_text(got["msg"]).splitlines()[0]
            elif isinstance(got, dict) and got.get("skipped"):
                errors[node] = "skipped"
            else:
                errors[node] = "no result from the node (unreachable or failed before diagnose_info)"
            continue
        out[node] = collected
    return out, errors


def bundle_path(path, now, report_dir=None):
    """The bundle's path: path as given (relative: in the report directory; a directory: the default name in it),
    else sparkops-diagnose-<UTC stamp>.tar.gz in the report directory (specdec_report_dir, default the current one)."""
    stamp = now.strftime("%Y%m%dT%H%M%SZ")
    default = os.path.basename(_diagnose.default_path(".", stamp))
    path = _reports.report_path(path, default, report_dir)
    if os.path.isdir(path):
        return _diagnose.default_path(path, stamp)
    return path


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = _action.task_args(self, _ARGS)
        try:
            secrets = _diagnose.secret_values(args.get("secrets"))
        except ValueError as exc:
            raise AnsibleActionFail("diagnose_bundle: %s." % exc) from None
        nodes = args.get("nodes") or []
        results = args.get("results") or {}
        if not isinstance(nodes, list) or not isinstance(results, dict):
            raise AnsibleActionFail("diagnose_bundle: nodes must be a list of inventory names and results a dict of "
                                    "node -> registered diagnose_info result (see playbooks/diagnose.yml).")
        now = datetime.datetime.fromtimestamp(time.time(), datetime.timezone.utc)
        report_dir = args.get("report_dir")
        path = _reports.ensure_dir(bundle_path(to_text(args.get("path") or ""), now, report_dir), report_dir)
        if not os.path.isdir(os.path.dirname(path)):
            raise AnsibleActionFail("diagnose_bundle: the directory of diagnose_bundle_path %s does not exist: create it "
                                    "or set diagnose_bundle_path to a file in an existing directory." % path)
        items, errors = node_items([to_text(n) for n in nodes], results)
        redactor = _secrets.Redactor(secrets)
        preflight_path = _reports.report_path(args.get("preflight_report_path"), PREFLIGHT_REPORT, report_dir)
        controller = {"items": {"preflight_report": preflight_item(preflight_path)}, "node_errors": errors}
        files, manifest = _diagnose.build(items, controller, redactor, now.isoformat())
        root = os.path.basename(path)
        for suffix in (".tar.gz", ".tgz"):
            if root.endswith(suffix):
                root = root[:-len(suffix)]
        _files.write_private(path, _diagnose.tarball(root, files, now.timestamp()), "." + _diagnose.BUNDLE_PREFIX)
        result.update(
            changed=False, path=path, nodes=sorted(items), collected=sorted(n for n in items if items[n] is not None),
            missing=manifest["missing"], errors=manifest["errors"], files=len(files), manifest=manifest,
            supervisor_gave_up=manifest["supervisor_gave_up"],
            msg="Support bundle %s: %d node(s) collected of %d, %d item(s) missing, %d error(s)."
                % (path, len([n for n in items if items[n] is not None]), len(items), len(manifest["missing"]),
                   len(manifest["errors"])))
        return result
