# -*- coding: utf-8 -*-
# Unit tests for the PRIVATE filters of plugins/filter/netplan_qsfp.py (the netplan_qsfp role's peer test): which
# peers a node pings at which addresses, with which files/peer_ping.sh arguments, and the play-wide verdict
# (module_utils/_layout.ping_peers and peer_test_problems).

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.sparkops.specdec.plugins.filter import netplan_qsfp

PING = netplan_qsfp.netplan_qsfp_ping_peers
FAILURES = netplan_qsfp.netplan_qsfp_peer_failures

# The cabled port 1's pair (what nccl_interface_info selects on the lab and on a Spark cabled on port 1).
PAIR_IFS = ["enp1s0f1np1", "enP2p1s0f1np1"]
# A ring's four, port 0's pair first (module_utils/_layout.RING_NETDEVS).
RING_IFS = ["enp1s0f0np0", "enP2p1s0f0np0", "enp1s0f1np1", "enP2p1s0f1np1"]
APPLIED = {"changed": False, "failed": False}


def fabric_of(ips_of, interfaces):
    """Each node's published netplan_qsfp_fabric (only what the peer test reads: interfaces and ips), in order."""
    return {h: {"interfaces": list(interfaces), "ips": list(ips)} for h, ips in ips_of.items()}


def applied(nodes, result=None):
    return {h: dict(result or APPLIED) for h in nodes}


PAIR = fabric_of({"spark-1": ["192.168.100.10", "192.168.101.10"],
                  "spark-2": ["192.168.100.11", "192.168.101.11"]}, PAIR_IFS)
# A 3-node ring in the runbook's plan (module_utils/_layout.ring_addresses, ring_subnets 192.168.0-5.0/24): each node's
# port 0 (ips 0, 1) shares a subnet with the next node's port 1 (ips 2, 3).
RING3 = fabric_of({"s1": ["192.168.0.1", "192.168.1.1", "192.168.2.1", "192.168.3.1"],
                   "s2": ["192.168.4.1", "192.168.5.1", "192.168.0.2", "192.168.1.2"],
                   "s3": ["192.168.2.2", "192.168.3.2", "192.168.4.2", "192.168.5.2"]}, RING_IFS)
RING4 = fabric_of({"s1": ["192.168.0.1", "192.168.1.1", "192.168.6.2", "192.168.7.2"],
                   "s2": ["192.168.2.1", "192.168.3.1", "192.168.0.2", "192.168.1.2"],
                   "s3": ["192.168.4.1", "192.168.5.1", "192.168.2.2", "192.168.3.2"],
                   "s4": ["192.168.6.1", "192.168.7.1", "192.168.4.2", "192.168.5.2"]}, RING_IFS)


def switch(count):
    return fabric_of({"spark-%d" % n: ["192.168.100.%d" % n, "192.168.101.%d" % n] for n in range(1, count + 1)},
                     PAIR_IFS)


def pinged(plan):
    return [(p["node"], p["addresses"]) for p in plan["peers"]]


def test_filters_are_registered():
    assert set(netplan_qsfp.FilterModule().filters()) == {"netplan_qsfp_ping_peers", "netplan_qsfp_peer_failures"}


# --- netplan_qsfp_ping_peers ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("layout", ["auto", None, "", "direct"])
def test_a_pair_pings_its_peer_on_the_cabled_port_with_the_same_arguments_as_before(layout):
    # files/peer_ping.sh's arguments of a pair, byte for byte those the role's Jinja passed: this node's two
    # interfaces, then the peer's name and its addresses on logical links 1 and 2 (ips 0 and 1).
    plan = PING(PAIR, applied(PAIR), "spark-1", layout, False)
    assert plan == {"peers": [{"node": "spark-2", "addresses": ["192.168.100.11", "192.168.101.11"]}],
                    "args": ["enp1s0f1np1", "enP2p1s0f1np1", "spark-2", "192.168.100.11", "192.168.101.11"]}
    assert PING(PAIR, applied(PAIR), "spark-2", layout, False)["args"] == [
        "enp1s0f1np1", "enP2p1s0f1np1", "spark-1", "192.168.100.10", "192.168.101.10"]


@pytest.mark.parametrize("count", [3, 4])
def test_a_switch_node_pings_every_other_node_in_the_fabric_order(count):
    fabric = switch(count)
    for n in range(1, count + 1):
        plan = PING(fabric, applied(fabric), "spark-%d" % n, "switch", False)
        others = [m for m in range(1, count + 1) if m != n]
        assert pinged(plan) == [("spark-%d" % m, ["192.168.100.%d" % m, "192.168.101.%d" % m]) for m in others]
        assert plan["args"][:2] == PAIR_IFS
        assert plan["args"][2:] == [a for m in others for a in ("spark-%d" % m, "192.168.100.%d" % m,
                                                                "192.168.101.%d" % m)]


