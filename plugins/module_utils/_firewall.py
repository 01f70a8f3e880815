# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""PRIVATE to sparkops.specdec: the host firewall plan (issue 12 item 7), ufw rules admitting the endpoint port only
from the client networks the user lists (specdec_server_allowed_networks), while the Ansible SSH connection, the fabric
(every protocol on the fabric interfaces: OpenMPI and NCCL use random TCP ports) and the container sshd stay open.

The node-side module sparkops.specdec.endpoint_firewall reads ufw, plans with this file and applies the plan with the
ufw command line (the controller-side action firewall_plan plans from the role's old probe the same way). This file
decides which rules, checks the networks (the standard library's ipaddress: it runs on the node too), refuses before
any change (ufw missing, ufw inactive without consent, a rule that would lock out the Ansible connection) and plans
the teardown: only the rules carrying our comment go.
"""

from __future__ import annotations

import ipaddress
import re

# Every rule we add carries a comment starting with this (ufw keeps it in user.rules, hex-encoded).
TAG = "sparkops-specdec"
# ufw's "any" source in the tuples of its user rules files.
_ANY_SOURCES = ("0.0.0.0/0", "::/0", "any")
_BLOCKING = ("deny", "reject")


def tag(deployment):
    """The comment of our rules for a deployment (letters, digits, ``.``, ``_`` and ``-``: ufw quotes it)."""
    return "%s:%s" % (TAG, re.sub(r"[^A-Za-z0-9._-]", "_", str(deployment or "default")))


def is_ours(comment):
    return str(comment or "").startswith(TAG)


def network_problem(value, shown):
    """Why ``value`` is not a client network in CIDR form (checked with ipaddress), or None."""
    text = str(value).strip()
    try:
        net = ipaddress.ip_interface(text) if text else None
    except (ValueError, TypeError):
        net = None
    if net is None:
        return ("%s is not an IP network; write it in CIDR form, e.g. 192.168.1.0/24, 192.168.1.7/32 or 2001:db8::/64 "
                "(0.0.0.0/0 admits every IPv4 client)." % shown)
    if net.ip != net.network.network_address:
        return ("%s has host bits set; write the network, %s (or %s/%d for the one address)."
                % (shown, net.network, net.ip, net.max_prefixlen))
    return None


def admits_everyone(networks):
    """The networks of an allow-list that admit every client of their family (a /0: 0.0.0.0/0, ::/0), as given."""
    found = []
    for value in networks or []:
        try:
            if ipaddress.ip_network(str(value).strip(), strict=False).prefixlen == 0:
                found.append(str(value).strip())
        except (ValueError, TypeError):
            continue  # named by network_problem
    return found


def _cidr(text):
    """The network of ``text`` (an address or a CIDR, host bits ignored) in CIDR form; ValueError when it is none."""
    return str(ipaddress.ip_interface(str(text).strip()).network)


def normalize_network(value):
    """``(cidr, error)``: a client network in CIDR form (a bare address is its /32 or /128)."""
    problem = network_problem(value, repr(value))
    if problem:
        return None, "specdec_server_allowed_networks: " + problem
    return _cidr(value), None


def _norm_source(value):
    """A source as compared: ``any`` or a CIDR (ufw stores a /32 as the bare address)."""
    text = str(value or "any").strip()
    if text in _ANY_SOURCES:
        return "any"
    try:
        return _cidr(text)
    except (ValueError, TypeError):
        return text


def parse_tuples(text):
    """The rules of ufw's user rules files (``grep -h '^### tuple' user.rules user6.rules``), in file order.

    Each: ``action`` (allow, deny, reject, limit), ``proto``, ``port`` (dport: ``any``, ``22``, ``80,443``,
    ``6000:6010``), ``source`` (``any`` or a CIDR), ``interface`` (inbound interface or None), ``direction``,
    ``comment`` (decoded) and ``v6``. Route rules are left out (they do not filter the node's own ports).
    """
    rules = []
    for line in str(text or "").splitlines():
        if not line.startswith("### tuple ###"):
            continue
        fields = line[len("### tuple ###"):].split()
        comment = ""
        if fields and fields[-1].startswith("comment="):
            try:
                comment = bytes.fromhex(fields.pop()[len("comment="):]).decode("utf-8", "replace")
            except ValueError:
                comment = ""
        if len(fields) < 7 or fields[0].startswith("route:"):
            continue
        action, proto, dport, dst, _sport, src = fields[:6]
        direction = fields[-1]
        iface = None
        if "_" in direction:
            direction, iface = direction.split("_", 1)
        rules.append({"action": action.split("_", 1)[0], "proto": proto, "port": dport, "dest": dst,
                      "source": _norm_source(src), "interface": iface, "direction": direction,
                      "comment": comment, "v6": ":" in src or ":" in dst})
    return rules


def port_covers(dport, port):
    """ufw's dport field (``any``, ``22``, ``80,443``, ``6000:6010``, mixed) holds ``port``."""
    if str(dport) == "any":
        return True
    for part in str(dport).split(","):
        if ":" in part:
            low, _sep, high = part.partition(":")
            if low.isdigit() and high.isdigit() and int(low) <= int(port) <= int(high):
                return True
        elif part.isdigit() and int(part) == int(port):
            return True
    return False


def source_covers(source, address):
    if source == "any" or not address:
        return True
    try:
        return ipaddress.ip_address(str(address).strip()) in ipaddress.ip_network(str(source).strip(), strict=False)
    except (ValueError, TypeError):
        return False


def key(rule):
    """What makes two rules the same for ufw (its comment aside)."""
    return (rule["action"], rule["proto"], str(rule["port"]), _norm_source(rule["source"]), rule.get("interface"))


def describe(rule):
    where = " in on %s" % rule["interface"] if rule.get("interface") else ""
    port = "" if rule["port"] == "any" else " to port %s" % rule["port"]
    proto = "" if rule["proto"] == "any" else "/%s" % rule["proto"]
    return "%s%s from %s%s%s" % (rule["action"], where, rule["source"], port, proto)


def module_args(rule, comment, delete=False):
    """community.general.ufw options of a rule (only those it needs; the YAML omits the rest)."""
    args = {"rule": rule["action"], "from_ip": rule["source"], "delete": delete, "label": describe(rule)}
    if not delete:
        args["comment"] = comment
    if rule["proto"] != "any":
        args["proto"] = rule["proto"]
    if rule["port"] != "any":
        args["to_port"] = str(rule["port"])
    if rule.get("interface"):
        args["interface"] = rule["interface"]
        args["direction"] = "in"
    return args


def _rule(action, proto, port, source, interface=None, why=""):
    return {"action": action, "proto": proto, "port": str(port), "source": source, "interface": interface, "why": why}


def parse_ssh_connection(value):
    """``(client address, server port)`` of an E(SSH_CONNECTION) value (``client cport server sport``), or Nones."""
    parts = str(value or "").split()
    if len(parts) < 4 or not parts[3].isdigit():
        return None, None
    return parts[0].split("%", 1)[0], int(parts[3])


def status_active(status_text):
    return bool(re.search(r"^Status: active\b", str(status_text or ""), re.M))


def wanted_rules(networks, port, ssh_port, fabric_interfaces, fabric_networks, container_ssh_port, peers=()):
    """The rules of the plan, in the order ufw must evaluate them (the endpoint's reject last). ``peers``: the other
    members' management addresses (specdec_nccl_bootstrap: management_interface), each admitted on every port."""
    rules = [_rule("allow", "tcp", ssh_port, "any", why="the Ansible SSH connection")]
    for iface in fabric_interfaces:
        rules.append(_rule("allow", "any", "any", "any", iface, why="the fabric (OpenMPI/NCCL random TCP ports)"))
    for peer in peers:
        rules.append(_rule("allow", "any", "any", peer,
                           why="a member of the deployment on the management network (OpenMPI, NCCL and Gloo bootstrap "
                               "there on random ports)"))
    if container_ssh_port:
        for net in fabric_networks:
            rules.append(_rule("allow", "tcp", container_ssh_port, net, why="the container sshd (mpirun)"))
    for net in networks:
        rules.append(_rule("allow", "tcp", port, net, why="a client network of the endpoint"))
    rules.append(_rule("reject", "tcp", port, "any", why="every other client of the endpoint"))
    return rules


def _fabric_networks(addresses):
    nets = []
    for cidr in addresses or []:
        try:
            net = _norm_source(_cidr(cidr))
        except (ValueError, TypeError):
            net = str(cidr)
        if net not in nets:
            nets.append(net)
    return nets


def _lines(rules, active):
    return "ufw: %s\n%s" % ("active" if active else "inactive",
                            "".join("%s  # %s\n" % (describe(r), r.get("comment") or r.get("why", "")) for r in rules))


def plan_apply(host, inputs):
    """The firewall plan of one node. ``inputs``: ``networks`` (the setting), ``port`` (endpoint), ``ufw_path``,
    ``status`` (``ufw status verbose``), ``tuples`` (user rules), ``ssh_connection``, ``ansible_port``,
    ``fabric_interfaces``, ``fabric_addresses`` (CIDRs), ``container_ssh_port`` (0: none), ``consent``
    (specdec_server_firewall_enable), ``deployment``, ``two_nodes``, ``check_only`` (the fabric is not known yet),
    ``management_peers`` (the other members' management addresses when NCCL, UCX and OpenMPI bootstrap over the
    management interface: each must be an IP address; their random ports would be denied otherwise).

    Returns ``{errors, add, delete, enable, rules, diff, pending}``; ``add``/``delete`` are community.general.ufw
    options in the order to run them (deletes first).
    """
    errors = []
    raw = inputs.get("networks") or []
    if not isinstance(raw, (list, tuple)):
        raw = [raw]
    networks = []
    for value in raw:
        net, err = normalize_network(value)
        if err:
            errors.append(err)
        elif net not in networks:
            networks.append(net)
    if errors:
        return {"errors": errors}
    if not str(inputs.get("ufw_path") or "").strip():
        return {"errors": ["specdec_server_allowed_networks: ufw is not installed on %s; install it (sudo apt-get "
                           "install ufw) or set specdec_server_allowed_networks: [] (no firewall change)." % host]}
    active = status_active(inputs.get("status"))
    if not active and not inputs.get("consent"):
        errors.append("specdec_server_allowed_networks: ufw is inactive on %s, and enabling it denies every other "
                      "incoming connection; set specdec_server_firewall_enable: true to consent (SSH, the fabric and "
                      "the container sshd stay open), or enable ufw yourself." % host)
    port = int(inputs["port"])
    client, conn_port = parse_ssh_connection(inputs.get("ssh_connection"))
    ssh_port = conn_port or int(inputs.get("ansible_port") or 22)
    if ssh_port == port:
        errors.append("specdec_server_port: %s is also the port Ansible connects to %s with (SSH), so the firewall "
                      "cannot restrict it; serve on another port." % (port, host))
    interfaces = [str(i) for i in inputs.get("fabric_interfaces") or []]
    # check_only: the playbooks' firewall preflight, before netplan_qsfp has found the fabric.
    if inputs.get("two_nodes") and not interfaces and not inputs.get("check_only"):
        errors.append("specdec_server_allowed_networks: the fabric interfaces of %s are unknown (netplan_qsfp_fabric "
                      "not set), and a firewall without them would cut OpenMPI/NCCL; run the netplan_qsfp role first "
                      "(playbooks/two_sparks.yml does)." % host)
    peers = []
    for value in inputs.get("management_peers") or []:
        try:
            peer = str(ipaddress.ip_address(str(value).strip()))
        except ValueError:
            errors.append("specdec_nccl_bootstrap: management_interface with specdec_server_allowed_networks admits the "
                          "other members of %s's deployment by their management address (ansible_host), but one is "
                          "%r, not an IP address; set the ansible_host of every member to its management IP address."
                          % (host, str(value)))
            continue
        if peer not in peers:
            peers.append(peer)
    existing = parse_tuples(inputs.get("tuples"))
    # ufw evaluates its user rules in order and we append: a rule of someone else that refuses the Ansible
    # connection before ours would lock the controller out once ufw is active.
    for rule in existing:
        if is_ours(rule["comment"]) or rule["action"] not in _BLOCKING or rule["proto"] not in ("tcp", "any"):
            continue
        if port_covers(rule["port"], ssh_port) and source_covers(rule["source"], client):
            errors.append("specdec_server_allowed_networks: the existing ufw rule '%s' on %s refuses the Ansible "
                          "connection (from %s to port %s) ahead of the rules this role adds, so it would lock "
                          "Ansible out; delete that rule (sudo ufw delete ...) or admit the controller before it."
                          % (describe(rule), host, client or "the controller", ssh_port))
            break
    if errors:
        return {"errors": errors}

    comment = tag(inputs.get("deployment"))
    wanted = wanted_rules(networks, port, ssh_port, interfaces, _fabric_networks(inputs.get("fabric_addresses")),
                          int(inputs.get("container_ssh_port") or 0), peers)
    ours = [r for r in existing if is_ours(r["comment"])]
    have = {}
    for rule in ours:
        have.setdefault(key(rule), rule)
    want_keys = [key(r) for r in wanted]
    delete = [r for k, r in have.items() if k not in want_keys]
    add = [r for r in wanted if key(r) not in have]
    # A client network added after the reject rule would land behind it: the reject goes and comes back last.
    reject = wanted[-1]
    if key(reject) in have and [r for r in add if r["port"] == str(port) and r["action"] == "allow"]:
        delete.append(have[key(reject)])
        add.append(reject)
    for rule in wanted:
        rule["comment"] = comment
    before = _lines(list(have.values()), active)
    return {
        "errors": [],
        "rules": [dict(r, label=describe(r)) for r in wanted],
        "delete": [module_args(r, r["comment"] or comment, delete=True) for r in delete],
        "add": [module_args(r, comment) for r in add],
        "enable": not active,
        "pending": bool(delete or add or not active),
        "client": client,
        "ssh_port": ssh_port,
        "diff": {"before_header": "ufw rules of sparkops.specdec on %s" % host, "before": before,
                 "after_header": "ufw rules of sparkops.specdec on %s" % host, "after": _lines(wanted, True)},
    }


def plan_remove(host, inputs):
    """Teardown: the rules carrying our comment go; ufw is disabled again when this collection enabled it
    (``marker``). When ufw stays active and nothing else would admit the Ansible connection, our SSH rule stays.

    ``inputs``: ``ufw_path``, ``status``, ``tuples``, ``marker`` (bool), ``enabled`` (``ENABLED=yes`` in
    /etc/ufw/ufw.conf: True/False, None when unknown), ``ssh_connection``, ``ansible_port``.
    With our marker, ufw is disabled (which also writes ``ENABLED=no``) when it is active OR enabled in its config OR
    that is unknown: an inactive but enabled ufw would come back at the next boot denying incoming connections without
    our SSH rule. Returns ``{delete, disable, kept, pending, diff}``.
    """
    if not str(inputs.get("ufw_path") or "").strip():
        return {"delete": [], "disable": False, "kept": [], "pending": False, "remove_marker": bool(inputs.get("marker")),
                "diff": {"before": "", "after": ""}}
    active = status_active(inputs.get("status"))
    existing = parse_tuples(inputs.get("tuples"))
    ours = {}
    for rule in existing:
        if is_ours(rule["comment"]):
            ours.setdefault(key(rule), rule)
    disable = bool(inputs.get("marker")) and (active or inputs.get("enabled") is not False)
    kept = []
    if active and not disable:
        client, conn_port = parse_ssh_connection(inputs.get("ssh_connection"))
        ssh_port = conn_port or int(inputs.get("ansible_port") or 22)
        default_allow = bool(re.search(r"Default: allow \(incoming\)", str(inputs.get("status") or "")))
        others = [r for r in existing if not is_ours(r["comment"])]
        admitted = default_allow
        for rule in others:  # first match, as ufw evaluates them
            if rule["proto"] in ("tcp", "any") and port_covers(rule["port"], ssh_port) and not rule.get("interface") \
                    and source_covers(rule["source"], client):
                admitted = rule["action"] not in _BLOCKING
                break
        if not admitted:
            kept = [r for k, r in ours.items() if r["action"] == "allow" and r["proto"] in ("tcp", "any")
                    and r["source"] == "any" and not r.get("interface") and port_covers(r["port"], ssh_port)]
    gone = [r for r in ours.values() if r not in kept]
    return {
        "delete": [module_args(r, r["comment"], delete=True) for r in gone],
        "disable": disable,
        "kept": [describe(r) for r in kept],
        "remove_marker": bool(inputs.get("marker")),
        "pending": bool(gone or disable),
        "diff": {"before_header": "ufw rules of sparkops.specdec on %s" % host, "before": _lines(list(ours.values()), active),
                 "after_header": "ufw rules of sparkops.specdec on %s" % host,
                 "after": _lines(kept, active and not disable)},
    }


def parse_probe(stdout):
    """The role's probe (one line per item, ``NAME<TAB>VALUE``): ``ufw_path``, ``status`` and ``tuples`` (text),
    ``marker`` (this collection enabled ufw), ``enabled`` (``ENABLED=yes`` in /etc/ufw/ufw.conf; None when the probe
    did not report it, e.g. an older probe: plan_remove then disables ufw when our marker is there, the safe side)."""
    out = {"ufw_path": "", "status": [], "tuples": [], "marker": False, "enabled": None}
    for line in str(stdout or "").splitlines():
        name, _sep, value = line.partition("\t")
        if name == "ufw":
            out["ufw_path"] = value.strip()
        elif name == "status":
            out["status"].append(value)
        elif name == "tuple":
            out["tuples"].append(value)
        elif name == "marker":
            out["marker"] = value.strip() == "yes"
        elif name == "enabled":
            out["enabled"] = value.strip() == "yes"
    out["status"] = "\n".join(out["status"])
    out["tuples"] = "\n".join(out["tuples"])
    return out
