# -*- coding: utf-8 -*-
"""The head's Hub download starts right after the preflight and runs in the background through the container stage.

Read from the playbooks and the specdec_models role as Ansible loads them (issue 21 item 5): in two_sparks.yml and
single_spark.yml the models role's start entry point comes before any role that changes a node (docker_group,
netplan_qsfp, ssh_mesh, trtllm_container), two_sparks.yml runs it on the head only (its peer copies after the fabric
and the SSH mesh), the start entry point starts the downloads with async and poll 0 and follows none of them, and
the specdec_server role follows them (the models role's main entry point) after its plan, after the container."""

from __future__ import annotations

import pathlib

import pytest
from ansible.parsing.dataloader import DataLoader

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODELS = "sparkops.specdec.specdec_models"
ROLE_KEYS = ("ansible.builtin.import_role", "ansible.builtin.include_role")


def load(path):
    return DataLoader().load_from_file(str(path), trusted_as_template=True)


def flat(items):
    for task in items or []:
        yield task
        for section in ("block", "rescue", "always"):
            yield from flat(task.get(section))


def role_steps(play):
    """(role name, tasks_from) of each role the deploy play applies, in order (pre_tasks, roles, tasks)."""
    steps = []
    for task in flat(play.get("pre_tasks")):
        steps.extend(_role_of(task))
    for role in play.get("roles") or []:
        steps.append((role["role"] if isinstance(role, dict) else role, None, {}))
    for task in flat(play.get("tasks")):
        steps.extend(_role_of(task))
    return steps


def _role_of(task):
    for key in ROLE_KEYS:
        if key in task:
            yield task[key]["name"], task[key].get("tasks_from"), task
    return


def plays_of(path):
    """The plays of a playbook in run order, imported playbooks inlined (two_sparks.yml imports plays/spark_deploy.yml)."""
    for entry in load(path):
        if "ansible.builtin.import_playbook" in entry:
            yield from plays_of(path.parent / entry["ansible.builtin.import_playbook"])
        else:
            yield entry


def deploy_play(name):
    plays = plays_of(ROOT / "playbooks" / name)
    return [p for p in plays if "hosts" in p and (p.get("tasks") or p.get("roles"))][-1]


@pytest.mark.parametrize("playbook", ["two_sparks.yml", "spark_cluster.yml", "single_spark.yml"])
def test_the_models_start_before_any_role_that_changes_a_node(playbook):
    steps = role_steps(deploy_play(playbook))
    names = [step[:2] for step in steps]
    start = names.index((MODELS, "start"))
    for later in ("docker_group", "netplan_qsfp", "ssh_mesh", "trtllm_container", "specdec_server"):
        found = [i for i, step in enumerate(names) if step[0] == "sparkops.specdec." + later]
        assert all(i > start for i in found), (playbook, later, names)
    assert ("sparkops.specdec.trtllm_container", None) in names
    # Only the firewall's read-only preflight may come before.
    assert all(name == "sparkops.specdec.specdec_firewall" and tasks_from == "check" for name, tasks_from in names[:start])


def test_two_sparks_starts_the_download_on_the_head_only():
    steps = role_steps(deploy_play("two_sparks.yml"))
    task = [t for name, tasks_from, t in steps if (name, tasks_from) == (MODELS, "start")][0]
    assert task["when"] == "inventory_hostname == specdec_head_host"


def test_the_start_entry_point_starts_the_downloads_in_the_background_and_waits_for_none():
    role = ROOT / "roles" / "specdec_models" / "tasks"
    start = load(role / "start.yml")
    assert [t["ansible.builtin.import_tasks"] for t in start] == ["fetch.yml"]
    fetch = list(flat(load(role / "fetch.yml")))
    # fetch.yml includes the wheels (when the virtualenv lacks them) and the downloads' start (when a model is not
    # complete), and nothing else.
    included = [t["ansible.builtin.include_tasks"] for t in fetch if "ansible.builtin.include_tasks" in t]
    assert sorted(included) == ["download_start.yml", "wheels.yml"]
    assert all(t.get("when") for t in fetch if "ansible.builtin.include_tasks" in t)
    path = fetch + [t for name in included for t in flat(load(role / name))]
    downloads = [t for t in path if "sparkops.specdec.hf_download" in t and "async" in t]
    assert len(downloads) == 1 and downloads[0]["poll"] == 0
    # Nothing in the start path follows the downloads or copies the models: main.yml does.
    assert not [t for t in path if "ansible.builtin.async_status" in t or "import_tasks" in t]
    assert not [t for t in path if "include_tasks" in str(t) and t not in fetch]
    main = list(flat(load(role / "main.yml")))
    assert [t["ansible.builtin.include_tasks"] for t in main if "ansible.builtin.include_tasks" in t] == [
        "fetch.yml", "download_poll.yml", "peer_copy.yml"]


def test_the_server_role_follows_the_downloads_after_its_plan():
    tasks = load(ROOT / "roles" / "specdec_server" / "tasks" / "main.yml")
    modules = [next((k for k in t if k.startswith(("sparkops.", "ansible."))), None) for t in tasks]
    plan = modules.index("sparkops.specdec.specdec_plan")
    models = [i for i, t in enumerate(tasks) if t.get("ansible.builtin.import_role", {}).get("name") == MODELS]
    assert len(models) == 1 and models[0] > plan
    # and before the launch decision, which reads the models' commits
    assert modules.index("sparkops.specdec.specdec_plan", plan + 1) > models[0]
