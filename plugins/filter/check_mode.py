# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""PRIVATE filters of the specdec_server role for check mode.

- ``models | sparkops.specdec.unresolved_commits``: repo id -> a placeholder commit for every planned model
  (``plan.models`` of sparkops.specdec.specdec_plan). Check mode on a node that has never been deployed has no
  download module to ask which commit a revision resolves to (its Python environment is created by the real
  run): the launch is planned with these placeholders, so that the run reports what it would start and
  changes nothing.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError


def unresolved_commits(models):
    if not isinstance(models, (list, tuple)):
        raise AnsibleFilterError("unresolved_commits: expected the plan's list of models, got %s" % type(models).__name__)
    out = {}
    for model in models:
        if not isinstance(model, dict) or not model.get("repo"):
            raise AnsibleFilterError("unresolved_commits: every model needs a repo, got %r" % (model,))
        out[str(model["repo"])] = "<commit of %s, not resolved in check mode>" % (model.get("revision") or "main")
    return out


class FilterModule(object):
    def filters(self):
        return {"unresolved_commits": unresolved_commits}
