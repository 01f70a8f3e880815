# -*- coding: utf-8 -*-
"""specdec_plan (controller, before any change) says whether fetch once per pair can run: the copy runs ssh as the
deploy user (ansible_user), so ssh_mesh_user must be empty or that user. auto falls back with a warning and
plan.peer_copy; true with another mesh user is one line of the plan's errors."""

from __future__ import annotations

from ansible_collections.sparkops.specdec.tests.unit.plugins.action.specdec_plan_pair import PAIR, run_pair


def run(**settings):
    return run_pair({host: settings for host in PAIR})


def test_default_copies_once_per_pair_without_warning():
    result = run(ansible_user="spark")
    assert not result.get("failed") and "warnings" not in result
    peer = result["plan"]["peer_copy"]
    assert (peer["models"]["value"], peer["models"]["use"]) == ("auto", True)
    assert (peer["image"]["value"], peer["image"]["use"]) == ("auto", True)


def test_auto_with_another_mesh_user_fetches_on_every_node_and_warns():
    result = run(ansible_user="spark", ssh_mesh_user="mpi")
    assert not result.get("failed")
    peer = result["plan"]["peer_copy"]
    assert peer["models"]["use"] is False and peer["image"]["use"] is False
    assert peer["models"]["mesh_user_differs"] and peer["image"]["mesh_user_differs"]
    assert result["warnings"] == [peer["models"]["reason"] + ".", peer["image"]["reason"] + "."]


def test_true_with_another_mesh_user_fails_the_plan_before_any_change():
    for value in (True, "true"):
        result = run(ansible_user="spark", ssh_mesh_user="mpi", specdec_server_peer_copy=value)
        assert result["failed"] and "plan" not in result
        lines = [line for line in result["msg"].splitlines() if line.startswith("- specdec_server_peer_copy:")]
        assert len(lines) == 1 and lines[0].startswith("- specdec_server_peer_copy: true, but ssh_mesh_user mpi is "
                                                       "not the deploy user spark")


def test_false_and_an_unnamed_deploy_user():
    result = run(ansible_user="spark", ssh_mesh_user="mpi", specdec_server_peer_copy=False,
                 trtllm_container_image_peer_copy="false")
    assert not result.get("failed") and "warnings" not in result
    assert result["plan"]["peer_copy"]["models"]["value"] == "false"
    # No ansible_user: the nodes decide once they know their user (the roles' filters, the same function).
    result = run(ssh_mesh_user="mpi", specdec_server_peer_copy=True)
    assert not result.get("failed") and result["plan"]["peer_copy"]["models"]["use"] is None
