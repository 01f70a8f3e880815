#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: specdec_bench_report
short_description: Turn benchmark runs into figures, the tuner's pick and a report (JSON, CSV, Markdown, PNG) on the controller
version_added: 0.2.0
description:
  - An action plugin, run on the controller; it contacts no host. It reads the registered results of
    M(sparkops.specdec.specdec_loadgen), one per run, and computes per run the output tokens/s (total output tokens
    / wall seconds), request throughput (requests/s), user tokens/s (mean over requests of output tokens / end-to-end
    seconds), TTFT, inter-token latency (gaps between content chunks) and end-to-end latency p50/p90/p99 (seconds),
    and from the server's counters differenced over the run the draft tokens, accepted tokens, acceptance rate
    (accepted / drafted), mean accepted length (1 + accepted / drafts, llama.cpp's definition; TensorRT-LLM drafts are
    its position-0 drafted count) and acceptance by draft position (per-position accepted / drafts; the
    per-position counts are checked to sum to the accepted tokens).
  - Repeated runs of a point (draft length or V(none)) are summarised by median, min-max and IQR.
  - With O(objective), picks the draft length or V(none) with the tuner of C(plugin_utils/_tune.py) (the noisy-tie
    rule prefers no speculation, then the shorter draft, when the best median lies within the cheaper point's
    min-max spread) and replays its cheaper search on these runs (cost ratio, and the distance of its pick from the
    best point compared with that point's spread).
  - With O(gate), runs the correctness gate of C(plugin_utils/_gate.py).
  - "Writes to O(output_dir): C(report.json) (metadata, every run's figures, every run's raw load-generator result
    including the metrics texts, per-point statistics, the series behind each plot, tuner, search, gate),
    C(runs.csv), C(summary.csv), C(report.md) and, with O(plots), C(throughput_vs_draft.png) (output tok/s and
    acceptance vs draft length per concurrency), C(spec_vs_baseline.png) (speed-up vs no speculation),
    C(itl_distribution.png) (inter-token latency ECDF at the lowest concurrency) and C(acceptance_by_position.png).
    Plots need C(matplotlib) in the controller's Python (in C(requirements.txt)); the Agg backend needs no display."
  - Returns the headline figures and sets them with C(set_stats) semantics (RV(ansible_stats), key
    C(specdec_benchmark)).
author:
  - sparkops maintainers (@sparkops)
options:
  runs:
    description:
      - One entry per run, in run order. Keys C(point) (V(none) or a draft length), C(concurrency), C(prompt_set),
        C(block) (the block of the randomised schedule), optional C(engine), and C(loadgen), the registered
        result of M(sparkops.specdec.specdec_loadgen).
    type: list
    elements: dict
    required: true
  output_dir:
    description:
      - Directory on the controller for the report files (C(specdec_benchmark_output_dir)); relative paths are in
        O(report_dir). Created when missing. Existing report files are replaced.
    type: path
    required: true
  engine:
    description:
      - The engine whose counters the metrics texts hold. Default detected from the texts (C(llamacpp:), C(trtllm_)
        or C(vllm:) names).
    type: str
    choices: [llamacpp, trtllm, vllm]
  objective:
    description:
      - "The tuner's objective: C(concurrency) (required), optional C(prompt_set), C(ttft_p90_max) and C(itl_p90_max)
        (seconds; points whose median p90 exceeds a bound are excluded). Maximises the median output tokens/s."
    type: dict
  candidates:
    description:
      - Draft lengths the search may measure. Default the draft lengths present in O(runs).
    type: list
    elements: int
  probes:
    description:
      - The search's coarse probe (measured first with the baseline).
    type: list
    elements: int
    default: [1, 4]
  point_seconds:
    description:
      - Seconds each point cost in the sweep (server restart plus its runs), by point, for the cost ratio. Without it
        every point costs the same.
    type: dict
  gate:
    description:
      - "Correctness gate input: C(baseline) and C(speculative), lists of C({prompt_id, text}) (for example the
        C(requests) of two M(sparkops.specdec.specdec_loadgen) runs at temperature 0 and concurrency 1), and optional
        C(early_words) (default 32), C(max_early) (default 0), C(max_late_fraction) (default 0.25) and
        C(tie_margin) (nats, default 0.25: a divergence onto a runner-up of the baseline's token within this
        log-probability margin is a near-tie, status C(tie), not a failure; the baseline items need C(tokens) as
        M(sparkops.specdec.specdec_loadgen) records them with its option C(top_logprobs); 0 turns it off)."
      - "Or C(from_runs: true) (optional C(prompt_set)): the gate compares the O(runs) themselves, the first run of
        V(none) at concurrency 1 against the first run of each draft length at concurrency 1 (their first text per
        prompt id); it passes when every draft length passes, and RV(gate) holds the comparison of the tuner's pick
        (or of the best speculative point when the pick is V(none)) plus C(points), the verdict per draft length."
    type: dict
  metadata:
    description:
      - Free-form facts written at the top of the report (image, models, node, dates, ...).
    type: dict
  plots:
    description:
      - Draw the PNG plots.
    type: bool
    default: true
