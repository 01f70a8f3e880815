# -*- coding: utf-8 -*-
# Unit tests for sparkops.specdec.netplan_fabric: main() runs against a fake node (its links and
# addresses answer `ip -j addr show`, `ip addr add/del`, `ip link set`; `netplan generate/apply` are
# recorded) with the netplan file and the checkpoint in a temporary directory
# (conftest.run_module / module_failure).

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
import sys

import pytest

from ansible.module_utils import basic

from ansible_collections.sparkops.specdec.plugins.module_utils import _netplan
from ansible_collections.sparkops.specdec.plugins.modules import netplan_fabric
from ansible_collections.sparkops.specdec.tests.unit.plugins.modules.conftest import module_failure, run_module

IP = '/usr/sbin/ip'
NETPLAN = '/usr/sbin/netplan'
PAIR = ['enp1s0f1np1', 'enP2p1s0f1np1']
MGMT = '10.20.0.37'


class Node(object):
    """A DGX Spark as the module sees it: links, the default route, netplan, and what ran."""

    def __init__(self, tmp_path):
        self.links = {
            'lo': {'up': True, 'inet': ['127.0.0.1/8']},
            'enP7s7': {'up': True, 'inet': [MGMT + '/24']},
            'enp1s0f0np0': {'up': False, 'inet': []},
            'enP2p1s0f0np0': {'up': False, 'inet': []},
            'enp1s0f1np1': {'up': True, 'inet': []},
            'enP2p1s0f1np1': {'up': True, 'inet': []},
        }
        self.default = ['enP7s7']
        self.bins = {'ip': IP, 'netplan': NETPLAN}
        self.generate_rc = (0, '', '')
        self.fail = {}  # tuple(argv) -> (rc, out, err)
        self.calls = []
        self.generated = []
        self.warnings = []
        self.ssh = '10.20.0.5 51234 %s 22' % MGMT
        self.netplan_file = str(tmp_path / 'etc' / 'netplan' / '40-cx7.yaml')
        self.checkpoint = str(tmp_path / 'var' / 'lib' / 'sparkops' / 'netplan_qsfp' / 'checkpoint.json')
        os.makedirs(os.path.dirname(self.netplan_file))

    def ip_json(self):
        out = []
        for index, (name, link) in enumerate(self.links.items(), 1):
            flags = ['BROADCAST', 'MULTICAST'] + (['UP', 'LOWER_UP'] if link['up'] else [])
            info = [{'family': 'inet', 'local': c.split('/')[0], 'prefixlen': int(c.split('/')[1]), 'scope': 'global'}
                    for c in link['inet']]
            info.append({'family': 'inet6', 'local': 'fe80::%d' % index, 'prefixlen': 64, 'scope': 'link'})
            out.append({'ifindex': index, 'ifname': name, 'flags': flags, 'addr_info': info})
        return json.dumps(out)

    def run(self, args):
        args = list(args)
        self.calls.append(args)
        if tuple(args) in self.fail:
            return self.fail[tuple(args)]
        if args == [IP, '-j', 'addr', 'show']:
            return 0, self.ip_json(), ''
        if args == [IP, '-j', '-4', 'route', 'show', 'default']:
            return 0, json.dumps([{'dst': 'default', 'gateway': '10.20.0.1', 'dev': d} for d in self.default]), ''
        if args[:2] == [IP, 'addr']:
            verb, cidr, name = args[2], args[3], args[5]
            inet = self.links[name]['inet']
            if verb == 'add':
                if cidr in inet:
                    return 2, '', 'RTNETLINK answers: File exists'
                inet.append(cidr)
            else:
                if cidr not in inet:
                    return 2, '', 'RTNETLINK answers: Cannot assign requested address'
                # The kernel (net.ipv4.conf.*.promote_secondaries off, the default): deleting the primary address
                # of a subnet (the first one added in it) deletes the secondary addresses of that subnet too.
                net = ipaddress.ip_interface(cidr).network
                same = [c for c in inet if ipaddress.ip_interface(c).network == net]
                inet[:] = [c for c in inet if c not in (same if same[0] == cidr else [cidr])]
            return 0, '', ''
        if args[:3] == [IP, 'link', 'set']:
            self.links[args[3]]['up'] = args[4] == 'up'
            return 0, '', ''
        if args[:2] == [NETPLAN, 'generate']:
            root = args[3]
            with open(os.path.join(root, 'etc', 'netplan', os.path.basename(self.netplan_file))) as handle:
                self.generated.append(handle.read())
            return self.generate_rc
        if args == [NETPLAN, 'apply']:
            return 0, '', ''
        raise AssertionError('unexpected command %r' % (args,))

    def pair(self):
        return sorted('%s %s' % (n, c) for n in PAIR for c in self.links[n]['inet'])

    def changing_calls(self):
        return [c for c in self.calls if c[:2] in ([IP, 'addr'], [IP, 'link']) or c == [NETPLAN, 'apply']]

    def read(self):
        if not os.path.exists(self.netplan_file):
            return None
        with open(self.netplan_file) as handle:
            return handle.read()

    def write(self, text, mode=0o600):
        with open(self.netplan_file, 'w') as handle:
            handle.write(text)
        os.chmod(self.netplan_file, mode)

    def stored_checkpoint(self):
        with open(self.checkpoint) as handle:
            return json.load(handle)


