# -*- coding: utf-8 -*-
"""fleet_deploy (playbooks/fleet.yml): every deployment of a fleet inventory runs as its own ansible-playbook process,
several at once; a failing deployment fails alone and the result names it, the node, the task and the message.

The inventory is loaded by ansible-core's own InventoryManager (the shipped inventories/example/fleet.yml); the
deployments' runs are a stand-in ansible-playbook (a Python script) that records its argv and prints what the
ansible.posix.json callback prints, so the parsing is tested on that format and the runs really are processes."""

from __future__ import annotations

import json
import os
import pathlib
import re
import stat
import sys
import textwrap
import types

import pytest

from ansible import context
from ansible.cli.playbook import PlaybookCLI
from ansible.errors import AnsibleError
from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
from ansible.utils.context_objects import CLIArgs
from ansible.utils.vars import load_extra_vars
from ansible.vars.hostvars import HostVars
from ansible.vars.manager import VariableManager

from ansible_collections.sparkops.specdec.plugins.action import fleet_deploy
from ansible_collections.sparkops.specdec.plugins.filter import stats
from ansible_collections.sparkops.specdec.plugins.plugin_utils import _fleet, _settings
from ansible_collections.sparkops.specdec.plugins.plugin_utils import _action

ROOT = pathlib.Path(__file__).resolve().parents[4]
FLEET = ROOT / "inventories" / "example" / "fleet.yml"
TWO_NODES = ROOT / "tests" / "unit" / "fixtures" / "inventories" / "two_nodes.yml"

# The stand-in ansible-playbook: appends its argv and start/end times to $FAKE_LOG, then behaves per the deployment it
# was limited to ($FAKE_PLAN: limit -> {"rc", "fail": {host: [task, msg]}, "unreachable": [host], "sleep", "check"}).
# A deployment's check (preflight_inventory.yml, before any run) behaves per "check" ({"rc", "fail", "sleep"}), or is
# the real ansible-playbook's ("check": "real").
FAKE = textwrap.dedent("""\
    #!%s
    import json, os, sys, time
    argv = sys.argv[1:]
    limit = argv[argv.index("--limit") + 1]
    plan = json.load(open(os.environ["FAKE_PLAN"])).get(limit, {})
    checking = argv[-1].endswith("/preflight_inventory.yml")
    if checking and plan.get("check") == "real":
        real = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
        os.execv(real, [real] + argv)
    if checking:
        plan = plan.get("check", {})
    start = time.time()
    time.sleep(plan.get("sleep", 0))
    # Each @file of --extra-vars as this run sees it: its mode, its directory's mode and its text.
    files = {}
    for flag, value in zip(argv, argv[1:]):
        if flag == "--extra-vars" and value.startswith("@") and os.path.exists(value[1:]):
            files[value[1:]] = {"mode": os.stat(value[1:]).st_mode & 0o777, "text": open(value[1:]).read(),
                                "dir_mode": os.stat(os.path.dirname(os.path.abspath(value[1:]))).st_mode & 0o777}
    # The fleet's report as this run finds it when it starts ($FAKE_REPORT; null when there is none yet).
    report = os.environ.get("FAKE_REPORT")
    seen = json.load(open(report)) if report and os.path.exists(report) else None
    time.sleep(plan.get("sleep_after", 0))
    # ... and when it ends, once the time it is planned to take has passed.
    seen_at_end = json.load(open(report)) if report and os.path.exists(report) else None
    with open(os.environ["FAKE_LOG"], "a") as log:
        log.write(json.dumps({"argv": argv, "check": checking, "start": start, "end": time.time(), "files": files, "report": seen,
                              "report_at_end": seen_at_end,
                              "cmdline": open("/proc/self/cmdline").read() if os.path.exists("/proc/self/cmdline") else "",
                              "callback": os.environ.get("ANSIBLE_STDOUT_CALLBACK"),
                              "custom_stats": os.environ.get("ANSIBLE_SHOW_CUSTOM_STATS")}) + "\\n")
    hosts = limit.split(",")
    tasks = [{"task": {"name": "Docker group"}, "hosts": {h: {"changed": True} for h in hosts}}]
    stats = {h: {"ok": 5, "changed": 1, "failures": 0, "unreachable": 0, "skipped": 0, "rescued": 0, "ignored": 0}
             for h in hosts}
    for host, (task, msg) in plan.get("fail", {}).items():
        tasks.append({"task": {"name": "ignored earlier"}, "hosts": {host: {"failed": True, "msg": "ignored"}}})
        tasks.append({"task": {"name": task}, "hosts": {host: {"failed": True, "msg": msg}}})
        stats[host]["failures"] = 1
    for host in plan.get("unreachable", []):
        tasks.append({"task": {"name": "Gathering"}, "hosts": {host: {"unreachable": True, "msg": "ssh: no route"}}})
        stats[host]["unreachable"] = 1
    if plan.get("garbage"):
        sys.stderr.write("ERROR! the playbook could not be parsed\\n")
        sys.exit(plan["rc"])
    sys.stdout.write("[WARNING]: a warning before the document\\n")
    # Like the json callback: set_stats are printed only with ANSIBLE_SHOW_CUSTOM_STATS.
    shown = os.environ.get("ANSIBLE_SHOW_CUSTOM_STATS") == "1" and not plan.get("rc")
    custom = {"specdec_deploy": {h: {"deployment": limit} for h in hosts}} if shown else {}
    print(json.dumps({"plays": [{"play": {"name": "p"}, "tasks": tasks}], "stats": stats,
                      "custom_stats": {}, "global_custom_stats": custom}))
    sys.exit(plan.get("rc", 0))
""") % sys.executable