extends_documentation_fragment:
  - sparkops.specdec.attributes
  - sparkops.specdec.attributes.action
  - sparkops.specdec.reports
notes:
  - "Errors (the task fails with the message): a run from the lab's TensorRT-LLM stand-in (its figures are meaningless);
    speculation on with zero draft tokens (llama.cpp drafts nothing without C(--spec-type draft-simple)); no
    spec-decode counter in the metrics text with speculation on (llama-server needs C(--metrics); trtllm-serve needs
    C(return_perf_metrics: true)); a counter that went down (server restarted during a run); failed requests; a
    response without C(usage); no point at the objective's concurrency; the gate failing (its message names the
    prompts); matplotlib missing with O(plots); the directory not writable."
  - Default gate thresholds and their reason are in docs/benchmark.md ("Correctness gate").
attributes:
  check_mode:
    support: full
    details: Computes and writes the same in check mode (the report is output on the controller, not a change to a node).
  diff_mode:
    support: none
    details: Changes nothing on any node.
  idempotent:
    support: none
    details: Writes the report files and reports a change on every run.
seealso:
  - module: sparkops.specdec.specdec_loadgen
"""

EXAMPLES = r"""
- name: Write the report, pick the draft length for single-user speed
  sparkops.specdec.specdec_bench_report:
    runs: "{{ bench_runs }}"  # appended after each specdec_loadgen task: {point, concurrency, prompt_set, block, loadgen}
    output_dir: "{{ playbook_dir }}/../bench-report"
    engine: llamacpp
    objective:
      concurrency: 1
      ttft_p90_max: 1.0
    point_seconds: "{{ bench_point_seconds }}"
    gate:
      baseline: "{{ bench_gate_baseline.requests }}"
      speculative: "{{ bench_gate_speculative.requests }}"
    metadata:
      image: "{{ trtllm_container_image }}"
  register: bench_report
"""

RETURN = r"""
files:
  description: Paths written, by kind (C(json), C(runs_csv), C(summary_csv), C(markdown), C(png_<plot>)).
  returned: success
  type: dict
headline:
  description: "Headline figures: C(pick), C(reason), C(tuner_cost_ratio), C(tuner_pick_gap) (tokens/s),
    C(tuner_within_spread), C(gate_passed), C(best_by_concurrency) ({c<N>: {point, tokens_per_second,
    acceptance_rate}})."
  returned: success
  type: dict
tuner:
  description: The tuner's result (C(pick), C(best_by_median), C(reason), C(candidates) with median/min/max tokens/s,
    speed-up and acceptance per point), V(null) without O(objective).
  returned: success
  type: dict
search:
  description: The cheaper search replayed on these runs (C(measured), C(tuner_pick), C(full_pick), C(cost_ratio),
    C(tuner_seconds), C(full_seconds), C(pick_gap), C(best_spread), C(within_spread)).
  returned: with O(objective)
  type: dict
gate:
  description: The correctness gate (C(passed), C(msg), C(counts), C(prompts) with the first diverging word and character).
  returned: with O(gate)
  type: dict
points:
  description: Per point (point, concurrency, prompt set) the repeat statistics (median, min, max, q1, q3, iqr) of every
    figure, and the median acceptance by position.
  returned: success
  type: list
  elements: dict
problems:
  description: Anomalies that do not stop the report (per-position counts not summing to the accepted tokens,
    response timings disagreeing with the counters, a baseline that drafted).
  returned: success
  type: list
  elements: str
ansible_stats:
  description: The headline under C(specdec_benchmark), as C(set_stats) would set it.
  returned: success
  type: dict
"""
