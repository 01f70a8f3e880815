# -*- coding: utf-8 -*-
"""sparkops.specdec.fabric_cabling (issue 24 item 1): the deploy play's cabling check, per layout, from what the
netplan_qsfp role published on each node (netplan_qsfp_fabric: port, links), in Python; one line per problem."""

from __future__ import annotations

import types

import pytest

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from ansible_collections.sparkops.specdec.plugins.action import fabric_cabling
from ansible_collections.sparkops.specdec.plugins.module_utils import _layout

THREE = ["s1", "s2", "s3"]
# NVIDIA's manual plan for three Sparks (connect-three-sparks), in RING_NETDEVS order.
RING = {"s1": ["192.168.0.1/24", "192.168.1.1/24", "192.168.2.1/24", "192.168.3.1/24"],
        "s2": ["192.168.4.1/24", "192.168.5.1/24", "192.168.0.2/24", "192.168.1.2/24"],
        "s3": ["192.168.2.2/24", "192.168.3.2/24", "192.168.4.2/24", "192.168.5.2/24"]}


def published(port=1, links=None):
    return {"port": port, "interfaces": ["enp1s0f1np1", "enP2p1s0f1np1"], "ips": ["192.168.100.10", "192.168.101.10"],
            "links": links or []}


def ring_links(host, down=()):
    return [{"netdev": dev, "physical_port": 0 if "f0np0" in dev else 1, "state": "down" if dev in down else "up",
             "ipv4": [RING[host][slot]]} for slot, dev in enumerate(_layout.RING_NETDEVS)]


def run(**args):
    task = types.SimpleNamespace(args=args, check_mode=False, diff=False, async_val=0,
                                 action="sparkops.specdec.fabric_cabling")
    connection = types.SimpleNamespace(_shell=types.SimpleNamespace(tmpdir=None))
    action = fabric_cabling.ActionModule(task, connection, None, DataLoader(), Templar(loader=DataLoader()), None)
    return action.run(task_vars={})


def test_a_pair_on_the_same_port_passes():
    result = run(layout="direct", nodes=["spark-1", "spark-2"], fabric={"spark-1": published(), "spark-2": published()})
    assert (result.get("failed"), result["problems"], result["layout"], result["changed"]) == (None, [], "direct", False)


def test_a_pair_on_different_ports_is_one_line_naming_the_fix():
    result = run(layout="direct", nodes=["spark-1", "spark-2"],
                 fabric={"spark-1": published(1), "spark-2": published(0)})
    assert result["failed"] is True
    assert result["problems"] == [result["msg"]] == [
        "The Sparks use different QSFP ports (spark-1: port 1; spark-2: port 0); direct needs the same physical port "
        "on every Spark: recable, or set netplan_qsfp_port."]


@pytest.mark.parametrize("layout", [None, "", "auto"])
def test_no_layout_is_a_direct_pair(layout):
    result = run(layout=layout, nodes=["a", "b"], fabric={"a": published(1), "b": published(0)})
    assert result["layout"] == "direct" and result["failed"] is True


def test_switch_needs_the_same_port_on_all_four():
    nodes = ["a", "b", "c", "d"]
    fabric = {h: published(1) for h in nodes}
    assert run(layout="switch", nodes=nodes, fabric=fabric)["problems"] == []
    fabric["d"] = published(0)
    assert run(layout="switch", nodes=nodes, fabric=fabric)["problems"] == [
        "The Sparks use different QSFP ports (a: port 1; b: port 1; c: port 1; d: port 0); switch needs the same "
        "physical port on every Spark: recable, or set netplan_qsfp_port."]


def test_ring_reads_every_nodes_four_links():
    fabric = {h: published(1, ring_links(h)) for h in THREE}
    assert run(layout="ring", nodes=THREE, fabric=fabric)["problems"] == []
    fabric["s2"] = published(1, ring_links("s2", down=("enP2p1s0f1np1",)))
    result = run(layout="ring", nodes=THREE, fabric=fabric)
    assert result["failed"] is True and result["problems"] == [
        "s2: enP2p1s0f1np1 (cable to s1 enP2p1s0f0np0) not Up; a ring needs all four logical interfaces of every Spark "
        "Up: cable port 0 of each Spark to port 1 of the next (S1->S2->S3->S1)."]


def test_ring_follows_the_fabric_order_of_the_nodes():
    # The same link state read in another order is another ring: s1's port 0 then faces s3's port 1, another subnet.
    fabric = {h: published(1, ring_links(h)) for h in THREE}
    problems = run(layout="ring", nodes=["s1", "s3", "s2"], fabric=fabric)["problems"]
    assert problems and all("share no subnet" in line for line in problems)


def test_a_node_that_published_nothing_is_one_line():
    result = run(layout="switch", nodes=["a", "b", "c"], fabric={"a": published(), "b": published()})
    assert result["problems"] == ["c: no link state (sparkops.specdec.nccl_interface_info did not run there)."]


def test_several_problems_are_one_line_each():
    fabric = {h: published(1, ring_links(h, down=("enp1s0f0np0",))) for h in THREE}
    result = run(layout="ring", nodes=THREE, fabric=fabric)
    assert len(result["problems"]) == 3 and result["msg"].splitlines()[0] == "3 cabling problems:"