@pytest.fixture
def node(monkeypatch, tmp_path):
    state = Node(tmp_path)

    def get_bin_path(self, arg, required=False, opt_dirs=None):
        path = state.bins.get(arg)
        if path is None and required:
            self.fail_json(msg='Failed to find required executable "%s"' % arg)
        return path

    monkeypatch.setattr(basic.AnsibleModule, 'get_bin_path', get_bin_path)
    monkeypatch.setattr(basic.AnsibleModule, 'run_command', lambda self, args, *a, **kw: state.run(args))
    monkeypatch.setattr(basic.AnsibleModule, 'warn', lambda self, warning: state.warnings.append(warning))
    monkeypatch.setattr(netplan_fabric, '_ssh_connection', lambda: state.ssh)
    monkeypatch.setattr(netplan_fabric, 'OWNER_UID', os.getuid())
    monkeypatch.setattr(netplan_fabric, 'OWNER_GID', os.getgid())
    return state


def args(node, **extra):
    base = {'interfaces': PAIR, 'port': 1, 'node_index': 0, 'node_count': 2, 'path': node.netplan_file,
            'checkpoint_path': node.checkpoint, 'management_addresses': [MGMT], 'apply': True,
            'apply_method': 'ip'}
    base.update(extra)
    return base


def run_ok(module_args):
    return run_module(netplan_fabric, module_args)


def run_fail(module_args):
    return module_failure(netplan_fabric, module_args)


OURS_10 = _netplan.render(PAIR, ['192.168.100.10/24', '192.168.101.10/24'], 1)
PAIR_10 = ['enP2p1s0f1np1 192.168.101.10/24', 'enp1s0f1np1 192.168.100.10/24']


def converged(node):
    node.write(OURS_10)
    node.links['enp1s0f1np1']['inet'] = ['192.168.100.10/24']
    node.links['enP2p1s0f1np1']['inet'] = ['192.168.101.10/24']


# ---------------------------------------------------------------------------- present


def test_first_install_then_second_run_changes_nothing(node):
    result = run_ok(args(node))
    assert result['changed'] is True
    assert result['addresses'] == ['192.168.100.10/24', '192.168.101.10/24']
    assert result['ips'] == ['192.168.100.10', '192.168.101.10']
    assert (result['file'], result['file_changed'], result['validated'], result['netplan_apply']) == (
        'create', True, True, False)
    assert result['actions'] == {'add': ['enp1s0f1np1 192.168.100.10/24', 'enP2p1s0f1np1 192.168.101.10/24'],
                                 'remove': [], 'up': []}
    assert node.read() == OURS_10
    assert oct(os.stat(node.netplan_file).st_mode & 0o777) == '0o600'
    assert node.generated == [OURS_10]
    assert node.pair() == PAIR_10
    cp = node.stored_checkpoint()
    assert result['checkpoint'] == {'path': node.checkpoint, 'id': cp['id'], 'status': 'applied'}
    assert cp['file']['existed'] is False and cp['pair']['addresses'] == [] and cp['file_changed'] is True
    assert oct(os.stat(node.checkpoint).st_mode & 0o777) == '0o600'

    node.calls[:] = []
    again = run_ok(args(node))
    assert again['changed'] is False and again['file'] == 'none'
    assert again['checkpoint']['id'] is None
    assert node.changing_calls() == [] and len(node.generated) == 1
    assert node.stored_checkpoint()['id'] == cp['id']


