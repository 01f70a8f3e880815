"""End to end (issue 25 item 1): a run that would deploy (or read, or tear down) nothing fails with one line naming why
and what to pass, and a misspelt playbook variable is refused, both before any host is contacted. Every playbook runs
against a throwaway inventory on loopback addresses (127.0.0.9, a closed port): the check contacts no host, anything
after it would be unreachable. On the code before the check, these runs ended rc 0 with every play skipped (or
deployed the default host, ignoring the misspelt variable)."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PLAYBOOK = str(pathlib.Path(sys.executable).parent / "ansible-playbook")
CHECK = "sparkops.specdec.playbook_check"


def _run(tmp_path, closed_port, playbook, *args):
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(json.dumps({"all": {
        "vars": {"ansible_connection": "ssh", "ansible_host": "127.0.0.9", "ansible_port": closed_port},
        "children": {"spark_nodes": {"children": {"spark_head": {"hosts": {"spark-1": {}}},
                                                  "spark_workers": {"hosts": {"spark-2": {}}}}},
                     "other": {"hosts": {"box-3": {}}}}}}), encoding="utf-8")
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_HOST_KEY_CHECKING="False")
    env.pop("HF_TOKEN", None)
    cmd = [PLAYBOOK, "-i", str(inventory), str(ROOT / "playbooks" / playbook)] + list(args)
    result = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    return result, json.loads(result.stdout)


def _results(doc):
    return [r for p in doc["plays"] for t in p["tasks"] for r in t["hosts"].values()]


CASES = [
    ("single_spark.yml", ["-e", "single_spark_host=nosuch"],
     "single_spark_host (nosuch): matches no host of the inventory, so nothing would be deployed or read; pass -e "
     "single_spark_host=NAME naming one Spark of the inventory, or put one host in group spark_head."),
    ("single_spark.yml", ["--limit", "spark-2"],
     "--limit spark-2: leaves out spark-1, the host(s) of single_spark_host (spark_head), so nothing would be deployed "
     "or read; --limit to some of them, or drop --limit."),
    ("two_sparks.yml", ["--limit", "box-3"],
     "--limit box-3: leaves out spark-1, spark-2, the host(s) of spark_nodes, so nothing would be deployed or read; "
     "--limit to some of them, or drop --limit."),
    ("fleet.yml", ["--limit", "spark-1"],
     "--limit spark-1: leaves out localhost, where this playbook's play runs, so nothing would be done; drop --limit "
     "(fleet.yml runs on the controller, localhost) and pick deployments with -e '{\"fleet_deployments\": [ID, ...]}'."),
    # Second inputs (issue 25 audit): a --limit to the Sparks' group, which leaves out fleet.yml's controller play;
    # a host name close to the inventory's (spark-1, spark-2) that is none of them.
    ("fleet.yml", ["--limit", "spark_nodes"],
     "--limit spark_nodes: leaves out localhost, where this playbook's play runs, so nothing would be done; drop "
     "--limit (fleet.yml runs on the controller, localhost) and pick deployments with -e "
     "'{\"fleet_deployments\": [ID, ...]}'."),
    ("single_spark.yml", ["-e", "single_spark_host=spark-3"],
     "single_spark_host (spark-3): matches no host of the inventory, so nothing would be deployed or read; pass -e "
     "single_spark_host=NAME naming one Spark of the inventory, or put one host in group spark_head."),
    ("benchmark.yml", ["-e", "single_spark_host=nosuch", "-e", "specdec_benchmark_allow_restart=true"],
     "single_spark_host (nosuch): matches no host of the inventory, so nothing would be deployed or read; pass -e "
     "single_spark_host=NAME naming one Spark of the inventory, or put one host in group spark_head."),
    ("preflight.yml", ["-e", "preflight_topology=single_spark", "-e", "single_spark_host=nosuch"],
     "single_spark_host (nosuch): matches no host of the inventory, so nothing would be deployed or read; pass -e "
     "single_spark_host=NAME naming one Spark of the inventory, or put one host in group spark_head."),
    ("teardown.yml", ["--limit", "box-3", "-e", "confirm=yes"],
     "--limit box-3: leaves out spark-1, spark-2, the host(s) of spark_nodes, so nothing would be deployed or read; "
     "--limit to some of them, or drop --limit."),
    ("status.yml", ["-e", "status_hosts=nosuch"],
     "status_hosts (nosuch): matches no host of the inventory, so nothing would be deployed or read; pass -e "
     "status_hosts=PATTERN matching hosts of the inventory (default spark_nodes)."),
    ("diagnose.yml", ["-e", "diagnose_hosts=nosuch"],
     "diagnose_hosts (nosuch): matches no host of the inventory, so nothing would be deployed or read; pass -e "
     "diagnose_hosts=PATTERN matching hosts of the inventory (default spark_nodes)."),
    # Playbook variables, checked like role options (a misspelt name would be ignored and the default host deployed).
    ("single_spark.yml", ["-e", "single_spark_hots=spark-2"],
     "single_spark_hots: not a setting of sparkops.specdec; did you mean single_spark_host?"),
    ("fleet.yml", ["-e", '{"fleet_deployment": ["spark-1"]}'],
     "fleet_deployment: not a setting of sparkops.specdec; did you mean fleet_deployments?"),
    ("teardown.yml", ["-e", "confrim=yes"],
     "confrim: not a variable of sparkops.specdec (it would be ignored); did you mean confirm?"),
    ("two_sparks.yml", ["-e", "preflight_topology=three_sparks"],
     "preflight_topology: \"three_sparks\" is not one of two_sparks, single_spark, spark_cluster; did you mean two_sparks?"),
]


@pytest.mark.parametrize("playbook,args,line", CASES, ids=["%s %s" % (c[0], " ".join(c[1])) for c in CASES])
def test_a_run_that_would_do_nothing_fails_with_one_line(playbook, args, line, tmp_path, closed_port):
    result, doc = _run(tmp_path, closed_port, playbook, *args)
    assert result.returncode == 2, result.stdout[-3000:] + result.stderr[-2000:]
    failed = [r for r in _results(doc) if r.get("failed")]
    assert [(r["action"], r["problems"]) for r in failed] == [(CHECK, [line])], failed
    # Nothing but the check ran, and no host was contacted.
    assert {r["action"] for r in _results(doc)} == {CHECK}
    assert all(s["unreachable"] == 0 and s["changed"] == 0 for s in doc["stats"].values()), doc["stats"]


@pytest.mark.parametrize("playbook,args", [
    ("single_spark.yml", ["--check", "-e", "single_spark_host=spark-2"]),
    ("two_sparks.yml", ["--check", "--limit", "spark_nodes"]),
])
def test_a_run_that_selects_a_host_goes_on_to_it(playbook, args, tmp_path, closed_port):
    """The control: the check passes, the preflight's plan runs, and the first task that needs a host finds none."""
    result, doc = _run(tmp_path, closed_port, playbook, *args)
    assert result.returncode == 4, result.stdout[-3000:] + result.stderr[-2000:]
    checks = [r for r in _results(doc) if r.get("action") == CHECK]
    assert len(checks) == 1 and not checks[0].get("failed") and checks[0]["problems"] == []
    assert any(r.get("action") == "sparkops.specdec.specdec_plan" and not r.get("failed") for r in _results(doc))
    assert sum(s["unreachable"] for s in doc["stats"].values()) >= 1, doc["stats"]


