# -*- coding: utf-8 -*-
"""The trtllm_container role waits on the head for every node's container sshd before its mpirun check: one task
(sparkops.specdec.container_sshd_wait) waits, then runs mpirun -np N hostname over the hostfile's hosts; it runs on the
head, multi-node, not in check mode, bounded by trtllm_container_start_timeout, on specdec_container_ssh_port."""

from __future__ import annotations

import pathlib

import yaml

TASKS = pathlib.Path(__file__).resolve().parents[2] / "roles" / "trtllm_container" / "tasks" / "main.yml"
WAIT = "sparkops.specdec.container_sshd_wait"


def tasks():
    with open(TASKS) as handle:
        return yaml.safe_load(handle)


def index(items, predicate):
    found = [i for i, task in enumerate(items) if predicate(task)]
    assert len(found) == 1, found
    return found[0]


def test_the_head_waits_for_every_container_sshd_then_runs_mpirun_over_the_hostfile():
    items = tasks()
    wait = index(items, lambda t: WAIT in t)
    # A multi-node container with sshd: engine trtllm's (engine vllm across Sparks runs none, issue 23 item 2).
    assert items[wait]["when"] == ["__trtllm_container_sshd_wanted | bool", "inventory_hostname == specdec_head_host",
                                   "not ansible_check_mode"]
    role_vars = yaml.safe_load((TASKS.parents[1] / "vars" / "main.yml").read_text())
    assert role_vars["__trtllm_container_sshd_wanted"] == (
        "{{ trtllm_container_multinode | bool and specdec_engine != 'vllm' }}")
    args = items[wait][WAIT]
    assert args["mpirun_hosts"] == "{{ trtllm_container_hostfile_hosts }}"
    assert args["timeout"] == "{{ trtllm_container_start_timeout }}"
    assert args["port"] == "{{ specdec_container_ssh_port }}"
    assert "trtllm_container_hostfile_hosts" in args["targets"]
    assert "sparkops.specdec.trtllm_container_sshd_targets" in args["targets"]
    # It must fail the run on timeout (no failed_when/ignore_errors that would let mpirun meet a refused sshd).
    assert "failed_when" not in items[wait] and "ignore_errors" not in items[wait]
