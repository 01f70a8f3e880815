# -*- coding: utf-8 -*-
"""plugin_utils/_tune.py on synthetic sweeps: speculation loses -> none, a clear win, a noisy tie,
latency bounds, and the cheaper-than-a-full-sweep search (cost ratio and distance from the best)."""

from __future__ import annotations

import pytest

from ansible_collections.sparkops.specdec.plugins.module_utils import _bench
from ansible_collections.sparkops.specdec.plugins.plugin_utils import _tune


def sweep(points, concurrency=1, acceptance=None, ttft=0.2, itl=0.05):
    """points: {point: [tok/s per repeat]} -> run summaries as the role would collect them."""
    runs = []
    for point, values in points.items():
        for value in values:
            rates = (acceptance or {}).get(point, {})
            runs.append({'point': point, 'concurrency': concurrency, 'prompt_set': 'short',
                         'output_tokens_per_second': value, 'ttft_p90': ttft if not isinstance(ttft, dict)
                         else ttft[point], 'itl_p90': itl,
                         'acceptance_rate': None if point == 'none' else 0.9,
                         'mean_accepted_length': None if point == 'none' else 1 + sum(rates.values()),
                         'acceptance_by_position': rates})
    return runs


# The lab's CPU result (../shared/reference/real-engine.md): speculation loses despite ~90 % acceptance.
CPU = {'none': [34.1, 31.2, 37.2], 1: [20.1, 19.5, 20.6], 2: [21.4, 20.9, 22.0], 3: [21.0, 20.2, 21.6],
       4: [22.7, 22.0, 23.1], 8: [22.5, 21.8, 23.0]}


def test_speculation_loses_picks_none_and_says_why():
    got = _tune.pick(sweep(CPU), {'concurrency': 1})
    assert got['pick'] == 'none' and got['best_by_median'] == 'none'
    assert 'no speculation: 34.1 tok/s (31.2-37.2 over 3 runs)' in got['reason']
    assert 'draft length 4' in got['reason'] and '0.67x' in got['reason']


def test_clear_win_picks_the_best_draft_length_with_speedup_and_acceptance():
    got = _tune.pick(sweep({'none': [20, 21, 19], 2: [28, 29, 28.5], 3: [31, 32, 31.5], 4: [30, 30.5, 29.5]}),
                     {'concurrency': 1})
    assert got['pick'] == 3
    assert '1.57x the baseline' in got['reason'] and 'range 1.48-1.68x' in got['reason']
    assert 'acceptance 0.900' in got['reason']
    row = next(r for r in got['candidates'] if r['point'] == 3)
    assert row['speedup']['median'] == pytest.approx(31.5 / 20)


def test_noisy_tie_goes_to_the_shorter_draft():
    # 4 has the best median (30.0) but 2's spread reaches 30.5: within noise -> the cheaper 2.
    got = _tune.pick(sweep({'none': [20, 20.5, 19.5], 2: [27.0, 29.0, 30.5], 4: [29.5, 30.0, 30.2]}),
                     {'concurrency': 1})
    assert got['best_by_median'] == 4 and got['pick'] == 2
    assert 'noisy tie' in got['reason']


def test_noisy_tie_with_the_baseline_goes_to_no_speculation():
    got = _tune.pick(sweep({'none': [25, 27, 30], 3: [28, 28.5, 29]}), {'concurrency': 1})
    assert got['best_by_median'] == 3 and got['pick'] == 'none'


def test_latency_bound_excludes_points():
    runs = sweep({'none': [20, 20, 20], 2: [30, 30, 30], 8: [35, 35, 35]},
                 ttft={'none': 0.2, 2: 0.3, 8: 0.9})
    got = _tune.pick(runs, {'concurrency': 1, 'ttft_p90_max': 0.5})
    assert got['pick'] == 2
    assert 'excluded: draft length 8 (ttft_p90 median 0.900 s > 0.5 s)' in got['reason']
    none = _tune.pick(runs, {'concurrency': 1, 'ttft_p90_max': 0.1})
    assert none['pick'] is None and none['reason'].startswith('no point meets the objective')


