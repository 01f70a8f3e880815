# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
#
# PRIVATE to this collection: this module_util is used only by
# sparkops.specdec.netplan_fabric. It is not a public API; names and return
# shapes may change in any release without notice.
"""The QSFP fabric state machine of sparkops.specdec.netplan_fabric, as pure functions.

No I/O here: the module reads the host (``ip -j addr show``, ``ip -j -4 route show default``,
the netplan file, the checkpoint file) and runs commands; these functions decide.

* ``render``: the netplan file (the same text the role's template wrote before 1.x, with
  the "Managed by sparkops.specdec" mark). Format: netplan's YAML reference
  (https://netplan.readthedocs.io/en/stable/netplan-yaml/: ``network.version: 2``,
  ``ethernets.<name>.dhcp4``, ``ethernets.<name>.addresses``).
* ``parse_links`` / ``pair_state``: the JSON of iproute2 ``ip -j addr show`` (``ifname``,
  ``flags``, ``addr_info[].family/local/prefixlen``), the admin state being the ``UP`` flag.
* ``management`` / ``guard``: which interface carries the Ansible connection, and whether the
  selected pair or the planned subnets would touch it.
* ``ip_actions``: what the live (``ip``) method adds, removes (stale addresses of our own
  older configuration on the pair) and brings up.
* ``restore_actions``: what a rollback does to get back to a checkpoint.

Addresses of the pair are handled as ``"<interface> <address>/<prefix>"`` strings.
"""

from __future__ import annotations

import ipaddress
import json

MARK = "Managed by sparkops.specdec"
CHECKPOINT_SCHEMA = 1
# Checkpoint status values.
APPLYING = "applying"
APPLIED = "applied"
FAILED = "failed"
ROLLED_BACK = "rolled_back"
ROLLBACK_INCOMPLETE = "rollback_incomplete"

FIX = ("Fix: connect Ansible over the management NIC (not the QSFP fabric), choose the other port with "
       "netplan_qsfp_port, or pick fabric subnets that do not overlap the management network "
       "(netplan_qsfp_link_subnets, netplan_qsfp_single_subnet or netplan_qsfp_addresses).")


class PlanError(ValueError):
    """An input the plan cannot use; the message names the option and the fix."""


# ---------------------------------------------------------------------------- addresses
def check_addresses(interfaces, addresses, count=2):
    """Validate the planned CIDRs (one per interface, IPv4 host addresses, distinct). Raises PlanError.

    ``count``: 2 (the cabled port's two logical interfaces), or 4 (a ring: every logical interface)."""
    if len(interfaces) != count or len(set(interfaces)) != count:
        if count == 4:
            raise PlanError("interfaces: a ring needs the four logical interfaces of both ports (enp1s0f0np0, "
                            "enP2p1s0f0np0, enp1s0f1np1, enP2p1s0f1np1), got %s." % list(interfaces))
        raise PlanError("interfaces: needs the two logical interfaces of the cabled port (from "
                        "sparkops.specdec.nccl_interface_info selected_interfaces), got %s." % list(interfaces))
    if len(addresses) != len(interfaces):
        raise PlanError("addresses: needs one address per interface (%d), got %s; set two CIDRs like "
                        "192.168.100.10/24, or leave it empty to derive them from the scheme."
                        % (len(interfaces), list(addresses)))
    seen = set()
    out = []
    for cidr in addresses:
        text = str(cidr)
        if "/" not in text:
            raise PlanError("addresses: %s has no prefix length; write it as ADDRESS/PREFIX, e.g. 192.168.100.10/24."
                            % text)
        try:
            iface = ipaddress.IPv4Interface(text)
        except ValueError:
            raise PlanError("addresses: %s is not an IPv4 address with prefix, e.g. 192.168.100.10/24." % text)
        net = iface.network
        if net.prefixlen < 31 and iface.ip in (net.network_address, net.broadcast_address):
            raise PlanError("addresses: %s is the network or broadcast address of %s, not a host address; lower "
                            "the host offset or use a larger subnet." % (text, net))
        if iface.ip in seen:
            raise PlanError("addresses: %s is given twice; each logical interface needs its own address." % iface.ip)
        seen.add(iface.ip)
        out.append(str(iface))
    return out