def test_upgrade_from_the_role_template_is_not_a_change(node):
    converged(node)
    result = run_ok(args(node))
    assert result['changed'] is False
    assert result['management'] == {'addresses': [MGMT], 'interfaces': ['enP7s7'], 'networks': ['10.20.0.0/24']}
    assert not os.path.exists(node.checkpoint)


def test_check_mode_with_diff_writes_nothing(node):
    converged(node)
    result = run_ok(args(node, node_index=1, _ansible_check_mode=True, _ansible_diff=True))
    assert result['changed'] is True and result['file'] == 'update'
    assert result['checkpoint']['id'] is None
    assert result['actions'] == {'add': ['enp1s0f1np1 192.168.100.11/24', 'enP2p1s0f1np1 192.168.101.11/24'],
                                 'remove': ['enp1s0f1np1 192.168.100.10/24', 'enP2p1s0f1np1 192.168.101.10/24'],
                                 'up': []}
    file_diff, live_diff = result['diff']
    assert file_diff['before'] == OURS_10 and '        - 192.168.100.11/24\n' in file_diff['after']
    assert live_diff['before'] == ''.join(a + '\n' for a in PAIR_10)
    assert 'enp1s0f1np1 192.168.100.11/24' in live_diff['after']
    assert node.read() == OURS_10 and node.pair() == PAIR_10
    assert node.changing_calls() == [] and not os.path.exists(node.checkpoint)
    assert node.generated  # validation is read-only, so check mode validates too


def test_ip_method_removes_our_stale_addresses_only(node):
    converged(node)
    node.links['enp1s0f1np1']['inet'].append('192.168.100.50/24')  # someone else's
    result = run_ok(args(node, addresses=['10.99.0.10/24', '10.99.1.10/24']))
    assert result['actions']['remove'] == ['enp1s0f1np1 192.168.100.10/24', 'enP2p1s0f1np1 192.168.101.10/24']
    assert node.pair() == ['enP2p1s0f1np1 10.99.1.10/24', 'enp1s0f1np1 10.99.0.10/24', 'enp1s0f1np1 192.168.100.50/24']
    assert node.links['enP7s7']['inet'] == [MGMT + '/24']
    backup = result['backup_file']
    with open(backup) as handle:
        assert handle.read() == OURS_10
    assert node.stored_checkpoint()['backup_file'] == backup


def test_ip_method_brings_the_links_up(node):
    converged(node)
    node.links['enP2p1s0f1np1']['up'] = False
    result = run_ok(args(node))
    assert result['changed'] is True and result['file'] == 'none'
    assert result['actions'] == {'add': [], 'remove': [], 'up': ['enP2p1s0f1np1']}
    assert node.links['enP2p1s0f1np1']['up'] is True
    assert node.stored_checkpoint()['file_changed'] is False


def test_netplan_method_applies_only_a_changed_file(node):
    result = run_ok(args(node, apply_method='netplan'))
    assert result['netplan_apply'] is True and [NETPLAN, 'apply'] in node.calls
    assert result['actions'] == {'add': [], 'remove': [], 'up': []}
    assert node.stored_checkpoint()['netplan_applied'] is True
    node.calls[:] = []
    again = run_ok(args(node, apply_method='netplan'))
    assert again['changed'] is False and [NETPLAN, 'apply'] not in node.calls


def test_apply_false_writes_the_file_only(node):
    result = run_ok(args(node, apply=False))
    assert result['changed'] is True and node.read() == OURS_10
    assert node.changing_calls() == [] and node.pair() == []
    assert node.stored_checkpoint()['applied']['addresses'] == []


def test_mode_is_fixed(node):
    converged(node)
    os.chmod(node.netplan_file, 0o644)
    result = run_ok(args(node))
    assert result['changed'] is True and result['file'] == 'attributes'
    assert oct(os.stat(node.netplan_file).st_mode & 0o777) == '0o600'
    assert 'backup_file' not in result


