# -*- coding: utf-8 -*-
"""specdec_plan on a fleet inventory (several deployments in one inventory): the play's deployment is planned,
a play holding several deployments or half a pair is refused with one line, and today's layout is unchanged.

The inventories are loaded by ansible-core's own InventoryManager/VariableManager (HostVars as a play sees them),
among them the shipped example inventories/example/fleet.yml, so that the example cannot rot."""

from __future__ import annotations

import json
import pathlib
import types

import pytest

from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
from ansible.vars.hostvars import HostVars
from ansible.vars.manager import VariableManager

from ansible_collections.sparkops.specdec.plugins.action import specdec_plan, specdec_settings

ROOT = pathlib.Path(__file__).resolve().parents[4]
FLEET = ROOT / "inventories" / "example" / "fleet.yml"
TWO_NODES = ROOT / "tests" / "unit" / "fixtures" / "inventories" / "two_nodes.yml"


@pytest.fixture(autouse=True)
def no_env_token(monkeypatch):
    monkeypatch.delenv("HF_TOKEN", raising=False)


def plan(source, limit=None, topology="two_sparks", pattern="spark_nodes", extra=None, me=None):
    """Run the action as the preflight play does (run_once on the play's first host)."""
    loader = DataLoader()
    inventory = InventoryManager(loader=loader, sources=[str(source)])
    manager = VariableManager(loader=loader, inventory=inventory)
    if extra:
        manager._extra_vars = dict(extra)
    if limit:
        inventory.subset(limit)
    play_hosts = [h.name for h in inventory.get_hosts(pattern)]
    assert play_hosts, (pattern, limit)
    # Every host of the play resolves its settings in its own context first (specdec_settings, as the playbooks do).
    for host in play_hosts:
        variables = manager.get_vars(host=inventory.get_host(host))
        result = specdec_settings.resolve(Templar(loader=loader, variables=variables), variables)
        manager.set_nonpersistent_facts(host, {"specdec_settings": result})
    hostvars = HostVars(inventory=inventory, variable_manager=manager, loader=loader)
    task_vars = {"inventory_hostname": me or play_hosts[0], "groups": inventory.get_groups_dict(),
                 "ansible_play_hosts_all": play_hosts, "hostvars": hostvars}
    task = types.SimpleNamespace(args={"topology": topology}, check_mode=False, diff=False, async_val=0,
                                 action="sparkops.specdec.specdec_plan")
    connection = types.SimpleNamespace(_shell=types.SimpleNamespace(tmpdir=None))
    action = specdec_plan.ActionModule(task, connection, None, loader, Templar(loader=loader, variables=task_vars),
                                       None)
    return action.run(task_vars=task_vars)


def problems(result):
    assert result.get("failed"), result
    head, *lines = result["msg"].split("\n")
    assert head.endswith("nothing was changed:"), head
    return [line[2:] for line in lines]


@pytest.mark.parametrize("limit,dep_id,members", [("pair_a", "pair-a", ["spark-1", "spark-2"]),
                                                  ("pair_b", "pair-b", ["spark-3", "spark-4"]),
                                                  ("spark-4,spark-3", "pair-b", ["spark-3", "spark-4"])])
def test_example_fleet_limited_to_one_pair_plans_that_pair(limit, dep_id, members):
    result = plan(FLEET, limit)
    assert not result.get("failed"), result.get("msg")
    assert result["errors"] == []
    dep = result["deployment"]
    assert (dep["id"], dep["members"], dep["head"], dep["topology"]) == (dep_id, members, members[0], "two_sparks")
    assert result["plan"]["tp_size"] == 2 and result["plan"]["head"] == members[0]
    assert result["plan"]["preset"] == "qwen3-235b-eagle3-tp2"


def test_example_fleet_single_spark_serves_its_own_preset_and_id():
    result = plan(FLEET, topology="single_spark", pattern="spark-5")
    assert not result.get("failed"), result.get("msg")
    dep = result["deployment"]
    assert (dep["id"], dep["members"], dep["head"]) == ("spark-5", ["spark-5"], "spark-5")
    assert dep["topology"] == "single_spark"
    assert result["plan"]["preset"] == "llama-3.3-70b-draft-target" and result["plan"]["method"] == "draft_target"
    # --limit spark-5 with the single's own pattern is the same run.
    again = plan(FLEET, limit="spark-5", topology="single_spark", pattern="spark-5")
    assert again["deployment"]["id"] == "spark-5" and not again.get("failed")


