# -*- coding: utf-8 -*-
# Unit tests for the PRIVATE module_util sparkops.specdec.plugins.module_utils._nccl
# and for the lab stand-in tests/lab/images/node/ibdev2netdev.

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from ansible_collections.sparkops.specdec.plugins.module_utils import _nccl

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, '..', 'fixtures', 'nccl')
COLLECTION_ROOT = os.path.abspath(os.path.join(HERE, '..', '..', '..', '..'))
STAND_IN = os.path.join(COLLECTION_ROOT, 'tests', 'lab', 'images', 'node', 'ibdev2netdev')

PORT0 = ['enp1s0f0np0', 'enP2p1s0f0np0']
PORT1 = ['enp1s0f1np1', 'enP2p1s0f1np1']
ROCE0 = ['rocep1s0f0', 'roceP2p1s0f0']
ROCE1 = ['rocep1s0f1', 'roceP2p1s0f1']


def fixture_text(*parts):
    with open(os.path.join(FIXTURES, *parts)) as handle:
        return handle.read()


def iface(netdev, state='up', speed=200000, ipv4=None, roce='table', carrier='auto'):
    """An interfaces[] entry as merge_interfaces() builds it."""
    row = _nccl.table_entry(netdev)
    return {
        'netdev': netdev,
        'roce_device': row[3] if roce == 'table' else roce,
        'physical_port': row[0],
        'logical_index': row[1],
        'state': state,
        'carrier': (state == 'up') if carrier == 'auto' else carrier,
        'speed_mbps': speed if state == 'up' else None,
        'mac_address': None,
        'ipv4': list(ipv4 or []),
    }


def make_sysfs(root, links, roce=True):
    """Fabricate a sysfs tree. links: {netdev: (operstate, carrier or None, speed or None)}."""
    for netdev, (operstate, carrier, speed) in links.items():
        if_dir = os.path.join(str(root), 'class', 'net', netdev)
        os.makedirs(if_dir)
        values = {'operstate': operstate, 'carrier': carrier, 'speed': speed, 'address': '02:00:00:00:00:01'}
        for name, value in values.items():
            if value is not None:
                with open(os.path.join(if_dir, name), 'w') as handle:
                    handle.write('%s\n' % value)
        row = _nccl.table_entry(netdev)
        if roce and row:
            os.makedirs(os.path.join(str(root), 'class', 'infiniband', row[3], 'device', 'net', netdev))
    return str(root)


# --------------------------------------------------------------------------- table


def test_table_is_the_dgx_spark_cx7_table():
    assert _nccl.CX7_TABLE == (
        (0, 1, 'enp1s0f0np0', 'rocep1s0f0'),
        (0, 2, 'enP2p1s0f0np0', 'roceP2p1s0f0'),
        (1, 1, 'enp1s0f1np1', 'rocep1s0f1'),
        (1, 2, 'enP2p1s0f1np1', 'roceP2p1s0f1'),
    )


# --------------------------------------------------------------------------- parse_ibdev2netdev


@pytest.mark.parametrize('fixture, expected', [
    ('port0_cabled.txt', {'enp1s0f0np0': 'up', 'enP2p1s0f0np0': 'up', 'enp1s0f1np1': 'down', 'enP2p1s0f1np1': 'down'}),
    ('port1_cabled.txt', {'enp1s0f0np0': 'down', 'enP2p1s0f0np0': 'down', 'enp1s0f1np1': 'up', 'enP2p1s0f1np1': 'up'}),
    ('both_cabled.txt', {'enp1s0f0np0': 'up', 'enP2p1s0f0np0': 'up', 'enp1s0f1np1': 'up', 'enP2p1s0f1np1': 'up'}),
    ('none_cabled.txt', {'enp1s0f0np0': 'down', 'enP2p1s0f0np0': 'down', 'enp1s0f1np1': 'down', 'enP2p1s0f1np1': 'down'}),
    ('port1_half.txt', {'enp1s0f0np0': 'down', 'enP2p1s0f0np0': 'down', 'enp1s0f1np1': 'up', 'enP2p1s0f1np1': 'down'}),
    # management NIC, unknown CX-7-like names, -v lines, missing state, wrong arrow: all ignored;
    # the later duplicate rocep1s0f1 (Down) line does not override the first one.
    ('garbage.txt', {'enp1s0f1np1': 'up', 'enP2p1s0f1np1': 'up'}),
])
def test_parse_ibdev2netdev_fixtures(fixture, expected):
    parsed = _nccl.parse_ibdev2netdev(fixture_text('ibdev2netdev', fixture))
    assert dict((e['netdev'], e['state']) for e in parsed) == expected
    # names exactly from the table, returned in table order whatever the tool's line order
    assert [e['netdev'] for e in parsed] == [n for n in _nccl.CX7_NETDEVS if n in expected]
    for entry in parsed:
        assert entry['roce_device'] == _nccl.table_entry(entry['netdev'])[3]