def test_a_three_node_ring_pings_the_next_node_on_its_port_1_and_the_last_wraps_to_the_first():
    got = {h: PING(RING3, applied(RING3), h, "ring", False) for h in RING3}
    assert {h: pinged(plan) for h, plan in got.items()} == {
        "s1": [("s2", ["192.168.0.2", "192.168.1.2"])],
        "s2": [("s3", ["192.168.4.2", "192.168.5.2"])],
        "s3": [("s1", ["192.168.2.1", "192.168.3.1"])]}
    # Pinged from port 0 (this node's first two interfaces), each address in the subnet of this node's own port-0
    # address on that logical link: every cable once, over both logical links.
    for host, plan in got.items():
        assert plan["args"][:2] == RING_IFS[:2]
        for own, theirs in zip(RING3[host]["ips"][:2], plan["peers"][0]["addresses"]):
            assert own.rsplit(".", 1)[0] == theirs.rsplit(".", 1)[0]
    assert got["s3"]["args"] == ["enp1s0f0np0", "enP2p1s0f0np0", "s1", "192.168.2.1", "192.168.3.1"]


def test_a_four_node_ring_pings_each_next_node_once():
    got = {h: pinged(PING(RING4, applied(RING4), h, "ring", False)) for h in RING4}
    assert got == {"s1": [("s2", ["192.168.0.2", "192.168.1.2"])],
                   "s2": [("s3", ["192.168.2.2", "192.168.3.2"])],
                   "s3": [("s4", ["192.168.4.2", "192.168.5.2"])],
                   "s4": [("s1", ["192.168.6.2", "192.168.7.2"])]}


def test_check_mode_skips_peers_whose_addresses_are_only_planned():
    fabric = switch(3)
    results = applied(fabric)
    results["spark-2"] = {"changed": True, "failed": False}  # would change: its addresses are only planned
    assert [p for p, dummy in pinged(PING(fabric, results, "spark-1", "switch", True))] == ["spark-3"]
    assert PING(fabric, results, "spark-1", "switch", True)["args"] == PAIR_IFS + [
        "spark-3", "192.168.100.3", "192.168.101.3"]
    # A real run pings it (its addresses are applied by then).
    assert [p for p, dummy in pinged(PING(fabric, results, "spark-1", "switch", False))] == ["spark-2", "spark-3"]
    # A ring's only peer planned in check mode: nothing to ping (the role skips the task).
    ring_results = applied(RING3)
    ring_results["s2"] = {"changed": True}
    assert PING(RING3, ring_results, "s1", "ring", True) == {"peers": [], "args": RING_IFS[:2]}


@pytest.mark.parametrize("result, published", [
    ({"changed": True, "failed": True, "msg": "netplan apply failed"}, True),  # failed
    (None, True),                                                              # never ran netplan_fabric
    (APPLIED, False),                                                          # published no netplan_qsfp_fabric
])
def test_a_peer_that_failed_or_has_no_fact_is_not_pinged(result, published):
    fabric = switch(3)
    results = applied(fabric)
    results["spark-2"] = result
    if not published:
        fabric = dict(fabric, **{"spark-2": None})
    assert pinged(PING(fabric, results, "spark-1", "switch", False)) == [
        ("spark-3", ["192.168.100.3", "192.168.101.3"])]
    # In a ring the next node is the only peer: none left.
    ring_fabric, ring_results = dict(RING3), applied(RING3)
    ring_results["s2"] = result
    if not published:
        ring_fabric["s2"] = None
    assert PING(ring_fabric, ring_results, "s1", "ring", False)["peers"] == []


def test_refusals_are_one_line():
    with pytest.raises(AnsibleFilterError) as err:
        PING(PAIR, applied(PAIR), "spark-9", "direct", False)
    assert str(err.value) == ("netplan_qsfp_nodes: spark-9 is not one of the fabric's nodes (spark-1, spark-2); add it "
                              "to netplan_qsfp_nodes (or to the group netplan_qsfp_group names).")
    # A ring node whose next node published a pair's two addresses (another specdec_layout there).
    short = dict(RING3, s2={"interfaces": PAIR_IFS, "ips": ["192.168.100.11", "192.168.101.11"]})
    with pytest.raises(AnsibleFilterError) as err:
        PING(short, applied(RING3), "s1", "ring", False)
    assert str(err.value) == ("specdec_layout: s2 published 2 fabric address(es) (192.168.100.11, 192.168.101.11), a "
                              "ring node has 4; set the same specdec_layout on every node of the fabric.")
    with pytest.raises(AnsibleFilterError, match="^netplan_qsfp_ping_peers: expected a mapping of node to"):
        PING(["spark-1", "spark-2"], applied(PAIR), "spark-1", "direct", False)