def test_example_fleet_unlimited_is_refused_with_one_line():
    result = plan(FLEET)
    assert problems(result) == [
        "inventory: the play holds 3 deployments (pair-a, pair-b, spark-5); two_sparks.yml deploys one pair: --limit to "
        "one (e.g. --limit <group>), or deploy them all with playbooks/fleet.yml."]
    assert "plan" not in result


def test_example_fleet_limited_to_half_a_pair_is_refused():
    result = plan(FLEET, "spark-1")
    assert problems(result) == [
        "--limit: spark-1 is in the play but spark-2 of deployment pair-a is not; a pair deploys together: --limit "
        "both (e.g. --limit pair_a group) or neither."]


def test_example_fleet_single_in_two_sparks_points_to_single_spark():
    result = plan(FLEET, "spark_singles")
    assert problems(result) == [
        "inventory: two_sparks.yml needs a pair, but deployment spark-5 has one Spark (spark-5); serve it with "
        "playbooks/single_spark.yml (-e single_spark_host=spark-5), or give its pair the same specdec_deployment_id."]


def write(tmp_path, text):
    path = tmp_path / "hosts.yml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_host_put_in_two_pairs_is_refused(tmp_path):
    source = write(tmp_path, """
all:
  children:
    spark_nodes:
      children:
        pair_a:
          vars: {specdec_deployment_id: pair-a, specdec_head_host: a1}
          hosts: {a1: {ansible_host: 10.0.0.1}, x: {ansible_host: 10.0.0.3}}
        pair_b:
          vars: {specdec_deployment_id: pair-b, specdec_head_host: b1}
          hosts: {b1: {ansible_host: 10.0.0.2}, x: {}}
""")
    line = ("specdec_deployment_id: x is in deployments pair-a (group pair_a), pair-b (group pair_b); a Spark belongs "
            "to one deployment: remove it from all groups but one.")
    assert line in problems(plan(source, "pair_a"))
    assert line in problems(plan(source, "pair_b"))


def test_a_pair_named_in_group_vars_files_is_found(tmp_path):
    """specdec_deployment_id in group_vars/<group>.yml next to the inventory, as most users keep it."""
    source = write(tmp_path, """
all:
  children:
    spark_nodes:
      children:
        pair_a:
          hosts: {a1: {ansible_host: 10.0.0.1}, a2: {ansible_host: 10.0.0.2}}
        pair_b:
          hosts: {b1: {ansible_host: 10.0.0.3}, a2: {}}
""")
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "pair_a.yml").write_text("specdec_deployment_id: pair-a\nspecdec_head_host: a1\n")
    (tmp_path / "group_vars" / "pair_b.yml").write_text("specdec_deployment_id: pair-b\nspecdec_head_host: b1\n")
    lines = problems(plan(source, "pair_b"))
    assert any(line.startswith("specdec_deployment_id: a2 is in deployments pair-a (group pair_a), pair-b (group "
                               "pair_b)") for line in lines), lines


def test_a_pair_without_a_head_is_refused(tmp_path):
    source = write(tmp_path, """
all:
  children:
    spark_nodes:
      children:
        pair_a:
          vars: {specdec_deployment_id: pair-a}
          hosts: {a1: {ansible_host: 10.0.0.1}, a2: {ansible_host: 10.0.0.2}}
""")
    result = plan(source)
    assert problems(result) == ["specdec_head_host: deployment pair-a (a1, a2): name its head with specdec_head_host "
                                "(e.g. in the group vars of the pair)."]
    assert result["deployment"]["id"] == "pair-a"


def test_todays_layout_is_unchanged():
    result = plan(TWO_NODES)
    assert not result.get("failed"), result.get("msg")
    dep = result["deployment"]
    assert (dep["id"], dep["members"], dep["head"]) == ("spark-1", ["spark-1", "spark-2"], "spark-1")
    single = plan(TWO_NODES, topology="single_spark", pattern="spark_head")
    assert not single.get("failed") and single["deployment"]["members"] == ["spark-1"]
    assert single["deployment"]["id"] == "spark-1"


