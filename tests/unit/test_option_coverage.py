# -*- coding: utf-8 -*-
"""Every setting the preflight checks has a negative test.

Reads every roles/*/meta/argument_specs.yml option (as the preflight does, with
_settings.load_specs) and the playbook settings table (_settings.PLAYBOOK_SETTINGS), and fails
when one of them has no entry in NEGATIVE_CASES of tests/unit/plugins/plugin_utils/test_settings.py
and is not in EXEMPT below. A new option therefore needs a negative case (or a reasoned
exemption) in the same change. Also keeps the tables of _settings honest against the specs.
"""

from __future__ import annotations

import os

import pytest

from ansible_collections.sparkops.specdec.plugins.plugin_utils import _plan, _settings
from ansible_collections.sparkops.specdec.tests.unit.plugins.plugin_utils.test_settings import NEGATIVE_CASES

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
SPECS = _settings.load_specs(ROOT)
OPTIONS = _settings.known_options(SPECS)

# Options that cannot be wrong, so no negative case can exist. Each with the reason; an entry
# for an option that no longer exists fails test_exemptions_exist.
EXEMPT = {
    # Free text sent as the smoke test's chat message: every string is a valid prompt (and its
    # type check is the generic str one, covered by the other str options' cases).
    'specdec_server_smoke_prompt',
    # Free text written at the top of the benchmark report: every string is a valid note.
    'specdec_benchmark_note',
}


def _tested():
    return {case[2] for case in NEGATIVE_CASES}


def test_every_option_has_a_negative_case():
    missing = sorted(set(OPTIONS) - _tested() - EXEMPT)
    assert not missing, (
        'options without a negative case in tests/unit/plugins/plugin_utils/test_settings.py NEGATIVE_CASES '
        '(add one, or exempt the option with its reason here): %s' % ', '.join(missing))


def test_exemptions_exist():
    stale = sorted(EXEMPT - set(OPTIONS))
    assert not stale, 'EXEMPT names options that no longer exist: %s' % ', '.join(stale)


def test_exemptions_are_needed():
    both = sorted(EXEMPT & _tested())
    assert not both, 'exempt options that have a negative case now (drop the exemption): %s' % ', '.join(both)


def test_bounds_table_names_existing_options():
    stale = sorted(set(_settings.BOUNDS) - set(OPTIONS))
    assert not stale, '_settings.BOUNDS has rules for options that no longer exist: %s' % ', '.join(stale)


def test_removed_names_are_gone_and_replaced():
    still = sorted(set(_settings.REMOVED) & set(OPTIONS))
    assert not still, 'removed names still declared in an argument spec: %s' % ', '.join(still)
    missing = sorted(set(_settings.REMOVED.values()) - set(OPTIONS))
    assert not missing, 'replacement names not declared in any argument spec: %s' % ', '.join(missing)


def test_every_role_has_a_known_prefix():
    for role, options in SPECS.items():
        prefix = _settings.role_prefix(role)
        wrong = sorted(name for name in options if not name.startswith(prefix))
        assert not wrong, '%s: options without the prefix %s: %s' % (role, prefix, ', '.join(wrong))


def _plain(value):
    return not (isinstance(value, str) and ('{{' in value or '{%' in value))


WITH_DEFAULT = sorted(name for name, spec in OPTIONS.items() if 'default' in spec and _plain(spec['default']))
WITHOUT_DEFAULT = sorted(set(OPTIONS) - set(WITH_DEFAULT))
# Options without a default that no preset fills either: absent means "not set" (see their argument specs).
UNSET_BY_DEFAULT = {
    'specdec_head_host',  # derived from the inventory groups (specdec_common)
    'specdec_server_hf_token',  # a secret: the user's, never defaulted
    'specdec_server_target_file',  # llamacpp presets set it per model; trtllm serves the whole repo
    'specdec_server_draft_file',  # same
    'specdec_server_threads',  # null: llama.cpp's own thread count (about the CPU cores)
    'specdec_benchmark_restart_seconds',  # null: an engine-specific estimate (60 s llama.cpp, 900 s TensorRT-LLM)
    # Renamed in 0.3.0: the Jinja default reads the old name (trtllm, '' without it); test_specdec_settings_renamed.py
    'specdec_engine',
    'specdec_api_key',
}


def _preset_values():
    """(preset, option, value) for every non-null value a preset gives an option without a default."""
    out = []
    for preset_name, preset in sorted(_plan.PRESETS.items()):
        for name in WITHOUT_DEFAULT:
            field = name[len('specdec_server_'):] if name.startswith('specdec_server_') else None
            if field and preset.get(field) is not None:
                out.append((preset_name, name, preset[field]))
    return out


@pytest.mark.parametrize('name', WITH_DEFAULT)
def test_spec_default_passes(name):
    """The default of every option passes its own type, choices and bounds (and does not crash)."""
    assert _settings.check_settings({name: OPTIONS[name]['default']}, SPECS) == []


@pytest.mark.parametrize('preset,name,value', _preset_values())
def test_preset_value_passes(preset, name, value):
    """An option without a default takes the preset's value: that value passes the option's own checks."""
    assert _settings.check_settings({name: value}, SPECS) == [], '%s of preset %s' % (name, preset)


def test_every_option_without_default_is_filled_or_reasoned():
    """Each option without a plain default is either filled by some preset or listed in UNSET_BY_DEFAULT."""
    filled = {name for _preset, name, _value in _preset_values()}
    missing = sorted(set(WITHOUT_DEFAULT) - filled - UNSET_BY_DEFAULT)
    assert not missing, 'options without a default, a preset value or a reason in UNSET_BY_DEFAULT: %s' % ', '.join(missing)
    stale = sorted(UNSET_BY_DEFAULT - set(WITHOUT_DEFAULT))
    assert not stale, 'UNSET_BY_DEFAULT names options that now have a default or no longer exist: %s' % ', '.join(stale)


def test_all_defaults_together_pass():
    defaults = {name: spec['default'] for name, spec in OPTIONS.items() if 'default' in spec and _plain(spec['default'])}
    assert _settings.check_settings(defaults, SPECS, context={'ansible_host': '10.0.0.21', 'host': 'spark-a'}) == []