def check_in_subnets(addresses, subnets, offset_option):
    """Derived addresses must stay inside the subnet they were derived from (an offset past its end wraps
    into the next subnet). Raises PlanError naming ``offset_option``."""
    for cidr, subnet in zip(addresses, subnets):
        try:
            net = ipaddress.IPv4Network(str(subnet), strict=False)
            inside = ipaddress.IPv4Interface(cidr).network == net
        except ValueError:
            raise PlanError("%s is not an IPv4 subnet, e.g. 192.168.100.0/24." % subnet)
        if not inside:
            raise PlanError("%s: the derived address %s lies outside its subnet %s; lower the offset, or use a "
                            "larger subnet." % (offset_option, cidr.split("/", 1)[0], net))


def pairs(interfaces, addresses):
    """``["<interface> <cidr>", ...]`` for interface i -> address i."""
    return ["%s %s" % (i, a) for i, a in zip(interfaces, addresses)]


def split_pair(item):
    """``"<interface> <cidr>"`` -> ``(interface, cidr)``."""
    name, dummy, cidr = str(item).partition(" ")
    return name, cidr


# ---------------------------------------------------------------------------- netplan file
def render(interfaces, addresses, port=None, layout=None):
    """The netplan file for the pair (byte-identical to the role's former 40-cx7.yaml.j2); a ring's names its four
    interfaces, a switch's its layout."""
    where = "port %s" % port if port is not None else "port"
    if layout == "ring":
        what = "# ConnectX-7 QSFP ring: all four logical interfaces of both ports (two cables)."
    elif layout == "switch":
        what = "# ConnectX-7 QSFP %s to a switch: both logical interfaces of the cabled port." % where
    else:
        what = "# ConnectX-7 QSFP %s: both logical interfaces of the cabled port." % where
    lines = [
        "# %s (netplan_qsfp role). Local edits are overwritten." % MARK,
        what,
        "network:",
        "  version: 2",
        "  ethernets:",
    ]
    for name, cidr in zip(interfaces, addresses):
        lines += [
            "    %s:" % name,
            "      dhcp4: false",
            "      addresses:",
            "        - %s" % cidr,
        ]
    return "\n".join(lines) + "\n"


def is_ours(text):
    """Whether a netplan file carries the mark of this collection."""
    return text is not None and MARK in text


def addresses_in_file(text):
    """The ``"<interface> <cidr>"`` entries of a file written by ``render`` (its own format; [] otherwise).

    Only files with the mark are read: their layout is fixed, so no YAML parser is needed on the node.
    """
    if not is_ours(text):
        return []
    out = []
    current = None
    for raw in text.splitlines():
        line = raw.rstrip()
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        indent = len(line) - len(line.lstrip(" "))
        if indent == 4 and stripped.endswith(":"):
            current = stripped[:-1].strip("'\"")
        elif indent < 4:
            current = None
        elif current and stripped.startswith("- "):
            value = stripped[2:].strip().strip("'\"")
            try:
                out.append("%s %s" % (current, ipaddress.IPv4Interface(value)))
            except ValueError:
                continue
    return out


def file_decision(existing, planned, take_over):
    """What to do with the file: ``create``, ``update``, ``none`` (same content) or ``refuse`` (not ours).

    ``existing`` is the current content (None when the file does not exist).
    """
    if existing is None:
        return "create"
    if existing == planned:
        return "none"
    if not is_ours(existing) and not take_over:
        return "refuse"
    return "update"


def refuse_message(path):
    return ("%s exists and was not written by sparkops.specdec (for example by the manual connect-two-sparks steps). "
            "Move it aside, or set netplan_qsfp_take_over: true (module option take_over) to replace it (a timestamped "
            "backup is kept next to it), or point netplan_qsfp_file (option path) to another file. Nothing was changed."
            % path)


