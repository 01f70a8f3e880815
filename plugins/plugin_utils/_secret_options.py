# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""PRIVATE controller-side helper: the role options whose values are secrets, found from the argument specs.

An option is a secret when its entry in a role's ``meta/argument_specs.yml`` declares ``no_log: true`` (a unit test,
tests/unit/test_secret_options.py, makes every option whose name or description marks a secret declare it). The
support bundle (playbooks/diagnose.yml, lookup ``sparkops.specdec.secret_options``) removes the values of all of
them, so a new secret option is scrubbed as soon as its spec says ``no_log: true``, with no list to keep by hand.
"""

from __future__ import annotations

import glob
import os

import yaml

# The collection's root: plugins/plugin_utils/ -> plugins/ -> root.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def spec_options(root=None):
    """Every option of every role's argument specs: [(role, entry point, name, spec)], in file order."""
    found = []
    pattern = os.path.join(root or ROOT, "roles", "*", "meta", "argument_specs.yml")
    for path in sorted(glob.glob(pattern)):
        with open(path, "rb") as handle:
            document = yaml.safe_load(handle) or {}
        role = os.path.basename(os.path.dirname(os.path.dirname(path)))
        for entry, spec in sorted(((document.get("argument_specs") or {}).items())):
            for name, option in ((spec or {}).get("options") or {}).items():
                found.append((role, entry, name, option if isinstance(option, dict) else {}))
    return found


def no_log_options(root=None):
    """The names of the options that declare ``no_log: true`` in any role's argument specs, sorted, each once."""
    return sorted({name for _role, _entry, name, option in spec_options(root) if option.get("no_log") is True})