@pytest.mark.parametrize('text', [
    '',
    None,
    'mlx5_0 port 1 ==> enP7s7 (Up)\nmlx5_1 port 1 ==> eth0 (Up)\n',
    'rocep1s0f1 port 1 ==> ENP1S0F1NP1 (Up)\n',          # names are case-sensitive
    'rocep1s0f1 port 1 ==> enp1s0f1np1\n',                # no state
    'rocep1s0f1 port 1 ==> enp1s0f1np1 (Up) trailing\n',  # not the format
    'rocep1s0f1 port x ==> enp1s0f1np1 (Up)\n',
])
def test_parse_ibdev2netdev_ignores_non_cx7_and_garbage(text):
    assert _nccl.parse_ibdev2netdev(text) == []


def test_parse_ibdev2netdev_keeps_reported_roce_name_and_normalizes_state():
    parsed = _nccl.parse_ibdev2netdev('mlx5_3 port 1 ==> enP2p1s0f1np1 (UP)\n  mlx5_2 port 1 ==> enp1s0f1np1 (Up)\r\n')
    assert parsed == [
        {'roce_device': 'mlx5_2', 'netdev': 'enp1s0f1np1', 'state': 'up'},
        {'roce_device': 'mlx5_3', 'netdev': 'enP2p1s0f1np1', 'state': 'up'},
    ]


# --------------------------------------------------------------------------- read_sysfs


def test_read_sysfs_port1_cabled_fixture():
    entries = _nccl.read_sysfs(os.path.join(FIXTURES, 'sysfs', 'port1_cabled'))
    by_name = dict((e['netdev'], e) for e in entries)
    assert [e['netdev'] for e in entries] == list(_nccl.CX7_NETDEVS)  # enP7s7, wlP9s9, lo ignored
    assert by_name['enp1s0f1np1'] == {
        'netdev': 'enp1s0f1np1', 'roce_device': 'rocep1s0f1', 'state': 'up', 'operstate': 'up',
        'carrier': True, 'speed_mbps': 200000, 'mac_address': '4c:bb:47:2c:1a:01',
    }
    assert by_name['enp1s0f0np0']['state'] == 'down'
    assert by_name['enp1s0f0np0']['carrier'] is False
    assert by_name['enp1s0f0np0']['speed_mbps'] is None  # sysfs says -1 when the link is down
    assert by_name['enP2p1s0f1np1']['roce_device'] == 'roceP2p1s0f1'


def test_read_sysfs_admin_down_interface_has_unknown_carrier_and_speed():
    entries = _nccl.read_sysfs(os.path.join(FIXTURES, 'sysfs', 'port0_half'))
    down = [e for e in entries if e['netdev'] == 'enP2p1s0f0np0'][0]
    assert down['state'] == 'down' and down['carrier'] is None and down['speed_mbps'] is None


def test_read_sysfs_without_rdma_devices(tmp_path):
    root = make_sysfs(tmp_path, {'enp1s0f1np1': ('up', 1, 10000), 'enP2p1s0f1np1': ('up', 1, 10000)}, roce=False)
    entries = _nccl.read_sysfs(root)
    assert [(e['netdev'], e['roce_device'], e['state']) for e in entries] == [
        ('enp1s0f1np1', None, 'up'), ('enP2p1s0f1np1', None, 'up')]


