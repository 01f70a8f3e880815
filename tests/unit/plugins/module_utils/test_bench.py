# -*- coding: utf-8 -*-
"""module_utils/_bench.py: Prometheus parsing, both engine adapters on fixtures built from the engines'
source (tests/unit/fixtures/bench/, provenance in each file), the figures of a run, the statistics and
the block-randomised schedule."""

from __future__ import annotations

import collections
import json
import os

import pytest

from ansible_collections.sparkops.specdec.plugins.module_utils import _bench

FIX = os.path.join(os.path.dirname(__file__), '..', '..', 'fixtures', 'bench')


def fixture(name):
    with open(os.path.join(FIX, name)) as handle:
        return handle.read()


LLAMA_BEFORE, LLAMA_AFTER = fixture('llamacpp-metrics-before.txt'), fixture('llamacpp-metrics-after.txt')
TRT_BEFORE, TRT_AFTER = fixture('trtllm-prometheus-before.txt'), fixture('trtllm-prometheus-after.txt')
STANDIN = fixture('standin-prometheus.txt')
PERF = json.loads(fixture('trtllm-perf-metrics.json'))['body']


def request(index, tokens=128, ttft=0.2, gaps=(0.05,), text='def f(): pass', timings=None):
    times, now = [ttft], ttft
    for i in range(tokens - 1):
        now += gaps[i % len(gaps)]
        times.append(now)
    return {'index': index, 'prompt_id': str(index), 'ok': True, 'error': None, 'send_time': 0.0, 'ttft': ttft,
            'chunk_times': times, 'e2e': now + 0.001, 'output_tokens': tokens, 'prompt_tokens': 40,
            'finish_reason': 'length', 'text': text, 'timings': timings}


def run(requests, before=None, after=None, wall=10.0, **extra):
    out = {'requests': requests, 'wall_seconds': wall, 'metrics_before': before, 'metrics_after': after,
           'node': {'cpu_pressure_before': 'some avg10=0.50 avg60=0.40 avg300=0.30 total=1\n'
                                           'full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n',
                    'cpu_pressure_after': 'some avg10=12.25 avg60=3.00 avg300=1.00 total=99\n',
                    'mem_available_bytes_before': 8 << 30, 'mem_available_bytes_after': (8 << 30) - 4096}}
    out.update(extra)
    return out


# --- parsing -------------------------------------------------------------------------------

def test_parse_prometheus_reads_labels_escapes_cpp_numbers_and_special_values():
    text = ('# HELP x_total a counter\n# TYPE x_total counter\nx_total 1.23457e+06\n'
            'y{a="q\\"uote",b="new\\nline"} 2 1700000000000\nz +Inf\nw NaN\n# a plain comment\n')
    parsed = _bench.parse_prometheus(text)
    assert parsed['types'] == {'x_total': 'counter'}
    assert parsed['samples'][0] == {'name': 'x_total', 'labels': {}, 'value': 1234570.0}
    assert parsed['samples'][1]['labels'] == {'a': 'q"uote', 'b': 'new\nline'}
    assert parsed['samples'][2]['value'] == float('inf')
    assert parsed['samples'][3]['value'] != parsed['samples'][3]['value']  # NaN


def test_parse_prometheus_names_a_broken_line():
    with pytest.raises(_bench.BenchError, match='line 2'):
        _bench.parse_prometheus('ok 1\nthis is not a sample\n')


def test_counter_reset_during_a_run_is_an_error():
    with pytest.raises(_bench.BenchError, match='restarted'):
        _bench.counter_delta('c_total 10\n', 'c_total 3\n', 'c_total')


def test_detect_engine():
    assert _bench.detect_engine(LLAMA_AFTER) == 'llamacpp'
    assert _bench.detect_engine(TRT_AFTER) == 'trtllm'
    assert _bench.detect_engine(STANDIN) == 'standin'
    assert _bench.detect_engine('') is None


# --- adapters ------------------------------------------------------------------------------