@pytest.mark.parametrize('extra, expected', [
    ({'node_index': 1}, ['192.168.100.11/24', '192.168.101.11/24']),
    ({'link_subnets': ['10.1.0.0/16', '10.2.0.0/16'], 'host_offset': 100}, ['10.1.0.100/16', '10.2.0.100/16']),
    ({'scheme': 'single_subnet', 'node_index': 0}, ['192.168.200.12/24', '192.168.200.14/24']),
    ({'scheme': 'single_subnet', 'node_index': 1}, ['192.168.200.13/24', '192.168.200.15/24']),
    ({'addresses': ['172.20.0.1/30', '172.20.0.5/30'], 'node_index': 1}, ['172.20.0.1/30', '172.20.0.5/30']),
])
def test_addresses_from_the_scheme_or_explicit(node, extra, expected):
    result = run_ok(args(node, _ansible_check_mode=True, **extra))
    assert result['addresses'] == expected


@pytest.mark.parametrize('extra, message', [
    ({'addresses': ['192.168.100.10/24']}, 'addresses: needs one address per interface'),
    ({'addresses': ['192.168.100.10', '192.168.101.10/24']}, 'has no prefix length'),
    ({'host_offset': 300}, 'host_offset: the derived address 192.168.101.44 lies outside its subnet 192.168.100.0/24'),
    ({'scheme': 'single_subnet', 'single_subnet': '10.0.0.0/29', 'single_host_offset': 6},
     'single_host_offset: the derived address 10.0.0.8 lies outside its subnet 10.0.0.0/29'),
    ({'link_subnets': ['not-a-net', '10.0.1.0/24']}, 'cannot derive the addresses'),
    ({'host_offset': 254, 'node_index': 1}, 'network or broadcast address'),
    ({'node_index': 2}, 'node_index: 2 is not an index of 2 nodes'),
    ({'interfaces': ['enp1s0f1np1']}, 'needs the two logical interfaces'),
    ({'interfaces': ['enp1s0f1np1', 'enX9']}, 'interfaces: enX9 do(es) not exist on this node'),
])
def test_bad_input_fails_before_any_change(node, extra, message):
    result = run_fail(args(node, **extra))
    assert message in result['msg'] and 'Nothing was changed' in result['msg']
    assert result['changed'] is False
    assert node.read() is None and node.changing_calls() == [] and not os.path.exists(node.checkpoint)


def test_guard_stops_ansible_over_the_fabric(node):
    converged(node)
    node.links['enp1s0f1np1']['inet'].append('192.168.100.50/24')
    node.ssh = '10.20.0.5 51234 192.168.100.50 22'
    result = run_fail(args(node, management_addresses=['192.168.100.50'], node_index=1))
    assert result['msg'].startswith('netplan_qsfp stops before any change: the management connection '
                                    '(192.168.100.50 on enp1s0f1np1, enP7s7, subnets ')
    assert 'includes the management interface enp1s0f1np1' in result['msg']
    assert result['msg'].endswith(_netplan.FIX)
    assert node.read() == OURS_10 and node.changing_calls() == [] and not os.path.exists(node.checkpoint)


def test_guard_reads_the_ssh_connection_when_ansible_host_is_a_name(node):
    node.links['enp1s0f1np1']['inet'].append('192.168.100.50/24')
    node.ssh = '10.20.0.5 51234 192.168.100.50 22'
    node.default = []
    result = run_fail(args(node, management_addresses=['spark-1.lab']))
    assert result['management']['addresses'] == ['192.168.100.50']
    assert 'includes the management interface enp1s0f1np1' in result['msg']


def test_guard_stops_an_overlap_with_the_management_subnet(node):
    result = run_fail(args(node, link_subnets=['10.20.0.0/24', '192.168.101.0/24']))
    assert 'planned fabric subnet 10.20.0.0/24 overlaps the management subnet 10.20.0.0/24' in result['msg']
    assert node.read() is None and node.changing_calls() == []


def test_guard_protects_the_default_route_interface(node):
    node.links['enp1s0f1np1']['inet'] = ['172.31.0.2/24']
    node.default = ['enp1s0f1np1']
    node.ssh = None
    result = run_fail(args(node, management_addresses=[]))
    assert 'includes the management interface enp1s0f1np1' in result['msg']