@pytest.fixture
def fake(tmp_path, monkeypatch):
    script = tmp_path / "ansible-playbook"
    script.write_text(FAKE)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    plan_file = tmp_path / "plan.json"
    log = tmp_path / "runs.jsonl"
    monkeypatch.setenv("FAKE_PLAN", str(plan_file))
    monkeypatch.setenv("FAKE_LOG", str(log))

    def logged():
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

    def runs():
        """The deployments' runs (their playbooks)."""
        return [r for r in logged() if not r["check"]]

    def checks():
        """The deployments' checks (preflight_inventory.yml), made before any run."""
        return [r for r in logged() if r["check"]]

    def set_plan(plan):
        plan_file.write_text(json.dumps(plan))

    set_plan({})
    return types.SimpleNamespace(path=str(script), runs=runs, checks=checks, logged=logged, set_plan=set_plan,
                                 tmp=tmp_path)


def run(source, fake, cli=None, check=False, **args):
    loader = DataLoader()
    inventory = InventoryManager(loader=loader, sources=[str(source)])
    manager = VariableManager(loader=loader, inventory=inventory)
    hostvars = HostVars(inventory=inventory, variable_manager=manager, loader=loader)
    task_vars = {"inventory_hostname": "localhost", "groups": inventory.get_groups_dict(), "hostvars": hostvars}
    args.setdefault("log_dir", str(fake.tmp / "logs"))
    args.setdefault("report_path", str(fake.tmp / "fleet.json"))
    args["ansible_playbook"] = fake.path
    task = types.SimpleNamespace(args=args, check_mode=check, diff=None, async_val=0,
                                 action="sparkops.specdec.fleet_deploy")
    play_context = types.SimpleNamespace(check_mode=check)
    connection = types.SimpleNamespace(_shell=types.SimpleNamespace(tmpdir=None))
    action = fleet_deploy.ActionModule(task, connection, play_context, loader,
                                       Templar(loader=loader, variables=task_vars), None)
    cli = dict({"inventory": (str(source),), "extra_vars": ("@vars.yml",), "verbosity": 0}, **(cli or {}))
    original = fleet_deploy.context.CLIARGS
    fleet_deploy.context.CLIARGS = cli
    try:
        return action.run(task_vars=task_vars)
    finally:
        fleet_deploy.context.CLIARGS = original


def by_limit(runs):
    return {r["argv"][r["argv"].index("--limit") + 1]: r for r in runs}


def test_every_deployment_runs_its_playbook_limited_to_its_nodes(fake):
    result = run(FLEET, fake)
    assert not result.get("failed"), result["msg"]
    runs = by_limit(fake.runs())
    assert set(runs) == {"spark-1,spark-2", "spark-3,spark-4", "spark-5"}
    for limit, r in runs.items():
        argv = r["argv"]
        assert argv[:4] == ["--inventory", str(FLEET), "--extra-vars", "@vars.yml"]
        assert r["callback"] == "ansible.posix.json" and r["custom_stats"] == "1"
        assert "--check" not in argv and "--diff" not in argv
    assert runs["spark-1,spark-2"]["argv"][-1].endswith("playbooks/two_sparks.yml")
    assert runs["spark-5"]["argv"][-3:-1] == ["--extra-vars", "single_spark_host=spark-5"]
    assert runs["spark-5"]["argv"][-1].endswith("playbooks/single_spark.yml")
    assert os.path.isfile(runs["spark-5"]["argv"][-1])
    assert result["serving"] == ["pair-a", "pair-b", "spark-5"] and result["not_serving"] == []
    assert [d["status"] for d in result["deployments"]] == ["serving"] * 3
    assert result["deployments"][2]["deploy"] == {"spark-5": {"deployment": "spark-5"}}
    assert result["changed"] is True
    report = json.loads(pathlib.Path(result["report"]).read_text())
    assert report["serving"] == result["serving"]
    assert stat.S_IMODE(os.stat(result["report"]).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(result["deployments"][0]["log"]).st_mode) == 0o600


def test_runs_overlap_when_parallel_and_do_not_with_parallel_1(fake):
    fake.set_plan({k: {"sleep": 0.6} for k in ("spark-1,spark-2", "spark-3,spark-4", "spark-5")})
    result = run(FLEET, fake)
    runs = sorted(fake.runs(), key=lambda r: r["start"])
    assert runs[1]["start"] < runs[0]["end"] and runs[2]["start"] < runs[0]["end"]
    # The report tells the overlap too (ISO times of the same clock compare as text).
    deps = result["deployments"]
    assert all(d["started_at"] < e["ended_at"] for d in deps for e in deps)
    (fake.tmp / "runs.jsonl").unlink()
    result = run(FLEET, fake, parallel=1)
    runs = sorted(fake.runs(), key=lambda r: r["start"])
    assert all(b["start"] >= a["end"] for a, b in zip(runs, runs[1:]))
    assert result["parallel"] == 1


def test_a_failing_deployment_fails_alone_and_is_named(fake):
    fake.set_plan({"spark-3,spark-4": {"rc": 2, "fail": {"spark-4": ["Start the container", "image not found"]}},
                   "spark-5": {"rc": 4, "unreachable": ["spark-5"]}})
    result = run(FLEET, fake)
    assert result["failed"] is True
    assert result["serving"] == ["pair-a"] and result["not_serving"] == ["pair-b", "spark-5"]
    pair_b = result["deployments"][1]
    assert pair_b["status"] == "failed" and pair_b["rc"] == 2
    assert pair_b["failures"] == [{"host": "spark-4", "task": "Start the container", "msg": "image not found",
                                   "unreachable": False}]
    assert pair_b["hosts"]["spark-3"]["failures"] == 0 and pair_b["hosts"]["spark-4"]["failures"] == 1
    assert result["deployments"][2]["failures"][0]["unreachable"] is True
    lines = result["msg"].split("\n")
    assert lines[0].startswith("2 of 3 deployments failed") and "serving: pair-a" in lines[0]
    assert lines[1] == "- pair-b (spark-3, spark-4): spark-4: Start the container: image not found"
    assert lines[2] == "- spark-5 (spark-5): spark-5: Gathering: ssh: no route"
    shaped = stats.fleet_stats(result)
    assert shaped["not_serving"] == ["pair-b", "spark-5"] and shaped["deployments"]["pair-a"]["status"] == "serving"
    assert shaped["problems"] is None