# ---------------------------------------------------------------------------- links
def parse_links(text):
    """``ip -j addr show`` -> ``[{ifname, up, inet: [cidr], all: [address]}]``. Raises ValueError if not its JSON."""
    try:
        data = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise ValueError("`ip -j addr show` did not print JSON: %s" % exc)
    if not isinstance(data, list):
        raise ValueError("`ip -j addr show` printed JSON that is not a list of interfaces")
    links = []
    for link in data:
        if not isinstance(link, dict) or not isinstance(link.get("ifname"), str):
            continue
        flags = link.get("flags") if isinstance(link.get("flags"), list) else []
        inet, every = [], []
        for info in link.get("addr_info") or []:
            if not isinstance(info, dict):
                continue
            local, prefix = info.get("local"), info.get("prefixlen")
            if not isinstance(local, str) or isinstance(prefix, bool) or not isinstance(prefix, int):
                continue
            every.append(local)
            if info.get("family") == "inet":
                try:
                    value = str(ipaddress.IPv4Interface("%s/%d" % (local, prefix)))
                except ValueError:
                    continue
                if value not in inet:
                    inet.append(value)
        links.append({"ifname": link["ifname"], "up": "UP" in flags, "inet": inet, "all": every})
    return links


def parse_default_route(text):
    """``ip -j -4 route show default`` -> the interfaces of the default routes ([] when unparsable)."""
    try:
        data = json.loads(text or "[]")
    except ValueError:
        return []
    if not isinstance(data, list):
        return []
    return sorted({r["dev"] for r in data if isinstance(r, dict) and isinstance(r.get("dev"), str)})


def pair_state(links, interfaces):
    """``{"up": [interface], "addresses": ["<interface> <cidr>"], "missing": [interface]}`` of the pair only."""
    by_name = {link["ifname"]: link for link in links}
    state = {"up": [], "addresses": [], "missing": []}
    for name in interfaces:
        link = by_name.get(name)
        if link is None:
            state["missing"].append(name)
            continue
        if link["up"]:
            state["up"].append(name)
        state["addresses"] += ["%s %s" % (name, cidr) for cidr in link["inet"]]
    return state


def same_pair_state(first, second):
    return (sorted(first.get("addresses", [])) == sorted(second.get("addresses", []))
            and sorted(first.get("up", [])) == sorted(second.get("up", [])))


# ---------------------------------------------------------------------------- management guard
def ssh_server_address(value):
    """The server address of an E(SSH_CONNECTION) value (``client cport server sport``), or None."""
    parts = str(value or "").split()
    if len(parts) < 4:
        return None
    try:
        return str(ipaddress.ip_address(parts[2].split("%", 1)[0]))
    except ValueError:
        return None


def management(links, addresses, default_ifaces):
    """The management connection: ``{addresses, interfaces, networks}``.

    ``addresses``: candidate addresses of the connection (``ansible_host``, the server side of
    E(SSH_CONNECTION)); names that are not IP addresses are ignored. The interfaces are those holding one of
    them plus those of the default IPv4 route; the networks are every IPv4 subnet of those interfaces.
    """
    ips = []
    for value in addresses:
        try:
            ip = str(ipaddress.ip_address(str(value).strip().split("%", 1)[0]))
        except ValueError:
            continue
        if ip not in ips:
            ips.append(ip)
    ifaces = [link["ifname"] for link in links if set(link["all"]) & set(ips)]
    ifaces += [d for d in default_ifaces if d not in ifaces]
    networks = []
    for link in links:
        if link["ifname"] in ifaces:
            for cidr in link["inet"]:
                net = str(ipaddress.IPv4Interface(cidr).network)
                if net not in networks:
                    networks.append(net)
    return {"addresses": ips, "interfaces": ifaces, "networks": networks}


