# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
#
# PRIVATE to the sparkops.specdec collection: the inventory checks of the preflight. Not a public
# API; names and messages may change in any release without notice. Do not import it from other
# collections.
"""Check one host's settings against the collection's roles, before anything runs.

Pure functions (``load_specs`` only reads the roles' ``meta/argument_specs.yml``). Every problem
is reported as ONE line that names the setting, says what is wrong and how to fix it::

    specdec_server_max_draft_len: 0 is out of range; set an integer from 1 to 32 (the runbook uses 3 to 5).

What is checked, per host:

* names: unknown settings under a prefix of the collection (with the closest known name), names
  removed by the one-name-per-fact change (``REMOVED``), and near-miss prefixes such as
  ``trtlm_container_image`` (a misspelt prefix would make a setting silently ignored);
* types and choices from the argument specs, with the coercion
  ``ansible.builtin.validate_argument_spec`` does (``"3"`` for an int, ``"yes"`` for a bool);
* bounds and shapes from ``BOUNDS`` (one entry per option, each with the reason of its bound);
* rules between settings: archive source vs archive path, and the management address
  (``context['ansible_host']``) outside every fabric subnet in effect.

Values of settings whose name looks secret (``looks_secret``) or whose spec declares ``no_log`` are never shown.
"""

from __future__ import annotations

import datetime
import decimal
import difflib
import glob
import ipaddress
import json
import math
import os
import re

from ansible_collections.sparkops.specdec.plugins.module_utils import _container, _firewall
from ansible_collections.sparkops.specdec.plugins.plugin_utils import _fleet, _text

COLLECTION = 'sparkops.specdec'

# The one-name-per-fact change: each fact shared by several roles has ONE name now, owned by the
# defaults-only role specdec_common. Old name -> the name that replaces it. Setting an old name
# is an error (kubespray's removed-variables check is the model): it would be silently ignored.
REMOVED = {
    'trtllm_container_name': 'specdec_container_name',
    'specdec_server_container': 'specdec_container_name',
    'trtllm_container_state_dir': 'specdec_state_dir',
    'specdec_server_state_dir': 'specdec_state_dir',
    'trtllm_container_hf_cache_dir': 'specdec_hf_cache_dir',
    'specdec_server_hf_cache_dir': 'specdec_hf_cache_dir',
    'trtllm_container_container_hf_cache_dir': 'specdec_container_hf_cache_dir',
    'specdec_server_container_hf_cache_dir': 'specdec_container_hf_cache_dir',
    'trtllm_container_ssh_port': 'specdec_container_ssh_port',
    'ssh_mesh_container_port': 'specdec_container_ssh_port',
    'trtllm_container_ssh_host_key_dir': 'specdec_container_host_key_dir',
    'ssh_mesh_container_host_key_dir': 'specdec_container_host_key_dir',
    'trtllm_container_head_host': 'specdec_head_host',
    'specdec_server_head_host': 'specdec_head_host',
}

# Renamed options (issue 21): two facts shared by every role dropped the role prefix. Old name -> new name. Unlike a
# REMOVED name, the old one still works in 0.3.x: the settings action (sparkops.specdec.specdec_settings) takes its
# value under the new name, with a deprecation warning naming the new one; the old and the new name set to different
# values is an error. The role defaults of the new names read the old ones (roles/specdec_common/defaults/main/
# computed.yml), so the roles' YAML sees the new name before the settings action runs. An old name is no_log when its
# new name is (plugin_utils/_secret_options.py).
RENAMED = {
    'specdec_server_engine': 'specdec_engine',
    'specdec_server_api_key': 'specdec_api_key',
}
# The release that removes the old names of RENAMED (they become REMOVED names then).
RENAMED_REMOVAL = '0.4.0'

# What the roles, the playbooks and the actions publish (set_fact, register, ansible_facts): results, never settings,
# neither checked nor passed to the plan (a cached fact of an earlier run is no error either).
# tests/unit/test_settings_published.py keeps this list complete.
RESULTS = (
    'docker_group_become',
    'fleet_deploy',
    'netplan_qsfp_fabric',
    'preflight_plan',
    'preflight_result',
    'specdec_benchmark_result',
    'specdec_models_fetched',
    'specdec_models_found',
    'specdec_models_unresolved',
    'specdec_server_completion',
    'specdec_server_endpoint',
    'specdec_server_fabric_result',
    'specdec_server_firewall',
    'specdec_server_firewall_removal',
    'specdec_server_launch',
    'specdec_server_plan',
    'specdec_server_started_by_run',
    'specdec_server_state',
    'specdec_server_state_file',
    'specdec_server_tool_call',
    'specdec_settings',
    'ssh_mesh_identity',
    'teardown_result',
    'trtllm_container_image_info',
    'trtllm_container_mounts',
    'trtllm_container_previous',
    'trtllm_container_pulled',
    'trtllm_container_spec',
)
# The name under which sparkops.specdec.specdec_settings' result is registered on every host, for specdec_plan.
PUBLISHED = 'specdec_settings'

# Roles whose variables do not start with "<role>_": specdec_common's are facts every role reads; the options of
# specdec_firewall and specdec_models kept the specdec_server_ names they had before their tasks moved (issue 21).
ROLE_PREFIXES = {'specdec_common': 'specdec_', 'specdec_firewall': 'specdec_server_', 'specdec_models': 'specdec_server_'}

_GIB = 1024 ** 3

# Settings of the playbooks (not of a role), spec-like. Their bounds are in BOUNDS.
PLAYBOOK_SETTINGS = {
    'preflight_usable_memory_bytes': {'type': 'int', 'default': 119 * _GIB},
    'preflight_memory_reserve_bytes': {'type': 'int', 'default': 4 * _GIB},
    'preflight_disk_reserve_bytes': {'type': 'int', 'default': 10 * _GIB},
    'preflight_drop_caches': {'type': 'bool', 'default': False},
    'preflight_report_path': {'type': 'path', 'default': 'preflight-report.json'},
    'preflight_topology': {'type': 'str', 'default': 'two_sparks', 'choices': ['two_sparks', 'single_spark', 'spark_cluster']},
    'teardown_remove_models': {'type': 'bool', 'default': False},
    'teardown_remove_netplan': {'type': 'bool', 'default': False},
    'teardown_remove_state': {'type': 'bool', 'default': False},
    'teardown_remove_mesh': {'type': 'bool', 'default': False},
    'teardown_netplan_file': {'type': 'path', 'default': '/etc/netplan/40-cx7.yaml'},
    # teardown.yml: nothing is removed without confirm=yes (the word, not a boolean).
    'confirm': {'type': 'str', 'default': ''},
    # single_spark.yml and benchmark.yml: the host to serve on (default: the host of group spark_head).
    'single_spark_host': {'type': 'str', 'default': 'spark_head'},
    'diagnose_bundle_path': {'type': 'path', 'default': ''},
    'diagnose_log_lines': {'type': 'int', 'default': 200},
    # Values the support bundle removes: secrets (no_log, like a role option that holds one; docs/secrets.md).
    'diagnose_secrets': {'type': 'list', 'elements': 'str', 'default': [], 'no_log': True},
    'diagnose_hosts': {'type': 'str', 'default': 'spark_nodes'},
    'status_hosts': {'type': 'str', 'default': 'spark_nodes'},
    'status_report_path': {'type': 'path', 'default': 'specdec-status.json'},
    'status_http_timeout': {'type': 'int', 'default': 5},
    'status_require_serving': {'type': 'bool', 'default': False},
    'status_become': {'type': 'bool', 'default': False},
    'fleet_hosts': {'type': 'str', 'default': 'spark_nodes'},
    'fleet_deployments': {'type': 'list', 'elements': 'str', 'default': []},
    'fleet_parallel': {'type': 'int', 'default': 0},
    'fleet_max_failures': {'type': 'int', 'default': None},
    'fleet_log_dir': {'type': 'path', 'default': 'specdec-fleet-logs'},
    'fleet_report_path': {'type': 'path', 'default': 'specdec-fleet.json'},
}
# status_ is not listed: too common a word in other tools' variables to call every unknown status_* a typo.
_PLAYBOOK_PREFIXES = {'preflight_': 'README.md (Preflight)', 'teardown_': 'playbooks/teardown.yml',
                      'diagnose_': 'playbooks/diagnose.yml', 'fleet_': 'playbooks/fleet.yml',
                      'single_spark_': 'playbooks/single_spark.yml'}

# Variables of other tools never checked here, even when they look like one of ours (first word).
_FOREIGN_FIRST_WORDS = frozenset((
    'ansible', 'discovered', 'environment', 'group', 'groups', 'hostvars', 'inventory', 'lab', 'molecule',
    'omit', 'play', 'playbook', 'role', 'spark', 'vars',
))


# ---------------------------------------------------------------------------------------------
# Loading the specs
# ---------------------------------------------------------------------------------------------

def load_specs(collection_root: str) -> dict[str, dict]:
    """Role name -> the options of its ``main`` entry point, from roles/*/meta/argument_specs.yml."""
    import yaml  # PyYAML ships with ansible-core; imported here so the checks need the stdlib only

    specs = {}
    pattern = os.path.join(collection_root, 'roles', '*', 'meta', 'argument_specs.yml')
    for path in sorted(glob.glob(pattern)):
        role = os.path.basename(os.path.dirname(os.path.dirname(path)))
        with open(path, encoding='utf-8') as f:
            doc = yaml.safe_load(f) or {}
        main = ((doc.get('argument_specs') or {}).get('main') or {})
        specs[role] = dict(main.get('options') or {})
    return specs


def role_prefix(role: str) -> str:
    return ROLE_PREFIXES.get(role, role + '_')


def known_options(specs: dict) -> dict[str, dict]:
    """Every known setting -> its spec (the roles' options and PLAYBOOK_SETTINGS)."""
    options = dict(PLAYBOOK_SETTINGS)
    for role_options in specs.values():
        options.update(role_options)
    return options


def _prefixes(specs):
    """Known prefix (with its trailing "_") -> where its settings are documented."""
    prefixes = {role_prefix(role): 'roles/%s/README.md' % role for role in specs}
    prefixes.update(_PLAYBOOK_PREFIXES)
    return prefixes


# ---------------------------------------------------------------------------------------------
# Formatting
# ---------------------------------------------------------------------------------------------

