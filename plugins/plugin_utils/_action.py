# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Helpers shared by the collection's controller-side action plugins (private)."""

from __future__ import annotations

import os

from ansible.errors import AnsibleError

from ansible_collections.sparkops.specdec.plugins.module_utils import _settings

_ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
_SPECS = {}


def task_args(action, allowed):
    """The task's arguments as a dict; an unknown one is an error naming the plugin and the option."""
    args = dict(action._task.args)
    unknown = sorted(set(args) - set(allowed))
    if unknown:
        raise AnsibleError("%s: unknown option(s) %s; known: %s"
                           % (action._task.action, ", ".join(unknown), ", ".join(sorted(allowed))))
    return args


def specs():
    """The roles' meta/argument_specs.yml options by role (read once per controller process)."""
    if not _SPECS:
        _SPECS.update(_settings.load_specs(_ROOT))
    return _SPECS


def spec_defaults():
    """Every setting that declares a default (roles' argument specs and the playbooks' settings) -> it."""
    return {name: spec["default"] for name, spec in _settings.known_options(specs()).items() if "default" in spec}


def spec_default(name):
    """The declared default of one setting (None when it declares none)."""
    return spec_defaults().get(name)
