# -*- coding: utf-8 -*-
"""Every playbook ends with a non-empty ansible.builtin.set_stats (AWX/AAP job artifacts): in its last play, a
set_stats task with data, followed by nothing but verdicts (assert/fail, which change nothing and fail the run after
the results are recorded). The set_stats of the deployment playbooks are built from public results only, with the
keys docs/awx.md lists; the shaping filters (plugins/filter/stats.py) are tested on results as the modules return them.
"""

from __future__ import annotations

import pathlib
import re

import pytest
import yaml

from ansible.errors import AnsibleFilterError

from ansible_collections.sparkops.specdec.plugins.filter import stats

PLAYBOOKS = pathlib.Path(__file__).resolve().parents[2] / "playbooks"
SET_STATS = ("ansible.builtin.set_stats", "set_stats")
VERDICTS = ("ansible.builtin.assert", "ansible.builtin.fail", "assert", "fail")
# The set_stats key each playbook records (docs/awx.md, "Job results"); built by plugins/filter/stats.py.
KEYS = {
    "two_sparks.yml": "specdec_deploy",
    "spark_cluster.yml": "specdec_deploy",
    "single_spark.yml": "specdec_deploy",
    "benchmark.yml": "specdec_benchmark_run",
    "teardown.yml": "specdec_teardown",
    "preflight.yml": "specdec_preflight",
    "preflight_inventory.yml": "specdec_inventory",
}


def playbooks():
    return sorted(p.name for p in PLAYBOOKS.glob("*.yml"))


def flat_tasks(tasks, every=False):
    """Tasks in run order; a block's tasks are inlined (its rescue and always too with ``every``: failure paths)."""
    out = []
    for task in tasks or []:
        if "block" in task:
            out += flat_tasks(task["block"], every)
            if every:
                out += flat_tasks(task.get("rescue"), every) + flat_tasks(task.get("always"), every)
        else:
            out.append(task)
    return out


def last_play(name):
    plays = yaml.safe_load((PLAYBOOKS / name).read_text())
    assert isinstance(plays, list) and plays, name
    play = plays[-1]
    if "ansible.builtin.import_playbook" in play:
        # The deploy play shared by two_sparks.yml and spark_cluster.yml (plays/spark_deploy.yml).
        return last_play(play["ansible.builtin.import_playbook"])
    assert "hosts" in play, "%s: the last entry is not a play (%s)" % (name, sorted(play))
    return play


def action_of(task):
    return next((k for k in task if k in SET_STATS + VERDICTS or "." in k), None)


def stats_task(name):
    play = last_play(name)
    tasks = flat_tasks(play.get("tasks")) + flat_tasks(play.get("post_tasks"))
    positions = [i for i, t in enumerate(tasks) if action_of(t) in SET_STATS]
    assert positions, "%s: its last play has no ansible.builtin.set_stats" % name
    after = [action_of(t) for t in tasks[positions[-1] + 1:]]
    assert all(a in VERDICTS for a in after), "%s: after set_stats come %s, not only verdicts" % (name, after)
    return tasks[positions[-1]]


def test_every_playbook_is_covered():
    assert set(KEYS) <= set(playbooks())


@pytest.mark.parametrize("name", playbooks())
def test_last_play_ends_with_non_empty_set_stats(name):
    task = stats_task(name)
    args = task[action_of(task)]
    data = args.get("data") or {}
    assert data and all(str(v).strip() for v in data.values()), (name, data)


@pytest.mark.parametrize("name", sorted(KEYS))
def test_deployment_stats_use_public_results_and_merge_per_node(name):
    task = stats_task(name)
    args = task[action_of(task)]
    assert list(args["data"]) == [KEYS[name]]
    template = str(args["data"][KEYS[name]])
    assert not re.search(r"\b__\w+", template), "%s reads a private variable: %s" % (name, template)
    assert "sparkops.specdec." in template  # shaped in Python
    assert args.get("per_host") is False and args.get("aggregate") is True
    assert "run_once" not in task  # one entry per node, merged by aggregate


# --- the filters, on results as the modules return them ---------------------------------------------------------

LAUNCH = {
    "changed": False,
    "plan": {"deployment": "pair-a", "head": "spark-1", "endpoint": "http://10.0.0.1:8355/v1", "engine": "trtllm",
             "topology": "two_sparks", "method": "eagle3", "target_model": "nvidia/Qwen3-235B-A22B-FP4",
             "draft_model": "nvidia/Qwen3-235B-A22B-Eagle3", "max_draft_len": 3, "members": ["spark-1", "spark-2"],
             # The access part of the plan (plugin_utils/_plan.py): the two-Spark default, every interface, no key.
             "host": "0.0.0.0", "port": 8355, "exposure": "open_unauthenticated", "allowed_networks": [],
             "api_key": None},
    "decision": {"action": "none", "reason": "the server runs with the planned launch spec"},
}