def test_default_route_unreadable_warns(node):
    node.fail[(IP, '-j', '-4', 'route', 'show', 'default')] = (1, '', 'boom')
    run_ok(args(node, _ansible_check_mode=True))
    assert any('default route is not protected' in w for w in node.warnings)


def test_foreign_file_is_refused_unless_taken_over(node):
    manual = 'network:\n  version: 2\n  ethernets:\n    enp1s0f1np1:\n      addresses: [192.168.100.10/24]\n'
    node.write(manual)
    result = run_fail(args(node))
    # A plan of someone else's (no mark) on the pair that cannot be adopted as it is (issue 24: one address on one
    # interface only): refused before any change, naming take_over.
    assert "cannot be adopted for enp1s0f1np1, enP2p1s0f1np1: it does not address enP2p1s0f1np1" in result['msg']
    assert 'netplan_qsfp_take_over: true' in result['msg'] and node.read() == manual
    assert node.changing_calls() == []
    taken = run_ok(args(node, take_over=True))
    assert taken['changed'] is True and node.read() == OURS_10
    with open(taken['backup_file']) as handle:
        assert handle.read() == manual


def test_netplan_generate_rejects_the_file(node):
    node.generate_rc = (1, '', "Error in network definition: unknown key 'dhcp4'")
    result = run_fail(args(node))
    assert result['msg'].startswith('netplan generate rejects the planned ')
    assert "unknown key 'dhcp4'" in result['msg'] and result['changed'] is False
    assert node.read() is None and node.changing_calls() == [] and not os.path.exists(node.checkpoint)


def test_no_netplan_installed_warns_and_writes(node):
    del node.bins['netplan']
    result = run_ok(args(node))
    assert result['validated'] is False and node.read() == OURS_10
    assert any('was not validated' in w for w in node.warnings)


def test_no_ip_command(node):
    del node.bins['ip']
    result = run_fail(args(node))
    assert 'iproute2' in result['msg']


@pytest.mark.parametrize('output', [(0, 'not json', ''), (1, '', 'Cannot open netlink socket')])
def test_ip_addr_show_unusable(node, output):
    node.fail[(IP, '-j', 'addr', 'show')] = output
    result = run_fail(args(node))
    assert 'ip -j addr show' in result['msg'] and 'Nothing was changed' in result['msg']


def test_a_new_address_in_the_same_subnet_survives_the_old_ones_removal_and_so_does_someone_elses(node):
    """A layout change of a pair's node (.10 -> .1, switch plan) and a take-over (.44 -> .4) stay in the subnet: the
    kernel deletes a subnet's secondary addresses with its primary, so the old address goes first, the new one is
    added after, and someone else's (a secondary behind ours) is put back. Then the rollback, the same way."""
    converged(node)
    node.links['enp1s0f1np1']['inet'].append('192.168.100.50/24')  # someone else's, secondary behind our .10
    applied = run_ok(args(node, addresses=['192.168.100.1/24', '192.168.101.1/24']))
    assert applied['actions']['add'] == ['enp1s0f1np1 192.168.100.1/24', 'enP2p1s0f1np1 192.168.101.1/24']
    assert node.pair() == ['enP2p1s0f1np1 192.168.101.1/24', 'enp1s0f1np1 192.168.100.1/24',
                           'enp1s0f1np1 192.168.100.50/24']
    back = run_ok({'state': 'rollback', 'checkpoint_path': node.checkpoint,
                   'checkpoint_id': applied['checkpoint']['id']})
    assert back['restored'] is True
    assert node.pair() == ['enP2p1s0f1np1 192.168.101.10/24', 'enp1s0f1np1 192.168.100.10/24',
                           'enp1s0f1np1 192.168.100.50/24']


# ---------------------------------------------------------------------------- rollback


