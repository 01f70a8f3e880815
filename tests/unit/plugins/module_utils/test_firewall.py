# -*- coding: utf-8 -*-
# Unit tests for the PRIVATE module_util sparkops.specdec.plugins.module_utils._firewall: the ufw rules of the host
# firewall (specdec_server_allowed_networks), the refusals before any change, idempotence over ufw's own user rules
# (tuples as ufw 0.36.2 of the lab node writes them) and the teardown that removes only our rules.

from __future__ import annotations

import pytest

from ansible_collections.sparkops.specdec.plugins.module_utils import _firewall

TAG_HEX = "sparkops-specdec:spark-1".encode().hex()
STATUS_ACTIVE = """Status: active
Logging: on (low)
Default: deny (incoming), allow (outgoing), deny (routed)
New profiles: skip
"""
STATUS_INACTIVE = "Status: inactive\n"
SSH = "192.168.250.1 51234 192.168.250.11 22"
FABRIC_IFS = ["enp1s0f1np1", "enP2p1s0f1np1"]
FABRIC_ADDRS = ["192.168.100.11/24", "192.168.101.11/24"]


def ours(line):
    return "### tuple ### %s comment=%s" % (line, TAG_HEX)


# What ufw writes to user.rules / user6.rules after the plan below was applied (checked on the lab node image).
APPLIED = "\n".join(ours(t) for t in (
    "allow tcp 22 0.0.0.0/0 any 0.0.0.0/0 in",
    "allow any any 0.0.0.0/0 any 0.0.0.0/0 in_enp1s0f1np1",
    "allow any any 0.0.0.0/0 any 0.0.0.0/0 in_enP2p1s0f1np1",
    "allow tcp 2233 0.0.0.0/0 any 192.168.100.0/24 in",
    "allow tcp 2233 0.0.0.0/0 any 192.168.101.0/24 in",
    "allow tcp 8355 0.0.0.0/0 any 192.168.250.1 in",
    "reject tcp 8355 0.0.0.0/0 any 0.0.0.0/0 in",
    "allow tcp 22 ::/0 any ::/0 in",
    "allow any any ::/0 any ::/0 in_enp1s0f1np1",
    "allow any any ::/0 any ::/0 in_enP2p1s0f1np1",
    "reject tcp 8355 ::/0 any ::/0 in",
))


def inputs(**over):
    base = {"networks": ["192.168.250.1/32"], "port": 8355, "ufw_path": "/usr/sbin/ufw", "status": STATUS_INACTIVE,
            "tuples": "", "ssh_connection": SSH, "ansible_port": 22, "fabric_interfaces": FABRIC_IFS,
            "fabric_addresses": FABRIC_ADDRS, "container_ssh_port": 2233, "consent": True, "deployment": "spark-1",
            "two_nodes": True}
    base.update(over)
    return base


def labels(rules):
    return [r["label"] for r in rules]


def test_fresh_node_gets_every_rule_in_order_and_ufw_enabled():
    plan = _firewall.plan_apply("spark-1", inputs())
    assert plan["errors"] == []
    assert labels(plan["add"]) == [
        "allow from any to port 22/tcp",
        "allow in on enp1s0f1np1 from any",
        "allow in on enP2p1s0f1np1 from any",
        "allow from 192.168.100.0/24 to port 2233/tcp",
        "allow from 192.168.101.0/24 to port 2233/tcp",
        "allow from 192.168.250.1/32 to port 8355/tcp",
        "reject from any to port 8355/tcp",
    ]
    assert plan["delete"] == [] and plan["enable"] is True and plan["pending"] is True
    assert plan["client"] == "192.168.250.1" and plan["ssh_port"] == 22
    first, fabric, last = plan["add"][0], plan["add"][1], plan["add"][-1]
    assert first == {"rule": "allow", "from_ip": "any", "proto": "tcp", "to_port": "22", "delete": False,
                     "comment": "sparkops-specdec:spark-1", "label": "allow from any to port 22/tcp"}
    assert fabric["interface"] == "enp1s0f1np1" and fabric["direction"] == "in" and "to_port" not in fabric
    assert "proto" not in fabric
    assert last["rule"] == "reject" and last["to_port"] == "8355"
    assert "ufw: inactive" in plan["diff"]["before"] and "ufw: active" in plan["diff"]["after"]
    assert "allow from 192.168.250.1/32 to port 8355/tcp" in plan["diff"]["after"]