def test_a_spent_failure_budget_starts_no_more_and_leaves_the_rest_as_they_were(fake):
    fake.set_plan({"spark-1,spark-2": {"rc": 2, "fail": {"spark-2": ["Restart the server", "no /health"]}}})
    result = run(FLEET, fake, parallel=1, max_failures=0)
    assert [r["argv"][r["argv"].index("--limit") + 1] for r in fake.runs()] == ["spark-1,spark-2"]
    assert result["failed"] is True and result["not_serving"] == ["pair-a"]
    assert result["not_run"] == ["pair-b", "spark-5"] and result["serving"] == []
    assert [d["status"] for d in result["deployments"]] == ["failed", "not_run", "not_run"]
    assert result["deployments"][1]["hosts"] == {"spark-3": None, "spark-4": None}
    assert result["msg"].split("\n")[-1] == ("- not started, the failure budget (fleet_max_failures) was spent; left "
                                             "as they were: pair-b, spark-5")
    assert stats.fleet_stats(result)["not_run"] == ["pair-b", "spark-5"]
    # A budget of one failure: the second deployment still starts, and the third once only one has failed.
    (fake.tmp / "runs.jsonl").unlink()
    result = run(FLEET, fake, parallel=1, max_failures=1)
    assert len(fake.runs()) == 3 and result["not_run"] == [] and result["serving"] == ["pair-b", "spark-5"]


def test_fleet_deployments_sets_the_order_of_the_batches(fake):
    fake.set_plan({"spark-1,spark-2": {"rc": 2, "fail": {"spark-2": ["Restart the server", "no /health"]}}})
    result = run(FLEET, fake, parallel=1, max_failures=0, deployments=["spark-5", "pair-a", "pair-b"])
    assert [r["argv"][r["argv"].index("--limit") + 1] for r in fake.runs()] == ["spark-5", "spark-1,spark-2"]
    assert [d["id"] for d in result["deployments"]] == ["spark-5", "pair-a", "pair-b"]
    assert result["serving"] == ["spark-5"] and result["not_serving"] == ["pair-a"] and result["not_run"] == ["pair-b"]


def test_a_run_that_prints_no_document_is_reported_with_its_stderr(fake):
    fake.set_plan({"spark-5": {"rc": 4, "garbage": True}})
    result = run(FLEET, fake, deployments=["spark-5"])
    assert [r["argv"][-1].rsplit("/", 1)[-1] for r in fake.runs()] == ["single_spark.yml"]
    failure = result["deployments"][0]["failures"][0]
    assert failure["host"] is None and failure["msg"].startswith("ansible-playbook exited 4: ERROR! the playbook")


def test_check_and_diff_and_vault_pass_through_and_the_status_is_checked(fake):
    result = run(FLEET, fake, check=True, deployments=["pair-a"],
                 cli={"vault_password_files": ("/v/pw",), "diff": True, "verbosity": 2, "become": True})
    (only,) = fake.runs()
    argv = only["argv"]
    assert argv[argv.index("--vault-password-file") + 1] == "/v/pw"
    assert {"--check", "--diff", "--become", "-vv"} <= set(argv)
    assert result["deployments"][0]["status"] == "checked" and result["serving"] == ["pair-a"]


SECRET = "hf_FleetSecret0123456789abcdef"
API_KEY = "sk-fleet-api-key-0123456789abcdef"


@pytest.mark.parametrize("plan", [{}, {"spark-1,spark-2": {"rc": 2, "fail": {"spark-1": ["Pull", "no access"]}}}],
                         ids=["serving", "failed"])
def test_secrets_reach_the_runs_in_private_files_never_on_their_command_line(fake, plan):
    # Inline extra vars (key=value and JSON) may hold secrets: each run reads them from a 0600 file in a 0700
    # directory that is gone when the run has ended, whether it served or failed; the command line holds no value.
    fake.set_plan(plan)
    extra = ("specdec_server_hf_token=%s" % SECRET, "@vars.yml", '{"specdec_api_key": "%s"}' % API_KEY)
    result = run(FLEET, fake, cli={"extra_vars": extra})
    runs = fake.runs()
    assert len(runs) == 3
    for r in runs:
        assert not any(SECRET in a or API_KEY in a for a in r["argv"]), r["argv"]
        assert SECRET not in r["cmdline"] and API_KEY not in r["cmdline"]
        given = [a for flag, a in zip(r["argv"], r["argv"][1:]) if flag == "--extra-vars"]
        assert given[1] == "@vars.yml" and given[0] != given[2]
        files = [r["files"][given[0][1:]], r["files"][given[2][1:]]]
        assert [f["mode"] for f in files] == [0o600, 0o600] and [f["dir_mode"] for f in files] == [0o700, 0o700]
        assert json.loads(files[0]["text"]) == {"specdec_server_hf_token": SECRET}
        assert json.loads(files[1]["text"]) == {"specdec_api_key": API_KEY}
        assert not os.path.exists(given[0][1:]) and not os.path.exists(os.path.dirname(given[0][1:]))
    assert SECRET not in json.dumps(result)
    assert (result.get("failed") is True) == bool(plan)


def test_the_vars_files_are_removed_when_a_check_cannot_start(fake, monkeypatch, tmp_path):
    made = []
    real = fleet_deploy.tempfile.mkdtemp
    monkeypatch.setattr(fleet_deploy.tempfile, "mkdtemp", lambda **kw: made.append(real(dir=str(tmp_path), **kw)) or made[-1])
    fake.path = str(tmp_path / "no-such-ansible-playbook")
    result = run(FLEET, fake, deployments=["spark-5"], cli={"extra_vars": ("specdec_server_hf_token=%s" % SECRET,)})
    assert len(made) == 1 and not os.path.exists(made[0])
    # The check that cannot start is that deployment's problem, reported (not a crash of the fleet): not started.
    assert result["failed"] is True and result["invalid"] == ["spark-5"] and result["not_serving"] == []
    (failure,) = result["deployments"][0]["failures"]
    assert failure["host"] is None and SECRET not in failure["msg"]
    assert failure["msg"].startswith("fleet_deploy could not check deployment spark-5: FileNotFoundError: ")