_SECRET_STEMS = ('token', 'password', 'passwd', 'passphrase', 'secret', 'credential', 'key')
# A name ending in one of these words names ABOUT a secret (ssh_mesh_key_name, *_host_key_dir,
# specdec_server_tiktoken_files), not the secret itself.
_NOT_SECRET_LAST_WORDS = frozenset((
    'dir', 'file', 'files', 'id', 'length', 'name', 'names', 'path', 'size', 'type', 'url',
))


def looks_secret(name: str) -> bool:
    """Whether a setting's value must never be shown.

    Secret if a word of the name contains token, password, passwd, passphrase, secret, credential
    or key (substring: hftoken, apikey), unless the last word says the value only names or locates
    the secret (ssh_mesh_key_name, specdec_container_host_key_dir, specdec_server_tiktoken_files)
    or the word is "tokens", a count (specdec_server_max_num_tokens).
    """
    words = [w for w in name.lower().split('_') if w]
    if not words or words[-1] in _NOT_SECRET_LAST_WORDS:
        return False
    return any(stem in word for word in words if word != 'tokens' for stem in _SECRET_STEMS)


def _fmt(value, limit=60):
    """A value on one line (JSON, ASCII), shortened."""
    try:
        text = json.dumps(value, ensure_ascii=True, sort_keys=True, default=str)
    except (TypeError, ValueError):
        text = json.dumps(str(value), ensure_ascii=True)
    if len(text) > limit:
        text = text[:limit - 3] + '...'
    return text


def _secret(name, spec=None):
    """Whether a setting's value must never be shown: its name looks secret, or its spec declares no_log (a role
    option or playbook setting marked a secret by its description; docs/secrets.md)."""
    return looks_secret(name) or (spec or {}).get('no_log') is True


def _shown(name, value, spec=None):
    return 'the value (hidden)' if _secret(name, spec) else _fmt(value)


def _kind(value):
    if value is None:
        return 'null'
    if isinstance(value, bool):
        return 'a boolean'
    if isinstance(value, (int, float)):
        return 'a number'
    if isinstance(value, str):
        return 'a string'
    if isinstance(value, dict):
        return 'a mapping'
    if isinstance(value, (list, tuple)):
        return 'a list'
    return 'a %s' % type(value).__name__


def _one_line(text):
    return ' '.join(text.splitlines())


def _closest(word, candidates, cutoff=0.6):
    match = difflib.get_close_matches(word, sorted(candidates), n=1, cutoff=cutoff)
    return match[0] if match else None


def levenshtein(a: str, b: str) -> int:
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


# ---------------------------------------------------------------------------------------------
# Types (argument spec), with the coercion of ansible.builtin.validate_argument_spec
# ---------------------------------------------------------------------------------------------

_TRUE = frozenset(('y', 'yes', 'on', '1', 'true', 't'))
_FALSE = frozenset(('n', 'no', 'off', '0', 'false', 'f'))


class _Invalid(Exception):
    """A value that does not have the spec's type; the message is the part after "name: "."""


def _to_int(value):
    # Ansible also takes booleans (an int subclass); True for a port or a count is always a
    # mistake, so it is refused here.
    if isinstance(value, bool):
        raise _Invalid('is a boolean')
    if isinstance(value, int):
        return value
    if isinstance(value, (float, str)):
        try:
            number = decimal.Decimal(value.strip() if isinstance(value, str) else value)
        except (decimal.DecimalException, ValueError):
            raise _Invalid('is not a whole number') from None
        if number.is_finite() and number == int(number):
            return int(number)
    raise _Invalid('is not a whole number')


def _to_float(value):
    if isinstance(value, bool):
        raise _Invalid('is a boolean')
    if isinstance(value, (int, float, str)):
        try:
            number = float(value)
        except ValueError:
            raise _Invalid('is not a number') from None
        if math.isfinite(number):
            return number
    raise _Invalid('is not a number')


def _to_bool(value):
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
    elif isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    raise _Invalid('is not a boolean')


def _to_str(value):
    if isinstance(value, str):
        return value
    # Ansible converts any scalar; a YAML boolean (yes/no/on/off unquoted) for a text setting is
    # almost always a quoting mistake, so it is refused here.
    if isinstance(value, bool):
        raise _Invalid('is a boolean, not text')
    if isinstance(value, (int, float)):
        return str(value)
    raise _Invalid('is %s, not text' % _kind(value))


def _to_list(value):
    # Ansible splits a string on commas; the roles use the variable itself, not the converted
    # value, and would iterate over the characters of a string, so a string is refused here.
    if isinstance(value, (list, tuple)):
        return list(value)
    raise _Invalid('is %s, not a list' % _kind(value))


def _to_dict(value):
    # Ansible parses "k=v" strings; refused for the same reason as lists.
    if isinstance(value, dict):
        return value
    raise _Invalid('is %s, not a mapping' % _kind(value))


_CONVERTERS = {
    'int': _to_int,
    'float': _to_float,
    'bool': _to_bool,
    'str': _to_str,
    'path': _to_str,
    'list': _to_list,
    'dict': _to_dict,
}

_TYPE_FIX = {
    'int': 'set a whole number',
    'float': 'set a number',
    'bool': 'set true or false',
    'str': 'set a quoted string',
    'path': 'set a path',
    'list': 'write a YAML list',
    'dict': 'write a YAML mapping, e.g. {NAME: value}',
}


def _type_fix(name, spec, value):
    kind = spec.get('type', 'str')
    hint = BOUNDS.get(name)
    if hint is not None and getattr(hint, 'range_hint', None) and kind in ('int', 'float'):
        return hint.range_hint
    if kind == 'list':
        default = spec.get('default')
        if isinstance(default, list) and default:
            return 'write a YAML list like the default %s' % _fmt(default, 80)
        if isinstance(value, (str, int, float)) and not isinstance(value, bool) and not _secret(name, spec):
            return 'write a YAML list, e.g. %s' % _fmt([value])
        return 'write a YAML list, e.g. ["item"]'
    if kind in ('str', 'path') and isinstance(value, bool):
        choices = ' (%s)' % ', '.join(str(c) for c in spec['choices']) if spec.get('choices') else ''
        return 'quote the text you mean%s: YAML reads unquoted yes, no, true, false, on and off as booleans' % choices
    return _TYPE_FIX.get(kind, 'set a value of type %s' % kind)


# An example of a value of each type, for a setting whose default makes no example (none, empty, secret, templated).
_EXAMPLES = {'int': '8', 'float': '0.5', 'bool': 'true', 'str': '"text"', 'path': '/path/on/the/node',
             'list': '["item"]', 'dict': '{NAME: value}'}


# Examples of settings that declare no default (the preset or the deployment decides): a value the runbooks use.
_NO_DEFAULT_EXAMPLES = {'specdec_server_port': 8355, 'specdec_server_max_draft_len': 3, 'specdec_server_tp_size': 2,
                        'specdec_server_max_batch_size': 1, 'specdec_server_max_num_tokens': 1024,
                        'specdec_server_ctx_size': 4096, 'specdec_server_threads': 8,
                        'specdec_server_kv_cache_free_gpu_memory_fraction': 0.9, 'fleet_max_failures': 1,
                        'specdec_benchmark_restart_seconds': 900}


def _example(name, spec):
    """An example value of the setting: its default when that is one, else one of its type."""
    kind = spec.get('type', 'str')
    default = spec.get('default')
    if default is None:
        default = _NO_DEFAULT_EXAMPLES.get(name)
    if default not in (None, '', [], {}) and not _secret(name, spec) and not _templated(default):
        return _fmt(default, 60)
    if kind == 'list' and spec.get('elements') in _EXAMPLES:
        return '[%s]' % _EXAMPLES[spec['elements']]
    return _EXAMPLES.get(kind, '"text"')


def _with_example(name, spec, fix):
    return fix if 'e.g.' in fix else '%s, e.g. %s' % (fix, _example(name, spec))


# Settings of type str with the choices auto, true and false that keep accepting a YAML boolean (they were booleans):
# true/false become 'true'/'false', as Ansible's own argument validation turns them.
AUTO_OR_BOOL = ('specdec_server_peer_copy', 'trtllm_container_image_peer_copy')


def _check_type(name, spec, value):
    """(coerced value, None) or (None, message)."""
    if name in AUTO_OR_BOOL and isinstance(value, bool):
        value = 'true' if value else 'false'
    elif name in AUTO_OR_BOOL and isinstance(value, str) and value.strip().lower() in ('auto', 'true', 'false'):
        value = value.strip().lower()
    shown = _shown(name, value, spec)
    kind = spec.get('type', 'str')
    if value is None:
        if spec.get('default') is None:
            return None, None
        default = '' if _secret(name, spec) else ' ' + _fmt(spec['default'])
        return None, '%s: is null (an empty value in YAML); %s, or delete the line to use the default%s.' % (
            name, _with_example(name, spec, _type_fix(name, spec, value)), default)
    convert = _CONVERTERS.get(kind)
    if convert is None:  # raw, jsonarg, bytes...: not used by the roles; nothing to check
        return value, None
    try:
        coerced = convert(value)
    except _Invalid as e:
        return None, '%s: %s %s; %s.' % (name, shown, e, _with_example(name, spec, _type_fix(name, spec, value)))
    if kind == 'list' and spec.get('elements'):
        items = []
        for index, item in enumerate(coerced, 1):
            try:
                if item is None:
                    raise _Invalid('is null')
                items.append(_CONVERTERS.get(spec['elements'], lambda v: v)(item))
            except _Invalid as e:
                return None, '%s: item %d (%s) %s; every item of the list must be %s, e.g. %s.' % (
                    name, index, _shown(name, item, spec), e, _ARTICLE_TYPES.get(spec['elements'], spec['elements']),
                    _example(name, spec))
        coerced = items
    choices = spec.get('choices')
    if choices:
        textual = kind in ('str', 'path') or spec.get('elements') in ('str', 'path')
        allowed = [str(c) if textual else c for c in choices]
        # A list's choices apply to each item (as in Ansible).
        for item in (coerced if kind == 'list' else [coerced]):
            if item not in allowed:
                listed = ', '.join(str(c) for c in choices)
                guess = _closest(str(item), [str(c) for c in choices], cutoff=0.5)
                fix = 'did you mean %s?' % guess if guess else 'set one of them.'
                what = shown if kind != 'list' else 'item %s' % _shown(name, item, spec)
                return None, '%s: %s is not one of %s; %s' % (name, what, listed, fix)
    return coerced, None


_ARTICLE_TYPES = {'str': 'a string', 'int': 'a whole number', 'float': 'a number', 'bool': 'true or false',
                  'dict': 'a mapping', 'list': 'a list', 'path': 'a path'}