def test_llamacpp_adapter_on_the_source_built_fixture():
    got = _bench.spec_counters('llamacpp', LLAMA_BEFORE, LLAMA_AFTER)
    assert got['draft_tokens'] == 432 and got['accepted_tokens'] == 403 and got['drafts'] == 110
    assert got['accepted_by_position'] == {0: 108, 1: 103, 2: 99, 3: 93}
    assert sum(got['accepted_by_position'].values()) == got['accepted_tokens']


def test_trtllm_adapter_on_the_source_built_fixture():
    got = _bench.spec_counters('trtllm', TRT_BEFORE, TRT_AFTER)
    assert got['draft_tokens'] == 1200 and got['accepted_tokens'] == 730
    assert got['accepted_by_position'] == {0: 320, 1: 240, 2: 170}
    assert got['drafted_by_position'] == {0: 400, 1: 400, 2: 400}
    assert got['drafts'] == 400
    assert got['acceptance_length_gauge'] == 2.81
    assert got['config'] == {'engine_type': 'trtllm', 'model_name': 'nvidia/Qwen3-235B-A22B-FP4', 'spec_enabled': 'true',
                             'spec_method': 'Eagle', 'spec_num_tokens': '3',
                             'spec_draft_model': 'nvidia/Qwen3-235B-A22B-Eagle3'}


def test_trtllm_perf_metrics_totals_agree_with_the_counters():
    got = _bench.perf_metrics_totals(PERF)
    assert (got['draft_tokens'], got['accepted_tokens'], got['requests']) == (1200, 730, 8)
    assert 0.58 < got['acceptance_rate_median'] < 0.63


def test_per_position_series_new_after_the_run_count_from_zero():
    before = LLAMA_BEFORE.split('# HELP llamacpp:spec_decode_num_accepted_tokens_per_pos_total')[0]
    got = _bench.spec_counters('llamacpp', before, LLAMA_AFTER)
    assert got['accepted_by_position'] == {0: 135, 1: 129, 2: 124, 3: 116}


# --- one run -------------------------------------------------------------------------------

def test_summarize_llamacpp_run():
    timings = {'draft_n': 108, 'draft_n_accepted': 100, 'predicted_per_second': 21.0}
    reqs = [request(i, timings=dict(timings, draft_n_accepted=100 + (i == 0) * 3)) for i in range(4)]
    figures = _bench.summarize_run(run(reqs, LLAMA_BEFORE, LLAMA_AFTER, wall=20.0), 'llamacpp', True, 1)
    assert figures['output_tokens'] == 512
    assert figures['output_tokens_per_second'] == pytest.approx(25.6)
    assert figures['request_throughput'] == pytest.approx(0.2)
    assert figures['acceptance_rate'] == pytest.approx(403 / 432)
    assert figures['mean_accepted_length'] == pytest.approx(1 + 403 / 110)
    assert figures['accepted_by_position'] == {'0': 108, '1': 103, '2': 99, '3': 93}
    assert figures['acceptance_by_position']['0'] == pytest.approx(108 / 110)
    assert figures['per_position_sum'] == 403 and figures['per_position_sum_ok'] is True
    assert (figures['timings_draft_tokens'], figures['timings_accepted_tokens']) == (432, 403)
    assert figures['problems'] == []
    assert figures['ttft_p50'] == pytest.approx(0.2)
    assert figures['itl_p50'] == pytest.approx(0.05)
    assert figures['cpu_pressure_some_avg10_after'] == 12.25
    assert figures['mem_available_bytes_before'] == 8 << 30


def test_summarize_trtllm_run_uses_position_zero_drafts_for_mean_accepted_length():
    figures = _bench.summarize_run(run([request(i) for i in range(8)], TRT_BEFORE, TRT_AFTER, perf_metrics=PERF),
                                   'trtllm', True, 8)
    assert figures['acceptance_rate'] == pytest.approx(730 / 1200)
    assert figures['mean_accepted_length'] == pytest.approx(1 + 730 / 400)
    assert figures['acceptance_length_gauge'] == 2.81
    assert figures['perf_metrics_draft_tokens'] == 1200
    assert figures['per_position_sum_ok'] is True
    assert figures['spec_config']['spec_num_tokens'] == '3'


