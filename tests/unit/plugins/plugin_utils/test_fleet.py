# -*- coding: utf-8 -*-
"""plugin_utils/_fleet.py: how an inventory is cut into deployments, and the --limit check."""

from __future__ import annotations

import json

import pytest

from ansible_collections.sparkops.specdec.plugins.plugin_utils import _fleet


def fleet(host_vars, groups, group_vars=None, hosts=None):
    hosts = hosts if hosts is not None else list(host_vars)
    out = _fleet.group_deployments(hosts, lambda h: host_vars.get(h, {}), groups,
                                   None if group_vars is None else (lambda g: group_vars.get(g, {})))
    json.dumps(out)  # plain data only
    return out


def shape(out):
    return [(d["id"], d["members"], d["head"], d["topology"]) for d in out["deployments"]]


def test_todays_layout_is_one_pair_named_by_its_head():
    out = fleet({"spark-1": {}, "spark-2": {}}, {"spark_head": ["spark-1"], "spark_workers": ["spark-2"]})
    assert shape(out) == [("spark-1", ["spark-1", "spark-2"], "spark-1", "two_sparks")]
    assert out["errors"] == [] and out["deployments"][0]["named"] is False


def test_todays_layout_with_a_named_head_and_id():
    hv = {h: {"specdec_head_host": "spark-2"} for h in ("spark-1", "spark-2")}
    out = fleet(hv, {"spark_head": ["spark-1"], "spark_workers": ["spark-2"]})
    assert shape(out) == [("spark-2", ["spark-2", "spark-1"], "spark-2", "two_sparks")]


def test_two_pairs_and_a_single_by_group_vars():
    hv = {}
    for host, dep, head in (("a1", "pair-a", "a1"), ("a2", "pair-a", "a1"), ("b1", "pair-b", "b2"),
                            ("b2", "pair-b", "b2")):
        hv[host] = {"specdec_deployment_id": dep, "specdec_head_host": head}
    hv["s5"] = {"specdec_server_preset": "gpt-oss-120b-eagle3"}
    out = fleet(hv, {"pair_a": ["a1", "a2"], "pair_b": ["b1", "b2"], "singles": ["s5"]})
    assert shape(out) == [("pair-a", ["a1", "a2"], "a1", "two_sparks"), ("pair-b", ["b2", "b1"], "b2", "two_sparks"),
                          ("s5", ["s5"], "s5", "single_spark")]
    assert out["errors"] == []
    assert [d["named"] for d in out["deployments"]] == [True, True, False]


def test_single_with_its_own_id():
    out = fleet({"s5": {"specdec_deployment_id": "lab-single"}}, {})
    assert shape(out) == [("lab-single", ["s5"], "s5", "single_spark")]


def test_head_by_group_spark_head():
    hv = {"a1": {"specdec_deployment_id": "pair-a"}, "a2": {"specdec_deployment_id": "pair-a"}}
    out = fleet(hv, {"spark_head": ["a2"], "pair_a": ["a1", "a2"]})
    assert shape(out) == [("pair-a", ["a2", "a1"], "a2", "two_sparks")] and out["errors"] == []


def test_missing_head_is_one_line_naming_the_setting():
    hv = {"a1": {"specdec_deployment_id": "pair-a"}, "a2": {"specdec_deployment_id": "pair-a"}}
    out = fleet(hv, {"pair_a": ["a1", "a2"]})
    assert out["deployments"][0]["head"] is None
    assert out["errors"] == ["specdec_head_host: deployment pair-a (a1, a2): name its head with specdec_head_host "
                             "(e.g. in the group vars of the pair)."]
    # Two members in spark_head do not name one head either.
    out = fleet(hv, {"spark_head": ["a1", "a2"]})
    assert out["errors"][0].startswith("specdec_head_host: deployment pair-a (a1, a2): name its head")


def test_head_that_is_not_a_member():
    hv = {h: {"specdec_deployment_id": "pair-a", "specdec_head_host": "b1"} for h in ("a1", "a2")}
    out = fleet(hv, {})
    assert out["errors"] == ["specdec_head_host: 'b1' is not a node of deployment pair-a (a1, a2); name one of them "
                             "(e.g. in the group vars of the pair)."]


