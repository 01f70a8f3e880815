# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Action plugin of sparkops.specdec.specdec_settings: controller-side, no host is contacted.

Run on every node of a deployment (registered as ``specdec_settings``) before sparkops.specdec.specdec_plan: it
resolves this host's settings in this host's task context, so every precedence level Ansible knows counts (role
defaults, inventory, group and host vars, play and role vars, include and task vars, extra vars). The plan reads the
result of every member (a named variable of each host). The documentation is in plugins/modules/specdec_settings.py.
"""

from __future__ import annotations

from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase

from ansible_collections.sparkops.specdec.plugins.plugin_utils import _action
from ansible_collections.sparkops.specdec.plugins.plugin_utils import _settings


def resolve(templar, task_vars):
    """{settings: name -> value as Ansible resolves it, misnamed: [names], errors: [lines], deprecations: [records]} of
    one host's variables. A renamed option (_settings.RENAMED) set under its old name is published under its new name,
    with a deprecation record naming the new one (ansible-core shows it as a DEPRECATION WARNING)."""
    names, misnamed = _settings.select_names(task_vars.keys(), _action.specs())
    settings, failures = {}, {}
    for name in names:
        try:
            settings[name] = templar.template(task_vars[name])
        except Exception as exc:  # an undefined variable, or an expression that fails: one line, quoted below
            failures[name] = exc
    settings, used, errors = _settings.renamed(settings)
    if failures:
        # The exception may quote the token (or the variable it is built from): scrubbed before the quote is cut.
        scrub = _action.scrubber(*_action.secrets_of(templar, task_vars))
        for name, exc in sorted(failures.items()):
            quote = (scrub(to_text(exc)).splitlines() or [""])[0][:200]
            errors.append("%s: cannot be evaluated (%s); fix its value." % (name, quote))
    deprecations = [{"msg": _settings.deprecation(old), "version": _settings.RENAMED_REMOVAL,
                     "collection_name": _settings.COLLECTION} for old in used]
    return {"settings": settings, "misnamed": misnamed, "errors": errors, "deprecations": deprecations}


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        _action.task_args(self, ())
        result.update(resolve(self._templar, task_vars or {}))
        result["changed"] = False
        return result