def test_todays_layout_keeps_its_message_and_checks_the_limit(tmp_path):
    source = write(tmp_path, """
all:
  children:
    spark_nodes:
      children:
        spark_head: {hosts: {spark-1: {ansible_host: 10.0.0.1}}}
        spark_workers: {hosts: {spark-2: {ansible_host: 10.0.0.2}, spark-3: {ansible_host: 10.0.0.3}}}
""")
    assert problems(plan(source))[0] == (
        "inventory: two_sparks.yml needs one host in group spark_head and one in spark_workers (got "
        "spark_head=['spark-1'], spark_workers=['spark-2', 'spark-3']); see inventories/example/hosts.yml.")
    assert problems(plan(TWO_NODES, "spark-2")) == [
        "--limit: spark-2 is in the play but spark-1 of deployment spark-1 is not; a pair deploys together: --limit "
        "both (e.g. --limit spark_nodes group) or neither."]


def test_a_broken_deployment_outside_the_play_does_not_stop_this_one(tmp_path):
    source = write(tmp_path, """
all:
  children:
    spark_nodes:
      children:
        pair_a:
          vars: {specdec_deployment_id: pair-a, specdec_head_host: a1}
          hosts: {a1: {ansible_host: 10.0.0.1}, a2: {ansible_host: 10.0.0.2}}
        pair_b:
          vars: {specdec_deployment_id: pair-b}
          hosts: {b1: {ansible_host: 10.0.0.3}, b2: {ansible_host: 10.0.0.4}, b3: {ansible_host: 10.0.0.5}}
""")
    result = plan(source, "pair_a")
    assert not result.get("failed"), result.get("msg")
    assert result["deployment"]["members"] == ["a1", "a2"]
    lines = problems(plan(source, "pair_b"))
    # Three Sparks are one deployment since issue 24 (spark_cluster.yml); two_sparks.yml refuses it, and its missing head.
    assert "inventory: two_sparks.yml deploys a pair, but deployment pair-b has 3 Sparks (b1, b2, b3); deploy it with " \
           "playbooks/spark_cluster.yml (or playbooks/fleet.yml)." in lines
    assert any(line.startswith("specdec_head_host: deployment pair-b (b1, b2, b3)") for line in lines)


# Deployment ids YAML does not read as strings (issue 25, item 2): before, the grouping dropped them, the pair fell
# apart into two single Sparks and the message blamed the inventory's layout; now the id is named, with its type.
@pytest.mark.parametrize("value,problem", [
    ("1", '1 is an integer, not a string (YAML reads unquoted digits as a number); quote it, e.g. '
          'specdec_deployment_id: "1".'),
    ("20", '20 is an integer, not a string (YAML reads unquoted digits as a number); quote it, e.g. '
           'specdec_deployment_id: "20".'),
    ("2026-11-27", '2026-11-27 is a date, not a string (YAML reads an unquoted YYYY-MM-DD as a date); quote it, e.g. '
                   'specdec_deployment_id: "2026-11-27".'),
    ("2027-01-05", '2027-01-05 is a date, not a string (YAML reads an unquoted YYYY-MM-DD as a date); quote it, e.g. '
                   'specdec_deployment_id: "2027-01-05".'),
    ("yes", 'true is a boolean, not a string (YAML reads unquoted yes, no, true, false, on and off as booleans); quote '
            'it, e.g. specdec_deployment_id: "yes".'),
    ("true", 'true is a boolean, not a string (YAML reads unquoted yes, no, true, false, on and off as booleans); quote '
             'it, e.g. specdec_deployment_id: "yes".'),
    ('"../escape"', '"../escape" is not a plain file name (it names the deployment\'s state and log files); use 1 to '
                    '63 letters, digits, \'.\', \'_\' or \'-\', starting with a letter or digit, e.g. "pair-a".'),
    ('"pair/b"', '"pair/b" is not a plain file name (it names the deployment\'s state and log files); use 1 to 63 '
                 'letters, digits, \'.\', \'_\' or \'-\', starting with a letter or digit, e.g. "pair-a".'),
])
def test_a_pair_id_that_is_no_plain_string_is_named_with_its_type(tmp_path, value, problem):
    source = write(tmp_path, FLEET.read_text().replace("specdec_deployment_id: pair-b", "specdec_deployment_id: " + value))
    assert problems(plan(source, "pair_b")) == ["specdec_deployment_id on spark-3: " + problem,
                                                "specdec_deployment_id on spark-4: " + problem]
    # The other pair of the inventory is not stopped by it.
    assert not plan(source, "pair_a").get("failed")