def test_the_vars_files_are_removed_when_a_run_cannot_start(fake, monkeypatch, tmp_path):
    """The check passes, the run cannot be spawned (here: spark-5's): that deployment's failure, the others serve.
    (Before the checks, this was the test above with a missing ansible-playbook.)"""
    made = []
    real = fleet_deploy.tempfile.mkdtemp
    monkeypatch.setattr(fleet_deploy.tempfile, "mkdtemp", lambda **kw: made.append(real(dir=str(tmp_path), **kw)) or made[-1])
    call = fleet_deploy.subprocess.call

    def spawn(argv, **kwargs):
        if argv[argv.index("--limit") + 1] == "spark-5":
            raise FileNotFoundError(2, "No such file or directory", argv[0])
        return call(argv, **kwargs)
    monkeypatch.setattr(fleet_deploy.subprocess, "call", spawn)
    result = run(FLEET, fake, cli={"extra_vars": ("specdec_server_hf_token=%s" % SECRET,)})
    # One private directory per check and per run, each removed.
    assert len(made) == 6 and not any(os.path.exists(m) for m in made)
    assert sorted(by_limit(fake.runs())) == ["spark-1,spark-2", "spark-3,spark-4"]
    assert result["failed"] is True and result["not_serving"] == ["spark-5"]
    assert result["serving"] == ["pair-a", "pair-b"] and result["invalid"] == []
    (failure,) = result["deployments"][2]["failures"]
    assert failure["host"] is None and SECRET not in failure["msg"]
    assert failure["msg"] == ("fleet_deploy could not run deployment spark-5: FileNotFoundError: [Errno 2] No such file "
                              "or directory: '%s'" % fake.path)
    report = json.loads(pathlib.Path(result["report"]).read_text())
    assert report["complete"] is True and report["not_serving"] == ["spark-5"]


@pytest.mark.parametrize("args,cli,expected", [
    ({"deployments": ["pair-c"]}, None, "fleet_deployments: pair-c is no deployment of the inventory (known: pair-a, "
                                        "pair-b, spark-5)"),
    ({}, {"ask_vault_pass": True}, "--ask-vault-pass: the runs of the deployments cannot prompt; use "
                                   "--vault-password-file"),
])
def test_bad_input_runs_nothing(fake, args, cli, expected):
    result = run(FLEET, fake, cli=cli, **args)
    assert result["failed"] is True and result["deployments"] == []
    assert result["msg"].startswith("Fleet: ") and expected in result["msg"], result["msg"]
    assert fake.runs() == [] and not (fake.tmp / "fleet.json").exists()
    assert stats.fleet_stats(result)["problems"] == result["msg"]


def test_a_deployment_cut_by_the_group_is_reported_and_not_started(fake):
    source = fake.tmp / "cut.yml"
    source.write_text("all:\n  vars: {specdec_deployment_id: pair-x, specdec_head_host: a}\n"
                      "  children:\n    spark_nodes:\n      hosts: {a: {}}\n    elsewhere:\n      hosts: {b: {}}\n")
    result = run(source, fake)
    assert result["failed"] is True and result["invalid"] == ["pair-x"] and result["serving"] == []
    assert result["deployments"][0]["failures"] == [
        {"host": None, "task": None, "unreachable": False,
         "msg": "fleet_hosts: deployment pair-x has b outside the group; put all its nodes in the group, or none."}]
    assert fake.runs() == []


def test_bad_group_is_an_error(fake):
    with pytest.raises(AnsibleError, match="fleet_hosts: the inventory has no group nodes"):
        run(FLEET, fake, hosts="nodes")
    assert fake.runs() == []


# Every type and range error of fleet.yml's settings: the action checks them with _settings' rules (the lines an
# inventory value gets), before any run.
@pytest.mark.parametrize("args,line", [
    ({"parallel": -2}, "fleet_parallel: -2 is out of range; set an integer of at least 0 (deployments at once; 0: every "
                       "deployment at once)."),
    ({"parallel": "two"}, 'fleet_parallel: "two" is not a whole number; set an integer of at least 0 (deployments at '
                          'once; 0: every deployment at once), e.g. 0.'),
    ({"max_failures": "some"}, 'fleet_max_failures: "some" is not a whole number; set an integer of at least 0 (failed '
                               'deployments the run accepts before it starts no more; null: no limit), e.g. 1.'),
    ({"max_failures": -1}, "fleet_max_failures: -1 is out of range; set an integer of at least 0 (failed deployments "
                           "the run accepts before it starts no more; null: no limit)."),
    ({"deployments": "pair-a"}, 'fleet_deployments: "pair-a" is a string, not a list; write a YAML list, e.g. '
                                '["pair-a"].'),
    ({"deployments": ["pair-a", None]}, "fleet_deployments: item 2 (null) is null; every item of the list must be a string, "
                                        'e.g. ["text"].'),
    ({"hosts": ["spark-1"]}, 'fleet_hosts: ["spark-1"] is a list, not text; set a quoted string, e.g. "spark_nodes".'),
    ({"log_dir": " "}, "fleet_log_dir: is empty; set a directory for the runs' output, e.g. specdec-fleet-logs."),
    ({"report_path": ""}, "fleet_report_path: is empty; set a file name for the JSON report, e.g. specdec-fleet.json."),
])
def test_bad_settings_run_nothing_with_the_settings_line(fake, args, line):
    result = run(FLEET, fake, **args)
    assert result["failed"] is True and result["deployments"] == []
    assert result["msg"] == "Fleet: 1 problem(s), no deployment was run:\n- " + line
    assert fake.runs() == [] and not (fake.tmp / "fleet.json").exists()
    # The same line as the preflight gives for the value in an inventory (one place for the rules).
    name = "fleet_" + next(iter(args))
    assert line in _settings.check_settings({name: args[next(iter(args))]}, _action.specs())


def test_good_settings_as_the_playbook_passes_them(fake):
    # fleet.yml passes -e values as text: "1" and "0" are whole numbers.
    result = run(FLEET, fake, deployments=["spark-5"], parallel="1", max_failures="0")
    assert not result.get("failed"), result["msg"]
    assert result["parallel"] == 1 and result["max_failures"] == 0 and len(fake.runs()) == 1