def test_three_and_four_named_members_are_one_cluster():
    # Issue 24: a named deployment holds 1 to 4 Sparks; three or four are a spark_cluster (playbooks/spark_cluster.yml).
    for hosts in (("a1", "a2", "a3"), ("a1", "a2", "a3", "a4")):
        hv = {h: {"specdec_deployment_id": "ring-a", "specdec_head_host": "a2"} for h in hosts}
        out = fleet(hv, {})
        assert out["errors"] == []
        assert shape(out) == [("ring-a", ["a2"] + [h for h in hosts if h != "a2"], "a2", "spark_cluster")]


def test_five_named_members_are_refused():
    hosts = ("a1", "a2", "a3", "a4", "a5")
    out = fleet({h: {"specdec_deployment_id": "big", "specdec_head_host": "a1"} for h in hosts}, {})
    assert out["errors"] == ["specdec_deployment_id: deployment big has 5 nodes (a1, a2, a3, a4, a5); a deployment is "
                             "1 to 4 Sparks: split it, giving each part its own specdec_deployment_id."]


def test_unnamed_groups_stay_one_pair():
    legacy = fleet({"h": {}, "w1": {}, "w2": {}}, {"spark_head": ["h"], "spark_workers": ["w1", "w2"]})
    assert shape(legacy) == [("h", ["h", "w1", "w2"], "h", "spark_cluster")]
    assert legacy["errors"] == ["inventory: groups spark_head and spark_workers hold 3 hosts without "
                                "specdec_deployment_id (h, w1, w2); without an id they form one pair: give each "
                                "deployment its own specdec_deployment_id (three or four Sparks also specdec_layout, "
                                "docs/layouts.md)."]


@pytest.mark.parametrize("count,topology,playbook", [(1, "single_spark", "single_spark.yml"),
                                                     (2, "two_sparks", "two_sparks.yml"),
                                                     (3, "spark_cluster", "spark_cluster.yml"),
                                                     (4, "spark_cluster", "spark_cluster.yml")])
def test_each_size_runs_its_playbook(count, topology, playbook):
    members = ["n%d" % i for i in range(count)]
    out = fleet({h: {"specdec_deployment_id": "d", "specdec_head_host": "n0"} for h in members}, {})
    dep = out["deployments"][0]
    assert dep["topology"] == topology
    argv = _fleet.run_argv("ansible-playbook", "/c/playbooks", dep, {}, "/tmp/v")
    assert argv[-1] == "/c/playbooks/" + playbook and argv[argv.index("--limit") + 1] == ",".join(members)
    check = _fleet.run_argv("ansible-playbook", "/c/playbooks", dep, {}, "/tmp/v", check=True)
    assert check[-3:] == ["--extra-vars", "preflight_topology=" + topology, "/c/playbooks/preflight_inventory.yml"]


def test_limit_cutting_a_cluster_names_all_its_nodes():
    hv = {h: {"specdec_deployment_id": "sw", "specdec_head_host": "a1"} for h in ("a1", "a2", "a3")}
    out = fleet(hv, {"switch_a": ["a1", "a2", "a3"]})
    assert _fleet.check_limit(out, ["a1", "a2"], {"switch_a": ["a1", "a2", "a3"]}) == [
        "--limit: a1, a2 are in the play but a3 of deployment sw is not; a deployment deploys together: --limit all "
        "its nodes (e.g. --limit switch_a group) or none."]


def test_a_host_in_two_deployments_stops_both():
    # Ansible resolves x to one id (pair-b); the group variables show it was put in both.
    hv = {"a1": {"specdec_deployment_id": "pair-a"}, "x": {"specdec_deployment_id": "pair-b"},
          "b1": {"specdec_deployment_id": "pair-b"}}
    groups = {"pair_a": ["a1", "x"], "pair_b": ["b1", "x"], "all": ["a1", "x", "b1"]}
    gv = {"pair_a": {"specdec_deployment_id": "pair-a"}, "pair_b": {"specdec_deployment_id": "pair-b"},
          "all": {"specdec_deployment_id": "ignored"}}
    out = fleet(hv, groups, gv)
    line = ("specdec_deployment_id: x is in deployments pair-a (group pair_a), pair-b (group pair_b); a Spark belongs "
            "to one deployment: remove it from all groups but one.")
    assert all(line in d["errors"] for d in out["deployments"])
    assert out["errors"].count(line) == 1
    # Without the group variables the resolved values alone cannot show it.
    assert line not in fleet(hv, groups)["errors"]