@pytest.mark.parametrize('operstate, carrier, speed, state, speed_mbps', [
    ('up', 1, 200000, 'up', 200000),
    ('unknown', 1, None, 'up', None),     # e.g. a dummy interface set up
    ('unknown', 0, None, 'down', None),
    ('down', 0, -1, 'down', None),
    ('down', None, None, 'down', None),   # admin down: carrier/speed unreadable
    ('lowerlayerdown', 1, 100000, 'down', 100000),
    ('up', 1, 4294967295, 'up', None),
    ('up', 1, 'garbage', 'up', None),
])
def test_read_sysfs_link_rule(tmp_path, operstate, carrier, speed, state, speed_mbps):
    root = make_sysfs(tmp_path, {'enp1s0f0np0': (operstate, carrier, speed)})
    entry = _nccl.read_sysfs(root)[0]
    assert (entry['state'], entry['speed_mbps']) == (state, speed_mbps)


def test_read_sysfs_missing_root(tmp_path):
    assert _nccl.read_sysfs(str(tmp_path / 'nope')) == []


# --------------------------------------------------------------------------- parse_ip_json


def test_parse_ip_json_fixture():
    addrs = _nccl.parse_ip_json(fixture_text('ip', 'port1_addressed.json'))
    assert addrs['enp1s0f1np1'] == ['192.168.100.10/24']
    assert addrs['enP2p1s0f1np1'] == ['192.168.101.10/24']
    assert addrs['enp1s0f0np0'] == []
    assert addrs['lo'] == ['127.0.0.1/8']  # IPv6 entries are dropped


@pytest.mark.parametrize('text', ['this is not json', '', '{"ifname": "enp1s0f1np1"}', None])
def test_parse_ip_json_rejects_non_json(text):
    with pytest.raises(ValueError):
        _nccl.parse_ip_json(text)


def test_parse_ip_json_skips_malformed_entries():
    text = json.dumps([
        'junk',
        {'ifname': 'enp1s0f1np1', 'addr_info': [
            {'family': 'inet', 'local': '10.0.0.1', 'prefixlen': 24},
            {'family': 'inet', 'local': '10.0.0.1', 'prefixlen': 24},      # duplicate
            {'family': 'inet', 'local': 'not-an-ip', 'prefixlen': 24},
            {'family': 'inet', 'local': '10.0.0.2', 'prefixlen': '24'},
            {'family': 'inet', 'local': '10.0.0.3', 'prefixlen': True},
            {'family': 'inet6', 'local': 'fe80::1', 'prefixlen': 64},
            'junk',
        ]},
        {'ifname': 'enP2p1s0f1np1'},
    ])
    assert _nccl.parse_ip_json(text) == {'enp1s0f1np1': ['10.0.0.1/24'], 'enP2p1s0f1np1': []}


# --------------------------------------------------------------------------- merge_interfaces


def test_merge_ibdev2netdev_state_with_sysfs_details():
    ibdev = _nccl.parse_ibdev2netdev(fixture_text('ibdev2netdev', 'port1_cabled.txt'))
    sysfs = _nccl.read_sysfs(os.path.join(FIXTURES, 'sysfs', 'port1_cabled'))
    addrs = _nccl.parse_ip_json(fixture_text('ip', 'port1_addressed.json'))
    merged = _nccl.merge_interfaces(sysfs, ibdev, addrs)
    assert [(i['netdev'], i['physical_port'], i['logical_index'], i['state']) for i in merged] == [
        ('enp1s0f0np0', 0, 1, 'down'), ('enP2p1s0f0np0', 0, 2, 'down'),
        ('enp1s0f1np1', 1, 1, 'up'), ('enP2p1s0f1np1', 1, 2, 'up')]
    assert merged[2] == {
        'netdev': 'enp1s0f1np1', 'roce_device': 'rocep1s0f1', 'physical_port': 1, 'logical_index': 1,
        'state': 'up', 'carrier': True, 'speed_mbps': 200000, 'mac_address': '4c:bb:47:2c:1a:01',
        'ipv4': ['192.168.100.10/24'],
    }


