"""tests/lab/images/node/networkd_boot.py: a lab node applies its netplan files at every start, as systemd-networkd
does at boot (the .network files of the real `netplan generate`, applied with ip)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "lab" / "images" / "node" / "networkd_boot.py"
_loader = importlib.machinery.SourceFileLoader("networkd_boot", str(SCRIPT))
_spec = importlib.util.spec_from_loader("networkd_boot", _loader)
nb = importlib.util.module_from_spec(_spec)
_loader.exec_module(nb)

# What netplan 0.106 (the node image's) generates from netplan_qsfp's file.
GENERATED = """[Match]
Name=enp1s0f1np1

[Network]
LinkLocalAddressing=ipv6
Address=192.168.100.11/24
"""


def test_parse_generated_file():
    assert nb.parse_network(GENERATED) == {"match": ["enp1s0f1np1"], "addresses": ["192.168.100.11/24"], "mtu": None}


def test_parse_repeated_keys_globs_and_mtu():
    text = "# c\n[Match]\nName=enp* eth9\n[Link]\nMTUBytes=9000\n[Network]\nAddress=10.0.0.1/24\nAddress=fd00::1/64\n"
    assert nb.parse_network(text) == {"match": ["enp*", "eth9"], "addresses": ["10.0.0.1/24", "fd00::1/64"],
                                      "mtu": "9000"}


def test_plan_applies_matching_links_only_first_file_wins():
    networks = [
        ("20-other.network", {"match": ["enp*"], "addresses": ["10.9.9.9/24"], "mtu": None}),
        ("10-netplan-enp1s0f1np1.network", nb.parse_network(GENERATED)),
        ("10-netplan-enP2p1s0f1np1.network", {"match": ["enP2p1s0f1np1"], "addresses": ["192.168.101.11/24"],
                                              "mtu": "9000"}),
    ]
    links = ["lo", "eth0", "enp1s0f1np1", "enP2p1s0f1np1", "enp1s0f0np0"]
    assert nb.plan(networks, links) == [
        ["ip", "link", "set", "dev", "enP2p1s0f1np1", "mtu", "9000"],
        ["ip", "addr", "replace", "192.168.101.11/24", "dev", "enP2p1s0f1np1"],
        ["ip", "link", "set", "dev", "enP2p1s0f1np1", "up"],
        ["ip", "addr", "replace", "192.168.100.11/24", "dev", "enp1s0f1np1"],
        ["ip", "link", "set", "dev", "enp1s0f1np1", "up"],
        # The management interface (eth0) is matched by no file and left alone; the glob file gets what is left.
        ["ip", "addr", "replace", "10.9.9.9/24", "dev", "enp1s0f0np0"],
        ["ip", "link", "set", "dev", "enp1s0f0np0", "up"],
    ]


def test_no_netplan_file_does_nothing(tmp_path, capsys):
    assert nb.main(["--netplan-root", str(tmp_path)]) == 0
    assert "no netplan file" in capsys.readouterr().out
