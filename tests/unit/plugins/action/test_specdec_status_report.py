# -*- coding: utf-8 -*-
# Unit tests of the action plugin sparkops.specdec.specdec_status_report: the JSON file (mode 0600 also over an older
# 0644 file, written atomically, equal to the returned rows and summary), its default path, a host that left the
# play, an unwritable path named by its setting, and bad arguments.

from __future__ import annotations

import json
import os
import stat
from unittest import mock

import pytest

from ansible.errors import AnsibleError

from ansible_collections.sparkops.specdec.plugins.action import specdec_status_report
from ansible_collections.sparkops.specdec.tests.unit.plugins.module_utils import test_status as ts


def make(args):
    task = mock.MagicMock()
    task.args = args
    task.check_mode = False
    task.async_val = 0
    task.action = "specdec_status_report"
    return specdec_status_report.ActionModule(task, mock.MagicMock(), mock.MagicMock(), loader=None, templar=None,
                                              shared_loader_obj=None)


def task_vars(hosts=("spark-1", "spark-2"), active=None, playbook_dir="/nowhere/playbooks"):
    return {"inventory_hostname": hosts[0], "ansible_play_hosts_all": list(hosts),
            "ansible_play_hosts": list(active if active is not None else hosts), "playbook_dir": playbook_dir}


def facts():
    st = ts.state(k=2)
    return {"spark-1": ts.node_fact("spark-1", [st], [ts.probe_of(st, metrics_text=ts.fixture("llamacpp-metrics-after.txt"))]),
            "spark-2": ts.UNREACHABLE}


def test_file_0600_atomic_and_equal_to_the_result(tmp_path):
    path = tmp_path / "status.json"
    path.write_text("old")
    os.chmod(path, 0o644)
    result = make({"facts": facts(), "report_path": str(path)}).run(task_vars=task_vars())
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".specdec-status.")]
    doc = json.loads(path.read_text())
    assert doc["deployments"] == result["deployments"] and doc["summary"] == result["summary"]
    assert doc["generated_at"] == result["generated_at"] and result["report_path"] == str(path)
    assert result["changed"] is False and "failed" not in result
    assert [r["status"] for r in result["deployments"]] == ["serving", "unreachable"]
    assert result["summary"]["serving"] == ["spark-1"] and result["summary"]["unreachable_nodes"] == ["spark-2"]
    assert result["all_serving"] is True and result["msg"] == "1 deployment(s) serving: spark-1."
    assert result["table"][1].split()[:2] == ["spark-1", "serving"]


def test_default_path_is_the_current_directory_and_hosts_default_to_the_play(tmp_path, monkeypatch):
    """No setting: the JSON goes to the directory ansible-playbook runs in, never the checkout (read-only when the
    collection is installed in an execution environment)."""
    playbooks = tmp_path / "checkout" / "playbooks"
    playbooks.mkdir(parents=True)
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    # spark-2 left the play (failed or unreachable earlier) and has no result.
    result = make({"facts": {"spark-1": facts()["spark-1"]}}).run(
        task_vars=task_vars(active=("spark-1",), playbook_dir=str(playbooks)))
    assert result["report_path"] == str(here / "specdec-status.json")
    assert stat.S_IMODE(os.stat(here / "specdec-status.json").st_mode) == 0o600
    assert os.listdir(tmp_path / "checkout") == ["playbooks"]
    node = result["deployments"][1]
    assert node["status"] == "unreachable" and "left the play" in node["nodes"]["spark-2"]["error"]


@pytest.mark.parametrize("report_path,expected", [(None, "reports/specdec-status.json"), ("s.json", "reports/s.json"),
                                                  ("/ABS", "abs.json")])
def test_report_dir_holds_the_json(tmp_path, monkeypatch, report_path, expected):
    """specdec_report_dir (created when missing): the default name in it, a relative status_report_path in it, an
    absolute one as given."""
    monkeypatch.chdir(tmp_path)
    args = {"facts": facts(), "report_dir": "reports"}
    if report_path:
        args["report_path"] = str(tmp_path / "abs.json") if report_path == "/ABS" else report_path
    result = make(args).run(task_vars=task_vars())
    assert result["report_path"] == str(tmp_path / expected)
    assert stat.S_IMODE(os.stat(tmp_path / expected).st_mode) == 0o600


