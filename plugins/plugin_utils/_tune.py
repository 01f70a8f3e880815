# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
#
# PRIVATE to the sparkops.specdec collection. Not a public API; names and return shapes may
# change in any release without notice.
"""The draft-length tuner as pure functions (no Ansible, no I/O).

``pick`` chooses the draft length, or no speculation (``none``), that best meets an objective
over measured sweep points, and explains the choice with the numbers. ``next_points`` is a search
that measures fewer points than a full sweep; ``evaluate_search`` replays it on a full sweep and
reports its cost and how far its pick is from the full sweep's best.

Objective: ``{"concurrency": c, "prompt_set": s (optional), "ttft_p90_max": seconds or None,
"itl_p90_max": seconds or None}``. Maximise the median output tokens/s at that concurrency over the
points whose median TTFT p90 and ITL p90 meet the bounds.

Noisy-tie rule (documented in docs/benchmark.md): points are ordered by cost, ``none`` first, then by
draft length (a longer draft costs more draft compute and memory). After finding the point with
the best median, the tuner picks the CHEAPEST feasible point whose min-max spread over the repeats
reaches the best median (its max >= the best's median): the difference between them is within
run-to-run noise, so the simpler option wins. With one repeat per point the spread is a single
value and only an exact tie counts.
"""

from __future__ import annotations

from ansible_collections.sparkops.specdec.plugins.module_utils import _bench

NONE = _bench.SPEC_METHOD_NONE
METRIC = "output_tokens_per_second"
DEFAULT_CANDIDATES = (1, 2, 3, 4, 8)
DEFAULT_PROBES = (1, 4)


def _cost(point):
    return (0, 0) if point == NONE else (1, point)


def _label(point):
    return "no speculation" if point == NONE else "draft length %d" % point


def _fmt(stats, unit="tok/s"):
    if stats["n"] > 1:
        return "%.1f %s (%.1f-%.1f over %d runs)" % (stats["median"], unit, stats["min"], stats["max"], stats["n"])
    return "%.1f %s (1 run)" % (stats["median"], unit)


def point_table(sweep, objective):
    """{point: aggregated entry} of the sweep at the objective's concurrency (and prompt set).

    ``sweep``: run summaries (``_bench.summarize_run`` + point/concurrency/prompt_set) or
    ``_bench.aggregate`` entries.
    """
    entries = sweep if sweep and "stats" in sweep[0] else _bench.aggregate(sweep or [])
    concurrency = objective.get("concurrency")
    prompt_set = objective.get("prompt_set")
    table = {}
    for entry in entries:
        if concurrency is not None and entry["concurrency"] != concurrency:
            continue
        if prompt_set is not None and entry["prompt_set"] != prompt_set:
            continue
        if entry["point"] in table:
            raise _bench.BenchError("the sweep has %s twice at concurrency %s: give objective.prompt_set"
                                    % (_label(entry["point"]), concurrency))
        table[entry["point"]] = entry
    return table


def _feasible(entry, objective):
    why = []
    for figure, bound in (("ttft_p90", objective.get("ttft_p90_max")), ("itl_p90", objective.get("itl_p90_max"))):
        value = entry["stats"][figure]["median"]
        if bound is not None and (value is None or value > float(bound)):
            why.append("%s median %s > %g s" % (figure, "n/a" if value is None else "%.3f s" % value, float(bound)))
    return why


def speedup(entry, baseline):
    """Median ratio of output tok/s to the baseline's, with its extreme range (min/max, max/min)."""
    if baseline is None:
        return None
    s, b = entry["stats"][METRIC], baseline["stats"][METRIC]
    if not s["n"] or not b["n"] or not b["median"] or not b["min"]:
        return None
    return {"median": s["median"] / b["median"], "low": s["min"] / b["max"], "high": s["max"] / b["min"]}