FLEET_NOTHING = "Fleet: 1 problem(s), no deployment was run:\n- "


@pytest.mark.parametrize("args,line", [
    (["-e", '{"fleet_deployments": ["nosuch"]}'],
     "fleet_deployments: nosuch is no deployment of the inventory (known: spark-1); name deployments by their "
     "specdec_deployment_id (a single Spark by its name)."),
    (["-e", '{"fleet_deployments": ["spark-1", "pair-z"]}'],
     "fleet_deployments: pair-z is no deployment of the inventory (known: spark-1); name deployments by their "
     "specdec_deployment_id (a single Spark by its name)."),
])
def test_a_fleet_run_that_selects_no_deployment_fails_with_one_line(args, line, tmp_path, closed_port):
    """Nothing selected (issue 25 item 1): fleet.yml whose deployments name none of the inventory's, or one that is
    not there, runs no deployment and fails with the one line; no node is contacted."""
    result, doc = _run(tmp_path, closed_port, "fleet.yml", *args)
    assert result.returncode == 2, result.stdout[-3000:] + result.stderr[-2000:]
    fleet = [r for r in _results(doc) if r.get("action") == "sparkops.specdec.fleet_deploy"]
    assert len(fleet) == 1 and fleet[0]["deployments"] == [] and fleet[0]["msg"] == FLEET_NOTHING + line, fleet
    failed = [r for r in _results(doc) if r.get("failed")]
    assert [r["msg"] for r in failed] == [FLEET_NOTHING + line]
    assert all(s["unreachable"] == 0 and s["changed"] == 0 for s in doc["stats"].values()), doc["stats"]
