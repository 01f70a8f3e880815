# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Action plugin of sparkops.specdec.specdec_wheel_cache: controller-side, no host is contacted.

Fills one directory of the controller's wheel cache with ``pip download`` for a node's platform, once, safely when
several runs need it at the same time (plugin_utils/_wheel_cache.py: a lock and a directory renamed into place). The
argv is plugin_utils/_wheels.py's. The documentation is in plugins/modules/specdec_wheel_cache.py.
"""

from __future__ import annotations

from ansible.errors import AnsibleActionFail, AnsibleError
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase

from ansible_collections.sparkops.specdec.plugins.plugin_utils import _wheels
from ansible_collections.sparkops.specdec.plugins.plugin_utils import _action, _wheel_cache

_ARGS = frozenset(("path", "target", "requirement", "python", "timeout"))


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        args = _action.task_args(self, _ARGS)
        for name in ("path", "target", "requirement"):
            if not args.get(name):
                raise AnsibleError("specdec_wheel_cache: %s is required" % name)
        target, requirement = args["target"], to_text(args["requirement"])
        if not isinstance(target, dict) or not target.get("platforms"):
            raise AnsibleError("specdec_wheel_cache: target must be the node_wheel_target filter's result")
        try:
            _wheels.pinned_version(requirement)
            timeout = int(args.get("timeout", 1800))
        except (_wheels.WheelError, TypeError, ValueError) as exc:
            raise AnsibleActionFail(to_text(exc) if isinstance(exc, _wheels.WheelError)
                                    else "specdec_wheel_cache: timeout must be a whole number of seconds") from None
        path = to_text(args["path"])
        python = to_text(args.get("python") or task_vars.get("ansible_playbook_python") or "python3")
        result.update(path=path, changed=False)
        if _wheel_cache.complete(path):
            return result
        if self._task.check_mode or task_vars.get("ansible_check_mode"):
            result.update(changed=True, msg="would fetch the wheels for %s into %s" % (target.get("key"), path))
            return result
        try:
            fetched = _wheel_cache.ensure(
                path, lambda dest: _wheels.pip_download_argv(target, python, requirement, dest), requirement,
                timeout=timeout)
        except _wheel_cache.WheelCacheError as exc:
            raise AnsibleActionFail(to_text(exc)) from None
        result.update(changed=fetched)
        return result
