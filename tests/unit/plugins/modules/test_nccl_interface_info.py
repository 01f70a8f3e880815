# -*- coding: utf-8 -*-
# Unit tests for sparkops.specdec.nccl_interface_info: main() runs with mocked
# run_command / get_bin_path and fixture sysfs trees (conftest.run_module /
# module_failure).

from __future__ import annotations

import os

import pytest

from ansible.module_utils import basic

from ansible_collections.sparkops.specdec.plugins.modules import nccl_interface_info
from ansible_collections.sparkops.specdec.tests.unit.plugins.modules.conftest import module_failure, run_module

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, '..', 'fixtures', 'nccl')
SYSFS = os.path.join(FIXTURES, 'sysfs')
COLLECTION_ROOT = os.path.abspath(os.path.join(HERE, '..', '..', '..', '..'))
STAND_IN = os.path.join(COLLECTION_ROOT, 'tests', 'lab', 'images', 'node', 'ibdev2netdev')

IBDEV = '/usr/sbin/ibdev2netdev'
IP = '/usr/sbin/ip'


def fixture_text(*parts):
    with open(os.path.join(FIXTURES, *parts)) as handle:
        return handle.read()


class Host(object):
    """What the fake target has: executables on PATH and command outputs."""

    def __init__(self):
        self.bins = {'ibdev2netdev': IBDEV, 'ip': IP}
        self.outputs = {
            IBDEV: (0, fixture_text('ibdev2netdev', 'port1_cabled.txt'), ''),
            IP: (0, fixture_text('ip', 'port1_addressed.json'), ''),
        }
        self.calls = []
        self.warnings = []


@pytest.fixture
def host(monkeypatch):
    state = Host()
    real_run_command = basic.AnsibleModule.run_command

    def get_bin_path(self, arg, required=False, opt_dirs=None):
        return state.bins.get(arg)

    def run_command(self, args, *a, **kw):
        state.calls.append(list(args))
        if args[0] in state.outputs:
            return state.outputs[args[0]]
        if args[0] == STAND_IN:
            return real_run_command(self, args, *a, **kw)
        raise AssertionError('unexpected command %r' % (args,))

    monkeypatch.setattr(basic.AnsibleModule, 'get_bin_path', get_bin_path)
    monkeypatch.setattr(basic.AnsibleModule, 'run_command', run_command)
    monkeypatch.setattr(basic.AnsibleModule, 'warn', lambda self, warning: state.warnings.append(warning))
    return state


def run_ok(args):
    return run_module(nccl_interface_info, args)


def run_fail(args):
    return module_failure(nccl_interface_info, args)


PORT1_RESULT = {
    'selected_port': 1,
    'selected_interfaces': ['enp1s0f1np1', 'enP2p1s0f1np1'],
    'selected_roce_devices': ['rocep1s0f1', 'roceP2p1s0f1'],
    'nccl_socket_ifname': 'enp1s0f1np1,enP2p1s0f1np1',
    'ucx_net_devices': 'enp1s0f1np1,enP2p1s0f1np1',
    'ompi_mca_btl_tcp_if_include': 'enp1s0f1np1,enP2p1s0f1np1',
    'nccl_ib_hca': 'rocep1s0f1,roceP2p1s0f1',
}


def assert_subset(result, expected):
    for key, value in expected.items():
        assert result[key] == value, key


def test_auto_uses_ibdev2netdev(host):
    result = run_ok({'sysfs_root': os.path.join(SYSFS, 'port1_cabled')})
    assert_subset(result, PORT1_RESULT)
    assert result['changed'] is False
    assert result['source'] == 'ibdev2netdev'
    assert host.calls == [[IBDEV], [IP, '-j', 'addr', 'show']]
    assert host.warnings == []
    assert result['interfaces'] == [
        {'netdev': 'enp1s0f0np0', 'roce_device': 'rocep1s0f0', 'physical_port': 0, 'logical_index': 1, 'state': 'down',
         'carrier': False, 'speed_mbps': None, 'mac_address': '4c:bb:47:2c:1a:00', 'ipv4': []},
        {'netdev': 'enP2p1s0f0np0', 'roce_device': 'roceP2p1s0f0', 'physical_port': 0, 'logical_index': 2, 'state': 'down',
         'carrier': False, 'speed_mbps': None, 'mac_address': '4c:bb:47:2c:1a:02', 'ipv4': []},
        {'netdev': 'enp1s0f1np1', 'roce_device': 'rocep1s0f1', 'physical_port': 1, 'logical_index': 1, 'state': 'up',
         'carrier': True, 'speed_mbps': 200000, 'mac_address': '4c:bb:47:2c:1a:01', 'ipv4': ['192.168.100.10/24']},
        {'netdev': 'enP2p1s0f1np1', 'roce_device': 'roceP2p1s0f1', 'physical_port': 1, 'logical_index': 2, 'state': 'up',
         'carrier': True, 'speed_mbps': 200000, 'mac_address': '4c:bb:47:2c:1a:03', 'ipv4': ['192.168.101.10/24']},
    ]


