# -*- coding: utf-8 -*-
# Unit tests of the action plugins sparkops.specdec.preflight_report and sparkops.specdec.teardown_plan: the
# arguments they take from the playbooks, the settings they read from the nodes' variables (with the roles'
# defaults), the report file (mode 0600, also over an older 0644 one) and the results they return.

from __future__ import annotations

import json
import os
import stat
from unittest import mock

import pytest

from ansible.errors import AnsibleError

from ansible_collections.sparkops.specdec.plugins.action import preflight_report, teardown_plan
from ansible_collections.sparkops.specdec.tests.unit.plugins.plugin_utils import test_preflight as tp
from ansible_collections.sparkops.specdec.tests.unit.plugins.plugin_utils import test_teardown as tt


def make(cls, args, check_mode=False):
    task = mock.MagicMock()
    task.args = args
    task.check_mode = check_mode
    task.async_val = 0
    task.action = cls.__module__.rsplit(".", 1)[-1]
    return cls(task, mock.MagicMock(), mock.MagicMock(), loader=None, templar=None, shared_loader_obj=None)


def task_vars(hosts=("spark-1", "spark-2"), hostvars=None, **extra):
    out = {"inventory_hostname": hosts[0], "ansible_play_hosts_all": list(hosts),
           "hostvars": hostvars if hostvars is not None else {h: {} for h in hosts}, "playbook_dir": "/nowhere/playbooks"}
    out.update(extra)
    return out


def report_args(tmp_path, **over):
    args = {"plan": tp.PLAN, "probes": {h: tp.registered() for h in tp.HOSTS},
            "fabric": {"spark-1": tp.fabric(ips=("192.168.100.10/24",)), "spark-2": tp.fabric(ips=("192.168.100.11/24",))},
            "hf_results": tp.HF_OK, "container": "trtllm-multinode", "ssh_port": "2233", "hf_cache_dir": "",
            "report_path": str(tmp_path / "report.json")}
    args.update(over)
    return args


def test_report_written_0600_over_an_older_0644_file(tmp_path):
    path = tmp_path / "report.json"
    path.write_text("old")
    os.chmod(path, 0o644)
    hostvars = {"spark-1": {"trtllm_container_gpus": False}, "spark-2": {"trtllm_container_gpus": "false"}}
    result = make(preflight_report.ActionModule, report_args(tmp_path)).run(task_vars=task_vars(hostvars=hostvars))
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert result["report_path"] == str(path)
    assert json.loads(path.read_text()) == result["checks"]
    assert len(result["checks"]) == 40 and result["passed"] is True and result["changed"] is False
    assert result["failed_checks"] == [] and len(result["summary"]) == 40
    assert result["msg"].startswith("Preflight passed (40 checks")
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".preflight-report.")]


def test_gpus_default_to_the_roles_default_and_extra_vars_strings(tmp_path):
    hostvars = {"spark-1": {}, "spark-2": {"trtllm_container_gpus": "true"}}
    result = make(preflight_report.ActionModule, report_args(tmp_path)).run(task_vars=task_vars(hostvars=hostvars))
    gpu = {e["node"]: e for e in result["checks"] if e["id"] == "gpu_runtime"}
    assert gpu["spark-1"]["status"] == gpu["spark-2"]["status"] == "fail"
    assert result["passed"] is False and result["msg"].startswith("gpu_runtime | spark-1 | Docker has no nvidia runtime")


def test_byte_settings_from_extra_vars_strings(tmp_path):
    args = report_args(tmp_path, usable_memory_bytes="1048576", disk_reserve_bytes="1000000000000000")
    result = make(preflight_report.ActionModule, args).run(
        task_vars=task_vars(hostvars={h: {"trtllm_container_gpus": False} for h in tp.HOSTS}))
    got = {(e["id"], e["node"]): e for e in result["checks"]}
    assert got[("memory_budget", "spark-1")]["status"] == "fail"
    assert got[("disk_space", "spark-2")]["status"] == "fail"


def test_default_report_path_is_the_current_directory_not_the_checkout(tmp_path, monkeypatch):
    """No setting: the report goes to the directory ansible-playbook runs in (an installed collection is read-only)."""
    playbooks = tmp_path / "checkout" / "playbooks"
    playbooks.mkdir(parents=True)
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    args = report_args(tmp_path)
    del args["report_path"]
    result = make(preflight_report.ActionModule, args).run(task_vars=task_vars(playbook_dir=str(playbooks)))
    assert result["report_path"] == str(here / "preflight-report.json")
    assert stat.S_IMODE(os.stat(here / "preflight-report.json").st_mode) == 0o600
    assert os.listdir(tmp_path / "checkout") == ["playbooks"]