def pick(sweep, objective):
    """The point that best meets ``objective``; see the module docstring for the rule.

    Returns ``{"pick", "best_by_median", "reason", "candidates": [{point, median, min, max, feasible,
    why_not, speedup, acceptance_rate, mean_accepted_length}], "objective"}``. ``pick`` is None (with
    the reason) when no point meets the bounds.
    """
    objective = dict(objective or {})
    table = point_table(sweep, objective)
    if not table:
        raise _bench.BenchError("the sweep has no point at concurrency %s%s" % (
            objective.get("concurrency"),
            "" if objective.get("prompt_set") is None else " and prompt set %s" % objective["prompt_set"]))
    baseline = table.get(NONE)
    rows = []
    for point in sorted(table, key=_cost):
        entry = table[point]
        stats = entry["stats"][METRIC]
        why = _feasible(entry, objective)
        rows.append({"point": point, "median": stats["median"], "min": stats["min"], "max": stats["max"],
                     "n": stats["n"], "feasible": not why and stats["median"] is not None, "why_not": why,
                     "speedup": speedup(entry, baseline) if point != NONE else None,
                     "acceptance_rate": entry["stats"]["acceptance_rate"]["median"],
                     "mean_accepted_length": entry["stats"]["mean_accepted_length"]["median"]})
    feasible = [r for r in rows if r["feasible"]]
    result = {"objective": objective, "candidates": rows, "pick": None, "best_by_median": None}
    if not feasible:
        result["reason"] = "no point meets the objective: " + "; ".join(
            "%s: %s" % (_label(r["point"]), ", ".join(r["why_not"]) or "no figures") for r in rows)
        return result
    best = max(feasible, key=lambda r: (r["median"], [-x for x in _cost(r["point"])]))
    chosen = next(r for r in feasible if r["max"] >= best["median"])  # rows are in cost order
    result["pick"] = chosen["point"]
    result["best_by_median"] = best["point"]
    result["reason"] = _explain(chosen, best, table, rows, objective)
    return result


def _explain(chosen, best, table, rows, objective):
    entry = table[chosen["point"]]
    parts = ["%s: %s at concurrency %s" % (_label(chosen["point"]), _fmt(entry["stats"][METRIC]),
                                           objective.get("concurrency"))]
    baseline = table.get(NONE)
    if chosen["point"] != NONE and baseline is not None:
        ratio = chosen["speedup"]
        parts.append("%.2fx the baseline's %s (range %.2f-%.2fx)" % (
            ratio["median"], _fmt(baseline["stats"][METRIC]), ratio["low"], ratio["high"]))
    if chosen["point"] != NONE and chosen["acceptance_rate"] is not None:
        parts.append("acceptance %.3f, mean accepted length %s" % (
            chosen["acceptance_rate"], "n/a" if chosen["mean_accepted_length"] is None
            else "%.2f" % chosen["mean_accepted_length"]))
    if chosen["point"] == NONE:
        spec = [r for r in rows if r["point"] != NONE and r["feasible"]]
        if spec:
            top = max(spec, key=lambda r: r["median"])
            parts.append("the best speculative point, %s, reaches %s%s" % (
                _label(top["point"]), _fmt(table[top["point"]]["stats"][METRIC]),
                "" if top["speedup"] is None else " (%.2fx)" % top["speedup"]["median"]))
    if chosen["point"] != best["point"]:
        parts.append("picked over %s (%s) because its median lies within this point's spread: a noisy tie goes "
                     "to the cheaper option (no speculation, then the shorter draft)"
                     % (_label(best["point"]), _fmt(table[best["point"]]["stats"][METRIC])))
    bounds = [(k, objective.get(k)) for k in ("ttft_p90_max", "itl_p90_max") if objective.get(k) is not None]
    if bounds:
        excluded = [r for r in rows if not r["feasible"]]
        parts.append("bounds %s%s" % (", ".join("%s %g s" % b for b in bounds),
                                      "; excluded: " + "; ".join("%s (%s)" % (_label(r["point"]), ", ".join(r["why_not"]))
                                                                 for r in excluded) if excluded else ""))
    return "; ".join(parts) + "."


# --- search cheaper than a full sweep ------------------------------------------------------

