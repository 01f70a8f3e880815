# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The benchmark report on the controller (private to sparkops.specdec.specdec_bench_report).

``build`` turns load-generator runs into figures, statistics, the tuner's pick, the search's cost
and the correctness gate (all decided in module_utils/_bench.py, _tune.py, _gate.py); ``write``
puts them on disk: ``report.json`` (every raw figure and the series behind each plot),
``runs.csv`` (one row per run), ``summary.csv`` (one row per point), ``report.md`` (the table) and
four PNG plots drawn with matplotlib's Agg backend (no display needed).
"""

from __future__ import annotations

import csv
import io
import json
import os

from ansible_collections.sparkops.specdec.plugins.module_utils import _bench
from ansible_collections.sparkops.specdec.plugins.plugin_utils import _gate, _tune
from ansible_collections.sparkops.specdec.plugins.plugin_utils import _files

PLOTS = ("throughput_vs_draft", "spec_vs_baseline", "itl_distribution", "acceptance_by_position")
RUN_COLUMNS = ("point", "concurrency", "prompt_set", "block", "engine") + (
    "requests", "wall_seconds", "output_tokens", "output_tokens_per_second", "request_throughput",
    "user_tokens_per_second", "ttft_p50", "ttft_p90", "ttft_p99", "itl_mean", "itl_p50", "itl_p90", "itl_p99",
    "e2e_p50", "e2e_p90", "e2e_p99", "tpot_p50", "tokens_per_chunk", "draft_tokens", "accepted_tokens", "drafts",
    "acceptance_rate", "mean_accepted_length", "per_position_sum", "per_position_sum_ok", "acceptance_length_gauge",
    "timings_draft_tokens", "timings_accepted_tokens", "cpu_pressure_some_avg10_before",
    "cpu_pressure_some_avg10_after", "mem_available_bytes_before", "mem_available_bytes_after",
    "gpu_sm_clock_mhz_before", "gpu_sm_clock_mhz_after", "gpu_temperature_c_before", "gpu_temperature_c_after",
    "gpu_power_w_before", "gpu_power_w_after")


def _label(point):
    return "none" if point == _bench.SPEC_METHOD_NONE else "draft %d" % point


def summarize(runs, engine=None):
    """Each run is ``{point, concurrency, prompt_set, block, engine, loadgen}`` (loadgen: the registered
    specdec_loadgen result) -> run summaries (figures + identity), in the given order."""
    out = []
    for index, item in enumerate(runs or []):
        if not isinstance(item, dict) or not isinstance(item.get("loadgen"), dict):
            raise _bench.BenchError("runs[%d] needs loadgen: the registered result of sparkops.specdec.specdec_loadgen"
                                    % index)
        point = _bench.normalize_point(item.get("point"))
        engine = item.get("engine") or engine or _bench.detect_engine(item["loadgen"].get("metrics_after") or "") or ""
        if engine == "standin":
            _bench.check_not_standin([item["loadgen"].get("metrics_after")])
        try:
            figures = _bench.summarize_run(item["loadgen"], engine or "llamacpp", point != _bench.SPEC_METHOD_NONE,
                                           item.get("concurrency"))
        except _bench.BenchError as exc:
            raise _bench.BenchError("run %d (%s, concurrency %s, prompt set %s): %s" % (
                index, _label(point), item.get("concurrency"), item.get("prompt_set"), exc))
        figures.update(point=point, concurrency=item.get("concurrency", figures.get("concurrency")),
                       prompt_set=item.get("prompt_set"), block=item.get("block"), engine=engine)
        out.append(figures)
    return out


def _median(entry, figure):
    return entry["stats"][figure]["median"]


def _tps(entry):
    return entry["stats"]["output_tokens_per_second"]


def plot_series(entries):
    """The data behind each plot, as written to report.json."""
    series = {name: {"series": []} for name in PLOTS}
    by_conc = {}
    for entry in entries:
        by_conc.setdefault((entry["prompt_set"], entry["concurrency"]), []).append(entry)
    for (prompt_set, conc), group in sorted(by_conc.items(), key=lambda kv: (str(kv[0][0]), kv[0][1] or 0)):
        base = next((e for e in group if e["point"] == _bench.SPEC_METHOD_NONE), None)
        spec = [e for e in group if e["point"] != _bench.SPEC_METHOD_NONE]
        series["throughput_vs_draft"]["series"].append({
            "prompt_set": prompt_set, "concurrency": conc,
            "draft_length": [e["point"] for e in spec],
            "tokens_per_second_median": [_tps(e)["median"] for e in spec],
            "tokens_per_second_min": [_tps(e)["min"] for e in spec],
            "tokens_per_second_max": [_tps(e)["max"] for e in spec],
            "acceptance_rate_median": [_median(e, "acceptance_rate") for e in spec],
            "baseline_tokens_per_second": None if base is None else _tps(base)["median"],
            "baseline_min": None if base is None else _tps(base)["min"],
            "baseline_max": None if base is None else _tps(base)["max"]})
        if base is not None:
            series["spec_vs_baseline"]["series"].append({
                "prompt_set": prompt_set, "concurrency": conc, "draft_length": [e["point"] for e in spec],
                "speedup": [_tune.speedup(e, base) for e in spec]})
        series["itl_distribution"]["series"].append({
            "prompt_set": prompt_set, "concurrency": conc,
            "points": [{"point": e["point"], "itl_seconds": sorted(e["itl_values"])} for e in group]})
        series["acceptance_by_position"]["series"].append({
            "prompt_set": prompt_set, "concurrency": conc,
            "points": [{"point": e["point"], "positions": [int(k) for k in e["acceptance_by_position"]],
                        "acceptance": list(e["acceptance_by_position"].values())} for e in spec]})
    return series


def build(runs, objective=None, candidates=None, probes=None, point_seconds=None, gate=None, metadata=None,
          engine=None):
    """Everything the report holds, as one JSON-serialisable dict (see the action's RETURN)."""
    summaries = summarize(runs, engine)
    entries = _bench.aggregate(summaries)
    report = {"metadata": metadata or {}, "runs": summaries, "points": entries, "plots": plot_series(entries),
              "tuner": None, "search": None, "gate": None,
              "problems": sorted({p for s in summaries for p in s.get("problems") or []})}
    raw = []
    for item, summary in zip(runs, summaries):
        raw.append({"point": summary["point"], "concurrency": summary["concurrency"],
                    "prompt_set": summary["prompt_set"], "block": summary["block"], "loadgen": item["loadgen"]})
    report["raw"] = raw
    if objective:
        report["tuner"] = _tune.pick(summaries, objective)
        cands = candidates or sorted({s["point"] for s in summaries if s["point"] != _bench.SPEC_METHOD_NONE})
        report["search"] = _tune.evaluate_search(summaries, objective, cands, probes or _tune.DEFAULT_PROBES,
                                                 point_seconds)
    if gate:
        thresholds = {k: gate[k] for k in ("early_words", "max_early", "max_late_fraction", "tie_margin")
                      if gate.get(k) is not None}
        if gate.get("from_runs"):
            report["gate"] = gate_from_runs(runs, summaries, report["tuner"], gate.get("prompt_set"), thresholds)
        else:
            report["gate"] = _gate.compare(gate["baseline"], gate["speculative"], **thresholds)
    return report


def _texts(run):
    """{prompt_id: text} of one run (a prompt sent again in the same run keeps its first text)."""
    out = []
    seen = set()
    for request in run["loadgen"].get("requests") or []:
        key = str(request.get("prompt_id"))
        if key in seen:
            continue
        if request.get("text") is None:
            raise _gate.GateError("a run at concurrency 1 has no texts: run the load generator with record_text")
        seen.add(key)
        out.append({"prompt_id": key, "text": request["text"], "tokens": request.get("tokens")})
    return out


def gate_from_runs(runs, summaries, tuner, prompt_set=None, thresholds=None):
    """The correctness gate on the sweep's own runs at concurrency 1 (temperature 0): the first run of the
    baseline against the first run of the speculative point that matters (the tuner's pick, else the best
    speculative point by median, else the longest draft length). Every other speculative point is compared too;
    the gate passes when all do. Returns the pick's comparison plus ``points`` ({point: passed, msg, counts})."""
    first = {}
    for item, summary in zip(runs, summaries):
        if summary["concurrency"] != 1 or (prompt_set is not None and summary["prompt_set"] != prompt_set):
            continue
        first.setdefault((summary["point"], summary["prompt_set"]), item)
    sets = sorted({key[1] for key in first})
    if not sets or not any(key[0] == _bench.SPEC_METHOD_NONE for key in first):
        raise _gate.GateError("the correctness gate needs runs of none and of a draft length at concurrency 1%s"
                              % ("" if prompt_set is None else " with prompt set %s" % prompt_set))
    spec_points = sorted({key[0] for key in first if key[0] != _bench.SPEC_METHOD_NONE})
    if not spec_points:
        raise _gate.GateError("the correctness gate needs a speculative point at concurrency 1")
    main = None
    if tuner and tuner.get("pick") not in (None, _bench.SPEC_METHOD_NONE):
        main = tuner["pick"]
    elif tuner:
        ranked = sorted((r for r in tuner["candidates"] if r["point"] != _bench.SPEC_METHOD_NONE
                         and r["median"] is not None), key=lambda r: -r["median"])
        main = ranked[0]["point"] if ranked else None
    if main not in spec_points:
        main = spec_points[-1]
    results = {}
    for point in spec_points:
        base, spec = [], []
        for name in sets:
            if (point, name) in first and (_bench.SPEC_METHOD_NONE, name) in first:
                base += [dict(t, prompt_id="%s/%s" % (name, t["prompt_id"]))
                         for t in _texts(first[(_bench.SPEC_METHOD_NONE, name)])]
                spec += [dict(t, prompt_id="%s/%s" % (name, t["prompt_id"])) for t in _texts(first[(point, name)])]
        results[point] = _gate.compare(base, spec, **(thresholds or {}))
    out = dict(results[main])
    out["point"] = main
    out["points"] = {str(p): {"passed": r["passed"], "msg": r["msg"], "counts": r["counts"], "prompts": r["prompts"]}
                     for p, r in results.items()}
    if not all(r["passed"] for r in results.values()):
        out["passed"] = False
        out["msg"] = "correctness gate FAILED: " + "; ".join(
            "draft length %s: %s" % (p, r["msg"]) for p, r in results.items() if not r["passed"])
    return out


def _token_cell(token):
    """A token in a Markdown cell: quoted (its leading space shows), pipes and newlines escaped; - when none."""
    if token is None:
        return "-"
    return "`%s`" % json.dumps(token)[1:-1].replace("|", "\\|").replace("`", "'")


def _fmt(value, digits=1, scale=1.0):
    return "-" if value is None else "%.*f" % (digits, value * scale)


def _spread(stats, digits=1, scale=1.0):
    if not stats["n"]:
        return "-"
    if stats["n"] == 1:
        return _fmt(stats["median"], digits, scale)
    return "%s (%s-%s)" % (_fmt(stats["median"], digits, scale), _fmt(stats["min"], digits, scale),
                           _fmt(stats["max"], digits, scale))


def markdown(report):
    lines = ["# Speculative decoding benchmark", ""]
    meta = report.get("metadata") or {}
    for key in sorted(meta):
        value = meta[key]
        if key == "visits" and isinstance(value, list):
            # Each point visit and whether the server restarted for it (specdec_benchmark's point.yml).
            value = ", ".join("%s (%s)" % (_label(_bench.normalize_point(v.get("point"))),
                                           "restart" if v.get("action") in ("start", "restart") else "no restart")
                              for v in value if isinstance(v, dict)) or "none"
        lines.append("- %s: %s" % (key, value))
    if meta:
        lines.append("")
    lines += ["Medians over repeated runs, min-max in brackets. Times in ms. Speed-up = median tok/s / the "
              "baseline's median (range: worst to best pairing).", ""]
    groups = {}
    for entry in report["points"]:
        groups.setdefault((entry["prompt_set"], entry["concurrency"]), []).append(entry)
    for (prompt_set, conc), group in groups.items():
        base = next((e for e in group if e["point"] == _bench.SPEC_METHOD_NONE), None)
        lines += ["## Prompt set %s, concurrency %s" % (prompt_set, conc), "",
                  "| point | runs | output tok/s | speed-up | TTFT p90 | ITL p50 | ITL p90 | ITL p99 | E2E p90 | "
                  "acceptance | mean accepted length | CPU PSI avg10 |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for e in group:
            s = e["stats"]
            ratio = _tune.speedup(e, base) if base is not None and e["point"] != _bench.SPEC_METHOD_NONE else None
            lines.append("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                _label(e["point"]), e["repeats"], _spread(s["output_tokens_per_second"]),
                "-" if ratio is None else "%.2fx (%.2f-%.2f)" % (ratio["median"], ratio["low"], ratio["high"]),
                _spread(s["ttft_p90"], 0, 1000), _spread(s["itl_p50"], 2, 1000), _spread(s["itl_p90"], 0, 1000),
                _spread(s["itl_p99"], 0, 1000), _spread(s["e2e_p90"], 0, 1000), _spread(s["acceptance_rate"], 3),
                _spread(s["mean_accepted_length"], 2), _spread(s["cpu_pressure_some_avg10_after"], 1)))
        lines.append("")
    if report.get("tuner"):
        tuner = report["tuner"]
        picked = "nothing" if tuner["pick"] is None else _label(tuner["pick"])
        lines += ["## Tuner", "", "Pick: **%s**. %s" % (picked, tuner["reason"]), ""]
    if report.get("search"):
        s = report["search"]
        if s.get("full_seconds_estimated"):
            lines += ["Search: measured %s; cost %s of a full sweep (estimated: %s not measured, each costed at the "
                      "mean of a measured point); the distance of its pick from the best point needs a full sweep "
                      "(mode sweep)." % (", ".join(_label(p) for p in s["measured"]), _fmt(s["cost_ratio"], 2),
                                         ", ".join(_label(p) for p in s["unmeasured"])), ""]
        else:
            lines += ["Search: measured %s; cost %s of a full sweep; its pick is %s tok/s from the best point, whose "
                      "spread is %s tok/s (%s)." % (
                          ", ".join(_label(p) for p in s["measured"]), _fmt(s["cost_ratio"], 2),
                          _fmt(s["pick_gap"], 2), _fmt(s["best_spread"], 2),
                          "within" if s["within_spread"] else "NOT within"), ""]
    if report.get("gate"):
        gate = report["gate"]
        lines += ["## Correctness gate", "", gate["msg"], ""]
        # One table per draft length compared (gate from the runs), else the one comparison.
        tables = [("draft length %s: %s" % (point, res["msg"]), res["prompts"])
                  for point, res in sorted((gate.get("points") or {}).items(), key=lambda kv: int(kv[0]))
                  if res.get("prompts") is not None] or [(None, gate["prompts"])]
        for title, prompts in tables:
            if title:
                lines += ["### " + title, ""]
            lines += ["| prompt | status | first diverging word | baseline token | speculative token | margin (nats) "
                      "| margin in the speculative run (nats) |", "|---|---|---|---|---|---|---|"]
            lines += ["| %s | %s | %s | %s | %s | %s | %s |" % (
                p["prompt_id"], p["status"], "-" if p["first_diverging_word"] is None else p["first_diverging_word"],
                _token_cell((p.get("tie") or {}).get("baseline_token")),
                _token_cell((p.get("tie") or {}).get("speculative_token")),
                _nats((p.get("tie") or {}).get("margin")), _nats((p.get("tie") or {}).get("speculative_margin")))
                for p in prompts]
            lines.append("")
    if report.get("problems"):
        lines += ["## Problems", ""] + ["- %s" % p for p in report["problems"]] + [""]
    lines += ["Plots: %s." % ", ".join("`%s.png`" % name for name in PLOTS), ""]
    return "\n".join(lines)


def _nats(value):
    return "-" if value is None else "%.3f" % value


def _csv(rows, columns):
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(columns), extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: row.get(k) for k in columns})
    return buf.getvalue()


