# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
#
# PRIVATE to this collection: used by sparkops.specdec.netplan_fabric, module_utils/_container.py and the plan
# (plugin_utils/_plan.py). Not a public API; names and return shapes may change in any release without notice.
"""Fabric layouts of a deployment (issue 24), as pure functions (no I/O, no Ansible).

NVIDIA ships three layouts (facts: docs/layouts.md, from NVIDIA/dgx-spark-playbooks
``nvidia/connect-two-sparks``, ``nvidia/connect-three-sparks``, ``nvidia/multi-sparks-through-switch``,
``nvidia/playbook-connect-multiple-sparks`` and ``nvidia/playbook-nccl``):

* ``direct``: two Sparks, one cable, the same port on both; two subnets, one per logical interface. Today's pair:
  its address plan is netplan_qsfp's scheme (module_utils/_netplan.fabric_addresses), unchanged.
* ``ring``: three Sparks, S1 port0 -> S2 port1, S2 port0 -> S3 port1, S3 port0 -> S1 port1; all four logical
  interfaces of every node Up; two subnets per cable (one per logical interface), six in all, four per node. The
  runbook's plan: the cables in the order of their (lower, higher) node pair take subnets 2k and 2k+1, the lower
  node gets host 1, the higher host 2. Only 3-node rings are supported by NVIDIA; a 4-node ring (cabled the same
  way around) runs in the community only with ``NCCL_ALGO=Ring``.
* ``switch``: two to four Sparks, one cable each, the same port on all, one L2 domain; two shared subnets, node N
  (1-based) gets host N in each (``192.168.100.N/24`` on logical 1, ``192.168.101.N/24`` on logical 2).

``fabric_env`` is the one function that gives the NCCL/UCX/OpenMPI environment of a layout (TensorRT-LLM's mpirun,
and vLLM's ranks): today's pair values byte for byte with ``bootstrap='fabric_interfaces'``.
"""

from __future__ import annotations

import ipaddress

from collections.abc import Mapping

from ansible_collections.sparkops.specdec.plugins.module_utils._nccl import CX7_TABLE
from ansible_collections.sparkops.specdec.plugins.module_utils._netplan import addresses_in_subnets, fabric_addresses

LAYOUTS = ("direct", "ring", "switch")
AUTO = "auto"
MAX_MEMBERS = 4
# The ring's cable, as the runbook cables it: node i's port 0 goes to node i+1's port 1.
RING_OUT_PORT = 0
RING_IN_PORT = 1
# Defaults of the ring and switch address plans (netplan_qsfp_ring_subnets, netplan_qsfp_switch_host_offset).
RING_SUBNETS = tuple("192.168.%d.0/24" % i for i in range(8))
SWITCH_SUBNETS = ("192.168.100.0/24", "192.168.101.0/24")
SWITCH_HOST_OFFSET = 1
# The ring's netdevs in the order of netplan_qsfp_addresses for a ring: port 0 logical 1, 2, port 1 logical 1, 2.
RING_NETDEVS = tuple(row[2] for row in CX7_TABLE)
RING_ROCE = tuple(row[3] for row in CX7_TABLE)
# Bootstrap interface of NCCL/UCX/OpenMPI: the fabric interfaces (the seed runbook, connect-two-sparks) or the
# management interface (NVIDIA's 08/2026 NCCL runbook, enP7s7; NCCL then finds the RoCE ports itself).
BOOTSTRAPS = ("fabric_interfaces", "management_interface")
DEFAULT_MANAGEMENT_INTERFACE = "enP7s7"


# ---------------------------------------------------------------------------- the layout setting
def resolve_layout(setting, count, accept_ring4=False):
    """``(layout, error)`` for ``specdec_layout`` = ``setting`` on a deployment of ``count`` Sparks.

    ``auto`` (or empty): ``None`` for one Spark, ``direct`` for two, an error for more. The error is one line naming
    the setting and the fix; ``layout`` is None with it.
    """
    value = AUTO if setting in (None, "") else str(setting)
    if count < 1 or count > MAX_MEMBERS:
        return None, ("specdec_layout: a deployment has 1 to %d Sparks, this one has %d; split it into deployments "
                      "(specdec_deployment_id)." % (MAX_MEMBERS, count))
    if value == AUTO:
        if count == 1:
            return None, None
        if count == 2:
            return "direct", None
        return None, ("specdec_layout: the deployment has %d Sparks and no layout; set specdec_layout: ring (three "
                      "Sparks cabled in a ring) or switch (two to four Sparks through a switch)." % count)
    if value not in LAYOUTS:
        return None, "specdec_layout: '%s' is not a layout; use auto, direct, ring or switch." % value
    if count == 1:
        return None, ("specdec_layout: %s needs two or more Sparks, the deployment has one; remove specdec_layout, "
                      "or add the other Sparks to the deployment." % value)
    if value == "direct" and count != 2:
        return None, ("specdec_layout: direct cables two Sparks, the deployment has %d; use ring (three) or switch "
                      "(two to four)." % count)
    if value == "ring":
        if count == 2:
            return None, ("specdec_layout: a ring needs three Sparks, the deployment has two; use direct (one "
                          "cable) or switch.")
        if count == 4 and not accept_ring4:
            return None, ("specdec_layout: a 4-node ring is not an NVIDIA-supported layout (only 3-node rings are); "
                          "use switch for four Sparks, or set specdec_layout_accept_four_node_ring: true to run it "
                          "with NCCL_ALGO=Ring.")
    return value, None


