# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Action plugin of sparkops.specdec.playbook_check: controller-side, no host is contacted.

The playbook variables of this host's context (extra vars included) and the run's host selection, checked by
plugin_utils/_playbook_check.py. The documentation is in plugins/modules/playbook_check.py.
"""

from __future__ import annotations

from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase

from ansible_collections.sparkops.specdec.plugins.plugin_utils import _action, _playbook_check

_ARGS = frozenset(("selector", "pattern", "matched", "play_hosts", "limit", "skip"))


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        args = _action.task_args(self, _ARGS)
        specs = _action.specs()
        values, problems = {}, []
        for name in _playbook_check.candidate_names(list(task_vars), specs):
            try:
                values[name] = self._templar.template(task_vars[name])
            except Exception as exc:  # an undefined variable: one line (a playbook variable holds no secret)
                problems.append("%s: cannot be evaluated (%s); fix its value."
                                % (name, (to_text(exc).splitlines() or [""])[0][:200]))
        problems += _playbook_check.variable_problems(values, specs, skip=set(args.get("skip") or []))
        if not problems and args.get("pattern") is not None:
            line = _playbook_check.selection_problem(
                args.get("selector") or args["pattern"], str(args["pattern"]), args.get("matched") or [],
                args.get("play_hosts") or [], args.get("limit"))
            if line:
                problems.append(line)
        result["changed"] = False
        result["problems"] = problems
        if problems:
            result["failed"] = True
            result["msg"] = problems[0] if len(problems) == 1 else "%d problems, nothing was done:\n- %s" % (
                len(problems), "\n- ".join(problems))
        else:
            result["msg"] = "playbook variables and host selection checked"
        return result
