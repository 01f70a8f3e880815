"""The fleet inventory of docs/fleet.md is the one molecule/fleet runs.

``inventories/example/fleet.yml`` (shown in docs/fleet.md) and ``inventories/lab/fleet.yml`` (molecule/fleet) must
describe the same fleet: the same groups, hosts, deployment ids, heads and per-host choices. They may differ only in
addresses (``ansible_host``) and in the lab's own fabric subnets for its second pair (two real pairs are separate
cables; the lab's Docker networks may not overlap). The lab inventory must also match the lab's shape
(tests/lab/lab_vars.yml): each host's address and the second pair's subnets.
"""
from __future__ import annotations

import pathlib

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "inventories" / "example" / "fleet.yml"
LAB = ROOT / "inventories" / "lab" / "fleet.yml"
LAB_VARS = ROOT / "tests" / "lab" / "lab_vars.yml"

# Keys the lab inventory may set differently from (or in addition to) the example.
ADDRESS_KEYS = {"ansible_host"}
LAB_ONLY_KEYS = {"netplan_qsfp_link_subnets"}


def _shape(path: pathlib.Path) -> dict:
    """{group: {"vars": {...}, "hosts": {host: {...}}}} under spark_nodes, without addresses and lab-only keys."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    groups = data["all"]["children"]["spark_nodes"]["children"]
    shape = {}
    for name, group in groups.items():
        group = group or {}
        shape[name] = {
            "vars": {k: v for k, v in (group.get("vars") or {}).items() if k not in LAB_ONLY_KEYS},
            "hosts": {h: {k: v for k, v in (hv or {}).items() if k not in ADDRESS_KEYS}
                      for h, hv in (group.get("hosts") or {}).items()},
        }
    return shape


def _lab_hosts() -> dict:
    data = yaml.safe_load(LAB.read_text(encoding="utf-8"))
    hosts = {}
    for group in data["all"]["children"]["spark_nodes"]["children"].values():
        for host, hv in (group.get("hosts") or {}).items():
            hosts[host] = (hv or {}, group.get("vars") or {})
    return hosts


def test_the_lab_fleet_is_the_readme_fleet():
    example, lab = _shape(EXAMPLE), _shape(LAB)
    assert lab == example
    # Not vacuous: two pairs with heads and one single Spark with its own preset.
    assert sorted(example) == ["pair_a", "pair_b", "spark_singles"]
    assert [g["vars"].get("specdec_head_host") for g in example.values()] == ["spark-1", "spark-3", None]
    assert example["spark_singles"]["hosts"]["spark-5"]["specdec_server_method"] == "draft_target"


def test_the_fleet_doc_shows_the_example_fleet():
    readme = (ROOT / "docs" / "fleet.md").read_text(encoding="utf-8")
    example = _shape(EXAMPLE)
    for group, body in example.items():
        assert f"{group}:" in readme
        for key, value in body["vars"].items():
            assert f"{key}: {value}" in readme
        for host, hv in body["hosts"].items():
            assert f"{host}:" in readme
            for key, value in hv.items():
                assert f"{key}: {value}" in readme


def test_the_lab_fleet_matches_the_lab():
    lab_vars = yaml.safe_load(LAB_VARS.read_text(encoding="utf-8"))
    nodes = {n["name"]: n for n in lab_vars["lab_nodes"] + lab_vars["lab_fleet_nodes"]}
    hosts = _lab_hosts()
    assert sorted(hosts) == sorted(nodes)
    for host, (hv, _group_vars) in hosts.items():
        assert hv["ansible_host"] == nodes[host]["mgmt_ip"], host
    # The second pair's fabric: its subnets are the lab's second pair of fabric networks, and its nodes sit on them.
    fleet_subnets = [n["subnet"] for n in lab_vars["lab_fleet_networks"]]
    assert hosts["spark-3"][1]["netplan_qsfp_link_subnets"] == fleet_subnets
    assert hosts["spark-4"][1]["netplan_qsfp_link_subnets"] == fleet_subnets
    for host in ("spark-3", "spark-4"):
        prefixes = [pair.split("=")[0] for pair in nodes[host]["ifmap"].split()]
        assert [s.rsplit(".", 1)[0] + "." for s in fleet_subnets] == prefixes
    # The first pair keeps the default fabric (lab_networks' cx7 networks), as every other scenario.
    assert "netplan_qsfp_link_subnets" not in hosts["spark-1"][1]
    assert not nodes["spark-5"]["fabric"]