def test_relative_paths_are_in_the_report_dir(fake, monkeypatch):
    """specdec_report_dir (relative: to the current directory): the log directory and the report (0600) in it."""
    monkeypatch.chdir(str(fake.tmp))
    result = run(FLEET, fake, deployments=["spark-5"], log_dir="logs", report_path="f.json", report_dir="reports")
    assert not result.get("failed"), result["msg"]
    reports = fake.tmp / "reports"
    assert result["report"] == str(reports / "f.json") and result["log_dir"] == str(reports / "logs")
    assert stat.S_IMODE(os.stat(str(reports / "f.json")).st_mode) == 0o600
    assert os.listdir(str(reports / "logs")) and not (fake.tmp / "logs").exists()


def test_todays_layout_is_one_pair(fake):
    result = run(TWO_NODES, fake)
    assert not result.get("failed"), result["msg"]
    (only,) = fake.runs()
    assert only["argv"][only["argv"].index("--limit") + 1] == "spark-1,spark-2"
    assert only["argv"][-1].endswith("two_sparks.yml")


# --- the fleet never loses a result (issue 25, item 3) -------------------------------------------------------------

def _with_pair_b_id(fake, value):
    source = fake.tmp / "fleet.yml"
    source.write_text(FLEET.read_text().replace("specdec_deployment_id: pair-b", "specdec_deployment_id: " + value))
    return source


@pytest.mark.parametrize("value,dep_id,line", [
    ('"../escape"', "../escape", 'specdec_deployment_id on spark-3: "../escape" is not a plain file name'),
    ('"pair/b"', "pair/b", 'specdec_deployment_id on spark-3: "pair/b" is not a plain file name'),
    ("1", "1", "specdec_deployment_id on spark-3: 1 is an integer, not a string"),
    ("2026-11-27", "2026-11-27", "specdec_deployment_id on spark-3: 2026-11-27 is a date, not a string"),
])
def test_an_invalid_deployment_is_reported_and_not_started_and_the_others_run(fake, value, dep_id, line):
    result = run(_with_pair_b_id(fake, value), fake)
    assert sorted(by_limit(fake.runs())) == ["spark-1,spark-2", "spark-5"]
    assert result["failed"] is True and result["serving"] == ["pair-a", "spark-5"]
    assert result["invalid"] == [dep_id] and result["not_serving"] == [] and result["not_run"] == []
    invalid = result["deployments"][1]
    assert (invalid["id"], invalid["status"], invalid["rc"]) == (dep_id, "invalid", None)
    assert invalid["hosts"] == {"spark-3": None, "spark-4": None}
    assert [f["msg"].split(";")[0].split(" (")[0] for f in invalid["failures"]] == [
        line.split(" (")[0], line.replace("spark-3", "spark-4").split(" (")[0]]
    assert any(line in m for m in result["msg"].split("\n")), result["msg"]
    report = json.loads(pathlib.Path(result["report"]).read_text())
    assert report["invalid"] == [dep_id] and report["deployments"][1]["status"] == "invalid"
    # Nothing was written outside the log directory.
    assert sorted(os.listdir(str(fake.tmp / "logs"))) == ["pair-a.json", "pair-a.stderr", "spark-5.json", "spark-5.stderr"]
    assert not (fake.tmp / "escape.json").exists()
    assert stats.fleet_stats(result)["invalid"] == [dep_id]


def test_an_invalid_deployment_counts_against_the_failure_budget(fake):
    source = _with_pair_b_id(fake, "1")
    result = run(source, fake, parallel=1, max_failures=0)
    assert fake.runs() == [] and result["invalid"] == ["1"] and result["not_run"] == ["pair-a", "spark-5"]
    assert [d["status"] for d in result["deployments"]] == ["not_run", "invalid", "not_run"]
    # A budget of one: pair-a runs and fails, the second failure: spark-5 is not started.
    fake.set_plan({"spark-1,spark-2": {"rc": 2, "fail": {"spark-2": ["Restart the server", "no /health"]}}})
    result = run(source, fake, parallel=1, max_failures=1)
    assert list(by_limit(fake.runs())) == ["spark-1,spark-2"]
    assert result["not_serving"] == ["pair-a"] and result["invalid"] == ["1"] and result["not_run"] == ["spark-5"]


def test_the_report_is_written_as_each_deployment_ends(fake, monkeypatch):
    monkeypatch.setenv("FAKE_REPORT", str(fake.tmp / "fleet.json"))
    fake.set_plan({"spark-3,spark-4": {"rc": 2, "fail": {"spark-4": ["Start the container", "image not found"]}}})
    result = run(_with_pair_b_id(fake, "pair-b"), fake, parallel=1)
    runs = fake.runs()
    assert [r["argv"][r["argv"].index("--limit") + 1] for r in runs] == ["spark-1,spark-2", "spark-3,spark-4", "spark-5"]
    # Each run finds the outcomes of the runs before it in the report, and itself as running.
    assert [[d["status"] for d in r["report"]["deployments"]] for r in runs[1:]] == [
        ["serving", "running", "pending"], ["serving", "failed", "running"]]
    assert runs[2]["report"]["not_serving"] == ["pair-b"] and runs[2]["report"]["complete"] is False
    final = json.loads(pathlib.Path(result["report"]).read_text())
    assert final["complete"] is True and [d["status"] for d in final["deployments"]] == ["serving", "failed", "serving"]