def test_second_run_changes_nothing():
    plan = _firewall.plan_apply("spark-1", inputs(status=STATUS_ACTIVE, tuples=APPLIED))
    assert plan["add"] == [] and plan["delete"] == [] and plan["enable"] is False and plan["pending"] is False
    assert plan["diff"]["before"] == plan["diff"]["after"]


def test_removed_network_is_deleted_and_added_network_goes_before_the_reject():
    plan = _firewall.plan_apply("spark-1", inputs(status=STATUS_ACTIVE, tuples=APPLIED, networks=["10.20.0.0/16"]))
    assert labels(plan["delete"]) == ["allow from 192.168.250.1/32 to port 8355/tcp", "reject from any to port 8355/tcp"]
    assert all(d["delete"] is True and "comment" not in d for d in plan["delete"])
    assert labels(plan["add"]) == ["allow from 10.20.0.0/16 to port 8355/tcp", "reject from any to port 8355/tcp"]


def test_a_management_bootstrap_admits_the_other_members_on_every_port():
    # specdec_nccl_bootstrap: management_interface: OpenMPI's out-of-band TCP, NCCL's and Gloo's bootstrap and vLLM's
    # rendezvous listen on random ports of the management interface; a deny-by-default ufw must let the members in.
    plan = _firewall.plan_apply("spark-1", inputs(management_peers=["192.168.250.12", "192.168.250.12"]))
    assert plan["errors"] == []
    assert labels(plan["add"])[3] == "allow from 192.168.250.12"
    assert plan["add"][3] == {"rule": "allow", "from_ip": "192.168.250.12", "delete": False,
                              "comment": "sparkops-specdec:spark-1", "label": "allow from 192.168.250.12"}
    assert len(plan["add"]) == 8 and labels(plan["add"])[-1] == "reject from any to port 8355/tcp"
    # As ufw stores it (a /32 is the bare address): the second run adds nothing.
    applied = APPLIED + "\n" + ours("allow any any 0.0.0.0/0 any 192.168.250.12 in")
    again = _firewall.plan_apply("spark-1", inputs(status=STATUS_ACTIVE, tuples=applied,
                                                   management_peers=["192.168.250.12"]))
    assert again["add"] == [] and again["delete"] == []
    # Back to the fabric bootstrap: the member's rule goes.
    back = _firewall.plan_apply("spark-1", inputs(status=STATUS_ACTIVE, tuples=applied))
    assert labels(back["delete"]) == ["allow from 192.168.250.12/32"] and back["add"] == []


def test_a_management_peer_that_is_not_an_address_is_one_line_before_any_change():
    plan = _firewall.plan_apply("spark-1", inputs(management_peers=["spark-2.lan"]))
    assert plan["errors"] == [
        "specdec_nccl_bootstrap: management_interface with specdec_server_allowed_networks admits the other members of "
        "spark-1's deployment by their management address (ansible_host), but one is 'spark-2.lan', not an IP address; "
        "set the ansible_host of every member to its management IP address."]


def test_single_node_has_no_fabric_or_container_sshd_rules():
    plan = _firewall.plan_apply("spark-1", inputs(fabric_interfaces=[], fabric_addresses=[], container_ssh_port=0,
                                                  two_nodes=False, networks=["10.0.0.0/8", "10.0.0.0/8"]))
    assert labels(plan["add"]) == ["allow from any to port 22/tcp", "allow from 10.0.0.0/8 to port 8355/tcp",
                                   "reject from any to port 8355/tcp"]


