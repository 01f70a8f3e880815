# -*- coding: utf-8 -*-
"""The fetch-once-per-pair modules document their shared options once (plugins/doc_fragments/peer_copy.py) and take
their argument specs from module_utils/_peer_copy.py: each module's documented options (its own plus its fragments')
are exactly the options of the spec it builds, with the same type, default, required, choices and elements."""

from __future__ import annotations

import importlib

import pytest
import yaml

from ansible_collections.sparkops.specdec.plugins.doc_fragments import peer_copy as fragment
from ansible_collections.sparkops.specdec.plugins.module_utils import _peer_copy

FRAGMENTS = {
    'sparkops.specdec.peer_copy': fragment.ModuleDocFragment.DOCUMENTATION,
    'sparkops.specdec.peer_copy.hf_snapshot': fragment.ModuleDocFragment.HF_SNAPSHOT,
}
MODULES = {
    'hf_peer_copy': ['sparkops.specdec.peer_copy', 'sparkops.specdec.peer_copy.hf_snapshot'],
    'hf_peer_manifest': ['sparkops.specdec.peer_copy.hf_snapshot'],
    'docker_image_peer_copy': ['sparkops.specdec.peer_copy'],
}
KEYS = ('type', 'default', 'required', 'choices', 'elements')


def _shape(option):
    shape = {k: option[k] for k in KEYS if option.get(k) not in (None, False)}
    if shape.get('type', 'str') == 'str':
        shape.pop('type', None)
    return shape


def _spec_of(name, monkeypatch):
    """The argument spec and keywords the module gives AnsibleModule (captured, the module does not run)."""
    module = importlib.import_module('ansible_collections.sparkops.specdec.plugins.modules.%s' % name)
    seen = {}

    class Stop(Exception):
        pass

    def capture(**kwargs):
        seen.update(kwargs)
        raise Stop()
    monkeypatch.setattr(module, 'AnsibleModule', capture)
    with pytest.raises(Stop):
        module.main()
    return module, seen


def test_fragments_document_the_shared_specs():
    ssh = yaml.safe_load(fragment.ModuleDocFragment.DOCUMENTATION)['options']
    hf = yaml.safe_load(fragment.ModuleDocFragment.HF_SNAPSHOT)['options']
    assert {k: _shape(v) for k, v in ssh.items()} == {k: _shape(v) for k, v in _peer_copy.SSH_SOURCE_SPEC.items()}
    assert {k: _shape(v) for k, v in hf.items()} == {k: _shape(v) for k, v in _peer_copy.HF_SNAPSHOT_SPEC.items()}


@pytest.mark.parametrize('name', sorted(MODULES))
def test_each_module_documents_exactly_its_spec_once(name, monkeypatch):
    module, seen = _spec_of(name, monkeypatch)
    doc = yaml.safe_load(module.DOCUMENTATION)
    # The attributes fragments document no option (tests/unit/test_module_attributes.py covers them).
    option_fragments = [f for f in doc['extends_documentation_fragment']
                        if f.startswith('sparkops.') and f.split('.')[2] != 'attributes']
    assert option_fragments == MODULES[name]
    documented = {}
    for ref in MODULES[name]:
        for option, value in yaml.safe_load(FRAGMENTS[ref])['options'].items():
            assert option not in documented and option not in doc['options'], (name, option)
            documented[option] = value
    documented.update(doc['options'])
    spec = seen['argument_spec']
    assert {k: _shape(v) for k, v in documented.items()} == {k: _shape(v) for k, v in spec.items()}
    if 'cache_dir' in spec:
        assert seen['mutually_exclusive'] == [('cache_dir', 'local_dir')] == seen['required_one_of']


def test_shared_specs_are_copies_and_the_snapshot_rules_apply():
    spec = _peer_copy.argument_spec(_peer_copy.SSH_SOURCE_SPEC, name={'type': 'str'})
    spec['ssh_options']['default'].append('-v')
    assert _peer_copy.SSH_SOURCE_SPEC['ssh_options']['default'] == list(_peer_copy.DEFAULT_SSH_OPTIONS)
    pair = [('cache_dir', 'local_dir')]
    assert _peer_copy.HF_SNAPSHOT_RULES == {'mutually_exclusive': pair, 'required_one_of': pair}


@pytest.mark.parametrize('params,problem', [
    ({'source_address': ' 192.168.100.10 ', 'connect_timeout': 10}, None),
    ({'source_address': '-oProxyCommand=x', 'connect_timeout': 10}, 'source_address'),
    ({'source_address': '10.0.0.1 x', 'connect_timeout': 10}, 'source_address'),
    ({'source_address': '', 'connect_timeout': 10}, 'source_address'),
    ({'source_address': '192.168.100.10', 'connect_timeout': 0}, 'connect_timeout')])
def test_ssh_source_checks_address_and_timeout(params, problem):
    address, msg = _peer_copy.ssh_source(params)
    assert address == params['source_address'].strip()
    assert (msg.split(' ', 1)[0] if msg else None) == problem