# ---------------------------------------------------------------------------------------------
# Bounds and shapes: one checker per option (BOUNDS). A checker gets the coerced value and the
# way to show it, and returns the problems, each the text after "name: ".
# ---------------------------------------------------------------------------------------------

class _Check:
    """A bound or shape rule: ``fn(value, shown) -> list of problems``."""

    def __init__(self, fn, range_hint=None):
        self.fn = fn
        self.range_hint = range_hint

    def __call__(self, value, shown):
        return self.fn(value, shown)


def _int_range(low, high=None, note=''):
    note = ' (%s)' % note if note else ''
    if high is None:
        fix = 'set an integer of at least %d%s' % (low, note)
    else:
        fix = 'set an integer from %d to %d%s' % (low, high, note)

    def check(value, shown):
        if value < low or (high is not None and value > high):
            return ['%s is out of range; %s.' % (shown, fix)]
        return []
    return _Check(check, fix)


def _fraction(example):
    fix = 'set a fraction above 0 and at most 1, e.g. %s' % example

    def check(value, shown):
        return [] if 0 < value <= 1 else ['%s is out of range; %s.' % (shown, fix)]
    return _Check(check, fix)


def _pattern(regex, what, example, empty_ok=False):
    compiled = re.compile(regex)

    def check(value, shown):
        if value == '' and empty_ok:
            return []
        if value == '':
            return ['is empty; set %s, e.g. %s.' % (what, example)]
        return [] if compiled.fullmatch(value) else ['%s is not %s; use e.g. %s.' % (shown, what, example)]
    return _Check(check)


def _each(check_one):
    """A list rule from an item rule; one problem per bad item."""
    def check(value, shown):
        problems = []
        for index, item in enumerate(value, 1):
            for problem in check_one(item, _fmt(item)):
                problems.append('item %d of the list: %s' % (index, problem))
        return problems
    return _Check(check)


def _one_of(*allowed):
    def check(value, shown):
        if value in allowed:
            return []
        guess = _closest(value, allowed, cutoff=0.5)
        fix = 'did you mean %s?' % guess if guess else 'set one of them.'
        return ['%s is not one of %s; %s' % (shown, ', '.join(allowed), fix)]
    return _Check(check)


def _abs_path(example, empty_ok=False, empty_means=''):
    def check(value, shown):
        if value == '':
            if empty_ok:
                return []
            return ['is empty; set an absolute path, e.g. %s.' % example]
        if not value.startswith('/'):
            tilde = ' (~ is not expanded here)' if value.startswith('~') else ''
            alt = ', or "" for %s' % empty_means if empty_ok and empty_means else ''
            return ['%s is not an absolute path%s; set a path starting with /, e.g. %s%s.' % (shown, tilde, example, alt)]
        if '\n' in value or '\x00' in value:
            return ['%s contains a line break; set a single path, e.g. %s.' % (shown, example)]
        return []
    return _Check(check)


# User and group names as shadow-utils accepts them by default (docker_group's validate.yml).
_USER_RE = r'[a-z_][a-z0-9_.-]{0,31}'
_GROUP_RE = r'[a-z_][a-z0-9_-]{0,31}'


def _user_name(empty_ok=False):
    rule = _pattern(_USER_RE, 'a user name (lower case letters, digits, _ . -; at most 32)', 'nvidia', empty_ok)
    return rule


# Hugging Face repo ids as huggingface_hub.utils.validate_repo_id accepts them, with the org:
# word characters, "-" and "."; starting and ending with a word character; no "--" or "..";
# not ending in .git; at most 96 characters.
_HF_PART = r'[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?'
_HF_ID_RE = re.compile(r'%s/%s' % (_HF_PART, _HF_PART))


def _hf_repo_id(example):
    def check(value, shown):
        fix = 'set a Hugging Face model id ORG/NAME, e.g. %s' % example
        if value == '':
            return ['is empty; %s, or delete the line to use the preset\'s.' % fix]
        if (not _HF_ID_RE.fullmatch(value) or '--' in value or '..' in value or value.endswith('.git')
                or len(value) > 96):
            return ['%s is not a Hugging Face model id; %s (letters, digits, _ . -, no spaces).' % (shown, fix)]
        return []
    return _Check(check)


def _gguf_file(example):
    def check(value, shown):
        fix = 'set the file name of a GGUF file within the repo, e.g. %s' % example
        if value == '':
            return ['is empty; %s, or delete the line to use the preset\'s.' % fix]
        parts = value.split('/')
        if (not re.fullmatch(r'[A-Za-z0-9._/+-]+', value) or value.startswith('/') or '..' in parts or '.' in parts
                or '' in parts or not value.lower().endswith('.gguf')):
            return ['%s is not a GGUF file in a repo; %s (a path relative to the repo ending in .gguf).' % (shown, fix)]
        return []
    return _Check(check)


def _revision(value, shown):
    if value == '' or re.search(r'\s', value):
        return ['%s is not a revision; set a branch, tag or commit without spaces, e.g. main.' % shown]
    return []


def _url(schemes, example, empty_ok=False, empty_means=''):
    prefixes = tuple(s + '://' for s in schemes)

    def check(value, shown):
        if value == '' and empty_ok:
            return []
        if not value.startswith(prefixes) or len(value) <= len(value.split('://', 1)[0]) + 3 or re.search(r'\s', value):
            alt = ', or "" for %s' % empty_means if empty_ok and empty_means else ''
            return ['%s is not a %s URL; set e.g. %s%s.' % (
                shown, ' or '.join(s + '://' for s in schemes), example, alt)]
        return []
    return _Check(check)


_SHELL_NAME_RE = re.compile(r'[A-Za-z_][A-Za-z0-9_]*')


def _env_dict(value, shown):
    problems = []
    for key in sorted(value, key=str):
        item = value[key]
        if not isinstance(key, str) or not _SHELL_NAME_RE.fullmatch(key):
            problems.append('key %s is not an environment variable name; use letters, digits and _, not starting '
                            'with a digit, e.g. NCCL_DEBUG.' % _fmt(key))
        elif isinstance(item, (dict, list, tuple)) or item is None:
            problems.append('%s is %s; give every variable a single value (a string or a number).' % (
                key, _kind(item)))
    return problems


# docker run --ulimit NAME=SOFT[:HARD]; Docker's names (go-units ulimit.go). -1 = unlimited.
_ULIMIT_NAMES = frozenset(('core', 'cpu', 'data', 'fsize', 'locks', 'memlock', 'msgqueue', 'nice', 'nofile',
                           'nproc', 'rss', 'rtprio', 'rttime', 'sigpending', 'stack'))
_ULIMIT_RE = re.compile(r'([a-z]+):(-?[0-9]+):(-?[0-9]+)')


def _ulimits(value, shown):
    problems = []
    for index, item in enumerate(value, 1):
        match = _ULIMIT_RE.fullmatch(item)
        if not match:
            problems.append('item %d (%s) is not NAME:SOFT:HARD; write it like memlock:-1:-1 (-1 is unlimited).' % (
                index, _fmt(item)))
            continue
        limit, soft, hard = match.group(1), int(match.group(2)), int(match.group(3))
        if limit not in _ULIMIT_NAMES:
            guess = _closest(limit, _ULIMIT_NAMES, cutoff=0.5)
            problems.append('item %d (%s): %s is not a ulimit Docker knows; %s' % (
                index, _fmt(item), limit, 'did you mean %s?' % guess if guess else
                'use one of %s.' % ', '.join(sorted(_ULIMIT_NAMES))))
        elif soft < -1 or hard < -1 or (hard != -1 and (soft == -1 or soft > hard)):
            problems.append('item %d (%s): the soft limit must be at most the hard limit (-1 is unlimited); '
                            'e.g. %s:%s:%s.' % (index, _fmt(item), limit, hard, hard))
    return problems


# distribution/reference grammar (what `docker pull` accepts): repository path in lower case.
_DOMAIN = r'(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)(?:\.(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?))*(?::[0-9]+)?'
_PATH_COMPONENT = r'[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*'
_IMAGE_RE = re.compile(r'(?:%s/)?%s(?:/%s)*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@[a-z0-9]+(?:[+._-][a-z0-9]+)*:[0-9a-fA-F]{32,})?'
                       % (_DOMAIN, _PATH_COMPONENT, _PATH_COMPONENT))


def _image_ref(value, shown):
    # A digest (after @) is checked first: sha256 and 64 lower-case hex digits (module_utils/_container.py).
    if '@' in value and value.partition('@')[0]:
        problem = _container.digest_problem(value.partition('@')[2])
        if problem:
            return ['%s is not a valid reference pinned by digest: %s; copy the whole digest from the registry or from '
                    'RepoDigests of docker image inspect, e.g. nvcr.io/nvidia/tensorrt-llm/release@sha256:<64 hex '
                    'digits>.' % (shown, problem)]
    if not _IMAGE_RE.fullmatch(value):
        return ['%s is not an image reference Docker accepts; use REGISTRY/REPOSITORY:TAG with the repository in '
                'lower case, e.g. nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc12.' % shown]
    return []


def _ipc_mode(value, shown):
    if value in ('', 'host', 'private', 'shareable', 'none') or re.fullmatch(r'container:[a-zA-Z0-9][a-zA-Z0-9_.-]+', value):
        return []
    return ['%s is not a Docker IPC mode; set host (the runbook), private, shareable, none or container:NAME.' % shown]


def _shm_size(value, shown):
    # Docker's RAMInBytes: a number, an optional unit k/m/g/t/p, optional i and b.
    if value == '' or re.fullmatch(r'[0-9]+(?:\.[0-9]+)? ?[kKmMgGtTpP]?[iI]?[bB]?', value):
        return []
    return ['%s is not a size; set e.g. 16g, or "" for Docker\'s default.' % shown]


# Linux interface names as net/core/dev.c dev_valid_name() takes them: 1-15 bytes, no "/", ":" or white space, not
# "." or ".." (plugin_utils/_text.py).
def _ifname(value, shown):
    why = _text.ifname_problem(value)
    return ['%s is not a network interface name (it %s); use e.g. enp1s0f1np1.' % (shown, why)] if why else []


def _roce_device(value, shown):
    if re.fullmatch(r'[A-Za-z0-9_.-]+(?::[0-9]+)?', value):
        return []
    return ['%s is not an RDMA device name (NCCL_IB_HCA); use e.g. rocep1s0f1 or rocep1s0f1:1.' % shown]


_HOSTNAME_RE = re.compile(r'(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*')


def _is_ip(value):
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


