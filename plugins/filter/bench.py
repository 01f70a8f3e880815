# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""PRIVATE filters of the specdec_benchmark role (the logic is in module_utils/_bench.py).

- ``loadgen | sparkops.specdec.bench_run_line(point, concurrency, prompt_set, engine)``: the progress line printed
  after each run (output tokens/s, TTFT and ITL p50, acceptance); fails the task with the reason when the run's
  figures are unusable (failed requests, zero draft tokens with speculation on, the lab's stand-in).
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.sparkops.specdec.plugins.module_utils import _bench


def _ms(value):
    return "-" if value is None else "%.0f ms" % (1000.0 * value)


def bench_run_line(loadgen, point, concurrency, prompt_set, engine="llamacpp"):
    point = _bench.normalize_point(point)
    try:
        f = _bench.summarize_run(loadgen or {}, engine or "llamacpp", point != _bench.SPEC_METHOD_NONE,
                                 int(concurrency))
    except _bench.BenchError as exc:
        raise AnsibleFilterError("benchmark run (%s, concurrency %s, prompt set %s): %s"
                                 % ("none" if point == _bench.SPEC_METHOD_NONE else "draft length %s" % point,
                                    concurrency, prompt_set, exc)) from None
    line = "%s c=%s %s: %.1f tok/s, %d requests in %.1f s, TTFT p50 %s, ITL p50 %s" % (
        "none" if point == _bench.SPEC_METHOD_NONE else "draft %s" % point, concurrency, prompt_set,
        f["output_tokens_per_second"], f["requests"], f["wall_seconds"], _ms(f.get("ttft_p50")), _ms(f.get("itl_p50")))
    if f.get("acceptance_rate") is not None:
        line += ", acceptance %.2f (%s/%s drafted)" % (
            f["acceptance_rate"], f.get("accepted_tokens"), f.get("draft_tokens"))
    return line


class FilterModule(object):
    def filters(self):
        return {"bench_run_line": bench_run_line}