def guard(interfaces, addresses, mgmt):
    """Problems (list of phrases, empty when safe) if the pair or the planned subnets touch the management connection."""
    problems = []
    inside = [i for i in interfaces if i in mgmt["interfaces"]]
    if inside:
        problems.append("the selected QSFP pair %s includes the management interface %s"
                        % (", ".join(interfaces), ", ".join(inside)))
    for cidr in addresses:
        planned = ipaddress.IPv4Interface(cidr).network
        for text in mgmt["networks"]:
            net = ipaddress.IPv4Network(text)
            if planned.overlaps(net):
                problems.append("planned fabric subnet %s overlaps the management subnet %s" % (planned, net))
        for text in mgmt["addresses"]:
            ip = ipaddress.ip_address(text)
            if ip.version == 4 and ip in planned and not any(ip in ipaddress.IPv4Network(n) for n in mgmt["networks"]):
                problems.append("planned fabric subnet %s contains the management address %s" % (planned, ip))
    return problems


def guard_message(mgmt, problems):
    """The one-line error of the guard."""
    where = (", ".join(mgmt["addresses"]) or "address unknown", ", ".join(mgmt["interfaces"]) or "an unknown interface",
             ", ".join(mgmt["networks"]) or "none")
    return ("netplan_qsfp stops before any change: the management connection (%s on %s, subnets %s) would be "
            "touched: %s. %s" % (where + ("; ".join(problems), FIX)))


# ---------------------------------------------------------------------------- live (ip) method
def ours_before(previous_file, checkpoint):
    """The ``"<interface> <cidr>"`` entries our own older configuration put on interfaces.

    From the previous netplan file when it carries our mark, and from the last checkpoint's applied
    addresses unless that checkpoint was rolled back.
    """
    out = list(addresses_in_file(previous_file))
    if isinstance(checkpoint, dict) and checkpoint.get("status") in (APPLIED, APPLYING, FAILED):
        for item in (checkpoint.get("applied") or {}).get("addresses") or []:
            if item not in out:
                out.append(item)
    return out


def ip_actions(before, planned, ours, interfaces):
    """What the ``ip`` method does: ``{add, remove, up}``.

    ``before``: ``pair_state`` read now; ``planned``: ``pairs(...)``; ``ours``: ``ours_before(...)``.
    Removed: addresses on the pair that our own older configuration set and the plan no longer has.
    Addresses someone else put on the pair are left alone.
    """
    present = before["addresses"]
    add = [p for p in planned if p not in present]
    remove = [p for p in present if p in ours and p not in planned and split_pair(p)[0] in interfaces]
    up = [i for i in interfaces if i not in before["up"]]
    return {"add": add, "remove": remove, "up": up}


def after_ip(before, actions):
    """The pair state once ``actions`` are done."""
    addresses = [p for p in before["addresses"] if p not in actions["remove"]] + list(actions["add"])
    up = list(before["up"]) + [i for i in actions["up"] if i not in before["up"]]
    return {"up": up, "addresses": addresses}


def no_actions(actions):
    return not any(actions.get(k) for k in ("add", "remove", "up", "down"))


# ---------------------------------------------------------------------------- checkpoint and rollback
def new_checkpoint(cid, now, path, existing, pair_before, interfaces, apply, method):
    """The checkpoint recorded before any change.

    ``existing``: ``None`` (no file) or ``{content, owner, group, mode}`` of the current file.
    """
    return {
        "schema": CHECKPOINT_SCHEMA,
        "id": cid,
        "created": now,
        "status": APPLYING,
        "path": path,
        "file": {"existed": existing is not None, "content": (existing or {}).get("content"),
                 "owner": (existing or {}).get("owner"), "group": (existing or {}).get("group"),
                 "mode": (existing or {}).get("mode")},
        "interfaces": list(interfaces),
        "pair": {"up": list(pair_before["up"]), "addresses": list(pair_before["addresses"])},
        "apply": bool(apply),
        "method": method,
        "file_changed": False,
        "backup_file": None,
        "netplan_applied": False,
        "applied": {"addresses": []},
    }