def test_ssh_port_comes_from_the_connection_then_ansible_port():
    assert _firewall.plan_apply("n", inputs(ssh_connection="10.0.0.9 4000 10.0.0.1 2222"))["ssh_port"] == 2222
    plan = _firewall.plan_apply("n", inputs(ssh_connection="", ansible_port=2200))
    assert plan["ssh_port"] == 2200 and plan["client"] is None
    assert plan["add"][0]["to_port"] == "2200"


@pytest.mark.parametrize("over,fragment", [
    ({"ufw_path": ""}, "specdec_server_allowed_networks: ufw is not installed on spark-1; install it (sudo apt-get "
                       "install ufw) or set specdec_server_allowed_networks: []"),
    ({"consent": False}, "specdec_server_allowed_networks: ufw is inactive on spark-1, and enabling it denies every "
                         "other incoming connection; set specdec_server_firewall_enable: true"),
    ({"port": 22}, "specdec_server_port: 22 is also the port Ansible connects to spark-1 with (SSH)"),
    ({"fabric_interfaces": []}, "the fabric interfaces of spark-1 are unknown (netplan_qsfp_fabric not set)"),
    ({"networks": ["10.0.0.0/33"]}, "specdec_server_allowed_networks: '10.0.0.0/33' is not an IP network"),
    ({"networks": ["any"]}, "'any' is not an IP network"),
    ({"networks": ["10.1.2.3/8"]}, "'10.1.2.3/8' has host bits set; write the network, 10.0.0.0/8 (or 10.1.2.3/32"),
    ({"status": STATUS_ACTIVE, "tuples": "### tuple ### deny tcp 22 0.0.0.0/0 any 192.168.250.0/24 in"},
     "the existing ufw rule 'deny from 192.168.250.0/24 to port 22/tcp' on spark-1 refuses the Ansible connection "
     "(from 192.168.250.1 to port 22)"),
    ({"tuples": "### tuple ### reject any 20:30 0.0.0.0/0 any 0.0.0.0/0 in"}, "would lock Ansible out"),
])
def test_refusals_are_one_line_and_name_the_setting(over, fragment):
    plan = _firewall.plan_apply("spark-1", inputs(**over))
    assert "add" not in plan and plan["errors"]
    text = " ".join(plan["errors"])
    assert fragment in text
    assert all("\n" not in e and e.split(":", 1)[0].startswith("specdec_server_") for e in plan["errors"])


@pytest.mark.parametrize("tuples", [
    "### tuple ### deny tcp 22 0.0.0.0/0 any 10.9.0.0/16 in",     # another source
    "### tuple ### deny tcp 80 0.0.0.0/0 any 0.0.0.0/0 in",       # another port
    "### tuple ### limit tcp 22 0.0.0.0/0 any 0.0.0.0/0 in",      # ufw limit OpenSSH: still admits
    "### tuple ### deny udp 22 0.0.0.0/0 any 0.0.0.0/0 in",       # another protocol
])
def test_rules_that_do_not_match_the_connection_are_no_lock_out(tuples):
    assert _firewall.plan_apply("spark-1", inputs(tuples=tuples))["errors"] == []


def test_parse_tuples_reads_ufw_user_rules():
    rules = _firewall.parse_tuples(APPLIED + "\n### tuple ### allow any 22 0.0.0.0/0 any 0.0.0.0/0 OpenSSH - in\n"
                                   "### tuple ### route:allow any any 0.0.0.0/0 any 0.0.0.0/0 in_a!out_b\n# other\n")
    assert len(rules) == 12
    assert rules[1]["interface"] == "enp1s0f1np1" and rules[1]["direction"] == "in"
    assert rules[5]["source"] == "192.168.250.1/32" and rules[5]["comment"] == "sparkops-specdec:spark-1"
    assert rules[7]["v6"] is True and rules[7]["source"] == "any"
    assert rules[11]["comment"] == "" and rules[11]["port"] == "22"