def test_deploy_stats_per_node():
    head = stats.deploy_stats(LAUNCH, "spark-1", "http://10.0.0.1:8355/v1", False)
    worker = stats.deploy_stats(LAUNCH, "spark-2", "http://10.0.0.1:8355/v1", True)
    assert head == {"spark-1": {
        "deployment": "pair-a", "role": "head", "head": "spark-1", "endpoint": "http://10.0.0.1:8355/v1",
        "engine": "trtllm", "topology": "two_sparks", "method": "eagle3", "target_model": "nvidia/Qwen3-235B-A22B-FP4",
        "draft_model": "nvidia/Qwen3-235B-A22B-Eagle3", "max_draft_len": 3, "decision": "none",
        "reason": "the server runs with the planned launch spec", "state": "serving",
        "exposure": {"who": "every_interface", "api_key": False, "bind": "0.0.0.0", "port": 8355,
                     "allowed_networks": [], "endpoint": "http://10.0.0.1:8355/v1"}}}
    assert worker["spark-2"]["role"] == "worker" and worker["spark-2"]["state"] == "checked"
    assert worker["spark-2"]["exposure"] == head["spark-1"]["exposure"]


def _plan(**changes):
    return dict(LAUNCH["plan"], **changes)


@pytest.mark.parametrize("changes,who,api_key", [
    ({}, "every_interface", False),
    ({"exposure": "open", "api_key": {"file": "/s/api-key", "fingerprint": "pbkdf2-sha256:ab"}}, "every_interface", True),
    ({"exposure": "address", "host": "10.0.0.1"}, "bind_address", False),
    ({"exposure": "loopback", "host": "127.0.0.1", "allowed_networks": ["10.0.0.0/24"]}, "loopback", False),
    ({"allowed_networks": ["10.0.0.0/24", "192.168.1.5/32"]}, "allowed_networks", False),
    ({"exposure": "address", "host": "10.0.0.1", "allowed_networks": ["10.0.0.0/24"]}, "allowed_networks", False),
    ({"exposure": None, "host": None}, None, False),
])
def test_exposure_stats_names_who_can_call_the_endpoint(changes, who, api_key):
    got = stats.exposure_stats(_plan(**changes))
    assert got["who"] == who and got["api_key"] is api_key
    assert got["allowed_networks"] == list(_plan(**changes)["allowed_networks"])


def test_endpoint_exposure_line():
    assert stats.endpoint_exposure(LAUNCH) == (
        "Endpoint http://10.0.0.1:8355/v1: anyone on every network the node is on can call it (bound to 0.0.0.0:8355, "
        "every interface), with no API key.")
    fenced = dict(LAUNCH, plan=_plan(allowed_networks=["10.0.0.0/24"], exposure="open", api_key={"file": "k"}))
    assert stats.endpoint_exposure(fenced) == (
        "Endpoint http://10.0.0.1:8355/v1: only 10.0.0.0/24 can call it (the host firewall admits them to port 8355; "
        "bound to 0.0.0.0), with the API key.")
    local = dict(LAUNCH, plan=_plan(exposure="loopback", host="127.0.0.1", endpoint="http://127.0.0.1:8355/v1"))
    assert "only the node itself can call it (bound to 127.0.0.1:8355)" in stats.endpoint_exposure(local)
    with pytest.raises(AnsibleFilterError, match="has no plan"):
        stats.endpoint_exposure({"changed": False})


@pytest.mark.parametrize("name", ["two_sparks.yml", "spark_cluster.yml", "single_spark.yml"])
def test_deploy_playbooks_print_the_exposure_before_the_stats(name):
    """Every deploy run says who can call its endpoint (a task of the last play, before its set_stats)."""
    play = last_play(name)
    tasks = flat_tasks(play.get("tasks"))
    shown = [i for i, t in enumerate(tasks)
             if "sparkops.specdec.endpoint_exposure" in str(t.get("ansible.builtin.debug", {}).get("msg", ""))]
    assert shown and shown[-1] < tasks.index(stats_task(name)) and "when" not in tasks[shown[-1]]


def test_deploy_stats_without_a_plan_fails_with_the_host():
    with pytest.raises(AnsibleFilterError, match="spark-9 has no plan"):
        stats.deploy_stats({"changed": False}, "spark-9")
    with pytest.raises(AnsibleFilterError, match="expected a registered result"):
        stats.deploy_stats("text", "spark-9")