def test_a_crash_in_one_worker_is_that_deployments_failure(fake, monkeypatch):
    real = fleet_deploy._fleet.summarize

    def summarize(dep, *args, **kwargs):
        if dep["id"] == "pair-b":
            raise RuntimeError("the parser broke")
        return real(dep, *args, **kwargs)
    monkeypatch.setattr(fleet_deploy._fleet, "summarize", summarize)
    result = run(FLEET, fake)
    assert len(fake.runs()) == 3
    assert result["failed"] is True and result["serving"] == ["pair-a", "spark-5"]
    assert result["not_serving"] == ["pair-b"]
    crashed = result["deployments"][1]
    assert crashed["status"] == "failed" and crashed["rc"] is None
    assert crashed["failures"] == [{"host": None, "task": None, "unreachable": False,
                                    "msg": "fleet_deploy could not run deployment pair-b: RuntimeError: the parser "
                                           "broke"}]
    report = json.loads(pathlib.Path(result["report"]).read_text())
    assert [d["status"] for d in report["deployments"]] == ["serving", "failed", "serving"]


@pytest.mark.parametrize("dep_id", ["../outside", "../../outside", "..", "a/../../outside", "a/b"])
def test_an_id_with_dotdot_never_writes_outside_the_log_dir(fake, dep_id):
    # Defence in depth: such an id is refused before any run; the run's files stay in the log directory anyway.
    log_dir = fake.tmp / "deep" / "logs"
    log_dir.mkdir(parents=True)
    dep = {"id": dep_id, "topology": "single_spark", "members": ["spark-5"], "head": "spark-5"}
    before = {str(p) for p in fake.tmp.rglob("*")}
    outcome = fleet_deploy._run(fake.path, dep, {"inventory": (str(FLEET),)}, str(log_dir), False)
    made = {str(p) for p in fake.tmp.rglob("*")} - before - {str(fake.tmp / "runs.jsonl")}
    assert made and all(os.path.dirname(p) == str(log_dir) for p in made), made
    assert os.path.dirname(outcome["log"]) == str(log_dir) and outcome["status"] == "serving"


# Every deployment is checked before any run starts: its playbook's first preflight tier (inventory and settings).
CHECK_FAILED = {"rc": 2, "fail": {"spark-3": [
    "Check every setting and the deployment",
    "Deployment pair-b: 2 problem(s), nothing was changed:\n"
    "- specdec_server_port: \"abc\" is not a whole number; set an integer from 1 to 65535, e.g. 8355.\n"
    "- trtllm_container_image: differs between spark-3 (a), spark-4 (b); set it once for the group."]}}


def test_every_deployment_is_checked_before_any_run_starts(fake):
    fake.set_plan({"spark-3,spark-4": {"check": CHECK_FAILED}})
    result = run(FLEET, fake, parallel=1)
    checks, runs = fake.checks(), fake.runs()
    # Each deployment's check: its preflight tier with its run's options, all of them ended before the first run.
    assert sorted(by_limit(checks)) == ["spark-1,spark-2", "spark-3,spark-4", "spark-5"]
    assert all(c["argv"][-1] == os.path.join(fleet_deploy._PLAYBOOK_DIR, "preflight_inventory.yml") for c in checks)
    assert by_limit(checks)["spark-5"]["argv"][-7:-1] == [
        "--limit", "spark-5", "--extra-vars", "single_spark_host=spark-5", "--extra-vars",
        "preflight_topology=single_spark"]
    assert by_limit(checks)["spark-1,spark-2"]["argv"][-3:-1] == ["--extra-vars", "preflight_topology=two_sparks"]
    assert max(c["end"] for c in checks) <= min(r["start"] for r in runs)
    # pair-b is not started; its problems are one line each; the others run.
    assert list(by_limit(runs)) == ["spark-1,spark-2", "spark-5"]
    assert result["failed"] is True and result["invalid"] == ["pair-b"] and result["serving"] == ["pair-a", "spark-5"]
    invalid = result["deployments"][1]
    assert (invalid["status"], invalid["rc"]) == ("invalid", None)
    assert [f["msg"] for f in invalid["failures"]] == [
        'specdec_server_port: "abc" is not a whole number; set an integer from 1 to 65535, e.g. 8355.',
        "trtllm_container_image: differs between spark-3 (a), spark-4 (b); set it once for the group."]
    assert ('pair-b (spark-3, spark-4): not started: specdec_server_port: "abc" is not a whole number'
            in result["msg"]), result["msg"]
    report = json.loads(pathlib.Path(result["report"]).read_text())
    assert report["invalid"] == ["pair-b"] and report["deployments"][1]["failures"] == invalid["failures"]
    # Its check counts against the failure budget: with none, no deployment starts.
    result = run(FLEET, fake, parallel=1, max_failures=0)
    assert len(fake.runs()) == 2 and result["invalid"] == ["pair-b"] and result["not_run"] == ["pair-a", "spark-5"]


def test_a_check_that_fails_before_any_task_gives_its_stderr(fake):
    fake.set_plan({"spark-5": {"check": {"rc": 1, "garbage": True}}})
    result = run(FLEET, fake)
    assert result["invalid"] == ["spark-5"] and sorted(by_limit(fake.runs())) == ["spark-1,spark-2", "spark-3,spark-4"]
    assert [f["msg"] for f in result["deployments"][2]["failures"]] == [
        "the check of the deployment (ansible-playbook preflight_inventory.yml) exited 1: ERROR! the playbook could "
        "not be parsed"]


def test_the_real_preflight_of_each_deployment_refuses_a_bad_setting_before_any_run(fake, monkeypatch):
    """The checks are the real preflight tier (ansible-playbook preflight_inventory.yml on the example inventory, no host
    contacted); the deployments' runs are the stand-in. An extra inventory source gives pair-b a bad port."""
    monkeypatch.setenv("ANSIBLE_CONFIG", str(ROOT / "ansible.cfg"))
    bad = fake.tmp / "pair-b-port.yml"
    bad.write_text("all:\n  children:\n    pair_b:\n      vars: {specdec_server_port: abc}\n")
    fake.set_plan({limit: {"check": "real"} for limit in ("spark-1,spark-2", "spark-3,spark-4", "spark-5")})
    cli = {"inventory": (str(FLEET), str(bad)),
           "extra_vars": ("ansible_host=127.0.0.1 ansible_user=nvidia ansible_connection=local",)}
    result = run(FLEET, fake, cli=cli)
    assert sorted(by_limit(fake.runs())) == ["spark-1,spark-2", "spark-5"]
    assert result["invalid"] == ["pair-b"] and result["serving"] == ["pair-a", "spark-5"], result["msg"]
    assert [f["msg"] for f in result["deployments"][1]["failures"]] == [
        'specdec_server_port: "abc" is not a whole number; set an integer from 1 to 65535 (the runbook uses 8000 on '
        'one Spark, 8355 on two), e.g. 8355.']


