#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nccl_interface_info
short_description: Detect the cabled ConnectX-7 QSFP port of a DGX Spark and derive the NCCL, UCX and Open MPI interface settings
version_added: 0.1.0
description:
  - Read-only. Finds which physical QSFP port of the DGX Spark ConnectX-7 NIC is cabled, and returns the interface
    values that the two-Spark runbook exports as E(NCCL_SOCKET_IFNAME), E(UCX_NET_DEVICES),
    E(OMPI_MCA_btl_tcp_if_include) and E(NCCL_IB_HCA).
  - The ConnectX-7 NIC has two physical QSFP ports. Each physical port is exposed as TWO logical netdevs, each with its
    own RoCE device. Port 0 (the cage next to the RJ45 jack) is C(enp1s0f0np0)/C(rocep1s0f0) and
    C(enP2p1s0f0np0)/C(roceP2p1s0f0); port 1 is C(enp1s0f1np1)/C(rocep1s0f1) and C(enP2p1s0f1np1)/C(roceP2p1s0f1).
    Only these four netdev names are considered; the management NIC (for example C(enP7s7)) and any other interface
    are ignored.
  - Full 200 GbE needs BOTH logical netdevs of the cabled port, so a physical port is selected only when both of its
    logical netdevs are Up. When one is Up and the other Down the port is reported as not a usable pair.
  - When both physical ports are usable and O(port=auto), port 1 (the runbook default) is selected and a warning is
    emitted.
  - Warnings are emitted when a selected interface links below 200000 Mb/s, when the two selected logical interfaces
    have IPv4 addresses in the same subnet (routing ambiguity that makes NCCL fail), and when the other physical port
    also has an Up interface but is not selected.
  - This module never changes anything on the host and always returns RV(ignore:changed=false).
author:
  - sparkops maintainers (@sparkops)