def _ip_address(value, shown):
    if _is_ip(value):
        return []
    return ['%s is not an IP address; set the address peers use, e.g. 192.168.100.10.' % shown]


def _mesh_address(value, shown):
    """ssh_mesh_addresses: an IP address, or one with its prefix length (netplan_qsfp_fabric.addresses)."""
    address, _sep, prefix = str(value).partition('/')
    if _is_ip(address) and (not _sep or (prefix.isdigit() and int(prefix) <= (32 if '.' in address else 128))):
        return []
    return ['%s is not an IP address; set the address peers use, e.g. 192.168.100.10 (or 192.168.100.10/24: peers are '
            'then verified on the addresses in its subnets).' % shown]


def _host_address(value, shown):
    if _is_ip(value) or _HOSTNAME_RE.fullmatch(value):
        return []
    return ['%s is not an IP address or host name; set e.g. 192.168.100.10.' % shown]


def _bind_address(value, shown):
    if _is_ip(value) or _HOSTNAME_RE.fullmatch(value):
        return []
    return ['%s is not an address to bind; set e.g. loopback, management (the address Ansible reaches the head at), an '
            'address of the node, or 0.0.0.0 (every interface).' % shown]


def _client_network(value, shown):
    problem = _firewall.network_problem(value, shown)
    return [problem] if problem else []


def _file_name(example):
    def check(value, shown):
        if re.fullmatch(r'[A-Za-z0-9_.-]+', value) and not value.startswith('.'):
            return []
        return ['%s is not a plain file name; use letters, digits, _ . - only, not starting with a dot, e.g. %s.' % (
            shown, example)]
    return _Check(check)


def _bench_point(value, shown):
    text = str(value).strip().lower()
    if text == 'none' or value is None:
        return []
    if isinstance(value, bool) or not re.fullmatch(r'[0-9]+', text) or not 1 <= int(text) <= 32:
        return ['%s is not a point; use none or a draft length from 1 to 32.' % shown]
    return []


def _bench_int(low, high, what):
    def check(value, shown):
        if isinstance(value, bool) or not re.fullmatch(r'[0-9]+', str(value).strip()) or not low <= int(value) <= high:
            return ['%s is not a number of %s; use an integer from %d to %d.' % (shown, what, low, high)]
        return []
    return check


def _positive_seconds(value, shown):
    return [] if value is None or value > 0 else ['%s is out of range; set seconds above 0, or null for the '
                                                  'engine\'s estimate.' % shown]


def _share(value, shown):
    return [] if 0 <= value <= 1 else ['%s is out of range; set a fraction from 0 to 1, e.g. 0.25.' % shown]


def _nats(value, shown):
    return [] if 0 <= value <= 5 else ['%s is out of range; set a log-probability margin in nats from 0 (off) to 5, e.g. 0.25.'
                                       % shown]


def _bench_objective(value, shown):
    known = ('concurrency', 'prompt_set', 'ttft_p90_max', 'itl_p90_max')
    problems = ['key %s is unknown; use %s.' % (k, ', '.join(known)) for k in value if k not in known]
    if 'concurrency' not in value:
        problems.append('has no concurrency; set the concurrency level the tuner optimises, e.g. {concurrency: 1}.')
    for key in ('ttft_p90_max', 'itl_p90_max'):
        bound = value.get(key)
        if bound is not None and (isinstance(bound, bool) or not isinstance(bound, (int, float)) or bound <= 0):
            problems.append('%s %s is not seconds; set a number above 0, or null for no bound.' % (key, _fmt(bound)))
    return problems


def _inventory_group(value, shown):
    # Ansible's valid group names (TRANSFORM_INVALID_GROUP_CHARS).
    if re.fullmatch(r'[A-Za-z_][A-Za-z0-9_]*', value):
        return []
    return ['%s is not an inventory group name; use letters, digits and _, e.g. spark_nodes.' % shown]


def _inventory_host(value, shown):
    if value and not re.search(r'[\s,]', value):
        return []
    return ['%s is not an inventory host name; set the name of the head host in the inventory, e.g. spark-1.' % shown]


def _node_names(example):
    """A list of inventory host names: each a name (no blank, no comma), none twice."""
    def check(value, shown):
        problems = []
        for index, item in enumerate(value, 1):
            if not isinstance(item, str) or not item or re.search(r'[\s,]', item):
                problems.append('item %d of the list: %s is not an inventory host name; list the inventory names of the '
                                'nodes, e.g. %s.' % (index, _fmt(item), example))
        twice = sorted({str(item) for item in value if value.count(item) > 1})
        if twice:
            problems.append('lists %s more than once; list each node once.' % ', '.join(twice))
        return problems
    return _Check(check)


def _trtllm_version(value, shown):
    if value == '' or re.fullmatch(r'[0-9]+(?:\.[0-9]+){1,3}(?:(?:a|b|rc|\.post|\.dev)[0-9]+)*(?:\+[A-Za-z0-9.]+)?', value):
        return []
    return ['%s is not a TensorRT-LLM version; set e.g. 1.3.0rc12, or "" to read it from the image.' % shown]


def _deployment_id(value, shown):
    # Normally found first, with the host (_HOST_NAMED): the same rule, plugin_utils/_fleet.py's.
    line = _fleet.id_problem(None, value)
    return [line.split(': ', 1)[1]] if line else []


def _deployment_id_on(host, value):
    """specdec_deployment_id's line as the fleet grouping gives it (plugin_utils/_fleet.py), for a scalar: YAML's
    implicit types named ("quote it"), a string that is not a plain file name; other types take the type check."""
    if isinstance(value, (str, int, float, datetime.date)):
        return _fleet.id_problem(host, value)
    return None


# Settings whose problems name the host ("name on HOST: problem; fix"), checked before their type.
_HOST_NAMED = {'specdec_deployment_id': _deployment_id_on}


def _hf_hub_requirement(value, shown):
    # An exact pin: the controller fetches (and caches) the wheels of that version once and ships them to the nodes.
    if re.match(r'^\s*huggingface[-_.]hub\s*==\s*[0-9][0-9A-Za-z.+!-]*\s*$', value, re.IGNORECASE):
        return []
    return ['%s is not an exact pin of huggingface_hub; set e.g. "huggingface_hub==2.4.0" (the controller ships the '
            'wheels of exactly that version to the nodes).' % shown]


# Flags the role puts on the trtllm-serve command line itself (tasks/validate.yml of specdec_server).
_ROLE_FLAGS = {
    '--tp_size': 'specdec_server_tp_size', '--tensor_parallel_size': 'specdec_server_tp_size',
    '--pp_size': 'specdec_server_pp_size', '--pipeline_parallel_size': 'specdec_server_pp_size',
    '--port': 'specdec_server_port', '--host': 'specdec_server_host', '--backend': None,
    '--extra_llm_api_options': 'specdec_server_llm_api_options', '--config': 'specdec_server_llm_api_options',
}


def _extra_args(value, shown):
    problems = []
    for index, item in enumerate(value, 1):
        flag = item.split('=', 1)[0]
        if flag in _ROLE_FLAGS:
            setting = _ROLE_FLAGS[flag]
            fix = 'set %s instead' % setting if setting else 'the role sets it'
            problems.append('item %d (%s) repeats a flag the role sets; remove it (%s).' % (index, _fmt(item), fix))
    return problems


def _non_empty(what):
    def check(value, shown):
        return [] if value.strip() else ['is empty; set %s.' % what]
    return _Check(check)


def _netplan_file(value, shown):
    if re.fullmatch(r'/etc/netplan/[^/\s]+\.yaml', value):
        return []
    return ['%s is not a netplan file; set a file directly under /etc/netplan ending in .yaml, '
            'e.g. /etc/netplan/40-cx7.yaml.' % shown]


def _container_name(value, shown):
    # Docker's validContainerNamePattern: ^/?[a-zA-Z0-9][a-zA-Z0-9_.-]+$ (at least two characters).
    if re.fullmatch(r'[a-zA-Z0-9][a-zA-Z0-9_.-]+', value):
        return []
    return ['%s is not a Docker container name; use letters, digits, _ . - (at least two, starting with a letter '
            'or digit), e.g. trtllm-multinode.' % shown]


# ---- IPv4 fabric -----------------------------------------------------------------------------

def _ipv4_network(text):
    """(network, None) or (None, problem text after the value)."""
    if not isinstance(text, str) or '/' not in text:
        try:
            ipaddress.IPv4Address(text)
        except (ipaddress.AddressValueError, ValueError):
            return None, 'is not an IPv4 network; write it as ADDRESS/PREFIX, e.g. 192.168.100.0/24.'
        return None, 'has no prefix length; write it as ADDRESS/PREFIX, e.g. %s/24.' % text
    try:
        interface = ipaddress.IPv4Interface(text)
    except (ipaddress.AddressValueError, ipaddress.NetmaskValueError, ValueError):
        return None, 'is not an IPv4 network; write it as ADDRESS/PREFIX, e.g. 192.168.100.0/24.'
    network = interface.network
    if interface.ip != network.network_address:
        return None, 'has host bits set; did you mean %s?' % network
    if network.prefixlen > 30:
        return None, 'has room for fewer than two hosts; use a prefix of 30 or shorter, e.g. %s/24.' % (
            ipaddress.IPv4Network('%s/24' % network.network_address, strict=False).network_address)
    return network, None


def _subnet_list(value):
    """Parse a list of IPv4 networks: (one problem line per bad item, the overlapping pairs of the good ones)."""
    problems, networks = [], []
    for item in value:
        network, problem = _ipv4_network(item)
        if problem:
            problems.append('%s %s' % (_fmt(item), problem))
        else:
            networks.append(network)
    overlaps = [(one, two) for index, one in enumerate(networks) for two in networks[index + 1:] if one.overlaps(two)]
    return problems, overlaps


def _link_subnets(value, shown):
    if len(value) != 2:
        return ['has %d subnet%s; set exactly two, one per logical link, e.g. ["192.168.100.0/24", '
                '"192.168.101.0/24"].' % (len(value), '' if len(value) == 1 else 's')]
    problems, overlaps = _subnet_list(value)
    if overlaps:
        problems.append('%s and %s overlap; the two logical links need separate subnets, e.g. 192.168.100.0/24 and '
                        '192.168.101.0/24 (for one subnet on both links set netplan_qsfp_scheme: single_subnet).'
                        % overlaps[0])
    return problems


def _single_subnet(value, shown):
    network, problem = _ipv4_network(value)
    return ['%s %s' % (shown, problem)] if problem else []