def check_checkpoint(data, checkpoint_id=None):
    """Problems with a checkpoint read from disk (empty when usable for a rollback)."""
    if not isinstance(data, dict):
        return ["the checkpoint is not a JSON object"]
    problems = []
    if data.get("schema") != CHECKPOINT_SCHEMA:
        problems.append("checkpoint schema %r is not %d" % (data.get("schema"), CHECKPOINT_SCHEMA))
    for key in ("id", "path", "file", "interfaces", "pair"):
        if key not in data:
            problems.append("the checkpoint has no %s" % key)
    if checkpoint_id and data.get("id") != checkpoint_id:
        problems.append("the checkpoint is %s, not %s (a later run replaced it)" % (data.get("id"), checkpoint_id))
    return problems


def restore_actions(checkpoint, current_content, current_pair):
    """What a rollback does: ``{file, netplan_apply, add, remove, down, up, backup}``.

    ``file``: ``restore`` (write the previous content back), ``remove`` (there was no file before),
    or ``none``. ``current_content``: the file now (None when absent); ``current_pair``: ``pair_state`` now.
    """
    before_file = checkpoint["file"]
    if before_file.get("existed"):
        file_action = "none" if current_content == before_file.get("content") else "restore"
    else:
        file_action = "remove" if current_content is not None else "none"
    want = checkpoint["pair"]
    have = current_pair
    return {
        "file": file_action,
        "attributes": bool(before_file.get("existed")),
        "netplan_apply": bool(checkpoint.get("netplan_applied")),
        "remove": [p for p in have["addresses"] if p not in want["addresses"]],
        "add": [p for p in want["addresses"] if p not in have["addresses"]],
        "down": [i for i in have["up"] if i not in want["up"]],
        "up": [i for i in want["up"] if i not in have["up"]],
        "backup": checkpoint.get("backup_file"),
    }


def file_outcome(checkpoint):
    """How the rollback left the file, in words."""
    if not checkpoint.get("file_changed"):
        return "unchanged"
    if checkpoint["file"].get("existed"):
        return "restored to its previous content"
    return "removed (there was none before)"


def addresses_in_subnets(cidrs, of):
    """The addresses of ``cidrs`` (``ip/prefix`` items, or bare addresses, in their order) that lie in a subnet of
    ``of`` (the same kind of items): a node's addresses on the links it shares with another (a pair's two, a switch's
    two, the one cable of a ring's neighbours). Items that are not addresses are left out."""
    nets = []
    for cidr in of or []:
        try:
            nets.append(ipaddress.ip_interface(str(cidr)).network)
        except ValueError:
            continue
    out = []
    for cidr in cidrs or []:
        try:
            ip = ipaddress.ip_interface(str(cidr)).ip
        except ValueError:
            continue
        if any(ip.version == net.version and ip in net for net in nets):
            out.append(str(ip))
    return out


def fabric_addresses(settings, index, count):
    """The two fabric addresses (CIDR) of the node at ``index`` of ``count``, as netplan_qsfp derives them.

    Returns ``(addresses, error)``. Explicit ``netplan_qsfp_addresses`` win over the scheme.
    """
    explicit = settings.get("netplan_qsfp_addresses") or []
    if explicit:
        return [str(a) for a in explicit], None
    try:
        if (settings.get("netplan_qsfp_scheme") or "per_link_subnets") == "per_link_subnets":
            nets = [ipaddress.ip_network(str(n), strict=False) for n in settings.get("netplan_qsfp_link_subnets")
                    or ["192.168.100.0/24", "192.168.101.0/24"]]
            host = int(settings.get("netplan_qsfp_host_offset") or 10) + index
            return ["%s/%d" % (net.network_address + host, net.prefixlen) for net in nets], None
        net = ipaddress.ip_network(str(settings.get("netplan_qsfp_single_subnet") or "192.168.200.0/24"), strict=False)
        first = int(settings.get("netplan_qsfp_single_host_offset") or 12)
        return ["%s/%d" % (net.network_address + first + index, net.prefixlen),
                "%s/%d" % (net.network_address + first + count + index, net.prefixlen)], None
    except (ValueError, TypeError, IndexError) as exc:
        return [], str(exc)


