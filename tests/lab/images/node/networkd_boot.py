"""Boot-time addressing of a simulated DGX Spark (sparkops.specdec lab), as systemd-networkd does it at boot.

A real Spark boots with netplan's systemd generator, which turns /etc/netplan/*.yaml into
/run/systemd/network/*.network, and systemd-networkd then configures every link those files match. The lab
node containers have no systemd: lab-entrypoint runs this at every start instead, after it has named the
interfaces. It runs the real `netplan generate` (the same parser and the same output) and applies the
generated files with `ip`: for each interface a [Match] Name= matches, [Link] MTUBytes=, every
[Network] Address=, and the link up. Nothing else assigns the fabric addresses after a reboot (the
container's sshd waits for them; the server supervisor never touches addresses).

  python3 networkd_boot.py [--netplan-root /] [--network-dir /run/systemd/network] [--dry-run]
"""

from __future__ import annotations

import argparse
import fnmatch
import glob
import json
import os
import subprocess
import sys


def parse_network(text):
    """A systemd .network file -> {'match': [names], 'addresses': [cidr], 'mtu': str or None}.

    Keys may repeat (Address=); Name= holds space-separated names or globs.
    """
    out = {"match": [], "addresses": [], "mtu": None}
    section = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            continue
        key, sep, value = line.partition("=")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if section == "Match" and key == "Name":
            out["match"].extend(value.split())
        elif section == "Network" and key == "Address":
            out["addresses"].append(value)
        elif section == "Link" and key == "MTUBytes":
            out["mtu"] = value
    return out


def plan(networks, links):
    """networks: [(file name, parse_network(...))] in file order; links: the interface names present.

    Returns the ip commands (argv lists): like networkd, the first file (lexical order) that matches a link
    configures it.
    """
    commands = []
    done = set()
    for dummy, net in sorted(networks, key=lambda item: item[0]):
        for link in links:
            if link in done or not any(fnmatch.fnmatchcase(link, pattern) for pattern in net["match"]):
                continue
            done.add(link)
            if net["mtu"]:
                commands.append(["ip", "link", "set", "dev", link, "mtu", net["mtu"]])
            for cidr in net["addresses"]:
                commands.append(["ip", "addr", "replace", cidr, "dev", link])
            commands.append(["ip", "link", "set", "dev", link, "up"])
    return commands


def links_present():
    out = subprocess.run(["ip", "-j", "link", "show"], check=True, stdout=subprocess.PIPE).stdout
    return [link["ifname"] for link in json.loads(out.decode() or "[]")]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--netplan-root", default="/")
    parser.add_argument("--network-dir", default="/run/systemd/network")
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args(argv)
    if not glob.glob(os.path.join(args.netplan_root, "etc/netplan/*.yaml")):
        print("networkd-boot: no netplan file, nothing to configure")
        return 0
    # The generator's work at boot (a netplan file it cannot parse stops here, as it would leave a real Spark unaddressed).
    gen = subprocess.run(["netplan", "generate", "--root-dir", args.netplan_root], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, check=False)
    if gen.returncode != 0:
        print("networkd-boot: netplan generate failed: %s" % gen.stdout.decode(errors="replace").strip(), file=sys.stderr)
        return 1
    network_dir = os.path.join(args.netplan_root, args.network_dir.lstrip("/"))
    networks = []
    for path in sorted(glob.glob(os.path.join(network_dir, "*.network"))):
        with open(path) as handle:
            networks.append((os.path.basename(path), parse_network(handle.read())))
    rc = 0
    for argv_ in plan(networks, links_present()):
        print("networkd-boot: " + " ".join(argv_))
        if not args.dry_run and subprocess.run(argv_, check=False).returncode != 0:
            rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
