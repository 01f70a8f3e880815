# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Action plugin of sparkops.specdec.fabric_cabling: controller-side, no host is contacted.

The deployment's cabling, judged per layout from the link state its nodes published
(module_utils/_layout.published_cabling_problems). The documentation is in plugins/modules/fabric_cabling.py.
"""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.sparkops.specdec.plugins.module_utils import _layout
from ansible_collections.sparkops.specdec.plugins.plugin_utils import _action

_ARGS = frozenset(("layout", "nodes", "fabric"))


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = _action.task_args(self, _ARGS)
        nodes = [str(n) for n in args.get("nodes") or []]
        layout = args.get("layout")
        problems = _layout.published_cabling_problems(layout, nodes, args.get("fabric") or {})
        result["changed"] = False
        result["layout"] = "direct" if layout in (None, "", _layout.AUTO) else str(layout)
        result["problems"] = problems
        if problems:
            result["failed"] = True
            result["msg"] = problems[0] if len(problems) == 1 else "%d cabling problems:\n- %s" % (
                len(problems), "\n- ".join(problems))
        else:
            result["msg"] = "%s cabling of %s checked" % (result["layout"], ", ".join(nodes))
        return result