def test_merge_ibdev2netdev_state_wins_and_missing_sysfs_gives_nulls():
    ibdev = [{'roce_device': 'rocep1s0f1', 'netdev': 'enp1s0f1np1', 'state': 'down'}]
    sysfs = [{'netdev': 'enp1s0f1np1', 'roce_device': 'rocep1s0f1', 'state': 'up', 'operstate': 'up',
              'carrier': True, 'speed_mbps': 200000, 'mac_address': None},
             {'netdev': 'enP2p1s0f1np1', 'roce_device': 'roceP2p1s0f1', 'state': 'up', 'operstate': 'up',
              'carrier': True, 'speed_mbps': 200000, 'mac_address': None}]
    merged = _nccl.merge_interfaces(sysfs, ibdev, {})
    assert [(i['netdev'], i['state']) for i in merged] == [('enp1s0f1np1', 'down')]
    only_tool = _nccl.merge_interfaces([], ibdev, None)[0]
    assert (only_tool['carrier'], only_tool['speed_mbps'], only_tool['ipv4']) == (None, None, [])


# --------------------------------------------------------------------------- select_pair


def _interfaces_from(fixture, speed=200000):
    return [iface(e['netdev'], e['state'], speed=speed)
            for e in _nccl.parse_ibdev2netdev(fixture_text('ibdev2netdev', fixture))]


@pytest.mark.parametrize('fixture, port, selected, netdevs, roce, warning_parts', [
    ('port0_cabled.txt', 'auto', 0, PORT0, ROCE0, []),
    ('port1_cabled.txt', 'auto', 1, PORT1, ROCE1, []),
    ('garbage.txt', 'auto', 1, PORT1, ROCE1, []),
    ('both_cabled.txt', 'auto', 1, PORT1, ROCE1, [['Both physical QSFP ports are Up', 'port 1']]),
    ('both_cabled.txt', '0', 0, PORT0, ROCE0, [['Physical port 1 is also Up', 'enp1s0f1np1']]),
    ('both_cabled.txt', 1, 1, PORT1, ROCE1, [['Physical port 0 is also Up', 'enp1s0f0np0']]),
    ('port1_cabled.txt', '1', 1, PORT1, ROCE1, []),
    ('port0_cabled.txt', None, 0, PORT0, ROCE0, []),
])
def test_select_pair(fixture, port, selected, netdevs, roce, warning_parts):
    result = _nccl.select_pair(_interfaces_from(fixture), port)
    assert result['selected_port'] == selected
    assert result['selected_interfaces'] == netdevs
    assert result['selected_roce_devices'] == roce
    assert len(result['warnings']) == len(warning_parts)
    for warning, parts in zip(result['warnings'], warning_parts):
        for part in parts:
            assert part in warning


@pytest.mark.parametrize('fixture, port, message_parts', [
    ('none_cabled.txt', 'auto', [
        'No usable ConnectX-7 QSFP port', 'enp1s0f0np0 (rocep1s0f0) Down', 'enP2p1s0f0np0 (roceP2p1s0f0) Down',
        'enp1s0f1np1 (rocep1s0f1) Down', 'enP2p1s0f1np1 (roceP2p1s0f1) Down', 'SAME physical port on both Sparks', 'ibdev2netdev',
        'reboot']),
    ('port1_half.txt', 'auto', [
        'No usable ConnectX-7 QSFP port', 'enp1s0f1np1 (rocep1s0f1) Up', 'enP2p1s0f1np1 (roceP2p1s0f1) Down',
        'port 1: ', 'not a usable pair', 'reboot']),
    ('port1_cabled.txt', '0', [
        'port=0 was requested but physical port 0 is not usable', 'enp1s0f0np0 (rocep1s0f0) Down',
        'use port=1 or port=auto']),
    ('port0_cabled.txt', '1', ['port=1 was requested', 'enp1s0f1np1 (rocep1s0f1) Down', 'use port=0 or port=auto']),
    ('none_cabled.txt', '1', ['port=1 was requested', 'reboot']),
    ('port1_cabled.txt', '2', ['port must be one of auto, 0, 1']),
])
def test_select_pair_errors(fixture, port, message_parts):
    with pytest.raises(_nccl.NcclSelectionError) as excinfo:
        _nccl.select_pair(_interfaces_from(fixture), port)
    for part in message_parts:
        assert part in str(excinfo.value)


