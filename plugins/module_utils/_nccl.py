# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
#
# PRIVATE to this collection: this module_util is used only by
# sparkops.specdec.nccl_interface_info. It is not a public API; names and
# return shapes may change in any release without notice.
#
# Pure functions (no I/O except read_sysfs, which only reads files under a
# caller-given root) that turn what a DGX Spark says about its ConnectX-7
# QSFP ports into the values the NCCL/UCX/Open MPI runbook exports.

from __future__ import annotations

import ipaddress
import json
import os
import re

# The DGX Spark ConnectX-7 NIC: two physical QSFP ports, each exposed as TWO
# logical netdevs, each with its own RoCE device (NVIDIA dgx-spark-playbooks).
# (physical_port, logical_index, netdev, roce_device)
CX7_TABLE = (
    (0, 1, 'enp1s0f0np0', 'rocep1s0f0'),
    (0, 2, 'enP2p1s0f0np0', 'roceP2p1s0f0'),
    (1, 1, 'enp1s0f1np1', 'rocep1s0f1'),
    (1, 2, 'enP2p1s0f1np1', 'roceP2p1s0f1'),
)

CX7_NETDEVS = tuple(row[2] for row in CX7_TABLE)
CX7_ROCE_DEVICES = tuple(row[3] for row in CX7_TABLE)
PHYSICAL_PORTS = (0, 1)

# Runbook default when both physical ports are cabled and Up.
DEFAULT_PORT_WHEN_BOTH_UP = 1

# A DGX Spark QSFP link negotiates 200 GbE; switches may land at 100 GbE.
EXPECTED_SPEED_MBPS = 200000

FIX_HINT = (
    'Fix: check that the QSFP cable is fully seated in the SAME physical port on both Sparks '
    '(Port0 is the cage next to the RJ45 jack), run `ibdev2netdev` on both Sparks and confirm that '
    'both logical interfaces of the cabled port show (Up), and reboot both Sparks if the link '
    'stays Down after reseating the cable.'
)

# `<roce_device> port <n> ==> <netdev> (<State>)`, as printed by ibdev2netdev
# without -v, e.g. `rocep1s0f1 port 1 ==> enp1s0f1np1 (Up)`.
_IBDEV2NETDEV_LINE = re.compile(
    r'^\s*(?P<roce>\S+)\s+port\s+(?P<ibport>\d+)\s+==>\s+(?P<netdev>\S+)\s+\((?P<state>[A-Za-z]+)\)\s*$'
)

# Values of /sys/class/net/<if>/speed that mean "unknown": -1 (link down) and
# its unsigned 32-bit form that some drivers print.
_UNKNOWN_SPEEDS = (-1, 0, 4294967295)


class NcclSelectionError(ValueError):
    """No usable ConnectX-7 port could be selected; the message says why and how to fix it."""


def table_entry(netdev):
    """Return (physical_port, logical_index, netdev, roce_device) for a CX-7 netdev, or None."""
    for row in CX7_TABLE:
        if row[2] == netdev:
            return row
    return None


def port_rows(port):
    """Table rows of one physical port, logical #1 first."""
    return [row for row in CX7_TABLE if row[0] == port]


def _normalize_state(value):
    return 'up' if value is not None and value.strip().lower() == 'up' else 'down'


def parse_ibdev2netdev(text):
    """Parse `ibdev2netdev` output (non-verbose form).

    Returns a list of dicts ``{'roce_device', 'netdev', 'state'}`` (state is
    ``up`` or ``down``) for lines whose netdev is one of the DGX Spark CX-7
    names, in table order. Lines that do not match the format, and lines for
    any other netdev (management NIC, other HCAs), are ignored. The RoCE device
    name is kept as printed. The first line for a netdev wins.
    """
    seen = {}
    for line in (text or '').splitlines():
        match = _IBDEV2NETDEV_LINE.match(line)
        if not match:
            continue
        netdev = match.group('netdev')
        if netdev not in CX7_NETDEVS or netdev in seen:
            continue
        seen[netdev] = {
            'roce_device': match.group('roce'),
            'netdev': netdev,
            'state': _normalize_state(match.group('state')),
        }
    return [seen[name] for name in CX7_NETDEVS if name in seen]


