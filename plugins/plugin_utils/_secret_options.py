# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""PRIVATE controller-side helper: the options whose values are secrets, found from their specs.

An option is a secret when its spec declares ``no_log: true``: its entry in a role's ``meta/argument_specs.yml``, or
in the playbook settings' table (``module_utils/_settings.PLAYBOOK_SETTINGS``, e.g. ``diagnose_secrets``). The
support bundle (playbooks/diagnose.yml, lookup ``sparkops.specdec.secret_options``) removes the values of all of
them, so a new secret option is scrubbed as soon as its spec says ``no_log: true``, with no list to keep by hand.

``marks_secret`` is the rule that says which options must declare it (tests/unit/test_secret_options.py applies it
to every role option, playbook setting and module option; docs/secrets.md states it).
"""

from __future__ import annotations

import glob
import os
import re

import yaml

from ansible_collections.sparkops.specdec.plugins.plugin_utils import _settings

# The collection's root: plugins/plugin_utils/ -> plugins/ -> root.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# A word of the name (split at "_") holding one of these stems makes it a secret (hf_token, apikey, registry_password).
NAME_STEMS = ("token", "password", "passwd", "passphrase", "secret", "credential", "apikey", "cookie")
# A last word that says the value names, locates, sizes or counts the secret, not the secret itself
# (specdec_container_host_key_dir, ssh_mesh_key_name, api_key_file, specdec_server_tiktoken_files, max_num_tokens).
ABOUT = ("dir", "file", "files", "path", "name", "names", "url", "id", "length", "size", "type", "tokens")
# Words that contain a stem but count or name things (specdec_server_max_num_tokens, tiktoken files).
_NOT_STEM_WORDS = ("tokens", "tiktoken")
# Phrases of a description that say the value is a secret ("(no secrets)" is a rule about the value, not one).
_DESCRIPTION = re.compile(r"(?i)\b(access token|hugging face token|hf token|api key|password|passphrase|private key|"
                          r"credentials?|bearer token|secret key)\b")


def marks_secret(name, description="", kind="str"):
    """Whether an option must declare ``no_log: true``: its value is a secret, by its name or its description.

    * A switch or a number (``kind`` bool, int, float) is never a secret, only about one (token_file_remove).
    * Name: split at ``_``; unless the last word is one of ``ABOUT`` (the value names, locates or counts the secret),
      a secret when a word holds one of ``NAME_STEMS`` (not ``tokens``, ``tiktoken``) or the last word is ``key``.
    * Description: one of the phrases access token, Hugging Face token, HF token, API key, password, passphrase,
      private key, credential(s), bearer token, secret key -- unless the name ends with one of ``ABOUT``.
    """
    if kind in ("bool", "int", "float"):
        return False
    words = [w for w in str(name).lower().split("_") if w]
    if words and words[-1] not in ABOUT:
        if any(stem in word for word in words if word not in _NOT_STEM_WORDS for stem in NAME_STEMS):
            return True
        if words[-1] == "key":
            return True
    text = " ".join(str(d) for d in description) if isinstance(description, list) else str(description or "")
    return bool(_DESCRIPTION.search(text)) and not str(name).endswith(ABOUT)


def playbook_options():
    """Every playbook setting (not a role option): [(name, spec)], from module_utils/_settings.PLAYBOOK_SETTINGS."""
    return sorted(_settings.PLAYBOOK_SETTINGS.items())


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
    """The names of the options that declare ``no_log: true`` in any role's argument specs or in the playbook
    settings' table, and the old names of those renamed (``_settings.RENAMED``, still read in 0.3.x), sorted, each
    once."""
    names = {name for _role, _entry, name, option in spec_options(root) if option.get("no_log") is True}
    names.update(name for name, spec in playbook_options() if spec.get("no_log") is True)
    names.update(old for old, new in _settings.RENAMED.items() if new in names)
    return sorted(names)