def test_rollback_restores_file_and_addresses_then_is_a_no_op(node):
    converged(node)
    applied = run_ok(args(node, addresses=['10.99.0.10/24', '10.99.1.10/24']))
    assert node.pair() == ['enP2p1s0f1np1 10.99.1.10/24', 'enp1s0f1np1 10.99.0.10/24']
    cid = applied['checkpoint']['id']

    result = run_ok({'state': 'rollback', 'checkpoint_path': node.checkpoint, 'checkpoint_id': cid, '_ansible_diff': True})
    assert result['changed'] is True and result['restored'] is True
    assert result['file'] == 'restore' and result['file_outcome'] == 'restored to its previous content'
    assert result['diff']['after'] == OURS_10
    assert node.read() == OURS_10 and node.pair() == PAIR_10
    assert not os.path.exists(applied['backup_file'])
    assert sorted(result['pair_after']['addresses']) == sorted(result['before']['addresses'])
    assert node.stored_checkpoint()['status'] == 'rolled_back'

    node.calls[:] = []
    again = run_ok({'state': 'rollback', 'checkpoint_path': node.checkpoint, 'checkpoint_id': cid})
    assert again['changed'] is False and again['restored'] is True and node.changing_calls() == []

    # The next run does not treat the rolled-back addresses as ours: only the previous file's are stale.
    node.links['enp1s0f1np1']['inet'].append('10.99.0.10/24')
    plan = run_ok(args(node, node_index=1, _ansible_check_mode=True))
    assert plan['actions']['remove'] == ['enp1s0f1np1 192.168.100.10/24', 'enP2p1s0f1np1 192.168.101.10/24']


def test_rollback_of_a_first_install_removes_file_and_addresses(node):
    node.links['enP2p1s0f1np1']['up'] = False
    applied = run_ok(args(node))
    assert node.links['enP2p1s0f1np1']['up'] is True
    result = run_ok({'state': 'rollback', 'checkpoint_path': node.checkpoint,
                     'checkpoint_id': applied['checkpoint']['id']})
    assert result['restored'] is True and result['file'] == 'remove'
    assert result['file_outcome'] == 'removed (there was none before)'
    assert result['actions']['down'] == ['enP2p1s0f1np1']
    assert node.read() is None and node.pair() == [] and node.links['enP2p1s0f1np1']['up'] is False


def test_rollback_check_mode_changes_nothing(node):
    applied = run_ok(args(node))
    result = run_ok({'state': 'rollback', 'checkpoint_path': node.checkpoint, '_ansible_check_mode': True,
                     'checkpoint_id': applied['checkpoint']['id']})
    assert result['changed'] is True and result['restored'] is None and result['file'] == 'remove'
    assert node.read() == OURS_10 and node.pair() == PAIR_10


def test_rollback_after_a_netplan_apply_runs_it_again(node):
    converged(node)
    applied = run_ok(args(node, node_index=1, apply_method='netplan'))
    node.calls[:] = []
    result = run_ok({'state': 'rollback', 'checkpoint_path': node.checkpoint})
    assert result['restored'] is True and [NETPLAN, 'apply'] in node.calls
    assert applied['checkpoint']['id'] == result['checkpoint']['id']


def test_failed_apply_reports_a_change_and_the_checkpoint(node):
    converged(node)
    node.fail[(IP, 'addr', 'add', '10.99.1.10/24', 'dev', 'enP2p1s0f1np1')] = (2, '', 'RTNETLINK answers: Permission denied')
    result = run_fail(args(node, addresses=['10.99.0.10/24', '10.99.1.10/24']))
    assert result['changed'] is True and result['checkpoint']['status'] == 'failed'
    assert 'failed while ip' in result['msg'] and 'Permission denied' in result['msg']
    del node.fail[(IP, 'addr', 'add', '10.99.1.10/24', 'dev', 'enP2p1s0f1np1')]
    back = run_ok({'state': 'rollback', 'checkpoint_path': node.checkpoint, 'checkpoint_id': result['checkpoint']['id']})
    assert back['restored'] is True and node.read() == OURS_10 and node.pair() == PAIR_10


def test_incomplete_rollback_fails_and_says_what_is_left(node):
    converged(node)
    applied = run_ok(args(node, addresses=['10.99.0.10/24', '10.99.1.10/24']))
    node.fail[(IP, 'addr', 'add', '192.168.100.10/24', 'dev', 'enp1s0f1np1')] = (2, '', 'RTNETLINK answers: No buffer space')
    result = run_fail({'state': 'rollback', 'checkpoint_path': node.checkpoint,
                       'checkpoint_id': applied['checkpoint']['id']})
    assert result['restored'] is False and result['changed'] is True
    assert result['msg'].startswith('ROLLBACK INCOMPLETE: ')
    assert 'No buffer space' in result['msg'] and 'ip addr add/del on those interfaces only' in result['msg']
    assert node.read() == OURS_10  # every step is tried: the file is back
    assert node.stored_checkpoint()['status'] == 'rollback_incomplete'


