# -*- coding: utf-8 -*-
"""module_utils/_gate.py: greedy outputs with and without speculation, prompt by prompt."""

from __future__ import annotations

import pytest

from ansible_collections.sparkops.specdec.plugins.module_utils import _gate

LONG = ' '.join('word%d' % i for i in range(100))


def outputs(texts):
    return [{'prompt_id': k, 'text': v} for k, v in texts.items()]


def test_identical_outputs_pass():
    got = _gate.compare(outputs({'a': LONG, 'b': 'x y'}), outputs({'a': LONG, 'b': 'x y'}))
    assert got['passed'] and got['counts'] == {'match': 2, 'late': 0, 'early': 0}
    assert got['prompts'][0]['first_diverging_word'] is None


def test_first_diverging_word_and_char():
    assert _gate.first_divergence('a bc d', 'a bx d') == (1, 3)
    assert _gate.first_divergence('a b', 'a b c') == (2, 3)


def test_early_divergence_fails_and_names_the_prompt():
    got = _gate.compare(outputs({'a': LONG, 'b': LONG}), outputs({'a': LONG, 'b': LONG.replace('word3 ', 'wordX ')}))
    assert not got['passed']
    assert got['prompts'][1]['status'] == 'early' and got['prompts'][1]['first_diverging_word'] == 3
    assert 'b (word 3)' in got['msg']


def test_a_late_divergence_on_a_minority_passes():
    base = {str(i): LONG for i in range(8)}
    spec = dict(base)
    spec['7'] = LONG.replace('word90', 'other')
    got = _gate.compare(outputs(base), outputs(spec))
    assert got['passed'] and got['counts']['late'] == 1
    assert got['prompts'][7]['first_diverging_word'] == 90


def test_late_divergence_on_many_prompts_fails():
    base = {str(i): LONG for i in range(4)}
    spec = {k: LONG.replace('word80', 'z') if int(k) < 2 else LONG for k in base}
    got = _gate.compare(outputs(base), outputs(spec))
    assert not got['passed'] and '2 of 4 prompts diverge late' in got['msg']


def test_empty_output_is_early():
    got = _gate.compare(['some text'], [''])
    assert got['prompts'][0]['status'] == 'early' and not got['passed']


def test_different_prompt_sets_are_an_error():
    with pytest.raises(_gate.GateError, match='different prompts'):
        _gate.compare(outputs({'a': 'x'}), outputs({'b': 'x'}))