def test_objective_concurrency_selects_the_points():
    runs = sweep({'none': [20], 2: [30]}, concurrency=1) + sweep({'none': [80], 2: [60]}, concurrency=8)
    assert _tune.pick(runs, {'concurrency': 1})['pick'] == 2
    assert _tune.pick(runs, {'concurrency': 8})['pick'] == 'none'
    with pytest.raises(_bench.BenchError, match='no point at concurrency 4'):
        _tune.pick(runs, {'concurrency': 4})


def test_search_stops_after_the_probes_when_speculation_loses():
    result = _tune.evaluate_search(sweep(CPU), {'concurrency': 1})
    assert result['measured'] == ['none', 1, 4]
    assert result['tuner_pick'] == 'none' == result['full_pick']
    assert result['cost_ratio'] == pytest.approx(0.5)
    assert result['pick_gap'] == 0 and result['within_spread'] is True


def geometric(q, k):
    return {str(i): q ** (i + 1) for i in range(k)}


def test_search_measures_the_predicted_best_neighbour():
    # A memory-bound GPU-like case: step time 10 ms + 0.3 ms per draft token, acceptance 0.9 per position:
    # the probes (1, 4) predict that 8 beats 4 beyond its spread, so 8 is measured, and nothing else.
    def tps(k):
        return 1000 * (1 + sum(0.9 ** (i + 1) for i in range(k))) / (10 + 0.3 * k) if k != 'none' else 100.0
    points = {p: [tps(p) * f for f in (0.98, 1.0, 1.02)] for p in ['none', 1, 2, 3, 4, 8]}
    acceptance = {p: geometric(0.9, p) for p in [1, 2, 3, 4, 8]}
    result = _tune.evaluate_search(sweep(points, acceptance=acceptance), {'concurrency': 1},
                                   point_seconds={'none': 60, 1: 90, 2: 90, 3: 90, 4: 90, 8: 90})
    assert result['measured'] == ['none', 1, 4, 8]
    assert result['tuner_pick'] == 8
    assert result['cost_ratio'] == pytest.approx((60 + 3 * 90) / (60 + 5 * 90))
    assert result['within_spread'] is True
    assert result['tuner_pick'] == result['full_pick']


def test_search_skips_a_neighbour_predicted_within_the_spread():
    # Acceptance 0.8, 1 ms per draft token: 8 is predicted no better than 4's spread; 4 is picked, as the
    # full sweep's noisy-tie rule also does.
    def tps(k):
        return 1000 * (1 + sum(0.8 ** (i + 1) for i in range(k))) / (10 + k) if k != 'none' else 100.0
    points = {p: [tps(p) * f for f in (0.98, 1.0, 1.02)] for p in ['none', 1, 2, 3, 4, 8]}
    result = _tune.evaluate_search(sweep(points, acceptance={p: geometric(0.8, p) for p in [1, 2, 3, 4, 8]}),
                                   {'concurrency': 1})
    assert result['measured'] == ['none', 1, 4] and result['cost_ratio'] == pytest.approx(0.5)
    assert result['tuner_pick'] == 4 == result['full_pick'] and result['within_spread'] is True


def test_next_points_starts_with_baseline_and_probes():
    assert _tune.next_points([]) == ['none', 1, 4]
    assert _tune.next_points([], candidates=[2, 3], probes=[1, 4]) == ['none']


# --- the benchmark's rounds (plan_round, estimate_seconds) ------------------------------------

def test_sweep_is_one_round_of_blocks_then_done():
    first = _tune.plan_round("sweep", ["none", 1, 2, 4], 3, seed=7)
    assert len(first) == 12 and [e["block"] for e in first] == [0] * 4 + [1] * 4 + [2] * 4
    for block in range(3):
        assert sorted(map(str, (e["point"] for e in first if e["block"] == block))) == ["1", "2", "4", "none"]
    assert first == _tune.plan_round("sweep", ["none", 1, 2, 4], 3, seed=7)  # reproducible
    assert _tune.plan_round("sweep", ["none", 1, 2, 4], 3, seed=7, measured=sweep({"none": [1]})) == []


