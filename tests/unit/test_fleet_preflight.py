"""End to end: the preflight play of two_sparks.yml on the example fleet inventory (inventories/example/fleet.yml),
with ansible-playbook's own --limit. Check mode, local connection on loopback (given as extra vars): the preflight
contacts no host, and a bug cannot reach the example's addresses."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
FLEET = ROOT / "inventories" / "example" / "fleet.yml"
PLAYBOOK = str(pathlib.Path(sys.executable).parent / "ansible-playbook")


def _run(playbook, limit, tmp_path, extra=None):
    varsfile = tmp_path / "vars.json"
    # The example's placeholders (SET-...) are set here as a user sets them: address and user.
    varsfile.write_text(json.dumps(dict({"ansible_connection": "local", "ansible_host": "127.0.0.1",
                                         "ansible_user": "nvidia"}, **(extra or {}))), encoding="utf-8")
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_STDOUT_CALLBACK="ansible.posix.json")
    env.pop("HF_TOKEN", None)
    cmd = [PLAYBOOK, "--check", "-i", str(FLEET), str(ROOT / "playbooks" / (playbook + ".yml")), "-e", "@" + str(varsfile)]
    if limit:
        cmd += ["--limit", limit]
    result = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    return result, json.loads(result.stdout)


def test_fleet_playbook_fails_naming_the_deployment_whose_node_is_lost(tmp_path):
    """playbooks/fleet.yml end to end: spark-5's own run of single_spark.yml cannot reach its node (loopback, a closed
    port): the fleet run fails (rc 2) and its set_stats name spark-5 as not serving, with the node unreachable."""
    varsfile = tmp_path / "vars.json"
    varsfile.write_text(json.dumps({"ansible_host": "127.0.0.1", "ansible_port": 9, "ansible_user": "nvidia",
                                    "fleet_deployments": ["spark-5"],
                                    "fleet_log_dir": str(tmp_path / "logs"),
                                    "fleet_report_path": str(tmp_path / "fleet.json")}), encoding="utf-8")
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_SHOW_CUSTOM_STATS="1")
    env.pop("HF_TOKEN", None)
    cmd = [PLAYBOOK, "-i", str(FLEET), str(ROOT / "playbooks" / "fleet.yml"), "-e", "@" + str(varsfile)]
    result = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 2, result.stdout[-3000:] + result.stderr[-2000:]
    stats = json.loads(result.stdout)["global_custom_stats"]["specdec_fleet"]
    assert stats["serving"] == [] and stats["not_serving"] == ["spark-5"] and stats["problems"] is None
    (failure,) = stats["deployments"]["spark-5"]["failures"]
    assert failure["host"] == "spark-5" and failure["unreachable"] is True
    report = json.loads((tmp_path / "fleet.json").read_text())
    assert report["deployments"][0]["rc"] == 4 and report["not_serving"] == ["spark-5"]
    # Its run was single_spark.yml limited to spark-5, and it reached the deploy play (its preflight passed).
    run = json.loads((tmp_path / "logs" / "spark-5.json").read_text())
    assert [p["play"]["name"] for p in run["plays"]][-1] == "Serve speculative decoding on one Spark"


def test_fleet_playbook_refuses_bad_settings_before_any_run(tmp_path):
    """playbooks/fleet.yml end to end with a wrong type and a value out of range: the fleet_deploy action's check
    (_settings' rules) fails the run with both lines in its set_stats, and no deployment runs."""
    varsfile = tmp_path / "vars.json"
    varsfile.write_text(json.dumps({"ansible_host": "127.0.0.1", "ansible_port": 9, "fleet_parallel": "two",
                                    "fleet_max_failures": -1, "fleet_log_dir": str(tmp_path / "logs"),
                                    "fleet_report_path": str(tmp_path / "fleet.json")}), encoding="utf-8")
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_SHOW_CUSTOM_STATS="1")
    cmd = [PLAYBOOK, "-i", str(FLEET), str(ROOT / "playbooks" / "fleet.yml"), "-e", "@" + str(varsfile)]
    result = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 2, result.stdout[-3000:] + result.stderr[-2000:]
    stats = json.loads(result.stdout)["global_custom_stats"]["specdec_fleet"]
    assert stats["problems"] == (
        "Fleet: 2 problem(s), no deployment was run:\n"
        "- fleet_max_failures: -1 is out of range; set an integer of at least 0 (failed deployments the run accepts "
        "before it starts no more; null: no limit).\n"
        '- fleet_parallel: "two" is not a whole number; set an integer of at least 0 (deployments at once; 0: every '
        "deployment at once), e.g. 0.")
    assert not (tmp_path / "logs").exists() and not (tmp_path / "fleet.json").exists()


def _plan_results(doc):
    """The host results of the sparkops.specdec.specdec_plan task (by its action, not its title)."""
    (task,) = [t for p in doc["plays"] for t in p["tasks"]
               if any(r.get("action") == "sparkops.specdec.specdec_plan" for r in t["hosts"].values())]
    return task["hosts"]