@pytest.mark.parametrize("report_path,expected", [(None, "reports/preflight-report.json"),
                                                  ("mine.json", "reports/mine.json")])
def test_report_dir_holds_the_report(tmp_path, monkeypatch, report_path, expected):
    """specdec_report_dir (created 0700 when missing): the default name in it, or a relative report_path in it."""
    monkeypatch.chdir(tmp_path)
    args = report_args(tmp_path, report_dir=str(tmp_path / "reports"))
    if report_path is None:
        del args["report_path"]
    else:
        args["report_path"] = report_path
    result = make(preflight_report.ActionModule, args).run(task_vars=task_vars())
    assert result["report_path"] == str(tmp_path / expected)
    assert stat.S_IMODE(os.stat(tmp_path / expected).st_mode) == 0o600


def test_unwritable_report_fails_with_the_path(tmp_path):
    args = report_args(tmp_path, report_path=str(tmp_path / "missing-dir" / "r.json"))
    result = make(preflight_report.ActionModule, args).run(task_vars=task_vars())
    assert result["failed"] and "cannot write the report" in result["msg"] and "missing-dir" in result["msg"]


@pytest.mark.parametrize("args,text", [
    ({"plan": {}}, "plan must be the registered result"),
    ({"plan": tp.PLAN, "bogus": 1}, "unknown option(s) bogus"),
    ({"plan": tp.PLAN, "ssh_port": "22x"}, "not a whole number"),
])
def test_report_bad_arguments(args, text):
    with pytest.raises(AnsibleError, match=text.replace("(", r"\(").replace(")", r"\)")):
        make(preflight_report.ActionModule, args).run(task_vars=task_vars())


def teardown_args(**over):
    args = {"probes": {"spark-1": {"results": [{"item": "root", "rc": 0, "stdout": "\n".join(
        [tt.line("state", 0, tt.RUNNING), tt.line("netplan", 0, tt.OURS), tt.line("addrs", 0, tt.IP_NOW)])}]}},
        "confirm": "", "remove_models": False, "remove_netplan": True, "container": "trtllm-multinode"}
    args.update(over)
    return args


def test_teardown_refuses_without_confirm_and_reads_node_settings():
    hostvars = {"spark-1": {"ansible_host": "192.168.100.10", "netplan_qsfp_apply": True}}
    result = make(teardown_plan.ActionModule, teardown_args()).run(task_vars=task_vars(("spark-1",), hostvars))
    assert result["proceed"] is False and result["confirmed"] is False and result["changed"] is False
    node = result["nodes"]["spark-1"]
    # The netplan file defaults to the netplan_qsfp role's; the management address stays; apply by netplan (default).
    assert node["netplan_file"] == "/etc/netplan/40-cx7.yaml" and node["netplan_apply"] is True
    assert node["addresses"] == [{"cidr": "192.168.101.10/24", "dev": "enP2p1s0f1np1"}]
    assert result["msg"].startswith("Nothing was removed. teardown.yml would remove: spark-1: container trtllm-multinode")


def test_teardown_check_mode_and_confirm():
    hostvars = {"spark-1": {"netplan_qsfp_apply": True, "netplan_qsfp_apply_method": "ip"}}
    result = make(teardown_plan.ActionModule, teardown_args(), check_mode=True).run(
        task_vars=task_vars(("spark-1",), hostvars))
    assert result["proceed"] is True and result["msg"].startswith("Would remove (check mode): ")
    assert result["nodes"]["spark-1"]["stop_server"] is False and result["nodes"]["spark-1"]["netplan_apply"] is False
    result = make(teardown_plan.ActionModule, teardown_args(confirm=True)).run(task_vars=task_vars(("spark-1",)))
    assert result["proceed"] is True and result["confirmed"] is True and result["nodes"]["spark-1"]["stop_server"]


@pytest.mark.parametrize("over,text", [
    ({"container": ""}, "container"), ({"remove_models": "maybe"}, "true or false"), ({"x": 1}, "unknown option"),
])
def test_teardown_bad_arguments(over, text):
    with pytest.raises(AnsibleError, match=text):
        make(teardown_plan.ActionModule, teardown_args(**over)).run(task_vars=task_vars(("spark-1",)))