def _read_text(path):
    try:
        with open(path, 'r') as handle:
            return handle.read().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _read_int(path):
    value = _read_text(path)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def link_is_up(operstate, carrier):
    """Link rule shared with the lab stand-in: operstate ``up``, or ``unknown`` with carrier 1."""
    operstate = (operstate or '').strip().lower()
    if operstate == 'up':
        return True
    return operstate == 'unknown' and carrier is True


def read_sysfs(root):
    """Read the CX-7 netdevs from a sysfs tree rooted at ``root`` (normally ``/sys``).

    RoCE device -> netdev comes from ``<root>/class/infiniband/*/device/net/*``;
    link data from ``<root>/class/net/<if>/{operstate,carrier,speed,address}``.
    Reading ``carrier`` or ``speed`` of a down interface fails (EINVAL) or gives
    -1 on real hardware; such values become None.

    Returns a list of dicts ``{'netdev', 'roce_device', 'state', 'operstate',
    'carrier', 'speed_mbps', 'mac_address'}`` for the CX-7 netdevs present,
    in table order. ``roce_device`` is None when no RoCE device maps to it.
    """
    roce_of = {}
    ib_dir = os.path.join(root, 'class', 'infiniband')
    try:
        ib_devices = sorted(os.listdir(ib_dir))
    except OSError:
        ib_devices = []
    for ib_device in ib_devices:
        try:
            netdevs = sorted(os.listdir(os.path.join(ib_dir, ib_device, 'device', 'net')))
        except OSError:
            continue
        for netdev in netdevs:
            if netdev in CX7_NETDEVS and netdev not in roce_of:
                roce_of[netdev] = ib_device

    result = []
    net_dir = os.path.join(root, 'class', 'net')
    for netdev in CX7_NETDEVS:
        if_dir = os.path.join(net_dir, netdev)
        if not os.path.isdir(if_dir):
            continue
        operstate = _read_text(os.path.join(if_dir, 'operstate'))
        carrier_raw = _read_int(os.path.join(if_dir, 'carrier'))
        carrier = None if carrier_raw is None else carrier_raw == 1
        speed = _read_int(os.path.join(if_dir, 'speed'))
        if speed is not None and speed in _UNKNOWN_SPEEDS:
            speed = None
        result.append({
            'netdev': netdev,
            'roce_device': roce_of.get(netdev),
            'state': 'up' if link_is_up(operstate, carrier) else 'down',
            'operstate': operstate,
            'carrier': carrier,
            'speed_mbps': speed,
            'mac_address': _read_text(os.path.join(if_dir, 'address')) or None,
        })
    return result


def parse_ip_json(text):
    """Parse ``ip -j addr show`` output into ``{ifname: ['a.b.c.d/nn', ...]}`` (IPv4 only).

    Raises ValueError when the text is not the JSON list iproute2 prints.
    """
    try:
        data = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise ValueError('`ip -j addr show` did not print JSON: %s' % exc)
    if not isinstance(data, list):
        raise ValueError('`ip -j addr show` printed JSON that is not a list of interfaces')
    result = {}
    for link in data:
        if not isinstance(link, dict) or not isinstance(link.get('ifname'), str):
            continue
        addrs = result.setdefault(link['ifname'], [])
        for info in link.get('addr_info') or []:
            if not isinstance(info, dict) or info.get('family') != 'inet':
                continue
            local, prefix = info.get('local'), info.get('prefixlen')
            if not isinstance(local, str) or isinstance(prefix, bool) or not isinstance(prefix, int):
                continue
            try:
                value = str(ipaddress.IPv4Interface('%s/%d' % (local, prefix)))
            except ValueError:
                continue
            if value not in addrs:
                addrs.append(value)
    return result


