#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: specdec_bench_plan
short_description: Check the benchmark's settings and plan its next round (block-randomised schedule and time estimate)
version_added: 0.2.0
description:
  - An action plugin, run on the controller; it contacts no host. The C(specdec_benchmark) role calls it before
    each round and acts on its RV(segments).
  - "O(mode=sweep): one round with every point of O(points), O(repeats) blocks, each block holding every point once
    in a seeded random order (C(random.Random(seed + round))), so slow drift of the machine (heat, other load) spreads
    over all points instead of biasing the last ones."
  - "O(mode=tune): the tuner's cheaper search (C(plugin_utils/_tune.py) C(next_points)): round 0 measures the
    baseline (V(none)) and the O(probes); round 1 measures the one draft length the probes predict best, if its
    prediction lies above the best measured point's spread; then it is done."
  - "The estimate: a server restart per change of point (O(restart_seconds) each) plus, per run, C(ceil(num_requests /
    concurrency) * max_tokens / tokens_per_second), the speed measured by the O(probe) request at concurrency 1. It is
    a floor: a busy server answers each request more slowly."
author:
  - sparkops maintainers (@sparkops)
options:
  mode:
    description: V(sweep) (every point) or V(tune) (the cheaper search).
    type: str
    choices: [sweep, tune]
    default: sweep
  points:
    description: V(none) (no speculation) and draft lengths (1 to 32), each once.
    type: list
    elements: raw
    required: true
  repeats:
    description: Blocks per round (each point measured once per block).
    type: int
    required: true
  seed:
    description: Seed of the block order.
    type: int
    default: 0
  probes:
    description: The tuner's first draft lengths (with O(mode=tune)).
    type: list
    elements: int
    default: [1, 4]
  objective:
    description: The tuner's objective, as M(sparkops.specdec.specdec_bench_report) takes it (C(concurrency) must be one
      of O(concurrency); C(prompt_set) one of O(prompt_sets), required with more than one).
    type: dict
    required: true
  concurrency:
    description: Concurrency levels run at each visit of a point.
    type: list
    elements: int
    required: true
  prompt_sets:
    description: Names of the prompt sets run at each visit of a point.
    type: list
    elements: str
    required: true
  runs:
    description: The runs measured so far (as M(sparkops.specdec.specdec_bench_report) takes them); the search of
      O(mode=tune) reads them.
    type: list
    elements: dict
  round:
    description: The round number (0 first).
    type: int
    default: 0
  restart_seconds:
    description: Seconds a server restart takes, for the estimate (C(specdec_benchmark_restart_seconds)). Null or
      empty - the start-to-health seconds measured on the node (O(state)'s C(running.ready_seconds), same O(engine) and
      O(target_model)), else the engine's documented default (C(trtllm) 900, C(llamacpp) 60, C(vllm) 900;
      docs/benchmark.md names the sources).
    type: float
  engine:
    description: The deployment's engine (C(trtllm), C(llamacpp) or C(vllm)), for the restart time.
    type: str
    version_added: 0.3.0
  target_model:
    description: The deployment's target model; a restart time measured for another one is not used.
    type: str
    version_added: 0.3.0
  state:
    description: The deployment's state file as read on the head (the C(specdec_server) role's
      C(specdec_server_launch.state_before)), for the restart time measured on the node.
    type: dict
    version_added: 0.3.0
  allow_restart:
    description: The consent (C(specdec_benchmark_allow_restart)). False - fail, in check mode too, when the round
      restarts the server; omitted - not checked.
    type: bool
    version_added: 0.3.0
  host:
    description: The head's name, for the consent's message.
    type: str
    version_added: 0.3.0
  pinned:
    description:
      - C(specdec_server_method) and C(specdec_server_max_draft_len) as the task sees them with both set to
        C(sparkops-benchmark-point) as task vars; any other value comes from an extra var or a fact, which would pin
        every point of the sweep, and fails.
      - C(specdec_server_draft_model), C(specdec_server_draft_revision), C(specdec_server_draft_file) and
        C(specdec_server_speculative_config) (engine vllm) the same way; with V(none) among O(points), a value from an
        extra var or a fact fails (the revision V(main) and an empty mapping excepted), since the baseline point cannot
        unset it and method none refuses a draft setting or a C(--speculative-config) key.
    type: dict
    version_added: 0.3.0
  spec_method:
    description: The speculative method of the draft-length points (the deployment's, or its preset's when it serves
      none), in C(serve) of RV(segments).
    type: str
    version_added: 0.3.0
  draft:
    description: The inventory's draft settings, C(model), C(revision) and C(file) (null when not set), and
      C(speculative_config) (engine vllm's extra C(--speculative-config) keys, C(specdec_server_speculative_config)),
      served with every draft-length point and unset for the baseline V(none) (C(serve) of RV(segments)).
    type: dict
    version_added: 0.3.0
  prompts:
    description: The text of each prompt set's file ({name - text}; null or empty when there is no file). Each of
      O(prompt_sets) must be JSON with a non-empty list C(prompts); the parsed lists come back in RV(prompts).
      Omitted - not checked.
    type: dict
    version_added: 0.3.0
  probe:
    description: A M(sparkops.specdec.specdec_loadgen) result at concurrency 1 whose speed (tokens/s) sizes the runs in
      the estimate.
    type: dict
  num_requests:
    description: Requests per run.
    type: int
    required: true
  max_tokens:
    description: Output tokens asked per request.
    type: int
    required: true
  current_point:
    description: The point that serves now (its first visit needs no restart). O(served) outranks it.
    type: raw
  served:
    description:
      - What the server serves now, C(method) and C(max_draft_len) (the state file's C(running)). Its point (V(none),
        or its draft length when C(method) is O(spec_method); else no point of this benchmark) opens the first block
        of the round, so the first visit needs no restart.
    type: dict
    version_added: 0.3.0
  final_served:
    description:
      - What the benchmark leaves serving when it ends, C(method) and C(max_draft_len) (the deployment's plan). Its
        point closes the last block of the round, so no restart is needed to serve it again. Only the order of the
        visits reads O(served) and O(final_served); the rest of each block stays shuffled.
    type: dict
    version_added: 0.3.0
notes:
  - "Errors, each naming the C(specdec_benchmark_*) setting: unknown mode; no point, a point twice or a draft length
    outside 1-32; concurrency levels that are not integers 1-1024; no prompt set; repeats, requests or tokens below 1;
    an objective concurrency not in the list; no objective prompt set with several prompt sets; a TTFT or ITL bound
    that is not seconds > 0; mode tune without V(none); a restart time that is not seconds > 0; a prompt set without
    a file or whose file is not a prompt set (O(prompts)); a method or draft length pinned by an extra var, or a draft
    setting given as one with V(none) among the points (O(pinned)); no consent (O(allow_restart)). The same in check mode: a check passes only what the real run
    accepts."
extends_documentation_fragment:
  - sparkops.specdec.attributes
  - sparkops.specdec.attributes.action
attributes:
  check_mode:
    support: full
    details: Plans the same in check mode.
  diff_mode:
    support: none
    details: Changes nothing.
  idempotent:
    support: full
    details: Plans only.
seealso:
  - module: sparkops.specdec.specdec_bench_report
  - module: sparkops.specdec.specdec_loadgen
"""

EXAMPLES = r"""
- name: Plan the first round of a full sweep
  sparkops.specdec.specdec_bench_plan:
    mode: sweep
    points: [none, 1, 2, 3, 4, 8]
    repeats: 3
    objective: {concurrency: 1, prompt_set: short}
    concurrency: [1, 4]
    prompt_sets: [short, long]
    num_requests: 8
    max_tokens: 128
    engine: trtllm
    restart_seconds: null  # measured on the node (state), else the engine's default
    state: "{{ specdec_server_launch.state_before }}"
    allow_restart: true
  register: bench_round
"""

RETURN = r"""
schedule:
  description: The round's visits in run order, C({block, slot, point}); empty when done.
  returned: success
  type: list
  elements: dict
segments:
  description:
    - The same visits, each with C(runs), the C({concurrency, prompt_set}) runs to make at that point, and C(serve),
      the C(specdec_server_*) values that serve the point (the role's include vars).
    - "C(serve) of a draft length: C(specdec_server_method) O(spec_method), C(specdec_server_max_draft_len) the length,
      C(specdec_server_draft_model), C(specdec_server_draft_revision) (V(main) when not set),
      C(specdec_server_draft_file) and C(specdec_server_speculative_config) (V({}) when not set) from O(draft). Of the
      baseline V(none): method V(none), no draft length, and the draft unset (model and file null, revision V(main),
      C(specdec_server_speculative_config) V({}))."
  returned: success
  type: list
  elements: dict
done:
  description: Whether there is nothing left to measure.
  returned: success
  type: bool
estimate:
  description: C(restarts), C(runs), C(seconds) (the round's estimated duration), C(restart_seconds),
    C(restart_source) (C(setting), C(measured) on the node, or the engine's C(default)), C(run_seconds),
    C(probe_tokens_per_second) (tokens/s).
  returned: success
  type: dict
prompts:
  description: The prompts of each prompt set ({name - [prompt, ...]}), read from O(prompts); {} without O(prompts).
  returned: success
  type: dict
  version_added: 0.3.0
msg:
  description: The schedule and the estimate in one line, for the operator.
  returned: always
  type: str
"""