def summary_rows(entries):
    rows = []
    for e in entries:
        row = {"point": e["point"], "concurrency": e["concurrency"], "prompt_set": e["prompt_set"],
               "repeats": e["repeats"]}
        for name, stats in e["stats"].items():
            for key in ("median", "min", "max", "iqr"):
                row["%s_%s" % (name, key)] = stats[key]
        rows.append(row)
    columns = ["point", "concurrency", "prompt_set", "repeats"] + [
        "%s_%s" % (name, key) for name in _bench.FIGURES for key in ("median", "min", "max", "iqr")]
    return rows, columns


def _atomic(path, data):
    _files.write_private(path, data, ".bench-report.")


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise _bench.BenchError("the report's plots need matplotlib in the controller's Python (it is in the "
                                "collection's requirements.txt: pip install -r requirements.txt), or plots: false")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _ticker():
    import matplotlib.ticker
    return matplotlib.ticker


def _color(plt, index):
    return plt.get_cmap("tab10")(index % 10)


def draw(report, out_dir):
    """The four PNGs from report["plots"]; returns {name: path}."""
    plt = _pyplot()
    paths = {}
    plots = report["plots"]

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.5))
    for i, s in enumerate(plots["throughput_vs_draft"]["series"]):
        name = "c=%s %s" % (s["concurrency"], s["prompt_set"] or "")
        color = _color(plt, i)
        if s["draft_length"]:
            med = s["tokens_per_second_median"]
            err = [[m - lo for m, lo in zip(med, s["tokens_per_second_min"])],
                   [hi - m for m, hi in zip(med, s["tokens_per_second_max"])]]
            ax1.errorbar(s["draft_length"], med, yerr=err, marker="o", capsize=3, color=color, label=name)
            acc = [(d, a) for d, a in zip(s["draft_length"], s["acceptance_rate_median"]) if a is not None]
            if acc:
                ax2.plot([pair[0] for pair in acc], [pair[1] for pair in acc], marker="o", color=color, label=name)
        if s["baseline_tokens_per_second"] is not None:
            ax1.axhline(s["baseline_tokens_per_second"], color=color, linestyle="--", linewidth=1,
                        label="%s no speculation" % name)
    ax1.set_title("Output tok/s vs draft length")
    ax1.set_xlabel("draft length (tokens)")
    ax1.set_ylabel("output tokens/s (median, min-max)")
    ax1.legend(fontsize=7)
    ax1.grid(alpha=0.3)
    # Draft lengths are whole numbers: integer ticks, half a length of margin (one length alone is not a 0.2 span).
    lengths = sorted({d for s in plots["throughput_vs_draft"]["series"] for d in s["draft_length"] or []})
    for axis in (ax1, ax2):
        axis.xaxis.set_major_locator(_ticker().MaxNLocator(integer=True, min_n_ticks=1))
        if lengths:
            axis.set_xlim(lengths[0] - 0.5, lengths[-1] + 0.5)
    ax2.set_title("Acceptance rate vs draft length")
    ax2.set_xlabel("draft length (tokens)")
    ax2.set_ylabel("accepted / drafted tokens")
    ax2.set_ylim(0, 1.05)
    ax2.grid(alpha=0.3)
    if ax2.lines:
        ax2.legend(fontsize=7)
    fig.suptitle("Output tok/s and acceptance vs draft length, per concurrency")
    fig.tight_layout()
    paths["throughput_vs_draft"] = _save(fig, plt, out_dir, "throughput_vs_draft")

    fig, ax = plt.subplots(figsize=(8, 4.5))
    groups = plots["spec_vs_baseline"]["series"]
    width = 0.8 / max(1, len(groups))
    lengths = sorted({d for s in groups for d in s["draft_length"]})
    for i, s in enumerate(groups):
        xs, ys, lo, hi = [], [], [], []
        for d, r in zip(s["draft_length"], s["speedup"]):
            if r is None:
                continue
            xs.append(lengths.index(d) + (i - (len(groups) - 1) / 2.0) * width)
            ys.append(r["median"])
            lo.append(r["median"] - r["low"])
            hi.append(r["high"] - r["median"])
        ax.bar(xs, ys, width=width, yerr=[lo, hi], capsize=3, color=_color(plt, i),
               label="c=%s %s" % (s["concurrency"], s["prompt_set"] or ""))
    ax.axhline(1.0, color="black", linewidth=1, linestyle="--", label="no speculation (1.0x)")
    ax.set_xticks(range(len(lengths)))
    ax.set_xticklabels([str(d) for d in lengths])
    ax.set_xlabel("draft length (tokens)")
    ax.set_ylabel("speed-up of output tok/s vs no speculation")
    ax.set_title("Speculation vs baseline: speed-up (median, worst-best range)")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    paths["spec_vs_baseline"] = _save(fig, plt, out_dir, "spec_vs_baseline")

    fig, ax = plt.subplots(figsize=(8, 4.5))
    itl = plots["itl_distribution"]["series"]
    chosen = min(itl, key=lambda s: (s["concurrency"] or 0)) if itl else None
    if chosen:
        for i, p in enumerate(chosen["points"]):
            values = [max(v, 1e-6) * 1000 for v in p["itl_seconds"]]
            if not values:
                continue
            ys = [(k + 1) / float(len(values)) for k in range(len(values))]
            ax.step(values, ys, where="post", color=_color(plt, i), label=_label(p["point"]))
        ax.set_xscale("log")
        ax.set_title("Inter-token latency distribution (ECDF), concurrency %s, prompt set %s"
                     % (chosen["concurrency"], chosen["prompt_set"]))
    ax.set_xlabel("gap between content chunks (ms, log scale)")
    ax.set_ylabel("fraction of gaps <= x")
    ax.grid(alpha=0.3, which="both")
    if ax.lines:
        ax.legend(fontsize=7)
    fig.tight_layout()
    paths["itl_distribution"] = _save(fig, plt, out_dir, "itl_distribution")

    fig, ax = plt.subplots(figsize=(8, 4.5))
    acc = plots["acceptance_by_position"]["series"]
    chosen = min(acc, key=lambda s: (s["concurrency"] or 0)) if acc else None
    if chosen and chosen["points"]:
        width = 0.8 / len(chosen["points"])
        for i, p in enumerate(chosen["points"]):
            xs = [pos + 1 + (i - (len(chosen["points"]) - 1) / 2.0) * width for pos in p["positions"]]
            ax.bar(xs, p["acceptance"], width=width, color=_color(plt, i), label=_label(p["point"]))
        ax.set_title("Acceptance by draft position, concurrency %s, prompt set %s"
                     % (chosen["concurrency"], chosen["prompt_set"]))
        ax.legend(fontsize=7)
    else:
        ax.set_title("Acceptance by draft position (no per-position counters)")
    ax.xaxis.set_major_locator(_ticker().MaxNLocator(integer=True, min_n_ticks=1))
    ax.set_xlabel("draft position (1 = first drafted token)")
    ax.set_ylabel("accepted at this position per draft")
    ax.set_ylim(0, 1.05)
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    paths["acceptance_by_position"] = _save(fig, plt, out_dir, "acceptance_by_position")
    return paths


