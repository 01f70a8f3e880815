# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Action plugin of sparkops.specdec.specdec_bench_plan: controller-side, no host is contacted.

Checks the benchmark's settings and returns the next round of its block-randomised schedule
(plugin_utils/_tune.py plan_round) with a time estimate. The documentation is in
plugins/modules/specdec_bench_plan.py.
"""

from __future__ import annotations

import json
import math

from ansible.errors import AnsibleError
from ansible.plugins.action import ActionBase

from ansible_collections.sparkops.specdec.plugins.module_utils import _bench
from ansible_collections.sparkops.specdec.plugins.plugin_utils import _tune
from ansible_collections.sparkops.specdec.plugins.plugin_utils import _action, _bench_report

_ARGS = frozenset(("mode", "points", "repeats", "seed", "probes", "objective", "concurrency", "prompt_sets", "runs",
                   "round", "restart_seconds", "probe", "num_requests", "max_tokens", "current_point", "engine",
                   "state", "target_model", "allow_restart", "pinned", "prompts", "host", "spec_method", "draft",
                   "served", "final_served"))

# What the role passes as specdec_server_method / specdec_server_max_draft_len when nothing outranks its task vars:
# any other value came from an extra var (-e) or a fact, and would pin every point of the sweep.
UNPINNED = "sparkops-benchmark-point"
# What each point sets (an extra var of the same name pins every point) ...
PINNED = ("specdec_server_method", "specdec_server_max_draft_len")
# ... and what the baseline point none unsets (the plan refuses a draft setting with method none): an extra var of the
# same name keeps it, and the baseline would be refused in the middle of the sweep.
# specdec_server_speculative_config: engine vllm's extra --speculative-config keys (the plan refuses them with method
# none too).
UNSET_AT_NONE = ("specdec_server_draft_model", "specdec_server_draft_revision", "specdec_server_draft_file",
                 "specdec_server_speculative_config")


def _label(point):
    return "none" if point == _tune.NONE else str(point)


def check(args):
    """One line per bad setting (the role's names), [] when all are usable."""
    errors = []
    mode = args.get("mode") or "sweep"
    if mode not in _tune.MODES:
        errors.append("specdec_benchmark_mode: %r is not a mode; set sweep (every point) or tune (the cheaper search)."
                      % (mode,))
    points = args.get("points") or []
    try:
        normalized = [_bench.normalize_point(p) for p in points]
        if not normalized or len(set(normalized)) != len(normalized):
            raise _bench.BenchError("empty or a point twice")
        if any(p != _tune.NONE and not 1 <= p <= 32 for p in normalized):
            raise _bench.BenchError("a draft length outside 1-32")
    except _bench.BenchError as exc:
        errors.append("specdec_benchmark_points: %s (%s); list none and/or draft lengths from 1 to 32 once each, e.g. "
                      "[none, 1, 2, 3, 4, 8]." % (points, exc))
    concurrency = args.get("concurrency") or []
    if not concurrency or not all(isinstance(c, int) and not isinstance(c, bool) and 1 <= c <= 1024
                                  for c in concurrency):
        errors.append("specdec_benchmark_concurrency: %s; list concurrency levels (integers 1-1024), e.g. [1, 4]."
                      % (concurrency,))
    sets = args.get("prompt_sets") or []
    if not sets:
        errors.append("specdec_benchmark_prompt_sets: empty; name at least one prompt set, e.g. [short, long].")
    for name in ("repeats", "num_requests", "max_tokens"):
        value = args.get(name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            errors.append("specdec_benchmark_%s: %r; set an integer of at least 1." % (name, value))
    objective = args.get("objective") or {}
    if objective.get("concurrency") not in concurrency:
        errors.append("specdec_benchmark_objective.concurrency: %r is not one of specdec_benchmark_concurrency %s; "
                      "pick one of them." % (objective.get("concurrency"), concurrency))
    if objective.get("prompt_set") is not None and objective["prompt_set"] not in sets:
        errors.append("specdec_benchmark_objective.prompt_set: %r is not one of specdec_benchmark_prompt_sets %s."
                      % (objective["prompt_set"], sets))
    if objective.get("prompt_set") is None and len(sets) > 1:
        errors.append("specdec_benchmark_objective.prompt_set: not set, with %d prompt sets; name the one the tuner "
                      "optimises for, e.g. %s." % (len(sets), sets[0]))
    for key in ("ttft_p90_max", "itl_p90_max"):
        value = objective.get(key)
        if value is not None and (not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0):
            errors.append("specdec_benchmark_objective.%s: %r; set seconds > 0, or null for no bound." % (key, value))
    if mode == "tune" and not errors and _tune.NONE not in normalized:
        errors.append("specdec_benchmark_points: mode tune compares against the baseline; add none to the points.")
    restart = args.get("restart_seconds")
    try:
        bad_restart = restart not in (None, "") and (not math.isfinite(float(restart)) or float(restart) <= 0)
    except (TypeError, ValueError):
        bad_restart = True
    if bad_restart:
        errors.append("specdec_benchmark_restart_seconds: %r; set the seconds a server restart takes (> 0), or null "
                      "for the one measured on the node or the engine's default." % (restart,))
    errors += check_pinned(args.get("pinned"), baseline=_has_baseline(points))
    errors += read_prompts(args.get("prompts"), sets)[1]
    return errors


def check_pinned(pinned, baseline=True):
    """The sweep sets the method and the draft length of each point as include vars; an extra var (-e) or a fact of
    the same name wins over them, and every point would serve the same thing. With the baseline among the points
    (``baseline``), the same for the draft settings the point none unsets."""
    pinned = pinned or {}
    errors = []
    names = sorted(name for name in PINNED if name in pinned and str(pinned[name]) != UNPINNED)
    if names:
        errors.append("%s: set as an extra var (-e) or a fact, which overrides every sweep point; remove it from the "
                      "command line (set it in the inventory instead, or list the draft lengths in "
                      "specdec_benchmark_points)." % " / ".join(names))
    for name in UNSET_AT_NONE if baseline else ():
        value = pinned.get(name, UNPINNED)
        if str(value) == UNPINNED or value in (None, "", {}) or (name.endswith("_revision")
                                                                 and str(value) == _tune.DEFAULT_REVISION):
            continue
        errors.append("%s: set as an extra var (-e) or a fact, which the baseline point none cannot unset (method none "
                      "refuses a %s); set it in the inventory instead, or remove none from "
                      "specdec_benchmark_points." % (name, "draft setting" if "draft" in name else
                                                     "--speculative-config key"))
    return errors


def _has_baseline(points):
    """Whether the points hold none (as specdec_benchmark_points spells it; a bad point is reported elsewhere)."""
    for point in points or []:
        try:
            if _bench.normalize_point(point) == _tune.NONE:
                return True
        except _bench.BenchError:
            continue
    return False


def read_prompts(texts, sets):
    """({name: [prompt, ...]}, errors) from the prompt set files' texts ({name: text, or None when no file}).

    ``texts`` None: not read (the plan only schedules), no error."""
    if texts is None:
        return {}, []
    prompts, errors = {}, []
    for name in sets:
        text = texts.get(name)
        if text in (None, ""):
            errors.append("specdec_benchmark_prompt_sets: %r has no file %s.json (in specdec_benchmark_prompts_dir, or "
                          "the role's files/prompts: short, long); name an existing prompt set or add the file."
                          % (name, name))
            continue
        try:
            data = json.loads(text) if isinstance(text, str) else text
            found = data.get("prompts") if isinstance(data, dict) else None
        except ValueError as exc:
            found, data = None, exc
        if not isinstance(found, list) or not found:
            errors.append("specdec_benchmark_prompt_sets: %s.json is not a prompt set (%s); write JSON like "
                          "{\"prompts\": [\"a prompt\", ...]} with at least one prompt."
                          % (name, data if isinstance(data, ValueError) else "no list 'prompts'"))
            continue
        prompts[name] = found
    return prompts, errors


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = _action.task_args(self, _ARGS)
        for name in ("repeats", "num_requests", "max_tokens", "seed", "round"):
            try:
                if args.get(name) is not None:
                    args[name] = int(str(args[name]))
            except ValueError:
                pass
        args["concurrency"] = [int(str(c)) if str(c).isdigit() else c for c in args.get("concurrency") or []]
        objective = dict(args.get("objective") or {})
        if str(objective.get("concurrency", "")).isdigit():
            objective["concurrency"] = int(str(objective["concurrency"]))
        args["objective"] = objective
        errors = check(args)
        if errors:
            result.update(failed=True, msg="The benchmark's settings have %d problem(s), nothing was changed:\n- %s"
                          % (len(errors), "\n- ".join(errors)))
            return result
        mode = args.get("mode") or "sweep"
        # The point the server serves now (opens the round: no restart) and the one the benchmark leaves serving
        # (closes it: no restart back), from the method and draft length of each (served, final_served).
        current = args.get("current_point")
        current = None if current in (None, "") else _bench.normalize_point(current)
        if args.get("served") is not None:
            current = _tune.point_of(args["served"], args.get("spec_method"))
        last = _tune.point_of(args["final_served"], args.get("spec_method")) if args.get("final_served") else None
        try:
            measured = _bench_report.summarize(args.get("runs") or []) if args.get("runs") else []
            schedule = _tune.plan_round(mode, args["points"], args["repeats"], args.get("seed") or 0, objective,
                                        args.get("probes") or _tune.DEFAULT_PROBES, measured, args.get("round") or 0,
                                        first=current, last=last)
        except _bench.BenchError as exc:
            result.update(failed=True, msg="specdec_bench_plan: %s" % exc)
            return result
        except (KeyError, TypeError, ValueError) as exc:
            raise AnsibleError("specdec_bench_plan: runs are not specdec_loadgen results (%s)" % exc)
        visits = [(c, s) for s in args["prompt_sets"] for c in args["concurrency"]]
        # Each visit with its runs and the specdec_server_* values that serve its point (the role's include vars).
        segments = [dict(entry, runs=[{"concurrency": c, "prompt_set": s} for c, s in visits],
                         serve=_tune.point_settings(entry["point"], args.get("spec_method"), args.get("draft")))
                    for entry in schedule]
        # Seconds per run: the probe request's own speed (tokens/s at concurrency 1), one request after another
        # per worker; a rough floor, since a busy server is slower per request.
        tps = None
        probe = args.get("probe") or {}
        reqs = [r for r in probe.get("requests") or [] if r.get("e2e") and r.get("output_tokens")]
        if reqs:
            tps = sum(r["output_tokens"] for r in reqs) / sum(float(r["e2e"]) for r in reqs)
        run_seconds = None
        if tps:
            run_seconds = sum(math.ceil(args["num_requests"] / float(c)) * args["max_tokens"] / tps
                              for c, dummy in visits) / len(visits)
        restart, source = _tune.restart_seconds(args.get("restart_seconds"), args.get("engine"), args.get("state"),
                                                args.get("target_model"))
        estimate = _tune.estimate_seconds(schedule, len(visits), restart, run_seconds or 0, current)
        estimate.update(restart_seconds=restart, restart_source=source, run_seconds=run_seconds,
                        probe_tokens_per_second=tps)
        why = {"setting": "specdec_benchmark_restart_seconds", "measured": "measured on the node",
               "default": "the %s default, not measured on the node" % (args.get("engine") or "largest engine")}
        order = ", ".join("%s(b%d)" % (_label(e["point"]), e["block"]) for e in schedule)
        if schedule:
            msg = ("%s round %d: %d point visit(s) [%s], %d run(s) of %d request(s) each (concurrency %s, prompt sets "
                   "%s); about %d restart(s) x %.0f s (%s) + runs ~ %.0f min%s."
                   % (mode, args.get("round") or 0, len(schedule), order, estimate["runs"], args["num_requests"],
                      "/".join(str(c) for c in args["concurrency"]), "/".join(args["prompt_sets"]),
                      estimate["restarts"], restart, why[source], estimate["seconds"] / 60.0,
                      "" if run_seconds else " (runs not estimated: no probe figures)"))
        else:
            msg = "%s: no more points to measure (round %d)." % (mode, args.get("round") or 0)
        if args.get("allow_restart") is not None and schedule and not _bool(args["allow_restart"]):
            result.update(failed=True, msg="specdec_benchmark_allow_restart: the benchmark restarts the server of %s "
                          "for each of its %d point visits (%s); serving stops while the weights reload each time. "
                          "Re-run with -e specdec_benchmark_allow_restart=true. Nothing was changed."
                          % (args.get("host") or "the head", len(schedule), msg))
            return result
        result.update(changed=False, schedule=schedule, segments=segments, done=not schedule, estimate=estimate,
                      prompts=read_prompts(args.get("prompts"), args["prompt_sets"])[0], msg=msg)
        return result


def _bool(value):
    return value is True or str(value).strip().lower() in ("true", "yes", "on", "1")