@pytest.mark.parametrize("dport,port,covered", [
    ("any", 22, True), ("22", 22, True), ("2222", 22, False), ("80,22,443", 22, True), ("20:30", 22, True),
    ("23:30", 22, False), ("80,20:25", 22, True),
])
def test_port_covers(dport, port, covered):
    assert _firewall.port_covers(dport, port) is covered


@pytest.mark.parametrize("value,problem", [
    ("192.168.1.0/24", None), ("192.168.250.1", None), ("2001:db8::/64", None), ("0.0.0.0/0", None),
    ("192.168.1.300/24", "is not an IP network"), ("", "is not an IP network"), ("lan", "is not an IP network"),
    ("192.168.1.1/24", "has host bits set"),
])
def test_network_problem(value, problem):
    found = _firewall.network_problem(value, repr(value))
    assert (found is None) if problem is None else (problem in found)


def test_normalize_network():
    assert _firewall.normalize_network(" 192.168.250.1 ") == ("192.168.250.1/32", None)
    assert _firewall.normalize_network("2001:db8::/64") == ("2001:db8::/64", None)


def test_tag_is_safe_for_ufw_quoting():
    assert _firewall.tag("pair a'1") == "sparkops-specdec:pair_a_1"


def test_parse_probe():
    out = _firewall.parse_probe("ufw\t/usr/sbin/ufw\nstatus\tStatus: active\nstatus\tLogging: on (low)\n"
                                "tuple\t### tuple ### allow tcp 22 0.0.0.0/0 any 0.0.0.0/0 in\nmarker\tyes\n")
    assert out == {"ufw_path": "/usr/sbin/ufw", "status": "Status: active\nLogging: on (low)",
                   "tuples": "### tuple ### allow tcp 22 0.0.0.0/0 any 0.0.0.0/0 in", "marker": True,
                   "enabled": None}
    empty = {"ufw_path": "", "status": "", "tuples": "", "marker": False, "enabled": None}
    assert _firewall.parse_probe("ufw\t\n") == empty
    assert _firewall.parse_probe("ufw\t/usr/sbin/ufw\nenabled\tyes\n")["enabled"] is True
    assert _firewall.parse_probe("ufw\t/usr/sbin/ufw\nenabled\tno\n")["enabled"] is False


def test_teardown_disables_ufw_enabled_in_config_but_inactive():
    base = {"ufw_path": "/usr/sbin/ufw", "status": STATUS_INACTIVE, "tuples": APPLIED, "ssh_connection": SSH}
    plan = _firewall.plan_remove("spark-1", dict(base, marker=True, enabled=True))
    assert plan["disable"] is True and plan["pending"] is True and plan["remove_marker"] is True
    assert plan["kept"] == [] and len(plan["delete"]) == 7
    plan = _firewall.plan_remove("spark-1", dict(base, marker=True, enabled=False))
    assert plan["disable"] is False and plan["remove_marker"] is True and len(plan["delete"]) == 7
    # an older probe without the field: unknown, our marker is there, so ufw is disabled (the safe side)
    assert _firewall.plan_remove("spark-1", dict(base, marker=True, enabled=None))["disable"] is True
    for enabled in (True, False, None):
        for status in (STATUS_INACTIVE, STATUS_ACTIVE):
            assert _firewall.plan_remove("spark-1", dict(base, status=status, marker=False,
                                                         enabled=enabled))["disable"] is False


def test_teardown_removes_only_ours_and_disables_what_we_enabled():
    theirs = "### tuple ### allow tcp 80 0.0.0.0/0 any 0.0.0.0/0 in comment=%s" % "web".encode().hex()
    plan = _firewall.plan_remove("spark-1", {"ufw_path": "/usr/sbin/ufw", "status": STATUS_ACTIVE,
                                             "tuples": APPLIED + "\n" + theirs, "marker": True, "ssh_connection": SSH})
    assert len(plan["delete"]) == 7 and "allow from any to port 80/tcp" not in labels(plan["delete"])
    assert plan["disable"] is True and plan["remove_marker"] is True and plan["kept"] == [] and plan["pending"]