def _predict(table, candidates):
    """Predicted median tok/s of unmeasured draft lengths from the measured ones (model in next_points)."""
    spec = {p: e for p, e in table.items() if p != NONE and e["stats"][METRIC]["median"]}
    if len(spec) < 2:
        return {}
    deepest = max(spec)
    rates = [table[deepest]["acceptance_by_position"].get(str(k)) for k in range(deepest)]
    if any(r is None for r in rates):
        return {}

    def expected(k):
        probs = list(rates[:k])
        while len(probs) < k:
            ratio = min(1.0, probs[-1] / probs[-2]) if len(probs) > 1 and probs[-2] else 1.0
            probs.append(probs[-1] * ratio)
        return 1.0 + sum(probs)

    # seconds per verification step ~ a + b * k (k draft tokens): fitted on the measured points.
    xs = sorted(spec)
    ys = [expected(k) / spec[k]["stats"][METRIC]["median"] for k in xs]
    n = float(len(xs))
    mx, my = sum(xs) / n, sum(ys) / n
    var = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / var if var else 0.0
    intercept = my - slope * mx
    out = {}
    for k in candidates:
        if k in table:
            continue
        step = intercept + slope * k
        if step > 0:
            out[k] = expected(k) / step
    return out


def next_points(measured, candidates=DEFAULT_CANDIDATES, probes=DEFAULT_PROBES, objective=None):
    """The points to measure next ([] when the search is done).

    1. The baseline (``none``) and the coarse probes (default draft lengths 1 and 4).
    2. If no probe beats the baseline beyond the noisy-tie rule (see ``pick``), stop: no speculation.
    3. Otherwise predict the unmeasured draft lengths from the probes: the deepest probe's
       acceptance by position gives the expected tokens per step for any k (extrapolated
       geometrically past it), and seconds per step is fitted as a + b*k on the measured points.
       Measure the one predicted best, if its prediction exceeds the best measured point's max
       (outside its spread), then stop.

    ``measured``: run summaries or aggregate entries of the points measured so far (at the
    objective's concurrency). Costs 3 points when speculation loses or the probes are best, 4 otherwise.
    """
    objective = objective or {}
    candidates = [_bench.normalize_point(c) for c in candidates]
    probes = [p for p in (_bench.normalize_point(x) for x in probes) if p in candidates]
    table = point_table(measured, objective) if measured else {}
    first = [p for p in [NONE] + probes if p not in table]
    if first:
        return first
    extra = [p for p in table if p not in [NONE] + probes]
    if extra:
        return []
    choice = pick(measured, objective)
    if choice["pick"] in (None, NONE):
        return []
    best = max((r for r in choice["candidates"] if r["feasible"]), key=lambda r: r["median"])
    predicted = _predict(table, candidates)
    if not predicted:
        return []
    top = max(predicted, key=lambda k: (predicted[k], -k))
    return [top] if predicted[top] > best["max"] else []