def test_bursty_itl_distribution_is_reported_not_averaged_away():
    # Speculation: 4 tokens land together (0.04 ms apart), then a 200 ms verification step.
    reqs = [request(i, tokens=101, gaps=(0.00004, 0.00004, 0.00004, 0.2)) for i in range(2)]
    figures = _bench.summarize_run(run(reqs, LLAMA_BEFORE, LLAMA_AFTER), 'llamacpp', True)
    assert figures['itl_p50'] == pytest.approx(0.00004)
    assert figures['itl_p90'] == pytest.approx(0.2)
    assert figures['itl_mean'] == pytest.approx((3 * 0.00004 + 0.2) / 4)


def test_per_position_mismatch_is_flagged():
    after = LLAMA_AFTER.replace('{position="3"} 116', '{position="3"} 110')
    figures = _bench.summarize_run(run([request(0)], LLAMA_BEFORE, after), 'llamacpp', True)
    assert figures['per_position_sum_ok'] is False
    assert any('sum to 397' in p and 'moved by 403' in p for p in figures['problems'])


def test_zero_draft_tokens_with_speculation_on_is_an_error():
    with pytest.raises(_bench.BenchError, match='--spec-type draft-simple'):
        _bench.summarize_run(run([request(0)], LLAMA_BEFORE, LLAMA_BEFORE), 'llamacpp', True)


def test_missing_counters_with_speculation_on_is_an_error():
    with pytest.raises(_bench.BenchError, match='return_perf_metrics'):
        _bench.summarize_run(run([request(0)], 'other 1\n', 'other 2\n'), 'trtllm', True)
    with pytest.raises(_bench.BenchError, match='--metrics'):
        _bench.summarize_run(run([request(0)]), 'llamacpp', True)


def test_baseline_needs_no_counters_but_flags_drafting():
    figures = _bench.summarize_run(run([request(0)]), 'llamacpp', False)
    assert figures['acceptance_rate'] is None and figures['problems'] == []
    figures = _bench.summarize_run(run([request(0)], LLAMA_BEFORE, LLAMA_AFTER), 'llamacpp', False)
    assert 'baseline' in figures['problems'][0]


@pytest.mark.parametrize('where', ['metrics', 'text'])
def test_standin_figures_are_refused(where):
    reqs = [request(0, text='[sparkops lab stand-in, not TensorRT-LLM; stands in for trtllm-serve 1.3.0rc12] hi')
            if where == 'text' else request(0)]
    metrics = STANDIN if where == 'metrics' else None
    with pytest.raises(_bench.BenchError, match='STAND-IN.*meaningless'):
        _bench.summarize_run(run(reqs, metrics, metrics), 'trtllm', True)


def test_failed_requests_and_missing_usage_are_errors():
    bad = request(1)
    bad.update(ok=False, error='HTTP 500 Internal Server Error: boom')
    with pytest.raises(_bench.BenchError, match='1 of 2 requests failed.*boom'):
        _bench.summarize_run(run([request(0), bad]), 'llamacpp', False)
    nousage = request(0)
    nousage['output_tokens'] = None
    with pytest.raises(_bench.BenchError, match='include_usage'):
        _bench.summarize_run(run([nousage]), 'llamacpp', False)


# --- statistics and schedule ---------------------------------------------------------------

def test_percentile_and_repeat_stats():
    assert _bench.percentile([1, 2, 3, 4], 50) == 2.5
    assert _bench.percentile([10], 99) == 10
    assert _bench.percentile([], 50) is None
    stats = _bench.repeat_stats([31.2, 34.1, 37.2, 33.0, 35.5])
    assert stats['median'] == 34.1 and (stats['min'], stats['max']) == (31.2, 37.2)
    assert stats['q1'] == 33.0 and stats['q3'] == 35.5 and stats['iqr'] == pytest.approx(2.5)


