# -*- coding: utf-8 -*-
"""Every setting the preflight checks has a negative test.

Reads every roles/*/meta/argument_specs.yml option (as the preflight does, with
_settings.load_specs) and the playbook settings table (_settings.PLAYBOOK_SETTINGS), and fails
when one of them has no entry in NEGATIVE_CASES of tests/unit/plugins/module_utils/test_settings.py
and is not in EXEMPT below. A new option therefore needs a negative case (or a reasoned
exemption) in the same change. Also keeps the tables of _settings honest against the specs.
"""

from __future__ import annotations

import os

import pytest

from ansible_collections.sparkops.specdec.plugins.module_utils import _settings
from ansible_collections.sparkops.specdec.tests.unit.plugins.module_utils.test_settings import NEGATIVE_CASES

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
SPECS = _settings.load_specs(ROOT)
OPTIONS = _settings.known_options(SPECS)

# Options that cannot be wrong, so no negative case can exist. Each with the reason; an entry
# for an option that no longer exists fails test_exemptions_exist.
EXEMPT = {
    # Free text sent as the smoke test's chat message: every string is a valid prompt (and its
    # type check is the generic str one, covered by the other str options' cases).
    'specdec_server_smoke_prompt',
}


def _tested():
    return {case[2] for case in NEGATIVE_CASES}


def test_every_option_has_a_negative_case():
    missing = sorted(set(OPTIONS) - _tested() - EXEMPT)
    assert not missing, (
        'options without a negative case in tests/unit/plugins/module_utils/test_settings.py NEGATIVE_CASES '
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


@pytest.mark.parametrize('name', sorted(OPTIONS))
def test_spec_default_passes(name):
    """The default of every option passes its own type, choices and bounds (and does not crash)."""
    spec = OPTIONS[name]
    if 'default' not in spec or not _plain(spec['default']):
        pytest.skip('no plain default')
    assert _settings.check_settings({name: spec['default']}, SPECS) == []


def test_all_defaults_together_pass():
    defaults = {name: spec['default'] for name, spec in OPTIONS.items() if 'default' in spec and _plain(spec['default'])}
    assert _settings.check_settings(defaults, SPECS, context={'ansible_host': '10.0.0.21', 'host': 'spark-a'}) == []
