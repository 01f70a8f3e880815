# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Helpers shared by the collection's controller-side action plugins (private)."""

from __future__ import annotations

from ansible.errors import AnsibleError


def task_args(action, allowed):
    """The task's arguments as a dict; an unknown one is an error naming the plugin and the option."""
    args = dict(action._task.args)
    unknown = sorted(set(args) - set(allowed))
    if unknown:
        raise AnsibleError("%s: unknown option(s) %s; known: %s"
                           % (action._task.action, ", ".join(unknown), ", ".join(sorted(allowed))))
    return args