def evaluate_search(full_sweep, objective, candidates=DEFAULT_CANDIDATES, probes=DEFAULT_PROBES,
                    point_seconds=None):
    """Replay ``next_points`` on a full sweep: cost and distance of its pick from the full sweep's best.

    ``point_seconds``: {point: seconds one point took in the full sweep (restart + runs)}; without it
    every point costs the same. Returns ``{"measured", "tuner_pick", "full_pick", "best_by_median",
    "cost_ratio", "tuner_seconds", "full_seconds", "pick_gap", "best_spread", "within_spread", "reason"}``:
    ``pick_gap`` = |median tok/s of the tuner's pick - the best point's median|, ``best_spread`` = the
    best point's max - min; ``within_spread`` = pick_gap <= best_spread.
    """
    objective = dict(objective or {})
    table = point_table(full_sweep, objective)
    wanted = [NONE] + [_bench.normalize_point(c) for c in candidates]
    all_points = [p for p in wanted if p in table]
    # Runs of the tuner's own search (mode tune) lack the points it skipped: the full sweep's cost is then
    # estimated at the mean cost of a measured point, and the distance from the true best is unknown.
    unmeasured = [p for p in wanted if p not in table]
    measured = []
    while True:
        todo = next_points([table[p] for p in measured], candidates, probes, objective)
        todo = [p for p in todo if p in table and p not in measured]
        if not todo:
            break
        measured.extend(todo)
    tuner = pick([table[p] for p in measured], objective)
    full = pick([table[p] for p in all_points], objective)

    def seconds(points):
        return sum(float((point_seconds or {}).get(p, (point_seconds or {}).get(str(p), 1.0))) for p in points)

    tuner_seconds, full_seconds = seconds(measured), seconds(all_points)
    if unmeasured and all_points:
        full_seconds += len(unmeasured) * full_seconds / len(all_points)
    out = {"measured": measured, "tuner_pick": tuner["pick"], "full_pick": None if unmeasured else full["pick"],
           "best_by_median": None if unmeasured else full["best_by_median"], "tuner_seconds": tuner_seconds,
           "full_seconds": full_seconds, "full_seconds_estimated": bool(unmeasured), "unmeasured": unmeasured,
           "cost_ratio": tuner_seconds / full_seconds if full_seconds else None, "reason": tuner["reason"],
           "pick_gap": None, "best_spread": None, "within_spread": None}
    if not unmeasured and tuner["pick"] is not None and full["best_by_median"] is not None:
        best = table[full["best_by_median"]]["stats"][METRIC]
        got = table[tuner["pick"]]["stats"][METRIC]
        out["pick_gap"] = abs(best["median"] - got["median"])
        out["best_spread"] = best["max"] - best["min"]
        out["within_spread"] = out["pick_gap"] <= out["best_spread"] + 1e-12
    return out


# --- the benchmark's rounds ----------------------------------------------------------------

MODES = ("sweep", "tune")


def plan_round(mode, points, repeats, seed=0, objective=None, probes=DEFAULT_PROBES, measured=None, round_index=0,
               first=None, last=None):
    """The block-randomised schedule of the next round: ``[{"block", "slot", "point"}]``; [] when done.

    ``sweep``: every point of ``points`` in the first round, then done. ``tune``: the cheaper search
    (``next_points``) over the draft lengths of ``points``: the baseline and the probes first, then at most
    one predicted best point. ``measured``: run summaries so far (at any concurrency; the search reads the
    objective's). Each round has its own seed (``seed + round_index``) so it can be printed and reproduced.
    ``first`` (the point the server serves when the round starts) and ``last`` (the point the benchmark leaves
    serving) are pinned to the round's ends when it holds them, saving a restart each (``_bench.block_schedule``).
    """
    if mode not in MODES:
        raise _bench.BenchError("mode must be sweep or tune, got %r" % (mode,))
    normalized = [_bench.normalize_point(p) for p in points or []]
    if not normalized:
        raise _bench.BenchError("a benchmark needs at least one point (none or a draft length)")
    if mode == "sweep":
        todo = [] if measured else normalized
    else:
        if NONE not in normalized:
            raise _bench.BenchError("the tuner compares against the baseline: put none in the points")
        candidates = [p for p in normalized if p != NONE]
        if not candidates:
            raise _bench.BenchError("the tuner needs at least one draft length in the points")
        probes = [p for p in (_bench.normalize_point(x) for x in probes or DEFAULT_PROBES) if p in candidates] \
            or candidates[:1]
        done = {s["point"] for s in measured or []}
        todo = [p for p in next_points(measured or [], candidates, probes, objective or {}) if p not in done]
    return _bench.block_schedule(todo, repeats, int(seed) + int(round_index), first=first, last=last) if todo else []


def point_of(served, spec_method):
    """The benchmark point a server serves: ``none`` (no speculation), its draft length when it speculates with the
    benchmark's method ``spec_method``, else None (no point of this benchmark: its first visit restarts it).

    ``served``: ``{"method", "max_draft_len"}`` (the state file's ``running``, or the plan's). Only the order of the
    visits reads it; whether a visit restarts the server is the server role's decision (the launch spec's fingerprint).
    """
    served = served or {}
    method = served.get("method")
    if method in (None, ""):
        return None
    if method == NONE:
        return NONE
    if method != spec_method or served.get("max_draft_len") in (None, ""):
        return None
    try:
        return _bench.normalize_point(served.get("max_draft_len"))
    except _bench.BenchError:
        return None