def _checked(task):
    """Whether a task is the run check every playbook starts with (sparkops.specdec.playbook_check, no host contact)."""
    return all(r.get("action") == "sparkops.specdec.playbook_check" for r in task["hosts"].values())


def _plays_after_the_check(doc):
    """The names of the plays that ran, without the run check's play (plays/run_check.yml)."""
    return [p["play"]["name"] for p in doc["plays"] if not (p["tasks"] and all(_checked(t) for t in p["tasks"]))]


@pytest.mark.parametrize("limit,dep_id,members", [("pair_a", "pair-a", ["spark-1", "spark-2"]),
                                                  ("pair_b", "pair-b", ["spark-3", "spark-4"])])
def test_limit_to_one_pair_passes_the_preflight(limit, dep_id, members, tmp_path):
    result, doc = _run("preflight_inventory", limit, tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    # run_once: one result (the play's first host), the play ran on exactly the pair.
    assert sorted(doc["stats"]) == members
    plan = _plan_results(doc)[members[0]]
    assert plan["deployment"]["id"] == dep_id and plan["deployment"]["members"] == members
    assert plan["plan"]["tp_size"] == 2 and plan["plan"]["head"] == members[0]


@pytest.mark.parametrize("limit,line", [
    ("spark-1", "- --limit: spark-1 is in the play but spark-2 of deployment pair-a is not; a pair deploys together: "
                "--limit both (e.g. --limit pair_a group) or neither."),
    (None, "- inventory: the play holds 3 deployments (pair-a, pair-b, spark-5); two_sparks.yml deploys one pair: "
           "--limit to one (e.g. --limit <group>), or deploy them all with playbooks/fleet.yml."),
])
def test_two_sparks_refuses_half_a_pair_and_the_whole_fleet(limit, line, tmp_path):
    result, doc = _run("two_sparks", limit, tmp_path)
    assert result.returncode != 0
    plays = _plays_after_the_check(doc)
    assert plays and all(p.startswith("Preflight 1/2") for p in plays), plays
    failed = [r for r in _plan_results(doc).values() if r.get("failed")]
    assert len(failed) == 1 and failed[0]["msg"].split("\n")[1:] == [line], failed
    assert all(s.get("changed", 0) == 0 for s in doc["stats"].values())


def test_single_spark_of_the_fleet_passes_the_preflight(tmp_path):
    result, doc = _run("preflight_inventory", None, tmp_path,
                       {"preflight_topology": "single_spark", "single_spark_host": "spark-5"})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    plan = _plan_results(doc)["spark-5"]
    assert plan["deployment"]["id"] == "spark-5" and plan["plan"]["preset"] == "llama-3.3-70b-draft-target"


@pytest.mark.parametrize("playbook,limit,extra,hosts", [
    ("preflight_inventory", "pair_a", [], ["spark-1", "spark-2"]),
    ("two_sparks", "pair_b", [], ["spark-3", "spark-4"]),
    ("single_spark", None, ["-e", "single_spark_host=spark-5"], ["spark-5"]),
    ("preflight", "pair_a", [], ["spark-1", "spark-2"]),
])
def test_the_shipped_example_stops_on_its_placeholders(playbook, limit, extra, hosts, tmp_path):
    """The example inventory as shipped (no value set): the inventory preflight of every deploy playbook and of
    preflight.yml stops before any other task, one line per placeholder naming the variable and the host, and no
    host is contacted (no connection override here: a contact would be to a SET-... address and fail otherwise)."""
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_STDOUT_CALLBACK="ansible.posix.json")
    cmd = [PLAYBOOK, "--check", "-i", str(FLEET), str(ROOT / "playbooks" / (playbook + ".yml"))] + extra
    if limit:
        cmd += ["--limit", limit]
    result = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 2, result.stdout[-3000:] + result.stderr[-2000:]
    doc = json.loads(result.stdout)
    # The run stopped at its first task after the run check (which passed: the placeholders are the preflight's).
    (task,) = [t for p in doc["plays"] for t in p["tasks"] if not _checked(t)]
    assert sorted(task["hosts"]) == hosts and {r["action"] for r in task["hosts"].values()} == {"ansible.builtin.assert"}
    for host in hosts:
        got = task["hosts"][host]
        assert got["failed"] and got["msg"].split("\n") == [
            "ansible_host on %s: SET-management-address-of-%s is the example inventory's placeholder; set the real "
            "value in your inventory (host or group vars) or with -e." % (host, host),
            "ansible_user on %s: SET-login-user-of-every-spark is the example inventory's placeholder; set the real "
            "value in your inventory (host or group vars) or with -e." % host]
    assert all(s["unreachable"] == 0 and s["changed"] == 0 for s in doc["stats"].values())
    assert not list(tmp_path.iterdir())  # no report either: nothing was checked on a node