def test_select_pair_nothing_found():
    with pytest.raises(_nccl.NcclSelectionError, match='No DGX Spark ConnectX-7 interface'):
        _nccl.select_pair([], 'auto')


def test_select_pair_missing_netdev_is_reported():
    with pytest.raises(_nccl.NcclSelectionError, match='enP2p1s0f1np1 not found'):
        _nccl.select_pair([iface('enp1s0f1np1')], 'auto')


def test_select_pair_one_logical_down_on_other_port_warns():
    interfaces = [iface('enp1s0f0np0'), iface('enP2p1s0f0np0'), iface('enp1s0f1np1'), iface('enP2p1s0f1np1', 'down')]
    result = _nccl.select_pair(interfaces, 'auto')
    assert result['selected_port'] == 0
    assert len(result['warnings']) == 1
    assert 'Physical port 1 has an Up interface but is not selected' in result['warnings'][0]
    assert 'not a usable pair' in result['warnings'][0]


@pytest.mark.parametrize('speeds, warned', [
    ((200000, 200000), []),
    ((100000, 200000), ['enp1s0f1np1']),
    ((100000, 100000), ['enp1s0f1np1', 'enP2p1s0f1np1']),
    ((10000, 10000), ['enp1s0f1np1', 'enP2p1s0f1np1']),
    ((None, None), []),  # unknown speed (e.g. tool source without sysfs): no claim
    ((400000, 200000), []),
])
def test_select_pair_low_speed_warning(speeds, warned):
    interfaces = [iface('enp1s0f1np1', speed=speeds[0]), iface('enP2p1s0f1np1', speed=speeds[1])]
    warnings = _nccl.select_pair(interfaces, 'auto')['warnings']
    assert len(warnings) == len(warned)
    for warning, netdev in zip(warnings, warned):
        assert warning.startswith(netdev + ' links at ')
        assert 'below the 200000 Mb/s' in warning


@pytest.mark.parametrize('ipv4_a, ipv4_b, same', [
    (['192.168.100.10/24'], ['192.168.101.10/24'], False),
    (['192.168.100.10/24'], ['192.168.100.11/24'], True),
    (['169.254.31.7/16'], ['169.254.200.9/16'], True),
    (['10.0.0.1/24'], ['10.0.0.130/25'], True),      # overlapping prefixes
    (['10.0.0.1/25'], ['10.0.0.130/25'], False),
    ([], ['192.168.100.11/24'], False),
    (['192.168.100.10/24', '10.1.0.1/16'], ['10.1.200.1/16'], True),
])
def test_select_pair_same_subnet_warning(ipv4_a, ipv4_b, same):
    interfaces = [iface('enp1s0f1np1', ipv4=ipv4_a), iface('enP2p1s0f1np1', ipv4=ipv4_b)]
    warnings = _nccl.select_pair(interfaces, 'auto')['warnings']
    assert bool(warnings) is same
    if same:
        assert 'same IPv4 subnet' in warnings[0]
        assert 'enp1s0f1np1' in warnings[0] and 'enP2p1s0f1np1' in warnings[0]


def test_select_pair_same_subnet_from_ip_fixture():
    addrs = _nccl.parse_ip_json(fixture_text('ip', 'port1_same_subnet.json'))
    interfaces = [iface(n, ipv4=addrs[n]) for n in PORT1]
    warnings = _nccl.select_pair(interfaces, 'auto')['warnings']
    assert warnings == [
        'Both logical interfaces of port 1 have addresses in the same IPv4 subnet (192.168.100.10/24 on enp1s0f1np1 '
        'and 192.168.100.11/24 on enP2p1s0f1np1). Two interfaces in one subnet make routing ambiguous and can make '
        'NCCL fail; give each logical interface its own subnet.']


