# -*- coding: utf-8 -*-
"""specdec_plan for a deployment of three or four Sparks (issue 24 item 1): spark_cluster.yml's preflight plans it
(topology spark_cluster, its layout, tp_size x pp_size ranks), two_sparks.yml stays the pair's and refuses it with one
line, and a pair planned by spark_cluster.yml is recorded as two_sparks.yml records it (same plan, same launch).

The inventories are loaded by ansible-core's own InventoryManager (test_specdec_plan_fleet.plan), among them the
shipped example inventories/example/cluster.yml."""

from __future__ import annotations

import pathlib

import pytest

from ansible_collections.sparkops.specdec.tests.unit.plugins.action.test_specdec_plan_fleet import plan, problems

ROOT = pathlib.Path(__file__).resolve().parents[4]
CLUSTER = ROOT / "inventories" / "example" / "cluster.yml"
FLEET = ROOT / "inventories" / "example" / "fleet.yml"


@pytest.fixture(autouse=True)
def no_env_token(monkeypatch):
    monkeypatch.delenv("HF_TOKEN", raising=False)


def write(tmp_path, group_vars, hosts=("spark-1", "spark-2", "spark-3")):
    lines = ["all:", "  children:", "    spark_nodes:", "      children:", "        ring_a:", "          vars:"]
    lines += ["            %s: %s" % (k, v) for k, v in group_vars.items()]
    lines += ["          hosts:"] + ["            %s: {ansible_host: 10.20.0.%d}" % (h, 37 + i) for i, h in enumerate(hosts)]
    path = tmp_path / "hosts.yml"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_example_switch_of_four_is_planned_by_spark_cluster():
    result = plan(CLUSTER, topology="spark_cluster")
    assert not result.get("failed"), result.get("msg")
    dep = result["deployment"]
    assert (dep["id"], dep["members"], dep["head"], dep["topology"]) == (
        "switch-a", ["spark-1", "spark-2", "spark-3", "spark-4"], "spark-1", "spark_cluster")
    p = result["plan"]
    assert (p["layout"], p["tp_size"], p["pp_size"], p["topology"]) == ("switch", 4, 1, "spark_cluster")
    assert p["argv"][p["argv"].index("--tp_size") + 1] == "4"


def test_two_sparks_refuses_more_than_a_pair_with_one_line():
    result = plan(CLUSTER, topology="two_sparks")
    assert problems(result) == [
        "inventory: two_sparks.yml deploys a pair, but deployment switch-a has 4 Sparks (spark-1, spark-2, spark-3, "
        "spark-4); deploy it with playbooks/spark_cluster.yml (or playbooks/fleet.yml)."]


def test_ring_of_three_with_pipeline_parallel(tmp_path):
    inv = write(tmp_path, {"specdec_deployment_id": "ring-a", "specdec_head_host": "spark-1", "specdec_layout": "ring",
                           "specdec_server_tp_size": 1, "specdec_server_pp_size": 3,
                           "specdec_nccl_bootstrap": "management_interface"})
    result = plan(inv, topology="spark_cluster")
    assert not result.get("failed"), result.get("msg")
    p = result["plan"]
    assert (p["layout"], p["tp_size"], p["pp_size"], p["members"]) == ("ring", 1, 3, ["spark-1", "spark-2", "spark-3"])
    argv = p["argv"]
    assert (argv[argv.index("--tp_size") + 1], argv[argv.index("--pp_size") + 1]) == ("1", "3")


def test_a_ring_bootstrapped_over_its_fabric_is_one_line(tmp_path):
    inv = write(tmp_path, {"specdec_deployment_id": "ring-a", "specdec_head_host": "spark-1", "specdec_layout": "ring",
                           "specdec_server_tp_size": 1, "specdec_server_pp_size": 3})
    assert problems(plan(inv, topology="spark_cluster")) == [
        "specdec_nccl_bootstrap: a ring's Sparks reach each other only over the cable between them, so OpenMPI and "
        "NCCL cannot bootstrap over the fabric interfaces (the head advertises its port-0 address, which the Spark on "
        "its port 1 cannot reach); set specdec_nccl_bootstrap: management_interface, as NVIDIA's NCCL runbook does "
        "for a ring, and specdec_nccl_management_interface to the management network's interface (enP7s7 on a DGX "
        "Spark)."]


def test_tp_times_pp_not_the_sparks_is_one_line(tmp_path):
    inv = write(tmp_path, {"specdec_deployment_id": "ring-a", "specdec_head_host": "spark-1", "specdec_layout": "ring",
                           "specdec_server_tp_size": 2, "specdec_server_pp_size": 2})
    lines = problems(plan(inv, topology="spark_cluster"))
    assert [line for line in lines if line.startswith("specdec_server_tp_size")] == [
        "specdec_server_tp_size: tp_size 2 x pp_size 2 = 4 ranks, but deployment ring-a has 3 GPU(s) (one per Spark); "
        "set specdec_server_tp_size and specdec_server_pp_size so that their product is 3, e.g. tp 3 x pp 1 or tp 1 x "
        "pp 3."]


def test_three_sparks_without_a_layout_is_one_line(tmp_path):
    inv = write(tmp_path, {"specdec_deployment_id": "three", "specdec_head_host": "spark-1",
                           "specdec_server_tp_size": 3})
    assert "specdec_layout: the deployment has 3 Sparks and no layout; set specdec_layout: ring (three Sparks cabled " \
           "in a ring) or switch (two to four Sparks through a switch)." in problems(plan(inv, topology="spark_cluster"))


def test_one_spark_is_refused_by_spark_cluster(tmp_path):
    inv = write(tmp_path, {"specdec_deployment_id": "solo"}, hosts=("spark-1",))
    assert problems(plan(inv, topology="spark_cluster")) == [
        "inventory: spark_cluster.yml needs two to four Sparks, but deployment solo has one Spark (spark-1); serve it "
        "with playbooks/single_spark.yml (-e single_spark_host=spark-1), or give its other Sparks the same "
        "specdec_deployment_id."]


def test_a_pair_by_spark_cluster_is_the_pair_two_sparks_plans():
    by_pair = plan(FLEET, "pair_a", topology="two_sparks")
    by_cluster = plan(FLEET, "pair_a", topology="spark_cluster")
    assert not by_pair.get("failed") and not by_cluster.get("failed"), (by_pair.get("msg"), by_cluster.get("msg"))
    assert by_cluster["deployment"]["topology"] == "two_sparks"
    assert by_cluster["plan"] == by_pair["plan"]


def test_ring_overrides_are_checked_in_the_fabric_order_not_head_first(tmp_path):
    # The head is the second host; netplan_qsfp indexes the ring in inventory order (spark-1 is S1). spark-1's
    # override is the runbook's plan for S1: checked against S2 and S3's cables, it fits.
    inv = write(tmp_path, {"specdec_deployment_id": "ring-a", "specdec_head_host": "spark-2", "specdec_layout": "ring",
                           "specdec_server_tp_size": 1, "specdec_server_pp_size": 3,
                           "specdec_nccl_bootstrap": "management_interface"})
    text = inv.read_text().replace(
        "spark-1: {ansible_host: 10.20.0.37}",
        "spark-1: {ansible_host: 10.20.0.37, netplan_qsfp_addresses: [192.168.0.1/24, 192.168.1.1/24, 192.168.2.1/24, "
        "192.168.3.1/24]}")
    inv.write_text(text)
    result = plan(inv, topology="spark_cluster")
    assert not result.get("failed"), result.get("msg")
    assert result["deployment"]["members"] == ["spark-2", "spark-1", "spark-3"]
