# -*- coding: utf-8 -*-
"""plugin_utils/_gate.py: greedy outputs with and without speculation, prompt by prompt."""

from __future__ import annotations

import pytest

from ansible_collections.sparkops.specdec.plugins.plugin_utils import _gate

LONG = ' '.join('word%d' % i for i in range(100))


def outputs(texts):
    return [{'prompt_id': k, 'text': v} for k, v in texts.items()]


def test_identical_outputs_pass():
    got = _gate.compare(outputs({'a': LONG, 'b': 'x y'}), outputs({'a': LONG, 'b': 'x y'}))
    assert got['passed'] and got['counts'] == {'match': 2, 'tie': 0, 'late': 0, 'early': 0}
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


# --- near-ties: the baseline's token log-probabilities (OpenAI chat logprobs, as llama-server sends them) ---
BASE_SQL = "WHERE o.created_at >= NOW() - INTERVAL 30 DAY"
SPEC_SQL = "WHERE o.created_at >= DATE_SUB(NOW(), 30)"


def sql_tokens(runner_up=" DATE", gap=0.05):
    pieces = ["WHERE", " o", ".created", "_at", " >=", " NOW", "()", " -", " INTERVAL", " ", "30", " DAY"]
    toks = [{"token": p, "logprob": -0.01, "top": [[p, -0.01], ["x", -6.0]]} for p in pieces]
    toks[5] = {"token": " NOW", "logprob": -0.70, "top": [[" NOW", -0.70], [runner_up, -0.70 - gap]]}
    return toks


def test_near_tie_found_at_the_diverging_token():
    word, char = _gate.first_divergence(BASE_SQL, SPEC_SQL)
    tie = _gate.near_tie(BASE_SQL, sql_tokens(), SPEC_SQL, char)
    assert tie == {"token_index": 5, "baseline_token": " NOW", "speculative_token": " DATE", "margin": 0.05}


def test_a_near_tie_is_not_a_failure_even_early():
    base = [{"prompt_id": "sql", "text": BASE_SQL, "tokens": sql_tokens()}]
    got = _gate.compare(base, [{"prompt_id": "sql", "text": SPEC_SQL}])
    assert got["passed"] and got["counts"] == {"match": 0, "tie": 1, "late": 0, "early": 0}
    assert got["prompts"][0]["status"] == "tie" and got["prompts"][0]["tie"]["margin"] == 0.05
    assert "near-tie" in got["msg"]


def test_a_wide_margin_stays_early():
    base = [{"prompt_id": "sql", "text": BASE_SQL, "tokens": sql_tokens(gap=2.0)}]
    got = _gate.compare(base, [{"prompt_id": "sql", "text": SPEC_SQL}])
    assert not got["passed"] and got["counts"]["early"] == 1
    assert got["prompts"][0]["tie"]["margin"] == 2.0


def test_tie_margin_zero_turns_ties_off():
    base = [{"prompt_id": "sql", "text": BASE_SQL, "tokens": sql_tokens()}]
    got = _gate.compare(base, [{"prompt_id": "sql", "text": SPEC_SQL}], tie_margin=0)
    assert not got["passed"] and got["counts"]["early"] == 1 and got["thresholds"]["tie_margin"] == 0.0


def test_a_continuation_outside_the_runner_ups_is_not_a_tie():
    base = [{"prompt_id": "sql", "text": BASE_SQL, "tokens": sql_tokens(runner_up=" CURRENT")}]
    got = _gate.compare(base, [{"prompt_id": "sql", "text": SPEC_SQL}])
    assert not got["passed"] and got["prompts"][0]["status"] == "early"
    assert got["prompts"][0]["tie"] == {"token_index": 5, "baseline_token": " NOW", "speculative_token": None,
                                        "margin": None}


def test_tokens_that_do_not_spell_the_text_are_not_used():
    toks = sql_tokens()
    toks[0] = dict(toks[0], token="SELECT")
    assert _gate.near_tie(BASE_SQL, toks, SPEC_SQL, _gate.first_divergence(BASE_SQL, SPEC_SQL)[1]) is None
    got = _gate.compare([{"prompt_id": "sql", "text": BASE_SQL, "tokens": toks}], [{"prompt_id": "sql", "text": SPEC_SQL}])
    assert got["prompts"][0]["status"] == "early" and got["prompts"][0]["tie"] is None


def test_the_longest_matching_runner_up_wins():
    toks = sql_tokens()
    toks[5]["top"] = [[" NOW", -0.70], [" D", -0.72], [" DATE", -0.74]]
    tie = _gate.near_tie(BASE_SQL, toks, SPEC_SQL, _gate.first_divergence(BASE_SQL, SPEC_SQL)[1])
    assert tie["speculative_token"] == " DATE" and tie["margin"] == 0.04


def test_an_empty_side_is_early_whatever_the_tokens():
    got = _gate.compare([{"prompt_id": "sql", "text": BASE_SQL, "tokens": sql_tokens()}], [{"prompt_id": "sql", "text": ""}])
    assert got["prompts"][0]["status"] == "early"