def test_report_reads_download_per_node_and_names_the_host_key_dir(tmp_path):
    probes = {h: tp.registered() for h in tp.HOSTS}
    probes["spark-1"] = tp.registered(tp.user_part(ssh_containers=[tp.ssh_ok(rc=255, err="Permission denied (publickey).")]))
    hostvars = {"spark-1": {"trtllm_container_gpus": False},
                "spark-2": {"trtllm_container_gpus": False, "specdec_server_download": "false"}}
    args = report_args(tmp_path, probes=probes, host_key_dir="/srv/keys")
    result = make(preflight_report.ActionModule, args).run(task_vars=task_vars(hostvars=hostvars))
    by_key = {(e["id"], e["node"]): e for e in result["checks"]}
    assert by_key[("hub_reach", "spark-1")]["status"] == "pass"
    assert by_key[("hub_reach", "spark-2")]["status"] == "skip"
    assert by_key[("hub_reach", "spark-2")]["message"] == (
        "skipped: specdec_server_download is false (the nodes download nothing)")
    assert "/srv/keys/mesh/authorized_keys on the peer" in by_key[("ssh_containers", "spark-1")]["fix"]
    assert result["passed"] is False
    assert result["msg"].startswith("ssh_containers | spark-1 | ssh from this node's container")


def test_teardown_plans_the_kept_container_of_a_pending_change_from_the_probe():
    lines = [tt.line("state", 0, tt.RUNNING), tt.line("kept", 0, tt.kept_inspect()), tt.line("record", 0, tt.record_text()),
             tt.line("record_path", 0, tt.RECORD_PATH), tt.line("netplan", 0, tt.OURS), tt.line("addrs", 0, tt.IP_NOW)]
    args = teardown_args(probes={"spark-1": {"results": [{"item": "root", "rc": 0, "stdout": "\n".join(lines)}]}},
                         confirm="yes")
    result = make(teardown_plan.ActionModule, args).run(task_vars=task_vars(("spark-1",)))
    previous = result["nodes"]["spark-1"]["previous"]
    assert result["proceed"] is True
    assert (previous["id"], previous["remove"], previous["record"], previous["remove_record"]) == (
        tt.KEPT_ID, True, tt.RECORD_PATH, True)
    assert "previous container trtllm-multinode-previous (exited, kept for the change from" in result["msg"]


def test_teardown_marks_running_state_files_with_one_time_and_removes_them_on_request():
    records = tt.line("records", 0, tt.listing(("spark-1.json", tt.state_file()), ("pair-a.json", tt.state_file("pair-a"))))
    args = teardown_args(confirm="yes")
    args["probes"]["spark-1"]["results"][0]["stdout"] += "\n" + records
    result = make(teardown_plan.ActionModule, args).run(task_vars=task_vars(("spark-1",)))
    files = result["nodes"]["spark-1"]["state_files"]
    assert [f["action"] for f in files] == ["mark", "mark"]
    assert {f["state"]["torn_down_at"] for f in files} == {result["torn_down_at"]}
    assert all(f["state"]["running"] is None and f["state"]["previous"] == tt.LAUNCH for f in files)
    result = make(teardown_plan.ActionModule, dict(args, remove_state=True)).run(task_vars=task_vars(("spark-1",)))
    assert [f["action"] for f in result["nodes"]["spark-1"]["state_files"]] == ["remove", "remove"]
    assert "(tuned) a redeploy would have reused; " in result["msg"]
    with pytest.raises(AnsibleError, match="remove_state must be true or false"):
        make(teardown_plan.ActionModule, dict(args, remove_state="maybe")).run(task_vars=task_vars(("spark-1",)))


def test_teardown_plans_the_mesh_per_node_from_its_read_only_on_request():
    args = teardown_args(confirm="yes", mesh={"spark-1": tt.mesh_read()})
    result = make(teardown_plan.ActionModule, args).run(task_vars=task_vars(("spark-1",)))
    assert result["nodes"]["spark-1"]["mesh"] == {"remove": False, "changes": []}
    assert "add -e teardown_remove_mesh=true" in result["msg"]
    result = make(teardown_plan.ActionModule, dict(args, remove_mesh=True)).run(task_vars=task_vars(("spark-1",)))
    assert result["nodes"]["spark-1"]["mesh"] == {"remove": True, "changes": tt.MESH_CHANGES}
    assert "the SSH mesh (remove our block from /home/spark/.ssh/authorized_keys" in result["msg"]
    with pytest.raises(AnsibleError, match="remove_mesh must be true or false"):
        make(teardown_plan.ActionModule, dict(args, remove_mesh="maybe")).run(task_vars=task_vars(("spark-1",)))
    with pytest.raises(AnsibleError, match="mesh must map each inventory name"):
        make(teardown_plan.ActionModule, dict(args, mesh=["x"])).run(task_vars=task_vars(("spark-1",)))