def test_tune_measures_baseline_and_probes_then_at_most_one_more():
    objective = {"concurrency": 1}
    first = _tune.plan_round("tune", ["none", 1, 2, 3, 4, 8], 2, objective=objective)
    assert sorted(map(str, {e["point"] for e in first})) == ["1", "4", "none"] and len(first) == 6
    # Speculation loses at the probes: done, no speculation.
    loses = sweep({"none": CPU["none"], 1: CPU[1], 4: CPU[4]})
    assert _tune.plan_round("tune", ["none", 1, 2, 3, 4, 8], 2, objective=objective, measured=loses) == []


def test_tune_needs_the_baseline_and_a_draft_length():
    with pytest.raises(_bench.BenchError, match="put none in the points"):
        _tune.plan_round("tune", [1, 2], 1)
    with pytest.raises(_bench.BenchError, match="at least one draft length"):
        _tune.plan_round("tune", ["none"], 1)
    with pytest.raises(_bench.BenchError, match="mode must be"):
        _tune.plan_round("grid", ["none"], 1)


def test_estimate_counts_a_restart_per_change_of_point():
    schedule = [{"point": "none"}, {"point": 2}, {"point": 2}, {"point": "none"}]
    got = _tune.estimate_seconds(schedule, 4, restart_seconds=60, run_seconds=10, current_point="none")
    assert got == {"restarts": 2, "runs": 16, "seconds": 2 * 60 + 16 * 10}
    assert _tune.estimate_seconds(schedule, 1, 60, 0)["restarts"] == 3


def test_search_replayed_on_its_own_runs_estimates_the_full_sweep():
    # Mode tune measured none, 1, 4 of none..8: the full sweep's cost is estimated, the distance is unknown.
    own = sweep({"none": CPU["none"], 1: CPU[1], 4: CPU[4]})
    got = _tune.evaluate_search(own, {"concurrency": 1}, candidates=(1, 2, 3, 4, 8),
                                point_seconds={"none": 100, "1": 120, "4": 140})
    assert got["full_seconds_estimated"] and got["unmeasured"] == [2, 3, 8]
    assert got["tuner_seconds"] == 360 and got["full_seconds"] == pytest.approx(360 + 3 * 120)
    assert got["cost_ratio"] == pytest.approx(0.5) and got["pick_gap"] is None and got["within_spread"] is None
    assert got["tuner_pick"] == "none" and got["best_by_median"] is None


def test_restart_seconds_setting_then_measured_then_the_engines_default():
    state = {"engine": "llamacpp", "running": {"target_model": "t", "ready_seconds": 42.0}}
    assert _tune.restart_seconds(120, "llamacpp", state, "t") == (120.0, "setting")
    assert _tune.restart_seconds(None, "llamacpp", state, "t") == (42.0, "measured")
    assert _tune.restart_seconds(None, "trtllm", state, "t") == (900.0, "default")  # measured on another engine
    assert _tune.restart_seconds(None, "llamacpp", {"engine": "llamacpp", "running": {"target_model": "t"}}, "t") \
        == (60.0, "default")
    assert _tune.restart_seconds("", None, None) == (900.0, "default")


def test_point_of_what_serves():
    assert _tune.point_of({"method": "none", "max_draft_len": None}, "eagle3") == "none"
    assert _tune.point_of({"method": "eagle3", "max_draft_len": 3}, "eagle3") == 3
    assert _tune.point_of({"method": "eagle3", "max_draft_len": "3"}, "eagle3") == 3
    # Another method is no point of this benchmark (its first visit restarts the server).
    assert _tune.point_of({"method": "draft_target", "max_draft_len": 3}, "ngram") is None
    assert _tune.point_of({"method": "ngram", "max_draft_len": None}, "ngram") is None
    assert _tune.point_of({}, "ngram") is None and _tune.point_of(None, "ngram") is None


def test_plan_round_pins_the_served_point_first_and_the_one_left_serving_last():
    objective = {"concurrency": 1, "prompt_set": "short"}
    for seed in range(10):
        schedule = _tune.plan_round("tune", ["none", 2], 1, seed=seed, objective=objective, probes=[2], last=2)
        got = [e["point"] for e in schedule]
        assert got == ["none", 2]
        got = [e["point"] for e in _tune.plan_round("sweep", ["none", 1, 2, 4], 1, seed=seed, first=4, last="none")]
        assert got[0] == 4 and got[-1] == "none"