def _ring_subnets(value, shown):
    # specdec_layout ring: two per cable; three Sparks need six, four need eight (the plan checks the count it uses).
    if len(value) < 6:
        return ['has %d subnet%s; a ring of three Sparks needs six (two per cable), e.g. 192.168.0.0/24 to '
                '192.168.5.0/24.' % (len(value), '' if len(value) == 1 else 's')]
    problems, overlaps = _subnet_list(value)
    if overlaps:
        problems.append('%s overlap; each logical link of each cable needs its own subnet.'
                        % '; '.join('%s and %s' % pair for pair in overlaps))
    return problems


def _fabric_addresses(value, shown):
    # Two (direct, switch: one per logical link) or four (ring: every logical interface; the plan checks the layout).
    if len(value) not in (0, 2, 4):
        return ['has %d address%s; set [] to use the scheme, or two, one per logical link, e.g. '
                '["192.168.100.10/24", "192.168.101.10/24"] (four on a ring).'
                % (len(value), '' if len(value) == 1 else 'es')]
    problems = []
    for item in value:
        if '/' not in item:
            fix = ('write it with its prefix, e.g. %s/24' % item) if _is_ipv4(item) else \
                'write ADDRESS/PREFIX, e.g. 192.168.100.10/24'
            problems.append('%s has no prefix length; %s.' % (_fmt(item), fix))
            continue
        try:
            interface = ipaddress.IPv4Interface(item)
        except (ipaddress.AddressValueError, ipaddress.NetmaskValueError, ValueError):
            problems.append('%s is not an IPv4 address with prefix; write ADDRESS/PREFIX, e.g. 192.168.100.10/24.'
                            % _fmt(item))
            continue
        network = interface.network
        if network.prefixlen < 31 and interface.ip in (network.network_address, network.broadcast_address):
            problems.append('%s is the %s address of %s, not a host address; use e.g. %s/%d.' % (
                _fmt(item), 'network' if interface.ip == network.network_address else 'broadcast', network,
                network.network_address + 10, network.prefixlen))
    ips = [item.split('/')[0] for item in value]
    twice = sorted({ip for ip in ips if ips.count(ip) > 1})
    if not problems and twice:
        problems.append('gives %s to %s links; each logical link needs its own address.'
                        % (twice[0], 'both' if len(value) == 2 else 'several'))
    return problems


def _is_ipv4(text):
    try:
        ipaddress.IPv4Address(text)
    except (ipaddress.AddressValueError, ValueError):
        return False
    return True


# ---------------------------------------------------------------------------------------------
# The table: option -> bound or shape, with the reason of each bound.
# ---------------------------------------------------------------------------------------------

_PORT = _int_range(1, 65535)  # TCP ports