# ---------------------------------------------------------------------------- plans someone else wrote (issue 24)
# The ConnectX-7 netdevs of a DGX Spark (module_utils/_nccl.CX7_TABLE): a plan addressing any of them is a fabric plan.
CX7_NETDEVS = ("enp1s0f0np0", "enP2p1s0f0np0", "enp1s0f1np1", "enP2p1s0f1np1")
# Who writes which file (for the messages only: ours and theirs are told apart by MARK, never by the name, since
# NVIDIA's connect-two-sparks steps write the same /etc/netplan/40-cx7.yaml as this role).
KNOWN_PLANS = {
    "99-nvidia-sync-cluster.yaml": "NVIDIA Sync's Cluster Assistant",
    "98-spark-vllm-docker.yaml": "eugr/spark-vllm-docker's setup-cluster.sh",
    "40-cx7.yaml": "NVIDIA's connect-two-sparks steps",
}


def plan_interfaces(text, load):
    """``{interface: {"addresses": [cidr], "dhcp4": bool}}`` of ``network.ethernets`` in a netplan YAML text.

    ``load``: a YAML loader (``yaml.safe_load``; netplan itself is Python and needs PyYAML, so the node has it).
    Raises ValueError when the text is not a netplan document. Addresses that are not IPv4 CIDRs are kept as given.
    """
    try:
        data = load(text)
    except Exception as exc:  # the loader's own error type
        raise ValueError("not YAML (%s)" % str(exc).splitlines()[0] if str(exc) else "not YAML")
    if data is None:
        return {}
    if not isinstance(data, dict) or not isinstance(data.get("network", {}), dict):
        raise ValueError("no network: mapping")
    ethernets = data.get("network", {}).get("ethernets") or {}
    if not isinstance(ethernets, dict):
        raise ValueError("network.ethernets is not a mapping")
    out = {}
    for name, conf in ethernets.items():
        conf = conf if isinstance(conf, dict) else {}
        addresses = conf.get("addresses") or []
        if not isinstance(addresses, list):
            addresses = [addresses]
        found = []
        for item in addresses:
            value = next(iter(item)) if isinstance(item, dict) and item else item  # "addr: {lifetime: ...}" form
            try:
                found.append(str(ipaddress.IPv4Interface(str(value))))
            except ValueError:
                found.append(str(value))
        out[str(name)] = {"addresses": found, "dhcp4": conf.get("dhcp4") in (True, "yes", "true", "on")}
    return out


def foreign_plans(files, load):
    """The plans under /etc/netplan that address a ConnectX-7 interface and do not carry our mark.

    ``files``: ``{path: text}`` of ``/etc/netplan/*.yaml``. Returns, in path order,
    ``[{"path", "source", "interfaces": {interface: {addresses, dhcp4}}, "error"}]``: ``error`` is set (and
    ``interfaces`` empty) when the file could not be read as netplan but names a ConnectX-7 interface.
    """
    out = []
    for path in sorted(files):
        text = files[path]
        if text is None or is_ours(text):
            continue
        source = KNOWN_PLANS.get(path.rsplit("/", 1)[-1], "another netplan file")
        try:
            plan = plan_interfaces(text, load) if load is not None else None
        except ValueError as exc:
            if any(name in text for name in CX7_NETDEVS):
                out.append({"path": path, "source": source, "interfaces": {}, "error": str(exc)})
            continue
        if plan is None:
            if any(name in text for name in CX7_NETDEVS):
                out.append({"path": path, "source": source, "interfaces": {},
                            "error": "PyYAML is not installed on the node, so the file could not be read"})
            continue
        cx7 = {name: conf for name, conf in plan.items() if name in CX7_NETDEVS}
        if cx7:
            out.append({"path": path, "source": source, "interfaces": cx7, "error": None})
    return out


