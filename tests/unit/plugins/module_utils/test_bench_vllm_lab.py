# -*- coding: utf-8 -*-
"""The vLLM counters adapter (module_utils/_bench.py) on /metrics RECORDED from the lab's real vLLM during
`make bench-tune ENGINE=vllm` (issue 23 item 4): draft_model with a draft that is a copy of the target, 3 speculative
tokens (provenance in tests/unit/fixtures/bench/vllm-lab-draft-model-metrics-*.txt). Even a copied draft has drafted
tokens rejected there (exact ties the two passes break differently); the per-position counts still sum to the accepted
counter, which the report checks on every run."""

from __future__ import annotations

import os

import pytest

from ansible_collections.sparkops.specdec.plugins.module_utils import _bench

FIX = os.path.join(os.path.dirname(__file__), '..', '..', 'fixtures', 'bench')


def fixture(name):
    with open(os.path.join(FIX, name), encoding='utf-8') as handle:
        return handle.read()


BEFORE = fixture('vllm-lab-draft-model-metrics-before.txt')
AFTER = fixture('vllm-lab-draft-model-metrics-after.txt')


def test_the_lab_runs_counters():
    got = _bench.spec_counters('vllm', BEFORE, AFTER)
    assert (got['draft_tokens'], got['accepted_tokens'], got['drafts']) == (390, 385, 130)
    assert got['accepted_by_position'] == {0: 129, 1: 128, 2: 128}


def test_the_lab_runs_figures_sum_by_position_to_the_accepted_tokens():
    requests = [{'index': i, 'prompt_id': str(i), 'ok': True, 'error': None, 'send_time': 0.0, 'ttft': 0.01,
                 'chunk_times': [0.01 * (k + 1) for k in range(16)], 'e2e': 0.17, 'output_tokens': 64,
                 'prompt_tokens': 20, 'finish_reason': 'length', 'text': 'x', 'timings': None} for i in range(8)]
    figures = _bench.summarize_run({'requests': requests, 'wall_seconds': 0.86, 'metrics_before': BEFORE,
                                    'metrics_after': AFTER}, 'vllm', True)
    assert figures['per_position_sum'] == figures['accepted_tokens'] == 385 and figures['per_position_sum_ok']
    assert figures['acceptance_rate'] == pytest.approx(385 / 390)
    assert figures['mean_accepted_length'] == pytest.approx(1 + 385 / 130)
    assert figures['acceptance_by_position'] == pytest.approx({'0': 129 / 130, '1': 128 / 130, '2': 128 / 130})
    assert figures['problems'] == []
    # A per-position count that does not add up is flagged, not passed over.
    broken = AFTER.replace('position="2"} 144.0', 'position="2"} 143.0')
    assert broken != AFTER
    figures = _bench.summarize_run({'requests': requests, 'wall_seconds': 0.86, 'metrics_before': BEFORE,
                                    'metrics_after': broken}, 'vllm', True)
    assert figures['per_position_sum_ok'] is False and figures['problems']