def test_a_parent_groups_id_overridden_by_the_pair_is_no_conflict():
    hv = {h: {"specdec_deployment_id": "pair-a", "specdec_head_host": "a1"} for h in ("a1", "a2")}
    hv["s5"] = {"specdec_deployment_id": "fleet-default"}
    groups = {"spark_nodes": ["a1", "a2", "s5"], "pair_a": ["a1", "a2"]}
    gv = {"spark_nodes": {"specdec_deployment_id": "fleet-default"}, "pair_a": {"specdec_deployment_id": "pair-a"}}
    out = fleet(hv, groups, gv)
    assert out["errors"] == [] and shape(out) == [("pair-a", ["a1", "a2"], "a1", "two_sparks"),
                                                  ("fleet-default", ["s5"], "s5", "single_spark")]


def test_disagreeing_heads():
    hv = {"a1": {"specdec_deployment_id": "pair-a", "specdec_head_host": "a1"},
          "a2": {"specdec_deployment_id": "pair-a", "specdec_head_host": "a2"}}
    out = fleet(hv, {})
    assert out["errors"] == ["specdec_head_host: differs within deployment pair-a (a1: a1, a2: a2); set it once for "
                             "the deployment (e.g. in the group vars of the pair)."]


def test_one_id_for_two_deployments():
    hv = {"s5": {}, "a1": {"specdec_deployment_id": "s5", "specdec_head_host": "a1"},
          "a2": {"specdec_deployment_id": "s5", "specdec_head_host": "a1"}}
    out = fleet(hv, {})
    assert out["errors"] == ["specdec_deployment_id: s5 names 2 deployments (s5; a1, a2); give each deployment its "
                             "own id."]


def test_unevaluated_or_empty_values_do_not_name_a_deployment():
    hv = {"s5": {"specdec_deployment_id": "", "specdec_head_host": "{{ groups['spark_head'][0] }}"},
          "s6": {"specdec_deployment_id": None}}
    assert shape(fleet(hv, {})) == [("s5", ["s5"], "s5", "single_spark"), ("s6", ["s6"], "s6", "single_spark")]


def _two_pairs_and_single():
    hv = {h: {"specdec_deployment_id": "pair-a", "specdec_head_host": "spark-1"} for h in ("spark-1", "spark-2")}
    hv.update({h: {"specdec_deployment_id": "pair-b", "specdec_head_host": "spark-3"} for h in ("spark-3", "spark-4")})
    hv["spark-5"] = {}
    groups = {"pair_a": ["spark-1", "spark-2"], "pair_b": ["spark-3", "spark-4"], "spark_nodes": list(hv)}
    return fleet(hv, groups), groups


def test_limit_to_a_whole_pair_or_a_single_passes():
    out, groups = _two_pairs_and_single()
    assert _fleet.check_limit(out, ["spark-1", "spark-2"], groups) == []
    assert [d["id"] for d in _fleet.deployments_of(out, ["spark-1", "spark-2"])] == ["pair-a"]
    assert _fleet.check_limit(out, ["spark-5"], groups) == []
    assert [d["id"] for d in _fleet.deployments_of(out, ["spark-5"])] == ["spark-5"]
    assert len(_fleet.deployments_of(out, list(groups["spark_nodes"]))) == 3


def test_limit_to_half_a_pair_is_one_line():
    out, groups = _two_pairs_and_single()
    assert _fleet.check_limit(out, ["spark-1"], groups) == [
        "--limit: spark-1 is in the play but spark-2 of deployment pair-a is not; a pair deploys together: --limit "
        "both (e.g. --limit pair_a group) or neither."]
    # No group holds exactly the pair: its hosts are named instead.
    assert _fleet.check_limit(out, ["spark-4", "spark-5"], {})[0].endswith(
        "--limit both (e.g. --limit spark-3,spark-4) or neither.")