def estimate_seconds(schedule, runs_per_visit, restart_seconds, run_seconds, current_point=None):
    """Rough duration of a schedule: a restart per visit of a point other than the one serving before it,
    plus ``runs_per_visit`` runs of ``run_seconds`` each. Returns ``{"restarts", "runs", "seconds"}``."""
    restarts = 0
    last = current_point
    for entry in schedule:
        if entry["point"] != last:
            restarts += 1
        last = entry["point"]
    runs = len(schedule) * int(runs_per_visit)
    return {"restarts": restarts, "runs": runs,
            "seconds": restarts * float(restart_seconds) + runs * float(run_seconds)}


# The role's default of specdec_server_draft_revision (and of the target's): what "not set" means for a revision.
DEFAULT_REVISION = "main"


def point_settings(point, spec_method, draft=None):
    """The specdec_server_* values the benchmark serves one point with (the role's include vars, which outrank the
    inventory).

    A draft length: ``spec_method`` with that length and the inventory's draft (``draft``: ``model``, ``revision``,
    ``file`` as the inventory gives them, None when not set; ``speculative_config``, engine vllm's extra
    ``--speculative-config`` keys, {} when not set). The baseline ``none``: method none with the draft and the extra
    ``--speculative-config`` keys unset, since the plan refuses either with method none (nothing would download, serve
    or read them).
    """
    draft = draft or {}
    if point == NONE:
        return {"specdec_server_method": NONE, "specdec_server_max_draft_len": None,
                "specdec_server_draft_model": None, "specdec_server_draft_revision": DEFAULT_REVISION,
                "specdec_server_draft_file": None, "specdec_server_speculative_config": {}}
    return {"specdec_server_method": spec_method, "specdec_server_max_draft_len": int(point),
            "specdec_server_draft_model": draft.get("model") or None,
            "specdec_server_draft_revision": draft.get("revision") or DEFAULT_REVISION,
            "specdec_server_draft_file": draft.get("file") or None,
            "specdec_server_speculative_config": dict(draft.get("speculative_config") or {})}


# Seconds one server restart takes when none was measured on the node and no setting gives it: the documented
# default of each engine (docs/benchmark.md, "Time estimate", names the sources). TensorRT-LLM: about 15 minutes
# for Qwen3-235B-A22B on two Sparks (reported for vLLM on the same pair; no TensorRT-LLM figure is published), an
# estimate until a restart is measured on the node. llama.cpp: 60 s, an estimate for a GGUF of a few GB. vLLM: the
# same 900 s, here a vLLM figure (the note measured vLLM GPTQ-Int4 TP2/EP2 starting in about 15 minutes on that pair);
# a single Spark's smaller model starts sooner, and the first restart measured on the node replaces it.
DEFAULT_RESTART_SECONDS = {"trtllm": 900.0, "llamacpp": 60.0, "vllm": 900.0}


def restart_seconds(setting=None, engine=None, state=None, target_model=None):
    """Seconds a server restart takes, for the estimate, and where the figure comes from.

    The setting (``specdec_benchmark_restart_seconds``) when given; else the start-to-health seconds measured on
    the node for this engine and target model (``running.ready_seconds`` of the deployment's state file, written by
    the server role when it (re)starts a server); else the engine's documented default (an unknown engine: the
    larger default). Returns ``(seconds, source)``, source ``setting``, ``measured`` or ``default``.
    """
    if setting not in (None, ""):
        return float(setting), "setting"
    running = (state or {}).get("running") or {}
    measured = running.get("ready_seconds")
    same = (state or {}).get("engine") == engine and (target_model is None or running.get("target_model") == target_model)
    if same and isinstance(measured, (int, float)) and not isinstance(measured, bool) and measured > 0:
        return float(measured), "measured"
    return DEFAULT_RESTART_SECONDS.get(engine, max(DEFAULT_RESTART_SECONDS.values())), "default"