def test_check_mode_returns_the_same_and_changes_nothing(host):
    args = {'sysfs_root': os.path.join(SYSFS, 'port1_cabled')}
    normal = run_ok(dict(args))
    checked = run_ok(dict(args, _ansible_check_mode=True))
    assert checked == normal
    assert checked['changed'] is False


@pytest.mark.parametrize('tool_output', [
    None,                                 # tool not installed
    (0, '', ''),                          # tool prints nothing
    (0, 'mlx5_0 port 1 ==> enP7s7 (Up)\n', ''),  # only non-CX-7 lines
])
def test_auto_falls_back_to_sysfs(host, tool_output):
    if tool_output is None:
        del host.bins['ibdev2netdev']
    else:
        host.outputs[IBDEV] = tool_output
    result = run_ok({'sysfs_root': os.path.join(SYSFS, 'port1_cabled')})
    assert result['source'] == 'sysfs'
    assert_subset(result, PORT1_RESULT)
    assert host.warnings == []


def test_auto_falls_back_to_sysfs_with_warning_when_tool_fails(host):
    host.outputs[IBDEV] = (1, '', 'ibdev2netdev: cannot open /sys/class/infiniband')
    result = run_ok({'sysfs_root': os.path.join(SYSFS, 'port1_cabled')})
    assert result['source'] == 'sysfs'
    assert len(host.warnings) == 1 and 'exited with rc=1' in host.warnings[0] and 'reading sysfs instead' in host.warnings[0]


def test_source_sysfs_never_runs_the_tool(host):
    result = run_ok({'source': 'sysfs', 'sysfs_root': os.path.join(SYSFS, 'port1_cabled')})
    assert result['source'] == 'sysfs'
    assert_subset(result, PORT1_RESULT)
    assert host.calls == [[IP, '-j', 'addr', 'show']]


@pytest.mark.parametrize('fixture, selected, netdevs, hca, warning', [
    ('port0_cabled.txt', 0, 'enp1s0f0np0,enP2p1s0f0np0', 'rocep1s0f0,roceP2p1s0f0', None),
    ('both_cabled.txt', 1, 'enp1s0f1np1,enP2p1s0f1np1', 'rocep1s0f1,roceP2p1s0f1', 'Both physical QSFP ports are Up'),
    ('garbage.txt', 1, 'enp1s0f1np1,enP2p1s0f1np1', 'rocep1s0f1,roceP2p1s0f1', None),
])
def test_ibdev2netdev_outputs(host, fixture, selected, netdevs, hca, warning):
    host.outputs[IBDEV] = (0, fixture_text('ibdev2netdev', fixture), '')
    host.outputs[IP] = (0, '[]', '')
    result = run_ok({'source': 'ibdev2netdev', 'sysfs_root': os.path.join(SYSFS, 'port1_cabled')})
    assert (result['selected_port'], result['nccl_socket_ifname'], result['nccl_ib_hca']) == (selected, netdevs, hca)
    assert result['ucx_net_devices'] == result['ompi_mca_btl_tcp_if_include'] == netdevs
    if warning:
        assert len(host.warnings) == 1 and warning in host.warnings[0]
    else:
        assert host.warnings == []