def test_inventory_stats():
    result = {"deployment": {"id": "spark-1", "topology": "single_spark", "members": ["spark-1"], "head": "spark-1"},
              "errors": [], "plan": {}}
    assert stats.inventory_stats(result, "spark-1") == {"spark-1": {
        "deployment": "spark-1", "topology": "single_spark", "head": "spark-1", "members": ["spark-1"], "problems": 0}}


def test_preflight_stats_keeps_the_nodes_own_checks():
    report = {"passed": False, "report_path": "/tmp/r.json", "checks": [
        {"id": "docker", "node": "spark-1", "status": "pass"}, {"id": "disk_space", "node": "spark-1", "status": "fail"},
        {"id": "clock", "node": "spark-1", "status": "warn"}, {"id": "docker", "node": "spark-2", "status": "fail"}]}
    assert stats.preflight_stats(report, "spark-1") == {"spark-1": {
        "passed": False, "failed": ["disk_space"], "warned": ["clock"], "counts": {"fail": 1, "pass": 1, "warn": 1},
        "report_path": "/tmp/r.json"}}
    assert stats.preflight_stats(report, "spark-2")["spark-2"]["failed"] == ["docker"]


def test_teardown_stats():
    result = {"confirmed": True, "proceed": True, "nodes": {"spark-1": {
        "container": {"exists": True, "status": "running"}, "stop_server": True, "models": ["/m/a"],
        "netplan_ours": False, "removals": ["container trtllm-multinode (running)"], "notes": ["netplan stays"]}}}
    assert stats.teardown_stats(result, "spark-1") == {"spark-1": {
        "confirmed": True, "state": "removed", "container_removed": True, "server_stopped": True,
        "previous_container_removed": False, "models_removed": ["/m/a"], "netplan_removed": False,
        "state_files_marked": [], "state_files_removed": [], "mesh_removed": [],
        "removals": ["container trtllm-multinode (running)"], "notes": ["netplan stays"]}}
    assert stats.teardown_stats(result, "spark-1", True)["spark-1"]["server_stopped"] is False
    result["nodes"]["spark-1"]["previous"] = {"remove": True, "id": "c0ffee"}
    assert stats.teardown_stats(result, "spark-1")["spark-1"]["previous_container_removed"] is True
    result["nodes"]["spark-1"]["state_files"] = [{"path": "/s/deployments/a.json", "action": "mark"},
                                                 {"path": "/s/deployments/b.json", "action": "remove"}]
    got = stats.teardown_stats(result, "spark-1")["spark-1"]
    assert got["state_files_marked"] == ["/s/deployments/a.json"]
    assert got["state_files_removed"] == ["/s/deployments/b.json"]
    result["nodes"]["spark-1"]["mesh"] = {"remove": True, "changes": ["remove /k/mesh/authorized_keys"]}
    assert stats.teardown_stats(result, "spark-1")["spark-1"]["mesh_removed"] == ["remove /k/mesh/authorized_keys"]
    with pytest.raises(AnsibleFilterError, match="no entry for spark-2"):
        stats.teardown_stats(result, "spark-2")


def test_benchmark_stats():
    result = {"headline": {"pick": 3, "reason": "fastest", "gate_passed": True}, "files": {"json": "/r/b.json"}}
    assert stats.benchmark_stats(result, "spark-1", "http://x/v1") == {"spark-1": {
        "measured": True, "endpoint": "http://x/v1", "pick": 3, "reason": "fastest", "gate_passed": True,
        "files": {"json": "/r/b.json"}}}
    assert stats.benchmark_stats({"skipped": True, "changed": False}, "spark-2") == {
        "spark-2": {"measured": False, "endpoint": None}}


def test_filters_are_registered():
    assert set(stats.FilterModule().filters()) == {"deploy_stats", "endpoint_exposure", "inventory_stats",
                                                   "preflight_stats", "teardown_stats", "benchmark_stats", "fleet_stats"}


def test_every_playbook_runs_non_interactively():
    """AWX/AAP has no terminal: no play prompts (vars_prompt), no task waits for a key (pause without a duration)."""
    root = PLAYBOOKS.parent
    for path in sorted(list(PLAYBOOKS.rglob("*.yml")) + list((root / "roles").rglob("tasks/*.yml"))):
        data = yaml.safe_load(path.read_text()) or []
        for item in data if isinstance(data, list) else []:
            assert "vars_prompt" not in item, path
            tasks = flat_tasks([item], every=True)
            for section in ("pre_tasks", "tasks", "post_tasks", "handlers"):
                tasks += flat_tasks(item.get(section), every=True)
            for task in tasks:
                pause = task.get("ansible.builtin.pause", task.get("pause")) if isinstance(task, dict) else None
                if pause is not None:
                    assert isinstance(pause, dict) and ("seconds" in pause or "minutes" in pause), (path, task)