def test_teardown_keeps_our_ssh_rule_when_nothing_else_admits_ansible():
    plan = _firewall.plan_remove("spark-1", {"ufw_path": "/usr/sbin/ufw", "status": STATUS_ACTIVE, "tuples": APPLIED,
                                             "marker": False, "ssh_connection": SSH})
    assert plan["disable"] is False and plan["kept"] == ["allow from any to port 22/tcp"]
    assert "allow from any to port 22/tcp" not in labels(plan["delete"]) and len(plan["delete"]) == 6


def test_teardown_with_another_ssh_rule_or_allow_default_removes_all_ours():
    other = "### tuple ### allow tcp 22 0.0.0.0/0 any 192.168.250.0/24 in"
    for status, tuples in ((STATUS_ACTIVE, APPLIED + "\n" + other),
                           (STATUS_ACTIVE.replace("deny (incoming)", "allow (incoming)"), APPLIED)):
        plan = _firewall.plan_remove("spark-1", {"ufw_path": "/usr/sbin/ufw", "status": status, "tuples": tuples,
                                                 "marker": False, "ssh_connection": SSH})
        assert plan["kept"] == [] and len(plan["delete"]) == 7


def test_teardown_without_ufw_or_rules_changes_nothing():
    assert _firewall.plan_remove("n", {"ufw_path": ""})["pending"] is False
    plan = _firewall.plan_remove("n", {"ufw_path": "/usr/sbin/ufw", "status": STATUS_INACTIVE, "tuples": ""})
    assert plan["pending"] is False and plan["delete"] == [] and plan["disable"] is False


# ------------------------------------------------------------------ plan and preflight: the endpoint behind our firewall
def test_plan_and_preflight_know_the_allowed_networks():
    from ansible_collections.sparkops.specdec.tests.unit.plugins.module_utils import test_access as ta
    from ansible_collections.sparkops.specdec.tests.unit.plugins.plugin_utils import test_plan as tp

    out = tp.build({"specdec_server_allowed_networks": ["10.20.0.0/16", "192.168.250.128/32"]})
    assert out["plan"]["allowed_networks"] == ["10.20.0.0/16", "192.168.250.128/32"]
    rows = ta._exposure_rows({"deployment": {"image": "x", "topology": "two_sparks", "head": "spark-1"},
                              "plan": out["plan"]})
    assert rows["spark-1"]["status"] == "pass"
    assert rows["spark-1"]["message"] == (
        "the endpoint listens on 0.0.0.0:8355 with no API key; the host firewall (ufw, specdec_server_allowed_networks) "
        "admits only 10.20.0.0/16, 192.168.250.128/32 to port 8355")
    assert tp.build()["plan"]["allowed_networks"] == []


@pytest.mark.parametrize("networks", [["0.0.0.0/0"], ["::/0", "0.0.0.0/0"]])
def test_preflight_counts_an_allow_list_that_admits_everyone_as_open(networks):
    # Issue 25 item 2: before, "admits only 0.0.0.0/0 to port 8355" passed as a restriction.
    from ansible_collections.sparkops.specdec.tests.unit.plugins.module_utils import test_access as ta
    from ansible_collections.sparkops.specdec.tests.unit.plugins.plugin_utils import test_plan as tp

    out = tp.build({"specdec_server_allowed_networks": networks})
    rows = ta._exposure_rows({"deployment": {"image": "x", "topology": "two_sparks", "head": "spark-1"},
                              "plan": out["plan"]})
    assert rows["spark-1"]["status"] == "warn"
    assert "with no API key: anyone on any network" in rows["spark-1"]["message"]
