# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Action plugin of sparkops.specdec.specdec_bench_report: controller-side, no host is contacted.

Turns the registered results of sparkops.specdec.specdec_loadgen into the benchmark's figures,
the tuner's pick, the search's cost and the correctness gate (module_utils/_bench.py, _tune.py,
_gate.py) and writes the report files (plugin_utils/_bench_report.py). The documentation is in
plugins/modules/specdec_bench_report.py.
"""

from __future__ import annotations

from ansible.errors import AnsibleError
from ansible.module_utils.common.text.converters import to_text
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

from ansible_collections.sparkops.specdec.plugins.module_utils import _bench
from ansible_collections.sparkops.specdec.plugins.plugin_utils import _gate
from ansible_collections.sparkops.specdec.plugins.plugin_utils import _action, _bench_report, _reports

_ARGS = frozenset(("runs", "output_dir", "engine", "objective", "candidates", "probes", "point_seconds", "gate",
                   "metadata", "plots", "report_dir"))
_OBJECTIVE = frozenset(("concurrency", "prompt_set", "ttft_p90_max", "itl_p90_max"))


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = _action.task_args(self, _ARGS)
        if not args.get("runs") or not isinstance(args["runs"], list):
            raise AnsibleError("specdec_bench_report: runs must be a non-empty list of {point, concurrency, prompt_set, "
                               "block, loadgen} (loadgen: the registered result of sparkops.specdec.specdec_loadgen)")
        if not args.get("output_dir"):
            raise AnsibleError("specdec_bench_report: output_dir (a directory on the controller) is required")
        engine = args.get("engine")
        if engine not in (None, "llamacpp", "trtllm", "vllm"):
            raise AnsibleError("specdec_bench_report: engine must be llamacpp, trtllm or vllm, got %s" % engine)
        objective = args.get("objective")
        if objective is not None:
            if not isinstance(objective, dict) or set(objective) - _OBJECTIVE or "concurrency" not in objective:
                raise AnsibleError("specdec_bench_report: objective is a dict with concurrency (required), prompt_set, "
                                   "ttft_p90_max and itl_p90_max (seconds)")
            try:
                objective = dict(objective, concurrency=int(objective["concurrency"]))
                for key in ("ttft_p90_max", "itl_p90_max"):
                    if objective.get(key) is not None:
                        objective[key] = float(objective[key])
            except (TypeError, ValueError) as exc:
                raise AnsibleError("specdec_bench_report: objective: %s" % exc)
        gate = args.get("gate")
        if gate is not None and (not isinstance(gate, dict) or not gate.get("from_runs") and (
                "baseline" not in gate or "speculative" not in gate)):
            raise AnsibleError("specdec_bench_report: gate needs from_runs: true (compare the runs at concurrency 1), or "
                               "baseline and speculative (lists of {prompt_id, text}, e.g. the requests of two "
                               "specdec_loadgen runs at temperature 0 and concurrency 1)")
        if gate is not None and gate.get("from_runs"):
            gate = dict(gate, from_runs=boolean(gate["from_runs"], strict=False))
        # A relative output_dir is in the report directory (specdec_report_dir, default the current directory).
        out_dir = _reports.report_path(to_text(args["output_dir"]), None, args.get("report_dir"))
        try:
            report = _bench_report.build(args["runs"], objective=objective, candidates=args.get("candidates"),
                                         probes=args.get("probes"), point_seconds=args.get("point_seconds"),
                                         gate=gate, metadata=args.get("metadata"), engine=engine)
            files = _bench_report.write(report, out_dir,
                                        plots=boolean(args.get("plots", True), strict=False))
        except (_bench.BenchError, _gate.GateError) as exc:
            result.update(failed=True, msg="specdec_bench_report: %s" % exc)
            return result
        except OSError as exc:
            result.update(failed=True, msg="specdec_bench_report: cannot write the report to %s: %s"
                          % (out_dir, exc))
            return result
        headline = _bench_report.headline(report)
        result.update(changed=True, files=files, headline=headline, tuner=report["tuner"], search=report["search"],
                      gate=report["gate"], problems=report["problems"], points=[
                          {k: v for k, v in p.items() if k != "itl_values"} for p in report["points"]])
        result["ansible_stats"] = {"data": {"specdec_benchmark": headline}, "per_host": False, "aggregate": True}
        if report["gate"] is not None and not report["gate"]["passed"]:
            result.update(failed=True, msg=report["gate"]["msg"])
        else:
            result["msg"] = report["tuner"]["reason"] if report["tuner"] else "report written to %s" % files["json"]
        return result