def merge_interfaces(sysfs_entries=None, ibdev_entries=None, addresses=None):
    """Build the ``interfaces`` return value.

    With ``ibdev_entries`` (from parse_ibdev2netdev) the set of interfaces, their
    RoCE device and their state come from ibdev2netdev and sysfs only adds
    carrier, speed and MAC address. Without it, everything comes from sysfs.
    ``addresses`` is the parse_ip_json() result. Output is in table order.
    """
    sysfs_by_name = dict((entry['netdev'], entry) for entry in (sysfs_entries or []))
    addresses = addresses or {}
    if ibdev_entries is not None:
        primary = dict((entry['netdev'], entry) for entry in ibdev_entries)
    else:
        primary = sysfs_by_name
    result = []
    for port, index, netdev, dummy in CX7_TABLE:
        if netdev not in primary:
            continue
        entry = primary[netdev]
        extra = sysfs_by_name.get(netdev, {})
        result.append({
            'netdev': netdev,
            'roce_device': entry.get('roce_device') or extra.get('roce_device'),
            'physical_port': port,
            'logical_index': index,
            'state': entry['state'],
            'carrier': extra.get('carrier'),
            'speed_mbps': extra.get('speed_mbps'),
            'mac_address': extra.get('mac_address'),
            'ipv4': list(addresses.get(netdev, [])),
        })
    return result


def _port_states(interfaces, port):
    """Return [(row, interface-or-None)] for both logical interfaces of a physical port."""
    by_name = dict((iface['netdev'], iface) for iface in interfaces)
    return [(row, by_name.get(row[2])) for row in port_rows(port)]


def port_status(interfaces, port):
    """``usable`` (both logical Up), ``partial`` (exactly one Up), ``down`` (none Up)."""
    ups = sum(1 for dummy, iface in _port_states(interfaces, port) if iface and iface['state'] == 'up')
    if ups == 2:
        return 'usable'
    return 'partial' if ups == 1 else 'down'


def describe_port(interfaces, port):
    """Human summary of one physical port, e.g. ``port 1: enp1s0f1np1 (rocep1s0f1) Up, enP2p1s0f1np1 (roceP2p1s0f1) Down``."""
    parts = []
    for row, iface in _port_states(interfaces, port):
        if iface is None:
            parts.append('%s not found' % row[2])
        else:
            parts.append('%s (%s) %s' % (iface['netdev'], iface['roce_device'] or 'no RoCE device', iface['state'].capitalize()))
    text = 'port %d: %s' % (port, ', '.join(parts))
    if port_status(interfaces, port) == 'partial':
        text += ' [only one of its two logical interfaces is Up: not a usable pair]'
    return text


def describe_interfaces(interfaces):
    return '; '.join(describe_port(interfaces, port) for port in PHYSICAL_PORTS)


def _subnet_overlaps(first, second):
    overlaps = []
    for addr_a in first['ipv4']:
        for addr_b in second['ipv4']:
            try:
                net_a = ipaddress.IPv4Interface(addr_a).network
                net_b = ipaddress.IPv4Interface(addr_b).network
            except ValueError:
                continue
            if net_a.overlaps(net_b):
                overlaps.append((addr_a, addr_b))
    return overlaps