BOUNDS = {
    # --- docker_group ---
    # usermod -aG takes shadow-utils names; a typo adds nobody and `docker ps` fails later.
    'docker_group_users': _each(_user_name()),
    'docker_group_name': _pattern(_GROUP_RE, 'a group name (lower case letters, digits, _ -)', 'docker'),

    # --- netplan_qsfp ---
    'netplan_qsfp_group': _Check(_inventory_group),
    # Inventory names in index order (the index picks the addresses): names, each once.
    'netplan_qsfp_nodes': _node_names('[spark-1, spark-2]'),
    # Two IPv4 networks without host bits (netplan and the peer ping compute host addresses from
    # them), one per logical link, not overlapping (one subnet on both links confuses routing and NCCL).
    'netplan_qsfp_link_subnets': _Check(_link_subnets),
    # Host part = offset + node index: 0 is the network address; the fit in the subnet is checked
    # with the subnets (_cross_fabric). 253 = the last offset a /24 leaves room for with two nodes.
    'netplan_qsfp_host_offset': _int_range(1, 253, 'the runbook uses 10'),
    'netplan_qsfp_single_subnet': _Check(_single_subnet),
    # single_subnet: link 2 gets offset + node count + index, so a /24 leaves room up to 251.
    'netplan_qsfp_single_host_offset': _int_range(1, 251, 'the runbook uses 12'),
    'netplan_qsfp_addresses': _Check(_fabric_addresses),
    'netplan_qsfp_ring_subnets': _Check(_ring_subnets),
    # Host part = offset + node index (up to four nodes on a switch): 250 leaves room in a /24.
    'netplan_qsfp_switch_host_offset': _int_range(1, 250, "NVIDIA's switch runbook uses 1"),
    # The role owns one file netplan reads: /etc/netplan/*.yaml (netplan ignores other names).
    'netplan_qsfp_file': _Check(_netplan_file),
    'netplan_qsfp_ibdev2netdev_path': _abs_path('/usr/sbin/ibdev2netdev', empty_ok=True,
                                                empty_means='a lookup on PATH'),

    # --- ssh_mesh ---
    'ssh_mesh_group': _Check(_inventory_group),
    'ssh_mesh_hosts': _node_names('[spark-1, spark-2]'),
    'ssh_mesh_user': _user_name(empty_ok=True),
    # Written to known_hosts and tested with ssh: addresses, not names (the fabric has no DNS).
    'ssh_mesh_addresses': _each(_mesh_address),
    # A file name in ~/.ssh: no path, no leading dot (no ../ traversal, no hidden file).
    'ssh_mesh_key_name': _file_name('id_ed25519_sparkops'),

    # --- trtllm_container ---
    'trtllm_container_image': _Check(_image_ref),
    # docker load reads it on the node: an absolute path ("" when the source is pull).
    'trtllm_container_image_archive': _abs_path('/srv/images/tensorrt-llm-release-1.3.0rc12.tar', empty_ok=True,
                                                empty_means='pulling the image'),
    'trtllm_container_infiniband_device': _abs_path('/dev/infiniband', empty_ok=True, empty_means='no RDMA device'),
    # docker run --ulimit NAME=SOFT:HARD with Docker's names; soft <= hard (-1 unlimited).
    'trtllm_container_ulimits': _Check(_ulimits),
    'trtllm_container_ipc_mode': _Check(_ipc_mode),
    'trtllm_container_shm_size': _Check(_shm_size),
    # NCCL_SOCKET_IFNAME / UCX_NET_DEVICES / OMPI_MCA_btl_tcp_if_include take interface names.
    'trtllm_container_fabric_interfaces': _each(_ifname),
    'trtllm_container_nccl_ib_hca': _each(_roce_device),
    'trtllm_container_hostfile_hosts': _each(_host_address),
    # sshd ListenAddress: addresses of this node, not names.
    'trtllm_container_sshd_listen_addresses': _each(_ip_address),
    'trtllm_container_sshd_image': _Check(lambda value, shown: [] if value == '' else _image_ref(value, shown)),
    # Exported to the container: keys must be shell variable names.
    'trtllm_container_cuda_env': _Check(_env_dict),
    'trtllm_container_env': _Check(_env_dict),
    'trtllm_container_start_timeout': _int_range(1, note='seconds'),
    'trtllm_container_image_peer_copy_timeout': _int_range(1, note='seconds; the default is 7200'),
    'trtllm_container_trtllm_version': _Check(_trtllm_version),

    # --- specdec_common (one name per fact) ---
    'specdec_deployment_id': _Check(_deployment_id),
    'specdec_head_host': _Check(_inventory_host),
    'specdec_nccl_management_interface': _Check(_ifname),
    'specdec_container_name': _Check(_container_name),
    # Mounted at the same path in the container (docker -v needs absolute paths).
    'specdec_state_dir': _abs_path('/var/lib/sparkops/specdec'),
    'specdec_hf_cache_dir': _abs_path('/home/nvidia/.cache/huggingface', empty_ok=True,
                                      empty_means='~/.cache/huggingface of the deploy user'),
    'specdec_container_hf_cache_dir': _abs_path('/root/.cache/huggingface'),
    'specdec_container_ssh_port': _int_range(1, 65535, 'the runbook uses 2233'),
    'specdec_container_host_key_dir': _abs_path('/etc/sparkops/trtllm-ssh'),

    # --- specdec_server ---
    # Not a choices list in the spec (null = the preset's); which engine serves which: _plan.ENGINE_METHODS.
    'specdec_server_method': _one_of('eagle3', 'draft_target', 'mtp', 'ngram', 'dflash', 'none'),
    'specdec_server_target_model': _hf_repo_id('nvidia/Qwen3-235B-A22B-FP4'),
    'specdec_server_target_revision': _Check(_revision),
    'specdec_server_draft_model': _hf_repo_id('nvidia/Qwen3-235B-A22B-Eagle3'),
    'specdec_server_draft_revision': _Check(_revision),
    # Engine llamacpp: one GGUF file per repo (hf_download's allow_patterns; llama-server -m / -md).
    'specdec_server_target_file': _gguf_file('qwen2.5-coder-1.5b-instruct-q4_k_m.gguf'),
    'specdec_server_draft_file': _gguf_file('qwen2.5-coder-0.5b-instruct-q4_k_m.gguf'),
    # llama-server -c: 0 = the model's own context; beyond 1M tokens no GGUF model trains.
    'specdec_server_ctx_size': _int_range(0, 1048576, 'tokens; 0 = the model\'s own, the preset uses 4096'),
    # llama-server -t: at least one thread (a Spark has 20 cores).
    'specdec_server_threads': _int_range(1, 1024, 'CPU threads, at most the node\'s cores'),
    # speculative_config.max_draft_len: at least one drafted token; beyond 32 the acceptance rate
    # makes speculation a loss and TRT-LLM's CUDA graphs grow with it.
    'specdec_server_max_draft_len': _int_range(1, 32, 'the runbook uses 3 to 5'),
    # TP over a Spark pair at most (one GPU per Spark); must equal the node count (_cross_play).
    'specdec_server_tp_size': _int_range(1, 4, '1 for one Spark, 2 for a Spark pair, up to 4 Sparks'),
    'specdec_server_pp_size': _int_range(1, 4, '1 unless pipeline parallel, e.g. 3 on a three-Spark ring'),
    'specdec_server_draft_tp_size': _int_range(1, 4, '1, or the target\'s tensor parallel size'),
    'specdec_server_max_model_len': _int_range(1, 16777216, 'tokens; the vLLM presets use 262144'),
    'specdec_server_gpu_memory_utilization': _fraction('0.7'),
    'specdec_server_master_port': _int_range(1, 65535, 'vLLM\'s rendezvous port; the default is 29501'),
    'specdec_server_port': _int_range(1, 65535, 'the runbook uses 8000 on one Spark, 8355 on two'),
    'specdec_server_host': _Check(_bind_address),
    # Host firewall: client networks in CIDR form (netaddr), checked here so that a typo stops before any change.
    'specdec_server_allowed_networks': _each(_client_network),
    'specdec_server_max_batch_size': _int_range(1),
    'specdec_server_max_num_tokens': _int_range(1),
    # A fraction of the free GPU memory: 0 leaves no KV cache, above 1 does not exist.
    'specdec_server_kv_cache_free_gpu_memory_fraction': _fraction('0.9'),
    'specdec_server_extra_args': _Check(_extra_args),
    'specdec_server_env': _Check(_env_dict),
    'specdec_server_hf_endpoint': _url(('http', 'https'), 'https://hf-mirror.example.com', empty_ok=True,
                                       empty_means='the public Hub'),
    'specdec_server_download_timeout': _int_range(1, note='seconds'),
    # huggingface_hub's thread pool: at least one worker; more than 64 only adds contention.
    'specdec_server_download_max_workers': _int_range(1, 64, 'the default is 8'),
    'specdec_server_download_poll_interval': _int_range(1, note='seconds'),
    'specdec_server_download_async_timeout': _int_range(1, note='seconds; the default is 86400'),
    'specdec_server_hf_venv': _abs_path('/opt/sparkops/hf-venv'),
    'specdec_server_hf_hub_requirement': _Check(_hf_hub_requirement),
    # The controller fetches the tiktoken files from there once (get_url): http(s) or a mirror on the controller (file://).
    'specdec_server_tiktoken_base_url': _url(('http', 'https', 'file'), 'https://openaipublic.blob.core.windows.net/encodings'),
    'specdec_server_tiktoken_files': _each(_file_name('o200k_base.tiktoken')),
    # Directories on the controller: the wheels of an air-gapped controller, and the cache of fetched files.
    'specdec_server_wheel_dir': _abs_path('/srv/sparkops/wheels', empty_ok=True,
                                          empty_means='the controller fetches the wheels from its package index'),
    'specdec_server_controller_cache_dir': _abs_path('/var/cache/sparkops-specdec', empty_ok=True,
                                                     empty_means='~/.cache/sparkops-specdec of the controller user'),
    'specdec_server_health_timeout': _int_range(1, note='seconds; first starts need up to 3600'),
    'specdec_server_hang_timeout': _int_range(0, 86400, 'seconds of failing /health before a recycle; 0 = off, '
                                                        'the default is 600'),
    'specdec_server_health_interval': _int_range(1, note='seconds'),
    # The supervisor's bounded recovery (roles/trtllm_container/files/specdec_supervisor.py).
    'specdec_server_max_failed_starts': _int_range(1, 1000, 'consecutive failed starts before the supervisor gives up; '
                                                            'the default is 5'),
    'specdec_server_restart_backoff_initial': _int_range(0, 86400, 'seconds; the default is 5'),
    'specdec_server_restart_backoff_max': _int_range(0, 86400, 'seconds; the default is 300'),
    'specdec_server_min_available_memory': _int_range(0, note='bytes; 0 = no memory wait, the default is 8589934592'),
    'specdec_server_completion_probe_interval': _int_range(60, 86400, 'seconds between completion probes; at least '
                                                                      '60, the default is 300'),
    # The liveness probe, the memory wait's bound and the boot-loop guard (specdec_supervisor.py).
    'specdec_server_liveness_probe_interval': _int_range(0, 86400, 'seconds between liveness probes; 0 = off, the '
                                                                   'default is 300'),
    'specdec_server_liveness_probe_timeout': _int_range(1, 3600, 'seconds; the default is 30'),
    'specdec_server_liveness_probe_grace': _int_range(0, 86400, 'seconds; the default is 600'),
    'specdec_server_liveness_probe_failures': _int_range(1, 100, 'failed probes in a row; the default is 2'),
    'specdec_server_liveness_restart_cooldown': _int_range(0, 604800, 'seconds; the default is 2700'),
    'specdec_server_memory_wait_timeout': _int_range(0, 86400, 'seconds; 0 = no bound, the default is 900'),
    'specdec_server_boot_loop_starts': _int_range(0, 100, 'boots; 0 = off, the default is 3'),
    'specdec_server_boot_loop_window': _int_range(1, 86400, 'seconds; the default is 600'),
    'specdec_server_smoke_max_tokens': _int_range(1),
    # The tool-call smoke test (plugin_utils/_toolcall.py): auto = gpt-oss targets only.
    'specdec_server_tool_smoke_test': _one_of('auto', 'always', 'never'),
    'specdec_server_tool_smoke_max_tokens': _int_range(1),
    # The fabric test before a pair's first start (module fabric_test; module_utils/_fabric_test.py).
    'specdec_server_fabric_test': _one_of('auto', 'always', 'never'),
    'specdec_server_fabric_test_binary': _non_empty('all_gather_perf, or a path in the engine container such as '
                                                    '/opt/nccl-tests/build/all_gather_perf'),
    'specdec_server_fabric_test_timeout': _int_range(1, 86400, 'seconds; the default is 300'),
    'specdec_server_fabric_test_warn_fraction': _fraction('0.8'),
    'specdec_server_fabric_test_env': _Check(_env_dict),  # with no secrets: the loop of *_env settings below

    # --- specdec_benchmark ---
    # Sweep points: none (the baseline) or a draft length in specdec_server_max_draft_len's range.
    'specdec_benchmark_points': _each(_bench_point),
    'specdec_benchmark_probes': _each(_bench_int(1, 32, 'draft tokens')),
    # Parallel streamed requests; beyond 1024 a Spark's KV cache and the load generator's threads give out.
    'specdec_benchmark_concurrency': _each(_bench_int(1, 1024, 'concurrent requests')),
    'specdec_benchmark_prompt_sets': _each(_file_name('short')),
    'specdec_benchmark_num_requests': _int_range(1, note='requests per run'),
    'specdec_benchmark_max_tokens': _int_range(1, note='output tokens per request'),
    'specdec_benchmark_warmup_requests': _int_range(0, note='requests before each run'),
    'specdec_benchmark_repeats': _int_range(1, note='blocks; 3 gives a median and a spread'),
    'specdec_benchmark_restart_seconds': _Check(_positive_seconds),
    'specdec_benchmark_min_mem_available': _int_range(0, note='bytes; 0 only records it'),
    'specdec_benchmark_gate_max_early': _int_range(0, note='prompts'),
    'specdec_benchmark_gate_max_late_fraction': _Check(_share),
    'specdec_benchmark_gate_tie_margin': _Check(_nats),
    'specdec_benchmark_output_dir': _non_empty('a directory for the report, e.g. specdec-benchmark'),
    'specdec_benchmark_objective': _Check(_bench_objective),

    # --- playbooks ---
    # Sizes in bytes; 0 is allowed (no reserve).
    'preflight_usable_memory_bytes': _int_range(0, note='bytes; a Spark has about 119 GiB = 127775277056'),
    'preflight_memory_reserve_bytes': _int_range(0, note='bytes; the default is 4 GiB = 4294967296'),
    'preflight_disk_reserve_bytes': _int_range(0, note='bytes; the default is 10 GiB = 10737418240'),
    'preflight_report_path': _non_empty('a file name for the JSON report, e.g. preflight-report.json'),
    'diagnose_log_lines': _int_range(1, note='lines'),
    'single_spark_host': _non_empty('the inventory name of one Spark, e.g. spark-1'),
    'status_http_timeout': _int_range(1, note='seconds'),
    'status_report_path': _non_empty('a file name for the JSON report, e.g. specdec-status.json'),
    # fleet.yml's settings reach the fleet_deploy action as its options: it checks them with check_playbook_values.
    'fleet_parallel': _int_range(0, note='deployments at once; 0: every deployment at once'),
    'fleet_max_failures': _int_range(0, note='failed deployments the run accepts before it starts no more; '
                                             'null: no limit'),
    'fleet_log_dir': _non_empty('a directory for the runs\' output, e.g. specdec-fleet-logs'),
    'fleet_report_path': _non_empty('a file name for the JSON report, e.g. specdec-fleet.json'),
}


# ---------------------------------------------------------------------------------------------
# Names
# ---------------------------------------------------------------------------------------------

def _near_prefix(name, prefixes, exact):
    """(typed prefix, intended prefix, rest of the name) for a misspelt prefix, else ('', '', '').

    The leading 1-3 words of the name are compared with every known prefix; a distance of 1 or 2
    is a typo. Something must follow the typed prefix (docker_groups alone is not ours), and when
    the name already starts with a known prefix only a longer one counts (specdec_sever_port is
    specdec_server_ misspelt, not an unknown specdec_ setting).
    """
    words = name.split('_')
    bare = {p[:-1] for p in prefixes}
    best = None
    for k in range(1, min(3, len(words) - 1) + 1):
        typed = '_'.join(words[:k])
        if typed in bare:
            continue
        for known in bare:
            if exact and len(known) <= len(exact) - 1:
                continue
            distance = levenshtein(typed, known)
            if 0 < distance <= 2:
                key = (distance, -len(known), typed)
                if best is None or key < best[0]:
                    best = (key, typed, known, '_'.join(words[k:]))
    if best is None:
        return '', '', ''
    return best[1], best[2], best[3]


def _check_name(name, options, prefixes):
    """The problem of a name that is not a known setting, or None when the name is not ours."""
    if name in REMOVED:
        return '%s: %s was removed: set %s instead (one name for this fact across roles).' % (name, name, REMOVED[name])
    bare = {p[:-1] for p in prefixes}
    if name in bare:
        return None
    first = name.split('_', 1)[0]
    if first in _FOREIGN_FIRST_WORDS or name.startswith('_'):
        return None
    exact = max((p for p in prefixes if name.startswith(p)), key=len, default=None)
    typed, known, rest = _near_prefix(name, prefixes, exact)
    if typed:
        intended = known + '_' + rest
        if intended in REMOVED:
            intended = REMOVED[intended]
        intended = RENAMED.get(intended, intended)
        if intended not in options:
            same = {o[len(known) + 1:]: o for o in options if o.startswith(known + '_')}
            intended = same.get(_closest(rest, same))
        tail = 'did you mean %s?' % intended if intended else 'see %s for its settings.' % prefixes[known + '_']
        return '%s: not a setting of %s; %s_ looks like a misspelling of the prefix %s_; %s' % (
            name, COLLECTION, typed, known, tail)
    if exact:
        # Compared without the prefix (all names under a prefix share it): first the settings
        # under the same prefix, then the same word under another prefix (specdec_port).
        rest = name[len(exact):]
        same = {o[len(exact):]: o for o in options if o.startswith(exact)}
        guess = same.get(_closest(rest, same))
        if not guess:
            others = {}
            for option in sorted(options):
                own = max((p for p in prefixes if option.startswith(p)), key=len, default='')
                others.setdefault(option[len(own):], option)
            guess = others.get(_closest(rest, others, cutoff=0.8))
        if guess:
            return '%s: not a setting of %s; did you mean %s?' % (name, COLLECTION, guess)
        return '%s: not a setting of %s (it would be ignored); remove it, or see %s for the settings.' % (
            name, COLLECTION, prefixes[exact])
    return None