def test_a_log_file_that_cannot_be_written_is_found_before_any_run(fake):
    (fake.tmp / "logs" / "pair-b.json").mkdir(parents=True)
    result = run(FLEET, fake)
    assert sorted(by_limit(fake.runs())) == ["spark-1,spark-2", "spark-5"]
    assert "spark-3,spark-4" not in by_limit(fake.checks())
    assert result["invalid"] == ["pair-b"] and result["serving"] == ["pair-a", "spark-5"]
    assert [f["msg"] for f in result["deployments"][1]["failures"]] == [
        "fleet_log_dir: the log file of deployment pair-b, %s, is a directory; remove it or set another fleet_log_dir."
        % (fake.tmp / "logs" / "pair-b.json")]


def test_a_log_file_that_would_be_the_report_is_refused(fake):
    # fleet_log_dir and fleet_report_path are one directory: deployment pair-b's output would replace the report.
    result = run(FLEET, fake, log_dir=str(fake.tmp), report_path=str(fake.tmp / "pair-b.json"))
    assert sorted(by_limit(fake.runs())) == ["spark-1,spark-2", "spark-5"]
    assert result["invalid"] == ["pair-b"]
    assert [f["msg"] for f in result["deployments"][1]["failures"]] == [
        "fleet_log_dir: the log file of deployment pair-b is %s, the report (fleet_report_path); set another "
        "fleet_log_dir or fleet_report_path." % (fake.tmp / "pair-b.json")]
    report = json.loads((fake.tmp / "pair-b.json").read_text())
    assert report["complete"] is True and report["invalid"] == ["pair-b"]


# The fleet's own files: a report or log directory that cannot be written runs nothing (one line); a report that
# fails later never loses an outcome.
@pytest.mark.parametrize("setting,make,line", [
    ("report_path", lambda tmp: (tmp / "fleet.json").mkdir() or str(tmp / "fleet.json"),
     "fleet_report_path: cannot write {path} (IsADirectoryError: [Errno 21] Is a directory: *); set a file in a "
     "directory you can write, e.g. specdec-fleet.json."),
    ("log_dir", lambda tmp: (tmp / "file").write_text("") * 0 or str(tmp / "file" / "logs"),
     "fleet_log_dir: cannot write {path} (NotADirectoryError: [Errno 20] Not a directory: '{path}'); set a directory "
     "you can write, e.g. specdec-fleet-logs."),
])
def test_a_fleet_that_cannot_keep_its_outcomes_runs_nothing(fake, setting, make, line):
    path = make(fake.tmp)
    result = run(FLEET, fake, **{setting: path})
    assert fake.logged() == [] and result["failed"] is True and result["deployments"] == []
    # "*": the temporary file the report is written to first (a random name), on one line.
    expected = re.escape("Fleet: 1 problem(s), no deployment was run:\n- " + line.format(path=path))
    assert re.fullmatch(expected.replace(re.escape("*"), "[^\n]*"), result["msg"]), result["msg"]


def test_a_report_that_cannot_be_written_later_loses_no_outcome(fake, monkeypatch):
    writes = []
    real = fleet_deploy._files.write_private

    def write_private(path, data, prefix):
        writes.append(path)
        if len(writes) > 1:  # the report before any run is written; every later write fails
            raise RuntimeError("the disk went away")
        return real(path, data, prefix)
    monkeypatch.setattr(fleet_deploy._files, "write_private", write_private)
    fake.set_plan({"spark-3,spark-4": {"rc": 2, "fail": {"spark-4": ["Start the container", "image not found"]}}})
    result = run(FLEET, fake)
    assert len(fake.runs()) == 3 and len(writes) > 2
    assert result["serving"] == ["pair-a", "spark-5"] and result["not_serving"] == ["pair-b"] and result["complete"]
    assert result["failed"] is True and [d["status"] for d in result["deployments"]] == ["serving", "failed", "serving"]
    assert result["report_error"] == ("fleet_report_path: cannot write %s (RuntimeError: the disk went away); the "
                                      "outcomes are in this run's result and its specdec_fleet stats only."
                                      % (fake.tmp / "fleet.json"))
    assert result["msg"].endswith("\n- " + result["report_error"])
    assert stats.fleet_stats(result)["report_error"] == result["report_error"]


def test_the_report_holds_each_outcome_as_soon_as_it_ends_while_others_run(fake, monkeypatch):
    """All at once: when spark-5's run ends (a fleet killed then keeps this file), the report holds the two pairs'
    outcomes, which ended before it."""
    monkeypatch.setenv("FAKE_REPORT", str(fake.tmp / "fleet.json"))
    fake.set_plan({"spark-3,spark-4": {"rc": 2, "fail": {"spark-4": ["Start the container", "image not found"]}},
                   "spark-5": {"sleep_after": 3}})
    run(FLEET, fake)
    seen = by_limit(fake.runs())["spark-5"]["report_at_end"]
    assert [d["status"] for d in seen["deployments"]] == ["serving", "failed", "running"]
    assert seen["complete"] is False and seen["not_serving"] == ["pair-b"]
    assert seen["deployments"][1]["failures"][0]["msg"] == "image not found"