def select_pair(interfaces, port='auto'):
    """Select the physical port whose two logical netdevs are both Up.

    ``interfaces`` is the merge_interfaces() result; ``port`` is ``auto``, ``0``
    or ``1`` (str or int). When both ports are usable and port is ``auto`` the
    runbook default, port 1, is chosen.

    Returns ``{'selected_port', 'selected_interfaces', 'selected_roce_devices',
    'warnings'}``; raises NcclSelectionError when nothing usable is found or the
    forced port is not usable.
    """
    port = 'auto' if port is None else str(port).strip().lower()
    if port not in ('auto', '0', '1'):
        raise NcclSelectionError('port must be one of auto, 0, 1; got %r' % port)
    seen = describe_interfaces(interfaces)
    status = dict((p, port_status(interfaces, p)) for p in PHYSICAL_PORTS)
    usable = [p for p in PHYSICAL_PORTS if status[p] == 'usable']
    warnings = []

    if not interfaces:
        raise NcclSelectionError(
            'No DGX Spark ConnectX-7 interface (%s) was found, so no QSFP port can be used for NCCL. These netdevs '
            'exist on a DGX Spark whether or not a cable is plugged in: this host is not a DGX Spark, or its '
            'interfaces were renamed or their driver is not loaded (check `ip -br link` and `ibdev2netdev`).'
            % ', '.join(CX7_NETDEVS)
        )

    if port == 'auto':
        if not usable:
            raise NcclSelectionError(
                'No usable ConnectX-7 QSFP port: a port is usable only when BOTH of its logical interfaces are Up. '
                'Seen: %s. %s' % (seen, FIX_HINT)
            )
        if len(usable) == 2:
            selected = DEFAULT_PORT_WHEN_BOTH_UP
            warnings.append(
                'Both physical QSFP ports are Up; selected port %d (the runbook default). '
                'Set port=0 or port=1 to choose explicitly.' % selected
            )
        else:
            selected = usable[0]
    else:
        selected = int(port)
        if status[selected] != 'usable':
            other = [p for p in usable if p != selected]
            hint = (' Port %d has both logical interfaces Up; use port=%d or port=auto.' % (other[0], other[0])) if other else ''
            raise NcclSelectionError(
                'port=%d was requested but physical port %d is not usable (both logical interfaces must be Up). '
                'Seen: %s.%s %s' % (selected, selected, seen, hint, FIX_HINT)
            )

    for other in PHYSICAL_PORTS:
        if other == selected:
            continue
        if status[other] == 'usable' and not (port == 'auto' and len(usable) == 2):
            warnings.append(
                'Physical port %d is also Up (%s) but is not selected; only port %d is used.'
                % (other, describe_port(interfaces, other), selected)
            )
        elif status[other] == 'partial':
            warnings.append(
                'Physical port %d has an Up interface but is not selected: %s.' % (other, describe_port(interfaces, other))
            )

    pair = [iface for dummy, iface in _port_states(interfaces, selected)]
    roce_devices = []
    for row, iface in zip(port_rows(selected), pair):
        if iface['roce_device']:
            roce_devices.append(iface['roce_device'])
        else:
            roce_devices.append(row[3])
            warnings.append(
                'No RoCE device maps to %s (class/infiniband/*/device/net); assuming the DGX Spark name %s for NCCL_IB_HCA.'
                % (iface['netdev'], row[3])
            )

    for iface in pair:
        speed = iface.get('speed_mbps')
        if speed is not None and speed < EXPECTED_SPEED_MBPS:
            warnings.append(
                '%s links at %d Mb/s, below the %d Mb/s a DGX Spark QSFP link should negotiate. '
                'A switch port may have negotiated 100000 Mb/s (force 200G on the switch port), '
                'or the cable may be poorly seated or not 200G-rated.' % (iface['netdev'], speed, EXPECTED_SPEED_MBPS)
            )

    overlaps = _subnet_overlaps(pair[0], pair[1])
    if overlaps:
        warnings.append(
            'Both logical interfaces of port %d have addresses in the same IPv4 subnet (%s). Two interfaces in one '
            'subnet make routing ambiguous and can make NCCL fail; give each logical interface its own subnet.'
            % (selected, ', '.join('%s on %s and %s on %s' % (a, pair[0]['netdev'], b, pair[1]['netdev']) for a, b in overlaps))
        )

    return {
        'selected_port': selected,
        'selected_interfaces': [iface['netdev'] for iface in pair],
        'selected_roce_devices': roce_devices,
        'warnings': warnings,
    }


def env_values(netdevs, roce_devices):
    """The environment values the runbook exports, from the selected pair."""
    ifnames = ','.join(netdevs)
    return {
        'nccl_socket_ifname': ifnames,
        'ucx_net_devices': ifnames,
        'ompi_mca_btl_tcp_if_include': ifnames,
        'nccl_ib_hca': ','.join(roce_devices),
    }


def ssh_targets(node, hosts, fabric):
    """The peer addresses the SSH rows try from ``node``: every IPv4 address (no prefix) on the selected (Up)
    interfaces of every other host's nccl_interface_info result, as [{'host', 'address'}] in host order."""
    out = []
    for host in hosts or []:
        result = (fabric or {}).get(host) or {}
        if host == node or not isinstance(result, dict) or result.get("failed") or result.get("skipped"):
            continue
        selected = result.get("selected_interfaces") or []
        for iface in result.get("interfaces") or []:
            if iface.get("netdev") not in selected:
                continue
            for cidr in iface.get("ipv4") or []:
                try:
                    address = str(ipaddress.ip_interface(cidr).ip)
                except ValueError:
                    continue
                if {"host": host, "address": address} not in out:
                    out.append({"host": host, "address": address})
    return out