def _save(fig, plt, out_dir, name):
    path = os.path.join(out_dir, name + ".png")
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    _atomic(path, buf.getvalue())
    return path


def write(report, out_dir, plots=True):
    """Write every file into out_dir (created when missing); returns {kind: path}."""
    out_dir = os.path.abspath(os.path.expanduser(out_dir))
    os.makedirs(out_dir, exist_ok=True)
    files = {}
    if plots:
        report["plots_files"] = files_png = draw(report, out_dir)
        files.update({"png_" + k: v for k, v in files_png.items()})
    for name, entry in report["plots"].items():
        entry["file"] = "%s.png" % name if plots else None
    files["json"] = os.path.join(out_dir, "report.json")
    _atomic(files["json"], json.dumps(report, indent=1, sort_keys=True, default=str) + "\n")
    files["runs_csv"] = os.path.join(out_dir, "runs.csv")
    _atomic(files["runs_csv"], _csv(report["runs"], RUN_COLUMNS))
    rows, columns = summary_rows(report["points"])
    files["summary_csv"] = os.path.join(out_dir, "summary.csv")
    _atomic(files["summary_csv"], _csv(rows, columns))
    files["markdown"] = os.path.join(out_dir, "report.md")
    _atomic(files["markdown"], markdown(report))
    return files


def headline(report):
    """Headline figures for set_stats / the play's output."""
    out = {}
    tuner = report.get("tuner")
    if tuner:
        out["pick"] = tuner["pick"]
        out["reason"] = tuner["reason"]
    search = report.get("search")
    if search:
        out["tuner_cost_ratio"] = search["cost_ratio"]
        out["tuner_pick_gap"] = search["pick_gap"]
        out["tuner_within_spread"] = search["within_spread"]
    if report.get("gate"):
        out["gate_passed"] = report["gate"]["passed"]
    best = {}
    for e in report["points"]:
        med = e["stats"]["output_tokens_per_second"]["median"]
        key = "c%s" % e["concurrency"]
        if med is not None and (key not in best or med > best[key]["tokens_per_second"]):
            best[key] = {"point": e["point"], "tokens_per_second": med,
                         "acceptance_rate": e["stats"]["acceptance_rate"]["median"]}
    out["best_by_concurrency"] = best
    return out