def compliance(plan, interfaces):
    """Why a foreign plan cannot be adopted for ``interfaces`` (the pair, a ring's four): [] when it gives each of
    them exactly one static IPv4 address, each in its own subnet."""
    if plan.get("error"):
        return ["it cannot be read (%s)" % plan["error"]]
    problems = []
    nets = {}
    for name in interfaces:
        conf = plan["interfaces"].get(name)
        if conf is None:
            problems.append("it does not address %s" % name)
            continue
        if conf["dhcp4"]:
            problems.append("%s takes DHCP" % name)
        good = []
        for cidr in conf["addresses"]:
            try:
                good.append(ipaddress.IPv4Interface(cidr))
            except ValueError:
                continue
        if len(good) != 1:
            problems.append("%s has %d static IPv4 addresses, not one" % (name, len(good)))
            continue
        net = good[0].network
        if net in nets:
            problems.append("%s and %s share the subnet %s" % (nets[net], name, net))
        nets[net] = name
    return problems


def ownership_decision(path, own_text, foreign, interfaces, take_over):
    """Whose plan addresses ``interfaces``: ``{"action", "adopted", "replace", "message"}``.

    ``own_text``: the content at ``path`` (None when absent); ``foreign``: ``foreign_plans(...)`` of the directory
    (``path`` among them when a file without our mark addresses a ConnectX-7 interface there).
    Actions: ``manage`` (no foreign plan: this module's file as before), ``adopt`` (one compliant foreign plan, no
    consent to replace it: its addresses are used and nothing is written), ``take_over`` (replace every foreign plan:
    ours is written, theirs moved aside as backups, ``replace`` lists them), ``refuse`` (``message``: one line).
    Two plans for the same interfaces are never left in place.
    """
    if not foreign:
        return {"action": "manage", "adopted": [], "replace": [], "message": None}
    if take_over:
        return {"action": "take_over", "adopted": [], "replace": [p["path"] for p in foreign if p["path"] != path],
                "message": None}
    names = "; ".join("%s (%s)" % (p["path"], p["source"]) for p in foreign)
    if own_text is not None and is_ours(own_text):
        return {"action": "refuse", "adopted": [], "replace": [], "message": (
            "%s (ours) and %s both address the ConnectX-7 interfaces, and netplan would merge them into one stacked "
            "plan; set netplan_qsfp_take_over: true (module option take_over) to keep ours and move theirs aside (a "
            "backup is kept), or remove %s to adopt theirs. Nothing was changed." % (path, names, path))}
    if len(foreign) > 1:
        return {"action": "refuse", "adopted": [], "replace": [], "message": (
            "%d netplan files address the ConnectX-7 interfaces (%s), a stacked plan this collection does not adopt; "
            "leave one of them, or set netplan_qsfp_take_over: true (module option take_over) to replace them all "
            "with ours (backups are kept). Nothing was changed." % (len(foreign), names))}
    plan = foreign[0]
    problems = compliance(plan, interfaces)
    if problems:
        why = (plan["path"], plan["source"], ", ".join(interfaces), "; ".join(problems))
        return {"action": "refuse", "adopted": [], "replace": [], "message": (
            "%s (%s) addresses the ConnectX-7 interfaces but cannot be adopted for %s: %s. Fix it, or set "
            "netplan_qsfp_take_over: true (module option take_over) to replace it with this collection's plan (a "
            "backup is kept). Nothing was changed." % why)}
    adopted = ["%s %s" % (name, str(ipaddress.IPv4Interface(plan["interfaces"][name]["addresses"][0])))
               for name in interfaces]
    return {"action": "adopt", "adopted": adopted, "replace": [], "message": None}


def foreign_on_pair(foreign, interfaces):
    """``"<interface> <cidr>"`` entries the foreign plans put on ``interfaces`` (removed live when ours replaces them)."""
    out = []
    for plan in foreign:
        for name in interfaces:
            for cidr in (plan["interfaces"].get(name) or {}).get("addresses") or []:
                try:
                    item = "%s %s" % (name, ipaddress.IPv4Interface(cidr))
                except ValueError:
                    continue
                if item not in out:
                    out.append(item)
    return out