def test_block_schedule_holds_every_point_once_per_block_and_is_seeded():
    points = ['none', 1, 2, 3, 4, 8]
    order = _bench.block_schedule(points, 5, seed=7)
    assert len(order) == 30
    for block in range(5):
        got = [o['point'] for o in order if o['block'] == block]
        assert sorted(got, key=str) == sorted(points, key=str)
    assert order == _bench.block_schedule(points, 5, seed=7)
    assert [o['point'] for o in order] != [o['point'] for o in _bench.block_schedule(points, 5, seed=8)]
    firsts = collections.Counter(o['point'] for o in order if o['slot'] == 0)
    assert len(firsts) > 1  # not always the same point first


def test_block_schedule_opens_with_the_served_point_and_closes_with_the_one_left_serving():
    points = ['none', 1, 2, 3, 4, 8]
    for seed in range(20):
        free = _bench.block_schedule(points, 3, seed=seed)
        pinned = _bench.block_schedule(points, 3, seed=seed, first=3, last='none')
        got = [o['point'] for o in pinned]
        assert got[0] == 3 and got[-1] == 'none'
        for block in range(3):
            assert sorted((o['point'] for o in pinned if o['block'] == block), key=str) == sorted(points, key=str)
        # The middle block stays as shuffled; slots are renumbered in order.
        assert [o['point'] for o in pinned if o['block'] == 1] == [o['point'] for o in free if o['block'] == 1]
        assert [o['slot'] for o in pinned if o['block'] == 0] == list(range(6))
    # One block: served first, left serving last; the same point for both: first (the cost is the same).
    assert [o['point'] for o in _bench.block_schedule(['none', 2], 1, seed=0, first=None, last=2)] == ['none', 2]
    assert [o['point'] for o in _bench.block_schedule(['none', 2], 1, seed=1, first=None, last=2)] == ['none', 2]
    assert [o['point'] for o in _bench.block_schedule(['none', 2], 1, seed=0, first=2, last=2)][0] == 2
    assert [o['point'] for o in _bench.block_schedule(['none', 2], 1, seed=0, first='none', last=2)] == ['none', 2]
    # Two blocks, the same point served and left serving: it opens the first block and closes the last.
    two = [o['point'] for o in _bench.block_schedule(['none', 1, 2], 2, seed=4, first=2, last=2)]
    assert two[0] == 2 and two[-1] == 2
    # A pin that is not a point of the schedule changes nothing.
    assert _bench.block_schedule(points, 2, seed=5, first=7, last=16) == _bench.block_schedule(points, 2, seed=5)


def test_block_schedule_rejects_bad_input():
    with pytest.raises(_bench.BenchError, match='twice'):
        _bench.block_schedule(['none', 'off'], 2)
    with pytest.raises(_bench.BenchError, match='draft length'):
        _bench.block_schedule(['none', -2], 2)
    with pytest.raises(_bench.BenchError, match='repeats'):
        _bench.block_schedule([1], 0)


def test_aggregate_groups_repeats():
    runs = []
    for value, point in ((30, 'none'), (34, 'none'), (32, 'none'), (20, 4), (22, 4)):
        figures = {'output_tokens_per_second': value, 'itl_values': [0.1], 'acceptance_by_position': {'0': 0.9}
                   if point != 'none' else {}, 'per_position_sum_ok': True if point != 'none' else None}
        runs.append(dict(figures, point=point, concurrency=1, prompt_set='short'))
    entries = _bench.aggregate(runs)
    assert [e['point'] for e in entries] == ['none', 4]
    assert entries[0]['stats']['output_tokens_per_second']['median'] == 32
    assert entries[1]['repeats'] == 2 and entries[1]['acceptance_by_position'] == {'0': 0.9}
    assert entries[0]['itl_values'] == [0.1, 0.1, 0.1]