@pytest.mark.parametrize('port', ['0', 0])
def test_forced_port_that_is_up(host, port):
    host.outputs[IBDEV] = (0, fixture_text('ibdev2netdev', 'both_cabled.txt'), '')
    result = run_ok({'port': port, 'sysfs_root': os.path.join(SYSFS, 'port1_cabled')})
    assert result['selected_port'] == 0
    assert result['nccl_socket_ifname'] == 'enp1s0f0np0,enP2p1s0f0np0'
    assert [w for w in host.warnings if 'Physical port 1 is also Up' in w]


def test_forced_port_that_is_down_fails(host):
    result = run_fail({'port': '0', 'sysfs_root': os.path.join(SYSFS, 'port1_cabled')})
    assert 'port=0 was requested but physical port 0 is not usable' in result['msg']
    assert 'use port=1 or port=auto' in result['msg']
    assert result['source'] == 'ibdev2netdev'
    assert len(result['interfaces']) == 4
    assert 'selected_port' not in result


def test_bad_port_choice_fails(host):
    result = run_fail({'port': '2'})
    assert 'port' in result['msg'] and 'auto, 0, 1' in result['msg']


@pytest.mark.parametrize('fixture, parts', [
    ('none_cabled.txt', ['No usable ConnectX-7 QSFP port', 'enp1s0f1np1 (rocep1s0f1) Down', 'SAME physical port',
                         '`ibdev2netdev`', 'reboot', '(source: ibdev2netdev)']),
    ('port1_half.txt', ['enp1s0f1np1 (rocep1s0f1) Up', 'enP2p1s0f1np1 (roceP2p1s0f1) Down', 'not a usable pair']),
])
def test_no_usable_pair_fails_with_what_it_saw(host, fixture, parts):
    host.outputs[IBDEV] = (0, fixture_text('ibdev2netdev', fixture), '')
    result = run_fail({'sysfs_root': os.path.join(SYSFS, 'port1_cabled')})
    for part in parts:
        assert part in result['msg']
    assert result['changed'] is False
    assert [i['state'] for i in result['interfaces']].count('up') == (1 if fixture == 'port1_half.txt' else 0)


def test_sysfs_one_logical_down_fails(host):
    result = run_fail({'source': 'sysfs', 'sysfs_root': os.path.join(SYSFS, 'port0_half')})
    assert 'enp1s0f0np0 (rocep1s0f0) Up' in result['msg']
    assert 'enP2p1s0f0np0 (roceP2p1s0f0) Down' in result['msg']
    assert 'not a usable pair' in result['msg']
    assert '(source: sysfs)' in result['msg']


def test_no_cx7_interface_at_all(host, tmp_path):
    os.makedirs(str(tmp_path / 'class' / 'net' / 'eth0'))
    del host.bins['ibdev2netdev']
    result = run_fail({'sysfs_root': str(tmp_path)})
    assert 'No DGX Spark ConnectX-7 interface' in result['msg']
    assert result['interfaces'] == []


@pytest.mark.parametrize('setup, message', [
    ('missing', 'the ibdev2netdev tool was not found on PATH'),
    ('rc', 'exited with rc=3'),
    ('empty', 'printed no line for a DGX Spark ConnectX-7 netdev'),
    ('bad_path', 'ibdev2netdev_path /nonexistent/ibdev2netdev is not an executable file'),
])
def test_forced_ibdev2netdev_errors(host, setup, message):
    args = {'source': 'ibdev2netdev', 'sysfs_root': os.path.join(SYSFS, 'port1_cabled')}
    if setup == 'missing':
        del host.bins['ibdev2netdev']
    elif setup == 'rc':
        host.outputs[IBDEV] = (3, '', 'boom')
    elif setup == 'empty':
        host.outputs[IBDEV] = (0, 'mlx5_0 port 1 ==> enP7s7 (Up)\n', '')
    else:
        args['ibdev2netdev_path'] = '/nonexistent/ibdev2netdev'
    result = run_fail(args)
    assert message in result['msg']


def test_auto_with_bad_ibdev2netdev_path_warns_and_uses_sysfs(host):
    result = run_ok({'ibdev2netdev_path': '/nonexistent/ibdev2netdev', 'sysfs_root': os.path.join(SYSFS, 'port1_cabled')})
    assert result['source'] == 'sysfs'
    assert host.warnings == ['ibdev2netdev_path /nonexistent/ibdev2netdev is not an executable file; reading sysfs instead.']
    assert [IBDEV] not in host.calls