def test_select_pair_without_roce_device_assumes_table_name():
    interfaces = [iface('enp1s0f1np1', roce=None), iface('enP2p1s0f1np1', roce='mlx5_1')]
    result = _nccl.select_pair(interfaces, 'auto')
    assert result['selected_roce_devices'] == ['rocep1s0f1', 'mlx5_1']
    assert len(result['warnings']) == 1 and 'assuming the DGX Spark name rocep1s0f1' in result['warnings'][0]


# --------------------------------------------------------------------------- env_values


@pytest.mark.parametrize('netdevs, roce, expected_if, expected_hca', [
    (PORT1, ROCE1, 'enp1s0f1np1,enP2p1s0f1np1', 'rocep1s0f1,roceP2p1s0f1'),
    (PORT0, ROCE0, 'enp1s0f0np0,enP2p1s0f0np0', 'rocep1s0f0,roceP2p1s0f0'),
])
def test_env_values(netdevs, roce, expected_if, expected_hca):
    assert _nccl.env_values(netdevs, roce) == {
        'nccl_socket_ifname': expected_if,
        'ucx_net_devices': expected_if,
        'ompi_mca_btl_tcp_if_include': expected_if,
        'nccl_ib_hca': expected_hca,
    }


# --------------------------------------------------------------------------- lab stand-in


def run_stand_in(sysfs_root, *args):
    env = dict(os.environ, IBDEV2NETDEV_SYSFS_ROOT=str(sysfs_root))
    return subprocess.run([STAND_IN] + list(args), env=env, capture_output=True, text=True, check=False)


def test_stand_in_is_executable_and_says_it_is_a_stand_in():
    assert os.access(STAND_IN, os.X_OK)
    with open(STAND_IN) as handle:
        head = handle.read(600)
    assert head.startswith('#!/bin/sh\n')
    assert 'LAB STAND-IN' in head and 'OFED' in head


@pytest.mark.skipif(shutil.which('sh') is None, reason='needs a POSIX shell')
def test_stand_in_lab_node_fixture():
    proc = run_stand_in(os.path.join(FIXTURES, 'sysfs', 'lab_node'))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == (
        'rocep1s0f0 port 1 ==> enp1s0f0np0 (Down)\n'
        'rocep1s0f1 port 1 ==> enp1s0f1np1 (Up)\n'
        'roceP2p1s0f0 port 1 ==> enP2p1s0f0np0 (Down)\n'
        'roceP2p1s0f1 port 1 ==> enP2p1s0f1np1 (Up)\n'
    )
    # what the stand-in prints is what the module parses and selects
    parsed = _nccl.parse_ibdev2netdev(proc.stdout)
    result = _nccl.select_pair(_nccl.merge_interfaces([], parsed, {}), 'auto')
    assert result['selected_interfaces'] == PORT1 and result['selected_roce_devices'] == ROCE1


@pytest.mark.skipif(shutil.which('sh') is None, reason='needs a POSIX shell')
@pytest.mark.parametrize('links, expected', [
    ({'enp1s0f0np0': ('unknown', 1, None), 'enP2p1s0f0np0': ('unknown', 0, None), 'eth0': ('up', 1, 1000)},
     'rocep1s0f0 port 1 ==> enp1s0f0np0 (Up)\nroceP2p1s0f0 port 1 ==> enP2p1s0f0np0 (Down)\n'),
    ({'enP2p1s0f1np1': ('down', None, None), 'enP7s7': ('up', 1, 1000)},
     'roceP2p1s0f1 port 1 ==> enP2p1s0f1np1 (Down)\n'),
    ({'eth0': ('up', 1, 1000)}, ''),
])
def test_stand_in_fake_sysfs(tmp_path, links, expected):
    root = make_sysfs(tmp_path, links, roce=False)
    proc = run_stand_in(root)
    assert (proc.returncode, proc.stdout) == (0, expected)


@pytest.mark.skipif(shutil.which('sh') is None, reason='needs a POSIX shell')
def test_stand_in_rejects_options(tmp_path):
    proc = run_stand_in(tmp_path, '-v')
    assert proc.returncode == 2 and proc.stdout == '' and 'not supported' in proc.stderr
