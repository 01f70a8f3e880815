# -*- coding: utf-8 -*-
"""plugin_utils/_playbook_check.py (issue 25 item 1): the playbook variables checked like role options, and a run
whose plays would match no host refused with one line naming why and what to pass."""

from __future__ import annotations

import pytest

from ansible_collections.sparkops.specdec.plugins.plugin_utils import _settings
from ansible_collections.sparkops.specdec.plugins.plugin_utils import _action, _playbook_check

SPECS = _action.specs()


def problems(values, skip=()):
    return _playbook_check.variable_problems(values, SPECS, skip=skip)


@pytest.mark.parametrize("values,line", [
    ({"single_spark_hots": "spark-2"},
     "single_spark_hots: not a setting of sparkops.specdec; did you mean single_spark_host?"),
    ({"fleet_deployment": ["pair-a"]},
     "fleet_deployment: not a setting of sparkops.specdec; did you mean fleet_deployments?"),
    ({"confrim": "yes"}, "confrim: not a variable of sparkops.specdec (it would be ignored); did you mean confirm?"),
    ({"status_hots": "spark_nodes"},
     "status_hots: not a variable of sparkops.specdec (it would be ignored); did you mean status_hosts?"),
    ({"teardown_remove_sate": True},
     "teardown_remove_sate: not a setting of sparkops.specdec; did you mean teardown_remove_state?"),
    ({"teardown_remove_meshes": True},
     "teardown_remove_meshes: not a setting of sparkops.specdec; did you mean teardown_remove_mesh?"),
])
def test_a_misspelt_playbook_variable_names_the_known_one(values, line):
    assert problems(values) == [line]


@pytest.mark.parametrize("values,name,fragment", [
    ({"single_spark_host": ["spark-1"]}, "single_spark_host", "is a list, not text"),
    ({"preflight_topology": "three_sparks"}, "preflight_topology", "is not one of two_sparks, single_spark"),
    ({"teardown_remove_state": "maybe"}, "teardown_remove_state", "is not a boolean"),
    ({"status_http_timeout": "soon"}, "status_http_timeout", "is not a whole number"),
    ({"fleet_parallel": -2}, "fleet_parallel", "is out of range"),
])
def test_a_wrong_type_or_choice_is_one_line(values, name, fragment):
    (line,) = problems(values)
    assert line.startswith(name + ": ") and fragment in line, line


def test_good_values_and_unrelated_variables_pass():
    assert problems({"single_spark_host": "spark-1", "preflight_topology": "single_spark", "confirm": "yes",
                     "teardown_remove_state": "true", "teardown_remove_mesh": True, "fleet_deployments": ["pair-a"], "status_hosts": "pair_a",
                     # A user's own variables, magic variables and results of the collection: never errors.
                     "my_rack": "r1", "spark_serial": "x", "inventory_hostname": "spark-1", "play_hosts": [],
                     "ansible_limit": "spark-1", "preflight_plan": {}, "fleet_deploy": {}, "run_check_pattern": "x",
                     "status": "ok", "hosts": "all", "confirmed": True}) == []


def test_role_options_misspelt_are_left_to_the_plan():
    """specdec_plan reports them with the deployment's other problems (one message): not doubled here."""
    assert problems({"specdec_sever_port": 9000, "trtllm_container_name": "x"}) == []


def test_skipped_values_are_not_checked_but_their_names_are_known():
    assert problems({"fleet_parallel": "two"}, skip={"fleet_parallel"}) == []
    assert problems({"fleet_paralel": 2}, skip={"fleet_parallel"}) != []


def test_candidate_names_are_the_playbook_variables_and_the_near_misses():
    names = ["single_spark_host", "single_spark_hots", "specdec_server_port", "confrim", "my_var", "ansible_host",
             "inventory_hostname"]
    assert _playbook_check.candidate_names(names, SPECS) == ["confrim", "single_spark_host", "single_spark_hots"]


def test_every_playbook_variable_is_declared_with_a_type():
    for name, spec in _settings.PLAYBOOK_SETTINGS.items():
        assert spec.get("type") in ("str", "int", "bool", "list", "path"), name


# --- the host selection ------------------------------------------------------------------------------------------

def test_a_selector_that_names_no_inventory_host():
    line = _playbook_check.selection_problem("single_spark_host", "nosuch", [], ["spark-1", "spark-2"], None)
    assert line == ("single_spark_host (nosuch): matches no host of the inventory, so nothing would be deployed or "
                    "read; pass -e single_spark_host=NAME naming one Spark of the inventory, or put one host in group "
                    "spark_head.")


def test_a_limit_that_leaves_out_the_plays_hosts():
    line = _playbook_check.selection_problem("spark_nodes", "spark_nodes", ["spark-1", "spark-2"], ["box-3"], "box-3")
    assert line == ("--limit box-3: leaves out spark-1, spark-2, the host(s) of spark_nodes, so nothing would be "
                    "deployed or read; --limit to some of them, or drop --limit.")


def test_a_limit_that_leaves_out_the_fleet_controller_play():
    line = _playbook_check.selection_problem("localhost", "localhost", ["localhost"], ["spark-1"], "spark-1")
    assert line.startswith("--limit spark-1: leaves out localhost") and "fleet_deployments" in line


@pytest.mark.parametrize("selector,pattern,matched,play_hosts", [
    ("spark_nodes", "spark_nodes", ["spark-1", "spark-2"], ["spark-1", "spark-2", "localhost"]),
    # Part of a pair under --limit: the plan's own check says what is wrong with it.
    ("spark_nodes", "spark_nodes", ["spark-1", "spark-2"], ["spark-1"]),
    ("localhost", "localhost", ["localhost"], ["spark-1", "localhost"]),
    ("single_spark_host", "spark-5", ["spark-5"], ["spark-5"]),
])
def test_a_selection_with_a_host_passes(selector, pattern, matched, play_hosts):
    assert _playbook_check.selection_problem(selector, pattern, matched, play_hosts) is None