# --- netplan_qsfp_peer_failures --------------------------------------------------------------------------------------

SCRIPT_CMD = ["sh", "-c", "SCRIPT", "sh"]


def ping_run(host, fabric, lines, rc=0, stderr=""):
    """A node's registered peer_ping.sh run: its cmd (from the filter's args) and one line per link."""
    args = PING(fabric, applied(fabric), host, "switch" if len(fabric) > 2 else "direct", False)["args"]
    return {"cmd": SCRIPT_CMD + args, "rc": rc, "stderr": stderr, "stdout_lines": lines, "changed": False}


def ok_lines(fabric, host):
    out = []
    for peer, ips in fabric.items():
        if peer != host:
            out += ["1 enp1s0f1np1 %s %s 0 3 packets transmitted, 3 received, 0%% packet loss, time 402ms" % (peer, ips["ips"][0]),
                    "2 enP2p1s0f1np1 %s %s 0 3 packets transmitted, 3 received, 0%% packet loss, time 401ms" % (peer, ips["ips"][1])]
    return out


def test_a_pair_that_reaches_its_peers_has_no_problem():
    pings = {h: ping_run(h, PAIR, ok_lines(PAIR, h)) for h in PAIR}
    assert FAILURES(pings, PAIR, applied(PAIR)) == []
    # A skipped peer test (no rc: check mode with changes pending, or netplan_qsfp_ping false) is no problem.
    assert FAILURES({"spark-1": {"changed": False, "skipped": True}, "spark-2": None}, PAIR, applied(PAIR)) == []


def test_the_verdict_names_each_failed_link_and_node():
    results = applied(PAIR)
    lines = ok_lines(PAIR, "spark-1")
    lines[1] = ("2 enP2p1s0f1np1 spark-2 192.168.101.11 1 3 packets transmitted, 0 received, 100% packet loss, "
                "time 2040ms")
    assert FAILURES({"spark-1": ping_run("spark-1", PAIR, lines), "spark-2": None}, PAIR, results) == [
        "spark-1 cannot reach spark-2 at 192.168.101.11 over enP2p1s0f1np1 (3 packets transmitted, 0 received, "
        "100% packet loss, time 2040ms)"]
    # A line without ping's verdict names ping's rc; a line cut short names what is missing with "?".
    lines = ["1 enp1s0f1np1 spark-2 192.168.100.11 2", "2 enP2p1s0f1np1"]
    assert FAILURES({"spark-1": ping_run("spark-1", PAIR, lines)}, PAIR, results) == [
        "spark-1 cannot reach spark-2 at 192.168.100.11 over enp1s0f1np1 (ping rc 2)",
        "spark-1 cannot reach ? at ? over enP2p1s0f1np1 (ping rc ?)"]
    # A node that failed, or has no result or no published fabric, did not finish applying.
    failed = dict(results, **{"spark-2": {"failed": True}})
    assert FAILURES({"spark-1": ping_run("spark-1", PAIR, ok_lines(PAIR, "spark-1")), "spark-2": None},
                    PAIR, failed) == ["spark-2 did not finish applying its fabric"]
    assert FAILURES({"spark-2": None}, PAIR, {"spark-1": APPLIED}) == ["spark-2 did not finish applying its fabric"]
    assert FAILURES({"spark-2": None}, dict(PAIR, **{"spark-2": None}), results) == [
        "spark-2 did not finish applying its fabric"]


def test_the_verdict_names_a_test_that_could_not_run_or_printed_too_few_results():
    fabric = switch(3)
    run = ping_run("spark-1", fabric, [], rc=127, stderr="sh: 1: ping: not found\n")
    assert FAILURES({"spark-1": run}, fabric, applied(fabric)) == [
        "spark-1 could not run its peer test (rc 127: sh: 1: ping: not found)",
        "spark-1 printed 0 peer test results for 4 links"]
    run = ping_run("spark-1", fabric, ok_lines(fabric, "spark-1")[:3])
    assert FAILURES({"spark-1": run}, fabric, applied(fabric)) == ["spark-1 printed 3 peer test results for 4 links"]


def test_verdict_refuses_what_is_not_a_mapping():
    with pytest.raises(AnsibleFilterError, match="^netplan_qsfp_peer_failures: expected a mapping of node to"):
        FAILURES(["spark-1"], PAIR, applied(PAIR))