@pytest.mark.parametrize("host", ["../outside", "a/b", ".hidden"])
def test_a_host_whose_name_is_no_file_name_is_refused_as_an_id(fake, host):
    """A host without specdec_deployment_id stands alone under its name: a name that would leave the directory of the
    files it names (logs here, state files on the node) is refused before any run; the others run."""
    source = fake.tmp / "hosts.yml"
    source.write_text(FLEET.read_text().replace("spark-5:", json.dumps(host) + ":"))
    result = run(source, fake)
    assert sorted(by_limit(fake.runs())) == ["spark-1,spark-2", "spark-3,spark-4"]
    assert result["invalid"] == [host] and result["serving"] == ["pair-a", "pair-b"]
    assert [f["msg"] for f in result["deployments"][2]["failures"]] == [
        "specdec_deployment_id on %s: unset, so the host's name %s is the deployment's id, but it is not a plain file "
        "name (it names the deployment's state and log files); set specdec_deployment_id on it: use 1 to 63 letters, "
        "digits, '.', '_' or '-', starting with a letter or digit, e.g. \"pair-a\"." % (host, json.dumps(host))]
    assert sorted(os.listdir(str(fake.tmp / "logs"))) == [
        "pair-a.json", "pair-a.stderr", "pair-b.json", "pair-b.stderr"]


# --- the pure parts -------------------------------------------------------------------------------------------------

DEP = {"id": "pair-a", "topology": "two_sparks", "members": ["spark-1", "spark-2"], "head": "spark-1", "errors": []}


def test_run_argv_passes_only_what_a_run_needs():
    cli = {"inventory": ("inv/a.yml", "inv/b.yml"), "extra_vars": ("x=1", "@f.yml", "", '{"y": 2}'),
           "subset": "spark-1", "tags": ("t",), "forks": 50, "remote_user": "ops", "timeout": None, "check": False}
    argv = _fleet.run_argv("/bin/ap", "/c/playbooks/", DEP, cli, "/tmp/v")
    # Inline extra vars become private files, in their place (the same precedence); @files and the rest as given.
    assert argv == ["/bin/ap", "--inventory", "inv/a.yml", "--inventory", "inv/b.yml",
                    "--extra-vars", "@/tmp/v/extra-vars-1.yml", "--extra-vars", "@f.yml",
                    "--extra-vars", "@/tmp/v/extra-vars-2.yml", "--user", "ops", "--limit", "spark-1,spark-2",
                    "/c/playbooks/two_sparks.yml"]
    assert _fleet.vars_files(cli, "/tmp/v/") == [("/tmp/v/extra-vars-1.yml", "x=1"), ("/tmp/v/extra-vars-2.yml", '{"y": 2}')]


def _parsed(argv, monkeypatch):
    """ansible-playbook's own parsing of ``argv``: its CLIARGS and the extra vars it loads (context restored after)."""
    # PlaybookCLI.parse() without its last step: the global CLIARGS is a singleton that keeps its first value.
    cli = PlaybookCLI(argv)
    cli.init_parser()
    args = CLIArgs.from_options(cli.post_process_args(cli.parser.parse_args(argv[1:])))
    monkeypatch.setattr(context, "CLIARGS", args)
    # load_extra_vars keeps its first answer on itself: forget it for each parse.
    monkeypatch.setattr(load_extra_vars, "extra_vars", None, raising=False)
    return dict(args), load_extra_vars(DataLoader())


def test_run_argv_a_rolling_image_change_reaches_each_run_as_given(monkeypatch, tmp_path):
    # The fleet run's options as ansible-playbook parses them (molecule/fleet's rolling image change), and each
    # deployment's argv parsed again: the same image, archive and consents, as the same text, in the same order.
    (tmp_path / "more.yml").write_text("specdec_server_max_draft_len: 2\n")
    given = ["--extra-vars=trtllm_container_image=sparkops-lab/trtllm-standin:1.4.0rc1",
             "--extra-vars=trtllm_container_image_archive=/srv/sparkops-lab/images/trtllm-standin-1.4.0rc1.tar",
             "--extra-vars=trtllm_container_allow_recreate=true", "-e", "specdec_server_allow_restart=true",
             "-e", "@%s" % (tmp_path / "more.yml"), "-e", '{"fleet_deployments": ["pair-a", "spark-5"]}']
    cli, fleet_vars = _parsed(["ansible-playbook", "-i", str(FLEET)] + given + ["playbooks/fleet.yml"], monkeypatch)
    single = dict(DEP, id="spark-5", topology="single_spark", members=["spark-5"], head="spark-5")
    for dep in (DEP, single):
        # The vars files as the action plugin writes them (inline values: the child reads them from those files).
        vars_dir = tmp_path / dep["id"]
        vars_dir.mkdir()
        for path, item in _fleet.vars_files(cli, str(vars_dir)):
            pathlib.Path(path).write_text(fleet_deploy._vars_text(item))
        argv = _fleet.run_argv("/bin/ansible-playbook", "/c/playbooks", dep, cli, str(vars_dir))
        child, child_vars = _parsed(argv, monkeypatch)
        assert len(child["extra_vars"]) == len(cli["extra_vars"]) + (dep is single)
        assert all(item.startswith("@") for item in child["extra_vars"][:len(cli["extra_vars"])])
        assert child["inventory"] == cli["inventory"] == (str(FLEET),)
        assert {k: v for k, v in child_vars.items() if k != "single_spark_host"} == fleet_vars
        assert child_vars["trtllm_container_image"] == "sparkops-lab/trtllm-standin:1.4.0rc1"
        assert child_vars["trtllm_container_allow_recreate"] == "true"
        assert child_vars["specdec_server_max_draft_len"] == 2
    assert child_vars["single_spark_host"] == "spark-5"


def test_parse_output_finds_the_document_between_other_output():
    doc = {"plays": [], "stats": {"a": {"ok": 1}}}
    text = "[WARNING]: x {not json}\n" + json.dumps(doc, indent=4) + "\nTuesday 24 November 2026  00:10:00 +0000\n"
    assert _fleet.parse_output(text) == doc
    assert _fleet.parse_output(json.dumps(doc)) == doc
    assert _fleet.parse_output("ERROR! no play\n") == {}
    assert _fleet.parse_output('{"no": "stats"}\n') == {}


def test_summarize_a_run_with_no_stats_for_a_member_is_failed():
    outcome = _fleet.summarize(DEP, 0, {"stats": {"spark-1": {"ok": 1}}})
    assert outcome["status"] == "failed" and outcome["hosts"]["spark-2"] is None
    assert outcome["failures"][0]["msg"] == "ansible-playbook exited 0 before any task"