def test_source_sysfs_with_missing_root_fails(host, tmp_path):
    result = run_fail({'source': 'sysfs', 'sysfs_root': str(tmp_path / 'nope')})
    assert 'has no class/net directory' in result['msg']


def test_ibdev2netdev_without_sysfs_details_warns(host, tmp_path):
    result = run_ok({'sysfs_root': str(tmp_path / 'nope')})
    assert result['source'] == 'ibdev2netdev'
    assert_subset(result, PORT1_RESULT)
    assert [i['speed_mbps'] for i in result['interfaces']] == [None] * 4
    assert host.warnings == ['sysfs_root %s has no class/net directory; carrier, speed and MAC address are not available.'
                             % (tmp_path / 'nope')]


def test_same_subnet_warning(host):
    host.outputs[IP] = (0, fixture_text('ip', 'port1_same_subnet.json'), '')
    result = run_ok({'sysfs_root': os.path.join(SYSFS, 'port1_cabled')})
    assert_subset(result, PORT1_RESULT)
    assert len(host.warnings) == 1 and 'same IPv4 subnet' in host.warnings[0]


@pytest.mark.parametrize('ip_setup, warning', [
    ('missing', 'The iproute2 `ip` command was not found'),
    ('rc', '`/usr/sbin/ip -j addr show` exited with rc=255'),
    ('not_json', 'did not print JSON'),
])
def test_address_problems_warn_but_succeed(host, ip_setup, warning):
    if ip_setup == 'missing':
        del host.bins['ip']
    elif ip_setup == 'rc':
        host.outputs[IP] = (255, '', 'Option "-j" is unknown')
    else:
        host.outputs[IP] = (0, fixture_text('ip', 'not_json.txt'), '')
    result = run_ok({'sysfs_root': os.path.join(SYSFS, 'port1_cabled')})
    assert_subset(result, PORT1_RESULT)
    assert [i['ipv4'] for i in result['interfaces']] == [[]] * 4
    assert len(host.warnings) == 1 and warning in host.warnings[0]
    assert 'same-subnet check is skipped' in host.warnings[0]


def test_explicit_ip_path(host, tmp_path):
    fake_ip = tmp_path / 'ip'
    fake_ip.write_text('#!/bin/sh\n')
    fake_ip.chmod(0o755)
    host.outputs[str(fake_ip)] = (0, fixture_text('ip', 'port1_addressed.json'), '')
    result = run_ok({'ip_path': str(fake_ip), 'sysfs_root': os.path.join(SYSFS, 'port1_cabled')})
    assert [str(fake_ip), '-j', 'addr', 'show'] in host.calls
    assert result['interfaces'][2]['ipv4'] == ['192.168.100.10/24']


def test_explicit_ip_path_missing_fails(host):
    result = run_fail({'ip_path': '/nonexistent/ip', 'sysfs_root': os.path.join(SYSFS, 'port1_cabled')})
    assert result['msg'] == 'ip_path /nonexistent/ip is not an executable file.'


def test_lab_node_with_the_stand_in(host, monkeypatch):
    """The lab: stand-in ibdev2netdev, veths at 10000 Mb/s, no RDMA devices in sysfs."""
    lab_sysfs = os.path.join(SYSFS, 'lab_node')
    monkeypatch.setenv('IBDEV2NETDEV_SYSFS_ROOT', lab_sysfs)
    host.outputs[IP] = (0, fixture_text('ip', 'port1_addressed.json'), '')
    result = run_ok({'ibdev2netdev_path': STAND_IN, 'sysfs_root': lab_sysfs})
    assert result['source'] == 'ibdev2netdev'
    assert_subset(result, PORT1_RESULT)
    assert [STAND_IN] in host.calls
    assert len(host.warnings) == 2
    assert all('links at 10000 Mb/s, below the 200000 Mb/s' in w for w in host.warnings)


def test_lab_node_sysfs_source_assumes_table_roce_names(host):
    result = run_ok({'source': 'sysfs', 'sysfs_root': os.path.join(SYSFS, 'lab_node')})
    assert_subset(result, PORT1_RESULT)
    assert [i['roce_device'] for i in result['interfaces']] == [None] * 4
    assert len([w for w in host.warnings if 'assuming the DGX Spark name' in w]) == 2