def bootstrap_problem(layout, bootstrap):
    """The one-line problem of a ring bootstrapped over its fabric interfaces, else None.

    A ring's Sparks reach each other only over the cable between them: the head's OpenMPI daemon and NCCL's rank 0
    advertise their first fabric address (port 0, the cable to the next Spark), which the Spark on the head's port 1
    cannot reach (seen on the lab ring: OpenMPI's out-of-band TCP of the third node times out on 192.168.0.1).
    NVIDIA's NCCL runbook bootstraps a ring over the management interface and lets NCCL route over the RoCE ports
    (NCCL_IB_SUBNET_AWARE_ROUTING)."""
    if layout == "ring" and str(bootstrap or "fabric_interfaces") == "fabric_interfaces":
        return ("specdec_nccl_bootstrap: a ring's Sparks reach each other only over the cable between them, so OpenMPI "
                "and NCCL cannot bootstrap over the fabric interfaces (the head advertises its port-0 address, which "
                "the Spark on its port 1 cannot reach); set specdec_nccl_bootstrap: management_interface, as NVIDIA's "
                "NCCL runbook does for a ring, and specdec_nccl_management_interface to the management network's "
                "interface (enP7s7 on a DGX Spark).")
    return None


def reach_problem(layout, members, addresses):
    """The one-line refusal of an accepted 4-node ring whose Sparks have no management IP address (``ansible_host``),
    else None. The Spark opposite the head has no cable to it: the deployment reaches every Spark over the management
    network (hostfile_addresses), which needs each one's address. Refused by the plan, before anything changes on a
    host (netplan_qsfp would otherwise address the ring first)."""
    if layout != "ring" or len(members) <= 3:
        return None
    bad = [m for m in members if not is_ip(str((addresses or {}).get(m) or "").strip())]
    if not bad:
        return None
    return ("specdec_layout_accept_four_node_ring: the Spark opposite the head has no cable to it, so a %d-node ring is "
            "reached over the management network (mpirun's hostfile, the container sshd, the peer copies), but the "
            "ansible_host of %s is not an IP address; set it to the Spark's management IP address, or use "
            "specdec_layout: switch for four Sparks." % (len(members), ", ".join(bad)))


def is_ip(value):
    """Whether ``value`` is an IP address literal (a management address the plan can name: ``ansible_host``)."""
    try:
        ipaddress.ip_address(str(value))
    except ValueError:
        return False
    return True