# --- deployment ids: plain file names, strings as YAML reads them (issue 25, item 2) --------------------------------

ID_LINES = [
    # YAML's implicit types: named, "quote it" (pairs, not a dict: 1 == True as a key).
    (1, 'specdec_deployment_id on a1: 1 is an integer, not a string (YAML reads unquoted digits as a number); quote '
        'it, e.g. specdec_deployment_id: "1".'),
    (42, 'specdec_deployment_id on a1: 42 is an integer, not a string (YAML reads unquoted digits as a number); quote '
         'it, e.g. specdec_deployment_id: "42".'),
    (1.5, 'specdec_deployment_id on a1: 1.5 is a number, not a string (YAML reads unquoted digits as a number); quote '
          'it, e.g. specdec_deployment_id: "1.5".'),
    (True, 'specdec_deployment_id on a1: true is a boolean, not a string (YAML reads unquoted yes, no, true, false, on '
           'and off as booleans); quote it, e.g. specdec_deployment_id: "yes".'),
    (False, 'specdec_deployment_id on a1: false is a boolean, not a string (YAML reads unquoted yes, no, true, false, '
            'on and off as booleans); quote it, e.g. specdec_deployment_id: "no".'),
]


def test_ids_yaml_does_not_read_as_strings_are_named_and_keep_their_pair():
    import datetime
    lines = list(ID_LINES)
    for day in (datetime.date(2026, 11, 27), datetime.date(2025, 1, 2)):
        lines.append((day, 'specdec_deployment_id on a1: %s is a date, not a string (YAML reads an unquoted '
                           'YYYY-MM-DD as a date); quote it, e.g. specdec_deployment_id: "%s".' % (day, day)))
    for value, line in lines:
        hv = {h: {"specdec_deployment_id": value, "specdec_head_host": "a1"} for h in ("a1", "a2")}
        hv["s5"] = {}
        out = fleet(hv, {"pair": ["a1", "a2"]})
        # The pair stays one deployment (not two single Sparks, not today's layout), stopped by its id's line.
        (pair, single) = out["deployments"]
        assert pair["members"] == ["a1", "a2"] and pair["named"] is True, value
        assert pair["errors"] == [line, line.replace(" on a1:", " on a2:")], value
        assert single["errors"] == [] and out["errors"] == pair["errors"]
        assert _fleet.id_problem("a1", value) == line


@pytest.mark.parametrize("value", ["../escape", "pair/a", "..", ".hidden", "-dash", "pair a", "a" * 64, "pair-a\n", "é"])
def test_ids_that_are_not_plain_file_names_are_refused(value):
    hv = {"s5": {"specdec_deployment_id": value}, "s6": {}}
    out = fleet(hv, {})
    line = ("specdec_deployment_id on s5: %s is not a plain file name (it names the deployment's state and log "
            "files); use 1 to 63 letters, digits, '.', '_' or '-', starting with a letter or digit, e.g. \"pair-a\"."
            % json.dumps(value))
    assert out["errors"] == [line]
    assert [d["errors"] for d in out["deployments"]] == [[line], []]


@pytest.mark.parametrize("value", ["pair-a", "1", "2026-11-27", "yes", "a" * 63, "Pair_1.b"])
def test_quoted_ids_and_plain_file_names_are_taken(value):
    out = fleet({"s5": {"specdec_deployment_id": value}}, {})
    assert out["errors"] == [] and shape(out) == [(value, ["s5"], "s5", "single_spark")]
    assert _fleet.id_problem("s5", value) is None


def test_log_name_never_leaves_the_directory():
    assert _fleet.log_name("pair-a") == "pair-a"
    names = [_fleet.log_name(v) for v in ("../escape", "../../etc/passwd", "a/b", "..", ".", "", "a\x00b", "/abs")]
    assert all(n and "/" not in n and n not in (".", "..") and not n.startswith(".") and "\x00" not in n for n in names)
    # Two ids that differ only in what is replaced keep two files.
    assert _fleet.log_name("a/b") != _fleet.log_name("a_b") and _fleet.log_name("a/b") != _fleet.log_name("a?b")