# ---------------------------------------------------------------------------------------------
# Rules between settings
# ---------------------------------------------------------------------------------------------

_BAD = object()  # a setting that failed its own check: rules using it are skipped


def _templated(value):
    return isinstance(value, str) and ('{{' in value or '{%' in value)


def _cross(effective, context):
    """Rules between settings, on the effective values (given, else the spec default)."""
    problems = []
    # docker load needs the tarball when the source is archive.
    if effective.get('trtllm_container_image_source') == 'archive' and effective.get('trtllm_container_image_archive') == '':
        problems.append('trtllm_container_image_archive: is empty but trtllm_container_image_source is archive; '
                        'set the absolute path of the docker-save tarball on the node, or set the source to pull.')
    # A digest cannot be matched after docker load (no RepoDigests): module_utils/_container.py says why.
    image, source = effective.get('trtllm_container_image'), effective.get('trtllm_container_image_source')
    if isinstance(image, str) and isinstance(source, str) and not _templated(image) and _IMAGE_RE.fullmatch(image):
        problem = _container.pinned_source_problem(image, source)
        if problem:
            problems.append(problem)
    problems.extend(_cross_management(effective, context or {}))
    problems.extend(_cross_node_lists(effective, context or {}))
    problems.extend(_cross_host_ports(effective, context or {}))
    problems.extend(_cross_allow_list(effective))
    problems.extend(_cross_nothing_to_act_on(effective, context or {}))
    return problems


def _cross_nothing_to_act_on(effective, context):
    """A consent with nothing to act on, a timer whose runner is off: a setting given that would change nothing."""
    problems = []
    if effective.get('specdec_server_firewall_enable') is True and not effective.get('specdec_server_allowed_networks'):
        problems.append('specdec_server_firewall_enable: true, but specdec_server_allowed_networks is empty, so no '
                        'firewall of ours is set up and ufw is not turned on; list the client networks to admit, or '
                        'remove specdec_server_firewall_enable.')
    hang = effective.get('specdec_server_hang_timeout')
    if ('specdec_server_hang_timeout' in (context.get('given') or ()) and effective.get('specdec_server_autostart') is False
            and isinstance(hang, int) and not isinstance(hang, bool) and hang > 0):
        problems.append('specdec_server_hang_timeout: %d s, but specdec_server_autostart: false turns off the '
                        'supervisor that runs the hang watchdog, so no hung server is recycled; set '
                        'specdec_server_autostart: true, or remove specdec_server_hang_timeout.' % hang)
    given = context.get('given') or ()
    if effective.get('specdec_server_autostart') is False:
        for name in _SUPERVISOR_ONLY:
            if name in given:
                problems.append('%s: %s, but specdec_server_autostart: false turns off the supervisor, the only reader '
                                'of it, so it changes nothing; set specdec_server_autostart: true, or remove %s.'
                                % (name, _said(effective.get(name)), name))
    elif ('specdec_server_completion_probe_interval' in given and isinstance(hang, int) and not isinstance(hang, bool)
          and hang <= 0):
        problems.append('specdec_server_completion_probe_interval: %s s, but specdec_server_hang_timeout: %d turns off '
                        'the hang watchdog that sends the completion probe, so none is sent; set '
                        'specdec_server_hang_timeout above 0, or remove specdec_server_completion_probe_interval.'
                        % (_said(effective.get('specdec_server_completion_probe_interval')), hang))
    interval, timeout = (effective.get('specdec_server_liveness_probe_interval'),
                         effective.get('specdec_server_liveness_probe_timeout'))
    if all(isinstance(v, int) and not isinstance(v, bool) for v in (interval, timeout)) and 0 < interval <= timeout:
        problems.append('specdec_server_liveness_probe_timeout: %d s is not below specdec_server_liveness_probe_interval: '
                        '%d s, so a probe that hangs runs into the next one; set the timeout below the interval '
                        '(the defaults are 30 and 300).' % (timeout, interval))
    return problems


# Settings that only the supervisor in the container reads (roles/trtllm_container/files/specdec_supervisor.py);
# specdec_server_hang_timeout has its own line above, specdec_server_health_timeout is Ansible's wait too.
_SUPERVISOR_ONLY = ('specdec_server_max_failed_starts', 'specdec_server_restart_backoff_initial',
                    'specdec_server_restart_backoff_max', 'specdec_server_min_available_memory',
                    'specdec_server_drop_caches', 'specdec_server_completion_probe_interval',
                    'specdec_server_liveness_probe_interval', 'specdec_server_liveness_probe_timeout',
                    'specdec_server_liveness_probe_grace', 'specdec_server_liveness_probe_failures',
                    'specdec_server_liveness_restart_cooldown', 'specdec_server_memory_wait_timeout',
                    'specdec_server_boot_loop_starts', 'specdec_server_boot_loop_window')