def parallel_problem(tp_size, pp_size, gpus, deployment):
    """The one-line problem when ``tp_size x pp_size`` is not the deployment's GPU count (one GPU per Spark), else
    None. Values that are not integers >= 1 are the per-setting checks' to report (None here)."""
    try:
        tp, pp = int(str(tp_size)), int(str(pp_size if pp_size not in (None, "") else 1))
    except ValueError:
        return None
    if tp < 1 or pp < 1 or tp * pp == gpus:
        return None
    fits = ["tp %d x pp %d" % (t, gpus // t) for t in (gpus, 1) if gpus % t == 0]
    return ("specdec_server_tp_size: tp_size %d x pp_size %d = %d ranks, but deployment %s has %d GPU(s) (one per "
            "Spark); set specdec_server_tp_size and specdec_server_pp_size so that their product is %d, e.g. %s."
            % (tp, pp, tp * pp, deployment, gpus, gpus, " or ".join(dict.fromkeys(fits))))


# ---------------------------------------------------------------------------- ring cabling
def ring_cables(count):
    """The ring's cables ``[(a, b)]``: node a's port 0 -> node b's port 1 (node indexes, 0-based)."""
    return [(i, (i + 1) % count) for i in range(count)]


def _ring_subnet_index(count):
    """(lower, higher) node pair -> the cable's index in the runbook's subnet order (sorted pairs)."""
    pairs = sorted(tuple(sorted(c)) for c in ring_cables(count))
    return {pair: k for k, pair in enumerate(pairs)}


def ring_peer(index, count, netdev):
    """``(peer node index, peer netdev)`` at the other end of ``netdev`` of node ``index`` in a ring."""
    row = [r for r in CX7_TABLE if r[2] == netdev][0]
    port, logical = row[0], row[1]
    if port == RING_OUT_PORT:
        peer, peer_port = (index + 1) % count, RING_IN_PORT
    else:
        peer, peer_port = (index - 1) % count, RING_OUT_PORT
    peer_dev = [r[2] for r in CX7_TABLE if r[0] == peer_port and r[1] == logical][0]
    return peer, peer_dev


def ring_addresses(index, count, subnets=RING_SUBNETS):
    """The four CIDRs of node ``index`` in a ring of ``count`` (order: RING_NETDEVS). Raises ValueError."""
    nets = [ipaddress.IPv4Network(str(s), strict=False) for s in subnets]
    order = _ring_subnet_index(count)
    if len(nets) < 2 * len(order):
        raise ValueError("a ring of %d needs %d subnets, %d given" % (count, 2 * len(order), len(nets)))
    out = []
    for netdev in RING_NETDEVS:
        logical = [r[1] for r in CX7_TABLE if r[2] == netdev][0]
        peer, dummy = ring_peer(index, count, netdev)
        pair = (min(index, peer), max(index, peer))
        net = nets[2 * order[pair] + logical - 1]
        host = 1 if index == pair[0] else 2
        out.append("%s/%d" % (net.network_address + host, net.prefixlen))
    return out


def switch_addresses(index, subnets=SWITCH_SUBNETS, host_offset=SWITCH_HOST_OFFSET):
    """The two CIDRs (logical 1, logical 2) of node ``index`` on a switch: host ``host_offset + index`` in each."""
    nets = [ipaddress.IPv4Network(str(s), strict=False) for s in subnets]
    return ["%s/%d" % (net.network_address + int(host_offset) + index, net.prefixlen) for net in nets]


def node_addresses(layout, settings, index, count):
    """``(addresses, error)``: this node's fabric CIDRs in ``layout``. Explicit ``netplan_qsfp_addresses`` win (two
    for direct and switch, four for a ring in RING_NETDEVS order). ``direct`` is today's scheme, unchanged."""
    if layout == "direct" or layout is None:
        return fabric_addresses(settings, index, count)
    explicit = settings.get("netplan_qsfp_addresses") or []
    if explicit:
        return [str(a) for a in explicit], None
    try:
        if layout == "ring":
            return ring_addresses(index, count, settings.get("netplan_qsfp_ring_subnets") or RING_SUBNETS), None
        offset = settings.get("netplan_qsfp_switch_host_offset")
        return switch_addresses(index, settings.get("netplan_qsfp_link_subnets") or SWITCH_SUBNETS,
                                SWITCH_HOST_OFFSET if offset in (None, "") else int(offset)), None
    except (ValueError, TypeError, IndexError) as exc:
        return [], str(exc)


def address_count(layout):
    """How many addresses a node has in ``layout`` (four interfaces in a ring, the cabled pair otherwise)."""
    return 4 if layout == "ring" else 2


# ---------------------------------------------------------------------------- the plan's checks
def check_plan(layout, members, settings_of, management):
    """Deployment-wide problems of a ring or switch address plan (one line each): the derivable count of addresses,
    host addresses, unique, off the management addresses (``management``: host -> ansible_host), a ring's cable
    ends in one subnet and its cables in distinct subnets, a switch's nodes in the same two subnets."""
    errors = []
    plan = {}
    for index, host in enumerate(members):
        addrs, err = node_addresses(layout, settings_of(host), index, len(members))
        if err:
            errors.append("netplan_qsfp_ring_subnets: %s cannot be derived (%s); give %d subnets, or set "
                          "netplan_qsfp_addresses on %s." % (host, err, 2 * len(members), host)
                          if layout == "ring" else
                          "netplan_qsfp_link_subnets: %s cannot be derived (%s)." % (host, err))
            continue
        if len(addrs) != address_count(layout):
            errors.append("netplan_qsfp_addresses: %s has %d address(es), a %s node needs %d (%s); fix the list, "
                          "or drop it to use the layout's plan." % (
                              host, len(addrs), layout, address_count(layout),
                              ", ".join(RING_NETDEVS) if layout == "ring" else "logical 1, logical 2"))
            continue
        try:
            plan[host] = [ipaddress.IPv4Interface(a) for a in addrs]
        except ValueError:
            continue  # the per-setting check names the bad address
    seen = {}
    twice = {}  # (host, host) -> the addresses both would use: one line per pair (a copied list is one mistake)
    for host, ifaces in plan.items():
        for iface in ifaces:
            net = iface.network
            if net.prefixlen < 31 and iface.ip in (net.network_address, net.broadcast_address):
                errors.append("netplan_qsfp_addresses: %s gets %s, not a host address of %s; use a larger subnet or "
                              "another offset." % (host, iface.ip, net))
            if seen.get(iface.ip, host) != host:
                twice.setdefault((seen[iface.ip], host), []).append(str(iface.ip))
            seen[iface.ip] = host
            for mhost, maddr in (management or {}).items():
                try:
                    inside = ipaddress.ip_address(str(maddr)) in net
                except ValueError:
                    continue
                if inside:
                    errors.append("netplan_qsfp_%s: fabric subnet %s of %s contains the management address %s of %s "
                                  "(ansible_host); pick fabric subnets off the management network."
                                  % ("ring_subnets" if layout == "ring" else "link_subnets", net, host, maddr, mhost))
    for (one, two), ips in twice.items():
        copied = " (is the list of %s a copy of %s's?)" % (two, one) if len(ips) == address_count(layout) else ""
        errors.append("netplan_qsfp_addresses: %s and %s would both use %s; give each node its own addresses%s."
                      % (one, two, _listed(ips), copied))
    if len(plan) != len(members) or twice:
        # The cable and subnet checks below would only repeat a duplicated address plan in other words.
        return sorted(set(errors), key=errors.index)
    if layout == "ring":
        count = len(members)
        cable_nets, parted = {}, {}
        for index, host in enumerate(members):
            for slot, netdev in enumerate(RING_NETDEVS):
                peer, peer_dev = ring_peer(index, count, netdev)
                mine, theirs = plan[host][slot], plan[members[peer]][RING_NETDEVS.index(peer_dev)]
                key = tuple(sorted([(index, netdev), (peer, peer_dev)]))
                if mine.network != theirs.network and key not in parted:  # each cable once, from either end
                    parted[key] = "%s %s (%s) -- %s %s (%s)" % (host, netdev, mine, members[peer], peer_dev, theirs)
                cable_nets.setdefault(mine.network, set()).add(key)
        if parted:
            errors.append("netplan_qsfp_addresses: %d logical link(s) of the ring have their two ends in different "
                          "subnets: %s; give both ends of each link addresses in one subnet, or drop "
                          "netplan_qsfp_addresses to use the runbook's plan." % (len(parted), _listed(parted.values())))
        shared = ["%s (%d links)" % (net, len(links)) for net, links in cable_nets.items() if len(links) > 1]
        if shared and not parted:  # parted ends put two links in one subnet: the line above is the cause
            errors.append("netplan_qsfp_ring_subnets: %s %s used by more than one link of the ring; each logical link "
                          "of each cable needs its own subnet (six for three Sparks)."
                          % (_listed(shared), "is" if len(shared) == 1 else "are"))
    elif layout == "switch":
        first = members[0]
        for host in members[1:]:
            for slot in (0, 1):
                if plan[host][slot].network != plan[first][slot].network:
                    errors.append("netplan_qsfp_addresses: logical %d of %s is in %s but %s's is in %s; on a switch "
                                  "every node's logical %d shares one subnet." % (
                                      slot + 1, host, plan[host][slot].network, first, plan[first][slot].network,
                                      slot + 1))
        if plan[first][0].network.overlaps(plan[first][1].network):
            errors.append("netplan_qsfp_link_subnets: the switch's two logical links share %s; NVIDIA's runbook "
                          "requires different subnets (e.g. 192.168.100.0/24 and 192.168.101.0/24)."
                          % plan[first][0].network)
    return sorted(set(errors), key=errors.index)


def _listed(items, most=3):
    """``a, b and c`` (at most ``most`` items, then ``and N more``)."""
    items = list(items)
    if len(items) > most:
        return "%s and %d more" % (", ".join(items[:most]), len(items) - most)
    return items[0] if len(items) == 1 else "%s and %s" % (", ".join(items[:-1]), items[-1])


# ---------------------------------------------------------------------------- cabling from link state
def cabling_problems(layout, facts, members):
    """Cabling problems from the link state the nodes report, one line each ([] when cabled as ``layout`` needs).

    ``facts``: host -> the result of sparkops.specdec.nccl_interface_info (``interfaces``: netdev, physical_port,
    state, ipv4; ``selected_port``). ring: every node's four logical interfaces Up, and each cable's two ends with
    addresses in one subnet once addressed; direct and switch: the same port on every node.
    """
    problems = []
    missing = [h for h in members if not isinstance((facts or {}).get(h), dict)]
    if missing:
        return ["%s: no link state (sparkops.specdec.nccl_interface_info did not run there)." % ", ".join(missing)]
    if layout == "ring":
        count = len(members)
        for index, host in enumerate(members):
            by_dev = {i.get("netdev"): i for i in facts[host].get("interfaces") or []}
            down = [d for d in RING_NETDEVS if (by_dev.get(d) or {}).get("state") != "up"]
            if down:
                wanted = []
                for dev in down:
                    peer, peer_dev = ring_peer(index, count, dev)
                    wanted.append("%s (cable to %s %s)" % (dev, members[peer], peer_dev))
                problems.append("%s: %s not Up; a ring needs all four logical interfaces of every Spark Up: cable "
                                "port 0 of each Spark to port 1 of the next (S1->S2->S3->S1)." % (host, ", ".join(wanted)))
        if problems:
            return problems
        for index, host in enumerate(members):
            by_dev = {i.get("netdev"): i for i in facts[host].get("interfaces") or []}
            for dev in RING_NETDEVS[:2]:  # port 0 of each node: each cable once
                peer, peer_dev = ring_peer(index, count, dev)
                other = {i.get("netdev"): i for i in facts[members[peer]].get("interfaces") or []}.get(peer_dev) or {}
                mine = _nets(by_dev.get(dev, {}).get("ipv4"))
                theirs = _nets(other.get("ipv4"))
                if mine and theirs and not mine & theirs:
                    problems.append("%s %s and %s %s share no subnet (%s vs %s): that cable does not join the ring's "
                                    "neighbours as planned; check which port each cable is in." % (
                                        host, dev, members[peer], peer_dev, ", ".join(sorted(mine)),
                                        ", ".join(sorted(theirs))))
        return problems
    ports = {h: facts[h].get("selected_port") for h in members}
    if len(set(ports.values())) > 1:
        problems.append("The Sparks use different QSFP ports (%s); %s needs the same physical port on every Spark: "
                        "recable, or set netplan_qsfp_port." % (
                            "; ".join("%s: port %s" % (h, p) for h, p in ports.items()), layout or "direct"))
    return problems


def published_cabling_problems(layout, nodes, fabric):
    """``cabling_problems`` from what the netplan_qsfp role publishes on each node (``netplan_qsfp_fabric``: ``port``,
    the cabled port, and ``links``, the link state of every ConnectX-7 interface nccl_interface_info read).

    ``nodes``: the deployment's nodes in their fabric order (netplan_qsfp_nodes: the ring's S1, S2, S3);
    ``fabric``: host -> its ``netplan_qsfp_fabric`` (a node without one: one line). ``layout`` None or ``auto`` is
    ``direct``. Returns one line per problem, [] when the nodes are cabled as the layout needs."""
    layout = "direct" if layout in (None, "", AUTO) else str(layout)
    facts = {}
    for host in nodes:
        published = (fabric or {}).get(host)
        if isinstance(published, dict):
            facts[host] = {"selected_port": published.get("port"), "interfaces": published.get("links") or []}
    return cabling_problems(layout, facts, list(nodes))


def hostfile_addresses(layout, head, nodes, fabric, management=None):
    """``(addresses, error)``: the OpenMPI hostfile of a deployment, one address per node, head first (mpirun's ssh
    and the ranks' rendezvous start on the head, so every address must be one the head reaches directly).

    ``nodes``: the deployment's nodes; ``fabric``: host -> its ``netplan_qsfp_fabric`` (``ips``, bare addresses, and
    ``addresses``, the same with their prefix: the cabled port's two, a ring's four in RING_NETDEVS order);
    ``management``: host -> its management address (``ansible_host``), or None.
    ``direct`` and ``switch``: each node's address on logical link 1 (today's pair, byte for byte; a switch's shared
    subnet). ``ring``: the head's first address, and each other node's address on the cable it shares with the head
    (in a 3-node ring every node is the head's neighbour). A ring with a node not cabled to the head (the Spark
    opposite it in an accepted 4-node ring) is reached over the management network: every node's management address
    (so that OpenMPI's tree spawn from any node reaches any other; a ring bootstraps over the management interface
    anyway, ``bootstrap_problem``); without them, the error, one line naming the fix."""
    order = [head] + [n for n in nodes if n != head]
    first = [str(((fabric.get(n) or {}).get("ips") or [""])[0]) for n in order]
    if layout != "ring":
        return first, None
    own = (fabric.get(head) or {}).get("addresses")
    out = first[:1]
    for node in order[1:]:
        found = (addresses_in_subnets((fabric.get(node) or {}).get("addresses"), own) or [None])[0]
        if found is None:
            reach = [str((management or {}).get(n) or "").strip() for n in order]
            if all(reach):
                return reach, None
            return [], ("specdec_layout: %s is not cabled to the head %s in this ring, so mpirun on the head cannot "
                        "reach it over the fabric, and the management addresses (ansible_host) of the Sparks are not "
                        "known; set ansible_host of every Spark to its management IP address, or use specdec_layout: "
                        "switch for four Sparks." % (node, head))
        out.append(found)
    return out, None


# ---------------------------------------------------------------------------- the netplan_qsfp peer test
# The links a node pings from in a ring: its port 0 (the ring's out port), logical 1 then 2. Each cable is pinged once,
# from its port-0 end, over both logical links (the next node answers on its port 1).
RING_PING_NETDEVS = tuple(row[2] for row in sorted(CX7_TABLE, key=lambda r: r[1]) if row[0] == RING_OUT_PORT)


def _published_changed(result):
    """Ansible's ``changed`` test of a registered result (a mapping)."""
    return bool(result.get("changed", False))


def ping_peers(layout, nodes, host, fabric, results, check_mode=False):
    """``(plan, error)``: the peer test of ``host`` (the netplan_qsfp role's ping of its peers over each logical link).

    ``nodes``: the nodes sharing the fabric, in their fabric order (netplan_qsfp_nodes); ``fabric``: node -> its
    published ``netplan_qsfp_fabric`` (``interfaces``: its own first, ``ips``: bare addresses, the cabled port's two or
    a ring's four in RING_NETDEVS order; None for a node that has none); ``results``: node -> its registered
    sparkops.specdec.netplan_fabric result (None when the node did not get there). ``layout`` None or ``auto`` is
    ``direct``.

    The peers: ``ring``, the next node in ``nodes`` (the last wraps to the first), the other end of this node's port-0
    cable, at its port-1 addresses (``ips`` 2 and 3); otherwise every other node, at its ``ips`` 0 and 1 (the cabled
    port). A peer is pinged once it finished applying (a result that did not fail, and a published fabric); in check
    mode not while its addresses are only planned (its result changed).

    ``plan``: ``{"peers": [{"node", "addresses": [link 1, link 2]}], "args": [...]}``, ``args`` being files/peer_ping.sh's
    arguments: this node's interfaces on logical links 1 and 2, then each peer's name and its two addresses.
    ``error``: one line (``plan`` None): ``host`` is not one of ``nodes``, or a peer published fewer addresses than the
    layout has."""
    nodes = [str(n) for n in nodes]
    host = str(host)
    fabric = fabric or {}
    results = results or {}
    if host not in nodes:
        return None, ("netplan_qsfp_nodes: %s is not one of the fabric's nodes (%s); add it to netplan_qsfp_nodes "
                      "(or to the group netplan_qsfp_group names)." % (host, ", ".join(nodes) or "none"))
    if layout == "ring":
        index = nodes.index(host)
        ends = [ring_peer(index, len(nodes), dev) for dev in RING_PING_NETDEVS]
        peers = list(dict.fromkeys(nodes[peer] for peer, dummy in ends))
        slots = [RING_NETDEVS.index(peer_dev) for dummy, peer_dev in ends]
    else:
        peers = list(dict.fromkeys(n for n in nodes if n != host))
        slots = [0, 1]
    out = []
    for peer in peers:
        result, published = results.get(peer), fabric.get(peer)
        if not isinstance(result, Mapping) or result.get("failed") or not isinstance(published, Mapping):
            continue
        if check_mode and _published_changed(result):
            continue
        ips = list(published.get("ips") or [])
        if len(ips) <= max(slots):
            return None, ("specdec_layout: %s published %d fabric address(es) (%s), a %s node has %d; set the same "
                          "specdec_layout on every node of the fabric." % (
                              peer, len(ips), ", ".join(str(i) for i in ips) or "none", layout or "direct",
                              address_count(layout)))
        out.append({"node": peer, "addresses": [str(ips[slot]) for slot in slots]})
    own = list((fabric.get(host) if isinstance(fabric.get(host), Mapping) else {}).get("interfaces") or [])
    args = [str(i) for i in own[:2]]
    for peer in out:
        args.extend([peer["node"]] + peer["addresses"])
    return {"peers": out, "args": args}, None


def peer_test_problems(nodes, fabric, results, pings):
    """The play-wide verdict of the netplan_qsfp peer test: one line per problem, [] when every node of ``nodes`` (the
    play's nodes of the fabric) finished applying and reached each peer over each logical link.

    ``fabric`` and ``results`` as for ``ping_peers``; ``pings``: node -> its registered run of files/peer_ping.sh
    (``cmd``: ``sh -c SCRIPT sh IF1 IF2`` then three arguments per peer, ``rc``, ``stderr``, ``stdout_lines``: one
    ``<link> <interface> <peer> <address> <ping rc> <verdict>`` line per link; a skipped run has no ``rc``)."""
    problems = []
    for host in nodes:
        result = (results or {}).get(host)
        result = result if isinstance(result, Mapping) else {"failed": True}
        if result.get("failed") or not isinstance((fabric or {}).get(host), Mapping):
            problems.append("%s did not finish applying its fabric" % host)
            continue
        ping = (pings or {}).get(host)
        ping = ping if isinstance(ping, Mapping) else {}
        lines = list(ping.get("stdout_lines") or [])
        if ping.get("rc", 0) != 0:
            stderr = str(ping.get("stderr") or "").strip()
            problems.append("%s could not run its peer test (rc %s: %s)" % (host, ping["rc"], stderr))
        for line in lines:
            real = str(line).split(" ", 5)
            field = real + ["?"] * (6 - len(real))  # "?" for each field a short line lacks
            if len(real) < 5 or real[4] != "0":
                verdict = real[5].strip() if len(real) > 5 else ""
                problems.append("%s cannot reach %s at %s over %s (%s)" % (
                    host, field[2], field[3], field[1], verdict or "ping rc " + field[4]))
        expected = 2 * (len(ping.get("cmd") or []) - 6) // 3
        if "rc" in ping and len(lines) != expected:
            problems.append("%s printed %d peer test results for %d links" % (host, len(lines), expected))
    return problems


def _nets(cidrs):
    out = set()
    for cidr in cidrs or []:
        try:
            out.add(str(ipaddress.IPv4Interface(cidr).network))
        except ValueError:
            continue
    return out


# ---------------------------------------------------------------------------- NCCL, UCX and OpenMPI per layout
HOSTFILE_HEADER = "# Managed by sparkops.specdec (trtllm_container role): one fabric address per node, head first.\n"


def fabric_env(layout, interfaces, roce_devices=(), hosts=(), bootstrap="fabric_interfaces",
               management_interface=DEFAULT_MANAGEMENT_INTERFACE, accept_four_node_ring=False,
               state_dir="/var/lib/sparkops/specdec", engine="trtllm"):
    """The NCCL, UCX and OpenMPI environment of a deployment's ranks: the one function every engine takes it from.

    ``layout``: ``direct``, ``ring`` or ``switch`` (module_utils/_layout.resolve_layout). ``interfaces``: the fabric
    netdevs of a node (the cabled pair; a ring's four), ``roce_devices``: their RoCE devices for ``NCCL_IB_HCA``
    (empty leaves it unset), ``hosts``: one address per node, head first (the OpenMPI hostfile, one rank each).
    ``bootstrap`` (``specdec_nccl_bootstrap``): ``fabric_interfaces`` puts ``interfaces`` in ``NCCL_SOCKET_IFNAME``,
    ``UCX_NET_DEVICES`` and OpenMPI's TCP ``if_include`` (connect-two-sparks, today's pair); ``management_interface``
    puts ``management_interface`` there instead
    (NVIDIA's 08/2026 NCCL runbook: NCCL finds the RoCE ports itself). A ring adds ``NCCL_IB_SUBNET_AWARE_ROUTING=1``
    and ``NCCL_NET_PLUGIN=none`` (connect-three-sparks); an accepted 4-node ring ``NCCL_ALGO=Ring`` (the community's
    only working setting, not NVIDIA-supported).

    Returns ``{"env": {NAME: value}, "forward": [NAME], "hostfile": text, "ranks": N}``: ``forward`` names the
    variables ssh-spawned remote ranks must get with ``mpirun -x``; ``hostfile`` is the OpenMPI hostfile (the
    trtllm_container role's, byte for byte); vLLM reads the NCCL_ and UCX_ entries and ignores the OMPI_ ones.
    For ``direct`` with ``bootstrap='fabric_interfaces'`` the env is today's pair env, byte for byte.
    ``engine='vllm'`` (torch.distributed, no MPI): the NCCL entries and Gloo's ``GLOO_SOCKET_IFNAME`` (vLLM's
    multi-node docs) on the same interfaces, no UCX_ or OMPI_ entries; ``hostfile`` and ``ranks`` as for trtllm.
    """
    if layout not in LAYOUTS:
        raise ValueError("layout must be one of %s, got %r" % (", ".join(LAYOUTS), layout))
    if bootstrap not in BOOTSTRAPS:
        raise ValueError("bootstrap must be fabric_interfaces or management_interface, got %r" % (bootstrap,))
    joined = management_interface if bootstrap == "management_interface" else ",".join(str(i) for i in interfaces)
    env = {
        "NCCL_SOCKET_IFNAME": joined,
        "UCX_NET_DEVICES": joined,
        "OMPI_MCA_btl_tcp_if_include": joined,
        "OMPI_MCA_oob_tcp_if_include": joined,
        "OMPI_MCA_orte_default_hostfile": state_dir + "/openmpi-hostfile",
        "OMPI_MCA_rmaps_ppr_n_pernode": "1",
        "OMPI_ALLOW_RUN_AS_ROOT": "1",
        "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    }
    if layout == "ring":
        env["NCCL_IB_SUBNET_AWARE_ROUTING"] = "1"
        env["NCCL_NET_PLUGIN"] = "none"
        if len(hosts) == 4 and accept_four_node_ring:
            env["NCCL_ALGO"] = "Ring"
    if roce_devices:
        env["NCCL_IB_HCA"] = ",".join(str(d) for d in roce_devices)
    if engine == "vllm":
        env = {k: v for k, v in env.items() if k.startswith("NCCL_")}
        env["GLOO_SOCKET_IFNAME"] = joined
    forward = sorted(k for k in env if k.startswith(("NCCL_", "UCX_")))
    return {"env": env, "forward": forward, "hostfile": HOSTFILE_HEADER + "".join("%s\n" % h for h in hosts),
            "ranks": len(hosts)}


# The variables that name the bootstrap interfaces (specdec_nccl_bootstrap), whatever the engine: TensorRT-LLM's mpirun
# reads the NCCL_, UCX_ and OMPI_ ones, vLLM's torch.distributed the NCCL_ and GLOO_ ones.
BOOTSTRAP_ENV = ("NCCL_SOCKET_IFNAME", "UCX_NET_DEVICES", "OMPI_MCA_btl_tcp_if_include", "OMPI_MCA_oob_tcp_if_include",
                 "GLOO_SOCKET_IFNAME")


# The variables a layout adds to the ranks' environment (fabric_env): a ring's subnet-aware routing, an accepted 4-node
# ring's algorithm. A launch spec carries them, so the state file shows them and mpirun forwards them with -x.
LAYOUT_ENV = ("NCCL_IB_SUBNET_AWARE_ROUTING", "NCCL_NET_PLUGIN", "NCCL_ALGO")


def launch_env(layout, bootstrap="fabric_interfaces", management_interface=DEFAULT_MANAGEMENT_INTERFACE,
               engine="trtllm", nodes=0, accept_four_node_ring=False):
    """The bootstrap variables of ``fabric_env`` a server's launch spec carries (the plan's ``rank_env``).

    ``fabric_interfaces`` (the default): ``{}``. The engine container's environment holds them (``fabric_env`` of the
    node's own interfaces), and a pair deployed before the bootstrap choice keeps its launch spec and fingerprint,
    byte for byte. ``management_interface``: the ``BOOTSTRAP_ENV`` entries of ``fabric_env`` (all the management
    interface, NVIDIA's 08/2026 NCCL runbook), so that server.sh exports them and mpirun forwards them with ``-x``
    (``-x UCX_NET_DEVICES -x NCCL_SOCKET_IFNAME -x OMPI_MCA_btl_tcp_if_include``, the runbook's) and the state file
    records them: switching the bootstrap changes the launch spec (a restart, with consent).
    A ring adds its ``LAYOUT_ENV`` entries (``NCCL_IB_SUBNET_AWARE_ROUTING=1``, ``NCCL_NET_PLUGIN=none``, and
    ``NCCL_ALGO=Ring`` for an accepted 4-node ring of ``nodes``); a pair and a switch add none.
    """
    layout = layout if layout in LAYOUTS else "direct"
    hosts = [""] * int(nodes or 0)
    env = fabric_env(layout, (), (), hosts, bootstrap=bootstrap, management_interface=management_interface,
                     accept_four_node_ring=accept_four_node_ring, engine=engine)["env"]
    names = (BOOTSTRAP_ENV if bootstrap == "management_interface" else ()) + LAYOUT_ENV
    return {k: env[k] for k in names if k in env}


# ---------------------------------------------------------------------------- the management interface (bootstrap)
_BOOTSTRAP_FIX = "or set specdec_nccl_bootstrap: fabric_interfaces"


def _bare(cidr):
    return str(cidr).split("/", 1)[0]


def management_problems(interface, node, found, address, peers, need_address=False):
    """One line per problem of the management interface NCCL, UCX and OpenMPI bootstrap over on ``node`` ([] when it
    can carry the bootstrap), before anything changes (module sparkops.specdec.nccl_interface_info).

    ``interface``: specdec_nccl_management_interface. ``found``: what the node read (``exists``, ``up``, ``ipv4``: its
    addresses with prefix, ``interfaces``: every interface name, ``routes``: {peer address: the device of
    ``ip route get`` or None}, ``error``: why it could not be read). ``address``: the address Ansible uses for the node
    (ansible_host). ``peers``: [(peer, its ansible_host)]. The interface must exist, be up, hold an IPv4 address and
    either carry ``address`` or be the route to every peer (a node Ansible reaches through another network).
    ``need_address`` (engine vllm): it must carry ``address`` itself, which the plan names in ``--master-addr`` (the
    head) and ``VLLM_HOST_IP``.
    """
    head = "specdec_nccl_management_interface: "
    if found.get("error"):
        return [head + "cannot check %s on %s (%s); install iproute2 (ip) on the node, %s." % (
            interface, node, found["error"], _BOOTSTRAP_FIX)]
    if not found.get("exists"):
        names = ", ".join(n for n in found.get("interfaces") or [] if n != "lo") or "none"
        return [head + "%s has no interface %s (its interfaces: %s); set it to the interface of the management network, "
                "the same name on every node (ip -o link show; enP7s7 is a DGX Spark's Ethernet, wlP9s9 its Wi-Fi), %s."
                % (node, interface, names, _BOOTSTRAP_FIX)]
    if not found.get("up") or not found.get("ipv4"):
        what = "is down" if not found.get("up") else "has no IPv4 address"
        return [head + "%s of %s %s, and NCCL, UCX and OpenMPI bootstrap over it (specdec_nccl_bootstrap: "
                "management_interface); bring it up with the node's management address, set it to the interface that "
                "has it, %s." % (interface, node, what, _BOOTSTRAP_FIX)]
    own = [_bare(c) for c in found["ipv4"]]
    carries = str(address) in own
    if need_address and not carries:
        return [head + "%s of %s (%s) does not carry %s, the node's ansible_host, which engine vllm names in "
                "--master-addr (the head) and VLLM_HOST_IP with specdec_nccl_bootstrap: management_interface; set "
                "ansible_host of %s to its address on %s, %s." % (interface, node, ", ".join(own), address, node,
                                                                  interface, _BOOTSTRAP_FIX)]
    routes = found.get("routes") or {}
    wrong = [(peer, addr, routes.get(str(addr))) for peer, addr in peers if routes.get(str(addr)) != interface]
    if carries or not wrong:
        return []
    shown = "; ".join("%s %s %s" % (peer, addr, "via %s" % dev if dev else "no route") for peer, addr, dev in wrong)
    return [head + "%s of %s (%s) carries neither %s (the address Ansible uses) nor the route to its peers (%s); set "
            "it to the interface that reaches the other Sparks (ip route get <peer>), %s."
            % (interface, node, ", ".join(own), address, shown, _BOOTSTRAP_FIX)]