@pytest.mark.parametrize('setup, message', [
    ('none', 'no checkpoint at'),
    ('garbage', 'cannot be read'),
    ('other', 'a later run replaced it'),
])
def test_rollback_refuses_a_missing_or_foreign_checkpoint(node, setup, message):
    if setup != 'none':
        run_ok(args(node))
    if setup == 'garbage':
        with open(node.checkpoint, 'w') as handle:
            handle.write('{not json')
    node.calls[:] = []
    result = run_fail({'state': 'rollback', 'checkpoint_path': node.checkpoint, 'checkpoint_id': 'x-1'})
    assert message in result['msg'] and 'Nothing was changed' in result['msg']
    assert node.changing_calls() == []


def test_ssh_connection_is_read_from_the_environment(monkeypatch):
    monkeypatch.setenv('SSH_CONNECTION', '10.0.0.1 5555 10.0.0.2 22')
    assert netplan_fabric._ssh_connection() == '10.0.0.1 5555 10.0.0.2 22'


def test_ssh_connection_is_read_from_a_parent_when_sudo_dropped_it():
    """sudo resets the environment: the module finds SSH_CONNECTION in the shell that started sudo."""
    root = os.path.abspath(os.path.join(os.path.dirname(netplan_fabric.__file__), '..', '..', '..', '..', '..'))
    child = ('import sys; sys.path.insert(0, %r); '
             'from ansible_collections.sparkops.specdec.plugins.modules import netplan_fabric as m; '
             'print(m._ssh_connection())' % root)
    parent = ('import os, subprocess, sys; '
              'env = {k: v for k, v in os.environ.items() if k != "SSH_CONNECTION"}; '
              'sys.exit(subprocess.run([sys.executable, "-c", %r], env=env).returncode)' % child)
    env = dict(os.environ, SSH_CONNECTION='192.0.2.1 40000 192.0.2.2 22')
    out = subprocess.run([sys.executable, '-c', parent], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == '192.0.2.1 40000 192.0.2.2 22'
    env.pop('SSH_CONNECTION')
    out = subprocess.run([sys.executable, '-c', parent], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() in ('None', os.environ.get('SSH_CONNECTION', 'None'))


# ---------------------------------------------------------------------------- layouts (issue 24)
RING = ['enp1s0f0np0', 'enP2p1s0f0np0', 'enp1s0f1np1', 'enP2p1s0f1np1']


def test_ring_node_gets_the_runbooks_four_addresses(node):
    for name in RING:
        node.links[name]['up'] = True
    result = run_ok(args(node, interfaces=RING, layout='ring', node_index=1, node_count=3, port=None))
    # NVIDIA's manual plan for node 2 of a 3-ring (connect-three-sparks; docs/layouts.md).
    assert result['addresses'] == ['192.168.4.1/24', '192.168.5.1/24', '192.168.0.2/24', '192.168.1.2/24']
    text = node.read()
    assert _netplan.is_ours(text) and 'ConnectX-7 QSFP ring: all four logical interfaces' in text
    assert _netplan.addresses_in_file(text) == ['%s %s' % p for p in zip(RING, result['addresses'])]
    assert sorted(c for n in RING for c in node.links[n]['inet']) == sorted(result['addresses'])
    assert run_ok(args(node, interfaces=RING, layout='ring', node_index=1, node_count=3, port=None))['changed'] is False


def test_ring_needs_all_four_interfaces(node):
    result = run_fail(args(node, layout='ring', node_index=0, node_count=3))
    assert result['msg'].startswith('interfaces: a ring needs the four logical interfaces of both ports')
    assert node.read() is None and node.changing_calls() == []


def test_switch_node_gets_host_n(node):
    result = run_ok(args(node, layout='switch', node_index=2, node_count=4, _ansible_check_mode=True))
    assert result['addresses'] == ['192.168.100.3/24', '192.168.101.3/24']
    assert node.read() is None


def test_direct_layout_is_todays_file(node):
    result = run_ok(args(node, layout='direct'))
    assert node.read() == OURS_10 and result['addresses'] == ['192.168.100.10/24', '192.168.101.10/24']