options:
  source:
    description:
      - Where to read the RoCE device to netdev mapping and the link state from.
      - V(ibdev2netdev) runs the C(ibdev2netdev) tool (no arguments) and parses its output. Carrier, speed and MAC
        address are still read from sysfs under O(sysfs_root) when available.
      - V(sysfs) reads everything from sysfs under O(sysfs_root).
      - V(auto) uses V(ibdev2netdev) when the tool is found, exits 0 and prints at least one line for a ConnectX-7
        netdev; otherwise it falls back to V(sysfs). RV(source) tells which one was used.
    type: str
    choices: [auto, ibdev2netdev, sysfs]
    default: auto
  ibdev2netdev_path:
    description:
      - Path of the C(ibdev2netdev) executable.
      - When not set, C(ibdev2netdev) is looked up on E(PATH) (and the usual sbin directories).
      - With O(source=auto), a path that does not exist gives a warning and the module falls back to sysfs.
    type: path
  sysfs_root:
    description:
      - Root of the sysfs tree. The module reads C(<sysfs_root>/class/infiniband/*/device/net/*) and
        C(<sysfs_root>/class/net/<netdev>/{operstate,carrier,speed,address}).
      - Only useful for testing against a copied or fabricated tree.
    type: path
    default: /sys
  port:
    description:
      - Physical QSFP port to use.
      - V(auto) selects the port whose two logical netdevs are both Up; if both ports are Up, port V(1).
      - V(0) or V(1) forces that physical port; the module fails if its two logical netdevs are not both Up.
      - V(none) selects no port (only RV(interfaces) and, with O(management_interface), RV(management) are
        returned), for the check of the management interface before any change (playbooks/two_sparks.yml).
      - An integer V(0) or V(1) in YAML is accepted and converted to the string.
    type: str
    choices: ['auto', '0', '1', 'none']
    default: auto
  management_interface:
    description:
      - The management interface NCCL, UCX and OpenMPI bootstrap over with
        C(specdec_nccl_bootstrap=management_interface) (NVIDIA's 08/2026 NCCL runbook; C(enP7s7) on a DGX Spark).
      - When set, the module reads it (existence and link state from sysfs, IPv4 addresses from C(ip -j addr show),
        and C(ip -j route get) of each of O(management_peers)) and fails with one line naming
        C(specdec_nccl_management_interface) unless it exists, is up, holds an IPv4 address and either carries
        O(management_address) or is the route to every peer.
    type: str
  management_address:
    description:
      - The address Ansible uses for this node (its C(ansible_host)), which the management interface should carry.
    type: str
  management_peers:
    description:
      - The other nodes of the deployment, as a mapping of inventory name to the address Ansible uses for it. A name
        that is not an IPv4 address is resolved on the node.
    type: dict
    default: {}
  node:
    description:
      - The node's inventory name, for the messages about O(management_interface).
    type: str
  management_address_required:
    description:
      - The interface must carry O(management_address) itself (engine vLLM names that address in C(--master-addr)
        and C(VLLM_HOST_IP)); a route to the peers is not enough.
    type: bool
    default: false
  ip_path:
    description:
      - Path of the iproute2 C(ip) executable, used as C(ip -j addr show) to collect IPv4 addresses.
      - When not set, C(ip) is looked up on E(PATH). If it is not found, addresses are returned empty, the
        same-subnet check is skipped and a warning is emitted.
    type: path
extends_documentation_fragment:
  - sparkops.specdec.attributes
  - sparkops.specdec.attributes.info_module
  - sparkops.specdec.attributes.platform
attributes:
  platform:
    details: Target must be a Linux host with sysfs (a DGX Spark, or the collection's lab node).
  action_group:
    description: Use C(group/sparkops.specdec.specdec) in C(module_defaults) to set defaults for this module.
    support: full
    membership:
      - sparkops.specdec.specdec
notes:
  - "C(ibdev2netdev) format (NVIDIA/Mellanox OFED/DOCA tool, as shown in NVIDIA's dgx-spark-playbooks): one line per RoCE
    device, made of the RoCE device name, C(port <n> ==>), the netdev name and the link state in parentheses, C(Up) or
    C(Down). Example line: rocep1s0f1 port 1 ==> enp1s0f1np1 (Up). Line order does not matter. Lines that do not match
    the format, and lines for netdevs outside the ConnectX-7 table, are ignored; if a netdev appears twice the first
    line wins. The C(-v) form is not parsed."
  - "sysfs (Linux ABI C(Documentation/ABI/testing/sysfs-class-net) and C(sysfs-class-infiniband)):
    C(/sys/class/infiniband/<roce_device>/device/net/<netdev>) maps a RoCE device to its netdev;
    C(/sys/class/net/<netdev>/operstate), C(carrier), C(speed) (Mb/s) and C(address) give the link. A netdev is Up
    when C(operstate) is C(up), or C(unknown) with C(carrier) 1. On a down link C(carrier) and C(speed) cannot be read
    or C(speed) is -1; both are then returned as V(null)."
  - "Addresses come from the JSON printed by iproute2 C(ip -j addr show) (C(ifname), C(addr_info[].family),
    C(local), C(prefixlen)); only C(inet) entries are used. If the command fails or prints something that is not
    JSON, addresses are returned empty and a warning is emitted."
  - "Errors you can meet: no usable port (neither physical port has both logical interfaces Up; the message lists
    each netdev and its state, and the fix: seat the QSFP cable in the same port on both Sparks, check
    C(ibdev2netdev), reboot both Sparks); O(port=0) or O(port=1) forced but that port is not usable; no ConnectX-7
    netdev found at all; O(source=ibdev2netdev) and C(ibdev2netdev) not found, exiting non-zero, or printing no
    ConnectX-7 line; O(source=sysfs) and O(sysfs_root) has no C(class/net) directory; O(ip_path) set to a path that is
    not an executable file."
  - The RoCE device name is used as reported by C(ibdev2netdev) or sysfs. If sysfs maps no RoCE device to a selected
    netdev (for example in a container without RDMA devices), the DGX Spark name from the table is assumed and a
    warning is emitted.
seealso:
  - name: NVIDIA DGX Spark playbooks (Connect two Sparks, NCCL)
    description: Cabling, interface naming and the NCCL environment this module derives.
    link: https://github.com/NVIDIA/dgx-spark-playbooks
"""

EXAMPLES = r"""
- name: Detect the cabled QSFP port
  sparkops.specdec.nccl_interface_info:
  register: nccl_if

- name: Show what NCCL will use
  ansible.builtin.debug:
    msg: >-
      port {{ nccl_if.selected_port }}:
      NCCL_SOCKET_IFNAME={{ nccl_if.nccl_socket_ifname }}
      NCCL_IB_HCA={{ nccl_if.nccl_ib_hca }}

- name: Force physical port 0 (fails if its two logical interfaces are not both Up)
  sparkops.specdec.nccl_interface_info:
    port: "0"
  register: nccl_if

- name: Read sysfs only (no ibdev2netdev on the host)
  sparkops.specdec.nccl_interface_info:
    source: sysfs

- name: Feed the values into the TensorRT-LLM container environment
  community.docker.docker_container:
    name: trtllm-worker
    image: "{{ trtllm_image }}"  # the TensorRT-LLM release image from NGC
    network_mode: host
    ipc_mode: host
    privileged: true
    devices:
      - /dev/infiniband:/dev/infiniband
    env:
      NCCL_SOCKET_IFNAME: "{{ nccl_if.nccl_socket_ifname }}"
      UCX_NET_DEVICES: "{{ nccl_if.ucx_net_devices }}"
      OMPI_MCA_btl_tcp_if_include: "{{ nccl_if.ompi_mca_btl_tcp_if_include }}"
      NCCL_IB_HCA: "{{ nccl_if.nccl_ib_hca }}"
    command: sleep infinity

- name: Fail early when the link is slower than 200 GbE
  ansible.builtin.assert:
    that:
      - nccl_if.interfaces
        | selectattr('netdev', 'in', nccl_if.selected_interfaces)
        | map(attribute='speed_mbps') | reject('none') | min >= 200000
    fail_msg: The QSFP link did not negotiate 200000 Mb/s.
"""

RETURN = r"""
source:
  description: Source actually used for the RoCE device to netdev mapping and the link state.
  returned: always
  type: str
  sample: ibdev2netdev
interfaces:
  description:
    - Every DGX Spark ConnectX-7 netdev found, in table order (port 0 logical 1, port 0 logical 2, port 1 logical 1,
      port 1 logical 2). Netdevs that do not exist are absent.
    - Also returned when the module fails.
  returned: always
  type: list
  elements: dict
  contains:
    netdev:
      description: Netdev name.
      type: str
      sample: enp1s0f1np1
    roce_device:
      description: RoCE (RDMA) device driving the netdev; V(null) if none was found.
      type: str
      sample: rocep1s0f1
    physical_port:
      description: Physical QSFP port, V(0) (next to the RJ45 jack) or V(1).
      type: int
      sample: 1
    logical_index:
      description: Which of the two logical netdevs of the physical port this is, V(1) (C(enp1s0...)) or V(2) (C(enP2p1s0...)).
      type: int
      sample: 1
    state:
      description: Link state, V(up) or V(down).
      type: str
      sample: up
    carrier:
      description: Value of C(/sys/class/net/<netdev>/carrier) as a boolean; V(null) when it cannot be read (link down).
      type: bool
      sample: true
    speed_mbps:
      description: Link speed in Mb/s from C(/sys/class/net/<netdev>/speed); V(null) when unknown (link down, -1).
      type: int
      sample: 200000
    mac_address:
      description: MAC address from C(/sys/class/net/<netdev>/address); V(null) when it cannot be read.
      type: str
      sample: "4c:bb:47:2c:1a:01"
    ipv4:
      description: IPv4 addresses with prefix length, from C(ip -j addr show).
      type: list
      elements: str
      sample: ["192.168.100.10/24"]
selected_port:
  description: Selected physical QSFP port.
  returned: success
  type: int
  sample: 1
selected_interfaces:
  description: The two logical netdevs of the selected port, logical 1 then logical 2.
  returned: success
  type: list
  elements: str
  sample: ["enp1s0f1np1", "enP2p1s0f1np1"]
selected_roce_devices:
  description: RoCE devices of the two selected netdevs, in the same order.
  returned: success
  type: list
  elements: str
  sample: ["rocep1s0f1", "roceP2p1s0f1"]
ring_interfaces:
  description: The four logical netdevs of both ports in a ring's order (port 0 logical 1 and 2, port 1 logical 1 and
    2). A C(specdec_layout=ring) node uses all four (NVIDIA's connect-three-sparks; module_utils/_layout.RING_NETDEVS).
  returned: success
  type: list
  elements: str
  sample: ["enp1s0f0np0", "enP2p1s0f0np0", "enp1s0f1np1", "enP2p1s0f1np1"]
ring_roce_devices:
  description: RoCE devices of RV(ring_interfaces), in the same order (a ring's E(NCCL_IB_HCA) lists all four).
  returned: success
  type: list
  elements: str
  sample: ["rocep1s0f0", "roceP2p1s0f0", "rocep1s0f1", "roceP2p1s0f1"]
nccl_socket_ifname:
  description: Value for E(NCCL_SOCKET_IFNAME), the selected netdevs joined with commas.
  returned: success
  type: str
  sample: enp1s0f1np1,enP2p1s0f1np1
ucx_net_devices:
  description: Value for E(UCX_NET_DEVICES), the selected netdevs joined with commas.
  returned: success
  type: str
  sample: enp1s0f1np1,enP2p1s0f1np1
ompi_mca_btl_tcp_if_include:
  description: Value for E(OMPI_MCA_btl_tcp_if_include), the selected netdevs joined with commas.
  returned: success
  type: str
  sample: enp1s0f1np1,enP2p1s0f1np1
nccl_ib_hca:
  description: Value for E(NCCL_IB_HCA), the selected RoCE devices joined with commas.
  returned: success
  type: str
  sample: rocep1s0f1,roceP2p1s0f1
management:
  description: What was read of O(management_interface) (also returned when the module fails on it).
  returned: when O(management_interface) is set
  type: dict
  contains:
    interface:
      description: The interface.
      type: str
      sample: enP7s7
    exists:
      description: Whether the node has it.
      type: bool
    up:
      description: Whether its link is up (C(operstate) up, or unknown with C(carrier) 1).
      type: bool
    ipv4:
      description: Its IPv4 addresses with prefix length.
      type: list
      elements: str
      sample: ["10.20.0.37/24"]
    routes:
      description: Each peer address and the device C(ip route get) names for it (V(null) when there is no route).
      type: dict
      sample: {"10.20.0.38": "enP7s7"}
    problems:
      description: The one-line problems (empty when the interface can carry the bootstrap).
      type: list
      elements: str
"""

import ipaddress
import json
import os
import socket

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkops.specdec.plugins.module_utils._layout import management_problems

from ansible_collections.sparkops.specdec.plugins.module_utils._nccl import (
    CX7_NETDEVS,
    CX7_ROCE_DEVICES,
    NcclSelectionError,
    env_values,
    merge_interfaces,
    parse_ibdev2netdev,
    parse_ip_json,
    link_is_up,
    read_sysfs,
    select_pair,
)


def _is_executable(path):
    return bool(path) and os.path.isfile(path) and os.access(path, os.X_OK)


def _find_ibdev2netdev(module):
    path = module.params['ibdev2netdev_path']
    if path:
        return path if _is_executable(path) else None
    return module.get_bin_path('ibdev2netdev', required=False)


def _read_ibdev2netdev(module, result):
    """Return parsed CX-7 lines, or None to fall back to sysfs (source=auto only)."""
    forced = module.params['source'] == 'ibdev2netdev'
    tool = _find_ibdev2netdev(module)
    if tool is None:
        explicit = module.params['ibdev2netdev_path']
        if forced:
            if explicit:
                module.fail_json(msg='ibdev2netdev_path %s is not an executable file.' % explicit, **result)
            module.fail_json(
                msg='source=ibdev2netdev but the ibdev2netdev tool was not found on PATH. Install the NVIDIA DOCA/OFED '
                    'user tools that provide it, set ibdev2netdev_path, or use source=sysfs (or auto).',
                **result
            )
        if explicit:
            module.warn('ibdev2netdev_path %s is not an executable file; reading sysfs instead.' % explicit)
        return None

    rc, out, err = module.run_command([tool])
    if rc != 0:
        msg = '%s exited with rc=%d: %s' % (tool, rc, (err or out or '').strip() or 'no output')
        if forced:
            module.fail_json(msg=msg + '. Use source=sysfs (or auto) to read sysfs instead.', rc=rc, stdout=out, stderr=err, **result)
        module.warn(msg + '; reading sysfs instead.')
        return None

    parsed = parse_ibdev2netdev(out)
    if not parsed and forced:
        module.fail_json(
            msg='ibdev2netdev printed no line for a DGX Spark ConnectX-7 netdev (%s). Check that the RDMA drivers are '
                'loaded (ibdev2netdev should list rocep1s0f0 ... roceP2p1s0f1), or use source=sysfs.' % ', '.join(CX7_NETDEVS),
            stdout=out, stderr=err, **result
        )
    return parsed or None


def _ip_path(module):
    return module.params['ip_path'] or module.get_bin_path('ip', required=False)


def _read_text(path):
    try:
        with open(path) as handle:
            return handle.read().strip()
    except (IOError, OSError):
        return None


def _peer_address(name):
    """An IPv4 address of a peer: the name itself, or what the node resolves it to (None if it cannot)."""
    try:
        return str(ipaddress.IPv4Address(str(name)))
    except ValueError:
        try:
            return socket.gethostbyname(str(name))
        except (OSError, UnicodeError):
            return None


def _route_dev(module, ip_path, address):
    """The device of `ip -j route get ADDRESS` (None: no route, or unreadable)."""
    if not address:
        return None
    rc, out, dummy = module.run_command([ip_path, '-j', 'route', 'get', address])
    if rc != 0:
        return None
    try:
        data = json.loads(out)
    except ValueError:
        return None
    first = data[0] if isinstance(data, list) and data and isinstance(data[0], dict) else {}
    return first.get('dev')


def _management(module, addresses):
    """What the node has of management_interface, and its problems (module_utils/_layout.management_problems)."""
    p = module.params
    name = p['management_interface']
    net = os.path.join(p['sysfs_root'], 'class', 'net')
    ip_path = _ip_path(module)
    exists = name in addresses or os.path.isdir(os.path.join(net, name))
    found = {'interface': name, 'exists': exists, 'ipv4': list(addresses.get(name) or []), 'routes': {},
             'interfaces': sorted(set(addresses) | set(os.listdir(net) if os.path.isdir(net) else []))}
    found['up'] = exists and link_is_up(_read_text(os.path.join(net, name, 'operstate')),
                                        _read_text(os.path.join(net, name, 'carrier')) == '1')
    if not ip_path:
        found['error'] = 'the iproute2 ip command was not found'
    elif exists:
        for peer, given in sorted((p['management_peers'] or {}).items()):
            address = _peer_address(given)
            found['routes'][str(given)] = _route_dev(module, ip_path, address)
    peers = sorted((str(k), str(v)) for k, v in (p['management_peers'] or {}).items())
    found['problems'] = management_problems(name, p['node'] or 'this node', found,
                                            p['management_address'] or '', peers, p['management_address_required'])
    found.pop('interfaces')
    return found


def _read_addresses(module, result):
    ip_path = module.params['ip_path']
    if ip_path:
        if not _is_executable(ip_path):
            module.fail_json(msg='ip_path %s is not an executable file.' % ip_path, **result)
    else:
        ip_path = module.get_bin_path('ip', required=False)
        if ip_path is None:
            module.warn('The iproute2 `ip` command was not found; IPv4 addresses are not collected and the same-subnet check is skipped.')
            return {}
    rc, out, err = module.run_command([ip_path, '-j', 'addr', 'show'])
    if rc != 0:
        module.warn('`%s -j addr show` exited with rc=%d (%s); IPv4 addresses are not collected and the same-subnet '
                    'check is skipped.' % (ip_path, rc, (err or '').strip() or 'no output'))
        return {}
    try:
        return parse_ip_json(out)
    except ValueError as exc:
        module.warn('%s; IPv4 addresses are not collected and the same-subnet check is skipped.' % exc)
        return {}


def run_module():
    module = AnsibleModule(
        argument_spec=dict(
            source=dict(type='str', default='auto', choices=['auto', 'ibdev2netdev', 'sysfs']),
            ibdev2netdev_path=dict(type='path'),
            sysfs_root=dict(type='path', default='/sys'),
            port=dict(type='str', default='auto', choices=['auto', '0', '1', 'none']),
            ip_path=dict(type='path'),
            management_interface=dict(type='str'),
            management_address=dict(type='str'),
            management_peers=dict(type='dict', default={}),
            management_address_required=dict(type='bool', default=False),
            node=dict(type='str'),
        ),
        supports_check_mode=True,
    )
    result = dict(changed=False, source=module.params['source'], interfaces=[])

    sysfs_root = module.params['sysfs_root']
    have_sysfs = os.path.isdir(os.path.join(sysfs_root, 'class', 'net'))

    ibdev_entries = None
    if module.params['source'] in ('auto', 'ibdev2netdev'):
        ibdev_entries = _read_ibdev2netdev(module, result)

    if ibdev_entries is None:
        result['source'] = 'sysfs'
        if not have_sysfs:
            module.fail_json(msg='sysfs_root %s has no class/net directory; cannot read network interfaces.' % sysfs_root, **result)
    else:
        result['source'] = 'ibdev2netdev'
        if not have_sysfs:
            module.warn('sysfs_root %s has no class/net directory; carrier, speed and MAC address are not available.' % sysfs_root)

    sysfs_entries = read_sysfs(sysfs_root) if have_sysfs else []
    addresses = _read_addresses(module, result)
    result['interfaces'] = merge_interfaces(sysfs_entries, ibdev_entries, addresses)

    if module.params['management_interface']:
        result['management'] = _management(module, addresses)
        if result['management']['problems']:
            module.fail_json(msg=' '.join(result['management']['problems']), **result)
    if module.params['port'] == 'none':
        module.exit_json(**result)

    try:
        selection = select_pair(result['interfaces'], module.params['port'])
    except NcclSelectionError as exc:
        module.fail_json(msg='%s (source: %s)' % (exc, result['source']), **result)

    for warning in selection['warnings']:
        module.warn(warning)

    result.update(
        selected_port=selection['selected_port'],
        selected_interfaces=selection['selected_interfaces'],
        selected_roce_devices=selection['selected_roce_devices'],
        # A ring (specdec_layout) uses both ports: the four netdevs and their RoCE devices, in the ring's order.
        ring_interfaces=list(CX7_NETDEVS),
        ring_roce_devices=list(CX7_ROCE_DEVICES),
    )
    result.update(env_values(selection['selected_interfaces'], selection['selected_roce_devices']))
    module.exit_json(**result)


def main():
    run_module()


if __name__ == '__main__':
    main()