def _said(value):
    """A value as YAML writes it (true/false for booleans)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def _cross_allow_list(effective):
    """specdec_server_allowed_networks that admits every client of a family (a /0) beside narrower networks of the
    same family: the list reads as a restriction but restricts nothing (the preflight counts a /0 as open)."""
    networks = effective.get('specdec_server_allowed_networks')
    if not isinstance(networks, list):
        return []
    problems = []
    for everyone in _firewall.admits_everyone(networks):
        version = ipaddress.ip_network(everyone, strict=False).version
        narrower = [str(n) for n in networks if str(n).strip() != everyone and _ip_version(n) == version]
        if narrower:
            problems.append('specdec_server_allowed_networks: %s admits every IPv%d client, so %s restrict%s nothing; '
                            'list only the client networks, or only %s to admit every client on purpose.'
                            % (everyone, version, ', '.join(narrower), 's' if len(narrower) == 1 else '', everyone))
    return problems


def _ip_version(value):
    try:
        return ipaddress.ip_network(str(value).strip(), strict=False).version
    except (ValueError, TypeError):
        return None


def _cross_host_ports(effective, context):
    """The ports the collection listens on with the host's network (the server's; the containers' sshd) must not be
    the node's own sshd (context['ansible_port'], else 22): the runbook moves the container's sshd to 2233 for it."""
    try:
        ssh = int(context.get('ansible_port') or 22)
    except (TypeError, ValueError):
        return []
    owner = ' of %s' % context['host'] if context.get('host') else ''
    problems = []
    for name, example in (('specdec_server_port', 8355), ('specdec_container_ssh_port', 2233)):
        value = effective.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value == ssh:
            problems.append('%s: %d is the SSH port%s (its sshd carries the Ansible connection, ansible_port); the '
                            'containers share the host network, so it is taken; choose another port, e.g. %d.'
                            % (name, value, owner, example if example != value else example + 1))
    return problems


def _cross_node_lists(effective, context):
    """A node list that is set must hold the node itself (its index, its peers). Skipped for single_spark."""
    host = context.get('host')
    if not host or context.get('topology') == 'single_spark':
        return []
    problems = []
    for name in ('netplan_qsfp_nodes', 'ssh_mesh_hosts'):
        value = effective.get(name)
        if isinstance(value, list) and value and host not in value:
            problems.append('%s: %s does not list %s, a node it runs on; list every node of the deployment, or set [] '
                            'for the hosts of the group.' % (name, ', '.join(str(v) for v in value), host))
    return problems


def _networks(items):
    networks = []
    for item in items:
        try:
            networks.append(ipaddress.IPv4Network(item, strict=False))
        except (ipaddress.AddressValueError, ipaddress.NetmaskValueError, ValueError, TypeError):
            return []
    return networks


def _cross_management(effective, context):
    """No fabric subnet in effect may contain the management address (the Ansible connection).

    The subnets in effect: netplan_qsfp_addresses when set, else those of netplan_qsfp_scheme.
    Skipped without an IPv4 context['ansible_host'], and for context['topology'] == 'single_spark'
    (netplan_qsfp does not run there).
    """
    management = context.get('ansible_host')
    if context.get('topology') == 'single_spark' or not _is_ipv4(management):
        return []
    addresses = effective.get('netplan_qsfp_addresses')
    scheme = effective.get('netplan_qsfp_scheme')
    if isinstance(addresses, list) and len(addresses) == 2:
        name, networks = 'netplan_qsfp_addresses', _networks(addresses)
    elif scheme == 'single_subnet' and isinstance(effective.get('netplan_qsfp_single_subnet'), str):
        name, networks = 'netplan_qsfp_single_subnet', _networks([effective['netplan_qsfp_single_subnet']])
    elif scheme == 'per_link_subnets' and isinstance(effective.get('netplan_qsfp_link_subnets'), list):
        name, networks = 'netplan_qsfp_link_subnets', _networks(effective['netplan_qsfp_link_subnets'])
    else:
        return []
    address = ipaddress.IPv4Address(management)
    owner = ' of %s' % context['host'] if context.get('host') else ''
    for network in networks:
        if address in network:
            return ['%s: %s contains the management address %s%s (ansible_host); addressing the fabric there would '
                    'take the management address off its network, and the Ansible connection with it; choose fabric '
                    'subnets that do not contain it, e.g. 192.168.100.0/24 and 192.168.101.0/24.'
                    % (name, network, management, owner)]
    return []


# ---------------------------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------------------------

def _apply_bound(name, value, given, spec=None):
    """The problems of a value of the right type (the spec's), shown as the user gave it."""
    text = _text_rule(name, value, spec)
    if text:
        return text  # one root cause, one line: the shape rules below would only repeat it
    rule = BOUNDS.get(name)
    if rule is None or value is None:
        return []
    try:
        return rule(value, _shown(name, given, spec))
    except (TypeError, AttributeError, ValueError):
        # The spec gave the option another type than the rule expects (a spec change): the type
        # check above has passed, and tests/unit/test_option_coverage.py reports the mismatch.
        return []


def _text_rule(name, value, spec):
    """The one text rule (plugin_utils/_text.py) on a string setting, or each string of a list: no control or format
    character, at most the length bound (paths in bytes). Secrets have their own rules, which never show the value."""
    if _secret(name, spec):
        return []
    kind = 'path' if (spec or {}).get('type') == 'path' or (spec or {}).get('elements') == 'path' or name.endswith(
        ('_path', '_dir', '_file', '_venv', '_archive', '_device')) else 'text'
    allow = '\n\t' if name in _text.PROSE else ''
    if isinstance(value, str):
        why = _text.problem(value, kind, allow)
        return ['%s %s.' % (_fmt(value), why)] if why else []
    if isinstance(value, (list, tuple)):
        return ['item %d of the list: %s %s.' % (index, _fmt(item), why) for index, item in enumerate(value, 1)
                if isinstance(item, str) for why in [_text.problem(item, kind, allow)] if why][:1]
    return []


def renamed(settings: dict) -> tuple[dict, list[str], list[str]]:
    """(settings under the new names of RENAMED, the old names that were used, the problems one line each).

    An old name alone: its value under the new name. Both names with the same value (e.g. the new name's role default,
    which reads the old one): the new name's value. Both with different values: one line naming both, and neither is
    kept (the plan stops on the line). Values of secret settings are never shown."""
    out = dict(settings)
    used, problems = [], []
    for old, new in sorted(RENAMED.items()):
        if old not in out:
            continue
        value = out.pop(old)
        used.append(old)
        if new not in out:
            out[new] = value
            continue
        if _templated(out[new]) and not _templated(value):
            out[new] = value  # the new name's role default, not templated by the caller: it reads the old name
            continue
        if out[new] == value or _templated(value):
            continue
        shown = 'the values (hidden)' if looks_secret(old) or looks_secret(new) else '%s and %s' % (
            _fmt(value), _fmt(out[new]))
        problems.append('%s: renamed to %s, and both are set, to different values (%s); set %s only.'
                        % (old, new, shown, new))
        out.pop(new)
    return out, used, problems


def deprecation(old: str) -> str:
    """The deprecation warning of an old name of RENAMED (ansible-core adds the release that removes it)."""
    return ('%s: renamed to %s; set %s instead (the old name still works in 0.3.x).' % (old, RENAMED[old], RENAMED[old]))


def select_names(names, specs: dict, *, results=RESULTS) -> tuple[list[str], list[str]]:
    """(settings, misnamed): of a host's variable names, those that are settings of the collection (to resolve and
    check) and those that are not but would be taken for one (misspelt, removed; reported by check_settings), sorted.
    Results (``results``), names starting with _ or ansible_ and other tools' variables are in neither."""
    options = known_options(specs)
    prefixes = _prefixes(specs)
    results = set(results or ())
    settings, misnamed = [], []
    for name in sorted(str(n) for n in names):
        if name in results or name.startswith(('_', 'ansible_')):
            continue
        if (name in options and name not in REMOVED) or name in RENAMED:
            settings.append(name)
        elif _check_name(name, options, prefixes):
            misnamed.append(name)
    return settings, misnamed


def check_settings(settings: dict, specs: dict, *, results=RESULTS, context=None) -> list[str]:
    """Problems of one host's settings, one line each, sorted (validate_settings without the values)."""
    return validate_settings(settings, specs, results=results, context=context)[1]


def validate_settings(settings: dict, specs: dict, *, results=RESULTS, context=None) -> tuple[dict, list[str]]:
    """(the valid settings converted to their spec's type, the problems one line each, sorted).

    settings: the host's variables as Ansible resolved them (templated); variables of other tools
    are ignored. specs: load_specs(). results: facts the roles publish (never errors). context:
    optional {'ansible_host': management IPv4, 'host': inventory name, 'topology': 'two_sparks' or
    'single_spark'} for the management-address rule. A setting that fails its own check is not in
    the returned values (nothing downstream sees a value that failed), nor is an unknown name.
    """
    options = known_options(specs)
    prefixes = _prefixes(specs)
    results = set(results or ())
    # An old name of RENAMED is checked under its new name (sparkops.specdec.specdec_settings has already renamed what
    # it publishes, and warned).
    settings, _used, problems = renamed(settings)
    given = {}
    for name in sorted(settings):
        value = settings[name]
        if name in results:
            continue
        if name in options and name not in REMOVED:
            if _templated(value):
                given[name] = value  # not templated by the caller: nothing reliable to check
                continue
            if name in _HOST_NAMED:
                # Named with the host (a value YAML did not read as a string is named with its type: "quote it").
                problem = _HOST_NAMED[name]((context or {}).get('host'), value)
                if problem:
                    problems.append(problem)
                    given[name] = _BAD
                    continue
            coerced, problem = _check_type(name, options[name], value)
            if problem:
                problems.append(problem)
                given[name] = _BAD
                continue
            found = _apply_bound(name, coerced, value, options[name])
            if found:
                problems.extend('%s: %s' % (name, p) for p in found)
                given[name] = _BAD
            else:
                given[name] = coerced
            continue
        problem = _check_name(name, options, prefixes)
        if problem:
            problems.append(problem)

    effective = {}
    for name, spec in options.items():
        if name in given:
            effective[name] = given[name]
        elif not _templated(spec.get('default')):
            effective[name] = spec.get('default')
    # A setting with its own problem takes no part in the rules between settings.
    effective = {k: v for k, v in effective.items() if v is not _BAD}
    # "Given" for the rules that judge a setting the user gave: a value other than its spec default. The roles resolve
    # every option, role defaults included, so a default seen here says nothing about what the user set.
    chosen = frozenset(n for n, v in given.items() if n not in options or v != options[n].get('default'))
    problems.extend(_cross(effective, dict(context or {}, given=chosen)))
    valid = {k: v for k, v in given.items() if v is not _BAD}
    return valid, sorted(set(_one_line(p) for p in problems))


def check_playbook_values(values: dict) -> tuple[dict, list[str]]:
    """Types and bounds of playbook settings given directly, e.g. as an action's options (fleet_deploy gets fleet.yml's
    settings so): (the coerced values of the good ones, the problems one line each, sorted). The same rules and lines
    as check_settings gives for the same values in an inventory; a name that is not in PLAYBOOK_SETTINGS is a
    KeyError (a caller's mistake, not the user's)."""
    coerced, problems = {}, []
    for name in sorted(values):
        value, problem = _check_type(name, PLAYBOOK_SETTINGS[name], values[name])
        if problem:
            problems.append(problem)
            continue
        found = _apply_bound(name, value, values[name], PLAYBOOK_SETTINGS[name])
        if found:
            problems.extend('%s: %s' % (name, p) for p in found)
            continue
        coerced[name] = value
    return coerced, sorted(set(_one_line(p) for p in problems))


# ---------------------------------------------------------------------------------------------
# Secrets (issue 10, item 4). One block, owned by the secrets hardening: the token's shape and
# secret-looking names in the *_env settings. The rules are in module_utils/_secrets.py (shared
# with hf_download on the nodes); this block only wires them into BOUNDS.
# ---------------------------------------------------------------------------------------------

from ansible_collections.sparkops.specdec.plugins.module_utils import _secrets  # noqa: E402  pylint: disable=wrong-import-position


def _hf_token(value, shown):
    """A malformed token (white space, line break, Bearer prefix, quotes, control characters): the defect,
    never the value (shown is "the value (hidden)" for this name)."""
    defects = _secrets.token_defects(value)
    if not defects:
        return []
    return ['the value (hidden) %s; set the token alone, exactly as the Hub shows it (hf_...): | trim in a template, '
            'and printf %%s TOKEN | ansible-vault encrypt_string (echo adds a newline).' % '; '.join(defects)]


def _env_dict_no_secrets(value, shown):
    """_env_dict, and no key that looks like a secret (the rank environment shows in docker inspect and ps)."""
    problems = _env_dict(value, shown)
    for key in sorted((k for k in value if isinstance(k, str)), key=str):
        pattern = _secrets.secret_env_name(key)
        if pattern:
            problems.append('key %s looks like a secret (matches %s); the environment of the container and the ranks '
                            'is readable with docker inspect and ps: give the Hugging Face token with '
                            'specdec_server_hf_token (kept in Ansible Vault; it reaches only the processes that need '
                            'it), and keep other credentials out of the settings.' % (key, pattern))
    return problems


BOUNDS['specdec_server_hf_token'] = _Check(_hf_token)
# Downloads that don't hang (issue 10, item 8): the poll's own deadline, and the silence after which
# a job is dead. hf_download rewrites its progress file about every second: under 60 s of silence
# a busy node (swapping, a slow disk) would look dead.
BOUNDS['specdec_server_download_poll_deadline'] = _int_range(1, note='seconds; the default is 86400')
BOUNDS['specdec_server_download_stale_timeout'] = _int_range(60, note='seconds; the default is 600')
# Every *_env setting checked as an environment mapping (specdec_server_env, trtllm_container_env,
# trtllm_container_cuda_env, and any added later with the _env_dict rule).
for _name in [n for n, rule in BOUNDS.items() if n.endswith('_env') and getattr(rule, 'fn', None) is _env_dict]:
    BOUNDS[_name] = _Check(_env_dict_no_secrets)
del _name


# ---------------------------------------------------------------------------------------------
# Who may call the endpoint (issue 12, item 7): the API key's shape. Which engine takes it is the
# plan's check (plugin_utils/_plan.py, _check_access).
# ---------------------------------------------------------------------------------------------

API_KEY_MIN_LENGTH = 16


def _api_key(value, shown):
    """llama-server reads the key file line by line (a line starting with # is a comment) and compares the
    Authorization header's value after "Bearer ": a key is one line of visible ASCII. Never shows the value."""
    if value == '':
        return []
    problems = []
    if any(ord(c) < 0x21 or ord(c) > 0x7e for c in value):
        problems.append('has white space, a line break or a character outside visible ASCII')
    if value.startswith('#'):
        problems.append('starts with # (llama-server reads such a line of the key file as a comment)')
    if value.lower().startswith('bearer'):
        problems.append('starts with Bearer (clients add it; set the key alone)')
    if len(value) < API_KEY_MIN_LENGTH:
        problems.append('is shorter than %d characters' % API_KEY_MIN_LENGTH)
    if not problems:
        return []
    return ['the value (hidden) %s; set a random key of visible ASCII, e.g. openssl rand -hex 32, kept in Ansible '
            'Vault (printf %%s KEY | ansible-vault encrypt_string), or "" for no key.' % '; '.join(problems)]


BOUNDS['specdec_api_key'] = _Check(_api_key)