def test_unwritable_path_fails_naming_the_setting(tmp_path):
    result = make({"facts": facts(), "report_path": str(tmp_path / "missing" / "s.json")}).run(task_vars=task_vars())
    assert result["failed"] and result["msg"].startswith("status_report_path: cannot write")
    assert result["deployments"][0]["status"] == "serving"


@pytest.mark.parametrize("args,text", [
    ({"facts": "spark-1"}, "facts must map each inventory name"),
    ({"facts": {}, "hosts": "spark-1"}, "hosts must be a list"),
    ({"facts": {}, "bogus": 1}, "unknown option(s) bogus"),
])
def test_bad_arguments(args, text):
    with pytest.raises(AnsibleError, match=text.replace("(", r"\(").replace(")", r"\)")):
        make(args).run(task_vars=task_vars())


LAB_GROUPS = {"all": ["spark-1", "spark-2"], "spark_nodes": ["spark-1", "spark-2"], "spark_head": ["spark-1"],
              "spark_workers": ["spark-2"]}
FLEET_GROUPS = {"all": ["spark-1", "spark-2", "spark-5"], "spark_nodes": ["spark-1", "spark-2", "spark-5"],
                "pair_a": ["spark-1", "spark-2"]}
FLEET_VARS = {"spark-1": {"specdec_deployment_id": "pair-a", "specdec_head_host": "spark-1"},
              "spark-2": {"specdec_deployment_id": "pair-a", "specdec_head_host": "spark-1"}, "spark-5": {}}


@pytest.mark.parametrize("groups,hostvars,ids", [
    # The lab pair (spark_head + spark_workers): the pair is "spark-1"; single_spark.yml deploys each under its name.
    (LAB_GROUPS, {"spark-1": {}, "spark-2": {}}, {"spark-1": ["spark-1"], "spark-2": ["spark-1", "spark-2"]}),
    # inventories/lab/fleet.yml's shape: pair-a by specdec_deployment_id, spark-5 alone under its name.
    (FLEET_GROUPS, FLEET_VARS, {"spark-1": ["pair-a"], "spark-2": ["pair-a"], "spark-5": ["spark-5"]}),
])
def test_inventory_ids_as_the_deployment_playbooks_read_them(groups, hostvars, ids):
    assert specdec_status_report.inventory_ids({"groups": groups, "hostvars": hostvars}, groups["all"], None) == ids


def test_records_of_ids_the_inventory_no_longer_assigns_are_retired(tmp_path):
    # molecule/fleet's pair-a record on the lab pair, which the lab inventory deploys as "spark-1" now.
    old = ts.state(dep="pair-a", members=("spark-1", "spark-2"), fingerprint="old")
    facts = {"spark-1": ts.absent_node("spark-1", [old]), "spark-2": ts.absent_node("spark-2", [old])}
    tv = dict(task_vars(), groups=LAB_GROUPS, hostvars={"spark-1": {}, "spark-2": {}})
    result = make({"facts": facts, "report_path": str(tmp_path / "s.json")}).run(task_vars=tv)
    row = result["deployments"][0]
    assert (row["deployment"], row["status"], row["in_inventory"]) == ("pair-a", "retired", False)
    assert result["summary"]["retired"] == ["pair-a"] and result["summary"]["not_serving"] == []
    # The same records under the fleet inventory: pair-a is the inventory's, and it is down.
    tv = dict(task_vars(), groups=FLEET_GROUPS, hostvars=FLEET_VARS)
    result = make({"facts": facts, "report_path": str(tmp_path / "s.json")}).run(task_vars=tv)
    row = result["deployments"][0]
    assert (row["deployment"], row["status"], row["in_inventory"]) == ("pair-a", "down", True)
    assert result["summary"]["not_serving"] == ["pair-a"] and result["all_serving"] is False
    # Without hostvars (the inventory unknown) nothing is flagged.
    result = make({"facts": facts, "report_path": str(tmp_path / "s.json")}).run(task_vars=task_vars())
    assert result["deployments"][0]["status"] == "down" and result["deployments"][0]["in_inventory"] is None