@pytest.mark.parametrize("value,problem", [
    ("7", '7 is an integer, not a string (YAML reads unquoted digits as a number); quote it, e.g. '
          'specdec_deployment_id: "7".'),
    ("2026-11-27", '2026-11-27 is a date, not a string (YAML reads an unquoted YYYY-MM-DD as a date); quote it, e.g. '
                   'specdec_deployment_id: "2026-11-27".'),
    ("on", 'true is a boolean, not a string (YAML reads unquoted yes, no, true, false, on and off as booleans); quote '
           'it, e.g. specdec_deployment_id: "yes".'),
    ('"../../tmp/x"', '"../../tmp/x" is not a plain file name (it names the deployment\'s state and log files); use 1 '
                      'to 63 letters, digits, \'.\', \'_\' or \'-\', starting with a letter or digit, e.g. "pair-a".'),
])
def test_a_single_spark_id_that_is_no_plain_string_is_named_with_its_type(tmp_path, value, problem):
    text = FLEET.read_text().replace("specdec_server_method: draft_target",
                                     "specdec_server_method: draft_target\n              specdec_deployment_id: " + value)
    source = write(tmp_path, text)
    assert problems(plan(source, topology="single_spark", pattern="spark-5")) == [
        "specdec_deployment_id on spark-5: " + problem]


# Issue 25 item 2: a member of a pair named by specdec_deployment_id is not served as a single Spark under the pair's id.
@pytest.mark.parametrize("host,dep_id,other", [("spark-1", "pair-a", "spark-2"), ("spark-4", "pair-b", "spark-3")])
def test_single_spark_refuses_a_member_of_a_named_pair(host, dep_id, other):
    assert problems(plan(FLEET, topology="single_spark", pattern=host)) == [
        "inventory: single_spark.yml serves %s as one Spark, but specdec_deployment_id makes it a member of the pair %s "
        "(with %s), which would be planned as a single Spark under the pair's id; deploy the pair with "
        "playbooks/two_sparks.yml (--limit both) or fleet.yml, or give %s its own specdec_deployment_id to serve it "
        "alone." % (host, dep_id, other, host)]


def test_single_spark_serves_a_host_of_a_pair_given_its_own_id(tmp_path):
    text = FLEET.read_text().replace("              ansible_host: SET-management-address-of-spark-2",
                                     "              ansible_host: SET-management-address-of-spark-2\n"
                                     "              specdec_deployment_id: spark-2-alone\n"
                                     "              specdec_head_host: spark-2")
    got = plan(write(tmp_path, text), topology="single_spark", pattern="spark-2")
    assert not got.get("failed"), got.get("msg")
    assert (got["deployment"]["id"], got["deployment"]["members"]) == ("spark-2-alone", ["spark-2"])


def test_single_spark_on_the_head_of_todays_unnamed_layout_is_unchanged():
    got = plan(TWO_NODES, topology="single_spark", pattern="spark_head")
    assert not got.get("failed"), got.get("msg")
    assert got["deployment"]["members"] == [got["deployment"]["head"]]


def test_the_nodes_ssh_port_reaches_the_port_rule(tmp_path):
    # A node whose own sshd listens on 2233 (ansible_port): the containers' sshd default would take it.
    text = FLEET.read_text().replace("              ansible_host: SET-management-address-of-spark-2",
                                     "              ansible_host: SET-management-address-of-spark-2\n"
                                     "              ansible_port: 2233")
    assert problems(plan(write(tmp_path, text), "pair_a")) == [
        "specdec_container_ssh_port: 2233 is the SSH port of spark-2 (its sshd carries the Ansible connection, "
        "ansible_port); the containers share the host network, so it is taken; choose another port, e.g. 2234. "
        "(on spark-2)"]


# single_spark.yml on a host without specdec_deployment_id: its name is the id, which names its state file on the node.
@pytest.mark.parametrize("name", ["../spark-6", ".spark-6", "rack/spark-6"])
def test_single_spark_refuses_a_host_name_that_is_no_plain_file_name(tmp_path, name):
    text = FLEET.read_text().replace(
        "            spark-5:\n",
        "            %s:\n              ansible_host: SET-management-address-of-spark-6\n"
        "              specdec_server_preset: llama-3.3-70b-draft-target\n"
        "              specdec_server_method: draft_target\n            spark-5:\n" % json.dumps(name))
    assert problems(plan(write(tmp_path, text), topology="single_spark", pattern=name)) == [
        "specdec_deployment_id on %s: unset, so the host's name %s is the deployment's id, but it is not a plain file "
        "name (it names the deployment's state and log files); set specdec_deployment_id on it: use 1 to 63 letters, "
        "digits, '.', '_' or '-', starting with a letter or digit, e.g. \"pair-a\"." % (name, json.dumps(name))]
