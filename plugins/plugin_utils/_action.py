# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Helpers shared by the collection's controller-side action plugins (private)."""

from __future__ import annotations

import os

from ansible.errors import AnsibleError

from ansible_collections.sparkops.specdec.plugins.module_utils import _secrets
from ansible_collections.sparkops.specdec.plugins.plugin_utils import _secret_options, _settings

try:  # ansible-core 2.19+
    from ansible.executor.module_common import _apply_action_arg_defaults
except ImportError:  # pragma: no cover
    _apply_action_arg_defaults = None

_ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
_SPECS = {}
_NO_LOG = set()


def task_args(action, allowed):
    """The task's arguments as a dict; an unknown one is an error naming the plugin and the option."""
    args = dict(action._task.args)
    unknown = sorted(set(args) - set(allowed))
    if unknown:
        raise AnsibleError("%s: unknown option(s) %s; known: %s"
                           % (action._task.action, ", ".join(unknown), ", ".join(sorted(allowed))))
    return args


def run_module(action, name, args, task_vars, check_mode=None, diff=None):
    """Run the module ``name`` on the action's host, with its task's connection and module_defaults for that module.

    check_mode / diff: the mode the module runs in (None: the task's own); the task's modes are restored afterwards,
    whatever the module did. Returns the module's result.
    """
    if _apply_action_arg_defaults is not None:
        args = _apply_action_arg_defaults(name, action._task, dict(args), action._templar)
    saved = (action._task.check_mode, action._task.diff)
    try:
        if check_mode is not None:
            action._task.check_mode = check_mode
        if diff is not None:
            action._task.diff = diff
        return action._execute_module(module_name=name, module_args=args, task_vars=task_vars)
    finally:
        action._task.check_mode, action._task.diff = saved


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


# A secret-looking variable (vault_hf_token, hf_token, ...) shorter than this is not taken as a secret to scrub: its
# value would mask ordinary words in the messages. The token setting itself is always scrubbed.
_MIN_SECRET = 8
TOKEN = "specdec_server_hf_token"
_NOT_VARIABLES = ("hostvars", "vars", "groups", "group_names", "omit", "playbook_dir", "inventory_dir")


def no_log_settings():
    """The settings whose spec declares ``no_log: true`` (the roles' argument specs and the playbook settings, found by
    _secret_options; read once per controller process)."""
    if not _NO_LOG:
        _NO_LOG.update(_secret_options.no_log_options())
    return _NO_LOG


def secret_setting(name):
    """Whether a setting's value is never shown: the token, a name that looks secret, or a spec that declares
    ``no_log: true`` (whatever its name)."""
    return name == TOKEN or _settings.looks_secret(name) or name in no_log_settings()


def secret_strings(value):
    """The strings a secret setting's value holds, for a scrubber: the value itself when it is text; the texts in a
    list or dict of secrets (diagnose_secrets) when at least _MIN_SECRET long (a short item, e.g. of a list given
    where text belongs, would mask ordinary words)."""
    if isinstance(value, str):
        return [value]
    items = list(value.values()) if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else []
    return [text for item in items for text in secret_strings(item) if len(text.strip()) >= _MIN_SECRET]


def _vaulted(value):
    """Whether a value is Vault-encrypted (ansible-core 2.19 EncryptedString, or the older class)."""
    return bool(getattr(value, "__ENCRYPTED__", False)) or type(value).__name__ in ("EncryptedString",
                                                                                    "AnsibleVaultEncryptedUnicode")


def _add_secret(found, value, always=False):
    if isinstance(value, str) and value and (always or len(value.strip()) >= _MIN_SECRET):
        found.add(str(value))


def secrets_of(templar, task_vars):
    """The secret values of a task's variables, for a scrub of the messages that quote a Jinja or library exception.

    specdec_server_hf_token and every option whose spec declares no_log, and every variable that is Vault-encrypted or
    whose name looks secret (vault_hf_token: the source a failing expression of the token is built from, and which its
    exception quotes), when it can be evaluated.
    """
    found = set()
    for name in list(task_vars.keys()) if hasattr(task_vars, "keys") else []:
        if name in _NOT_VARIABLES:
            continue
        # The token and every option whose spec declares no_log are scrubbed whatever their length.
        declared = name == TOKEN or name in no_log_settings()
        try:
            raw_value = task_vars[name]
        except Exception:  # a lazy variable that cannot even be read: nothing to learn from it
            continue
        if not (declared or _vaulted(raw_value) or _secrets.secret_env_name(name)):
            continue
        try:
            value = templar.template(raw_value)
        except Exception:  # the failing expression itself; its message is what gets scrubbed
            continue
        for text in secret_strings(value):
            _add_secret(found, text, always=declared)  # a list's short items are already left out
    return found


def scrubber(*values):
    """A scrub of these secrets in every form, and of the controller's HF_TOKEN (the token setting's default)."""
    found = set()
    _add_secret(found, os.environ.get("HF_TOKEN"), always=True)
    for value in values:
        _add_secret(found, value, always=True)
    return _secrets.Scrubber(sorted(found))
