# -*- coding: utf-8 -*-
# Unit tests for plugins/module_utils/_netplan.py (pure functions of sparkops.specdec.netplan_fabric),
# with `ip -j addr show` fixtures from tests/unit/plugins/fixtures/nccl/ip/.

from __future__ import annotations

import copy
import json
import os

import pytest

from ansible_collections.sparkops.specdec.plugins.module_utils import _netplan

HERE = os.path.dirname(os.path.abspath(__file__))
IP_FIXTURES = os.path.join(HERE, '..', 'fixtures', 'nccl', 'ip')
PAIR = ['enp1s0f1np1', 'enP2p1s0f1np1']

# What roles/netplan_qsfp/templates/40-cx7.yaml.j2 rendered (the file on every node converged before
# this module existed): the module must write exactly this, so an upgrade is not a change.
TEMPLATE_OUTPUT = (
    "# Managed by sparkops.specdec (netplan_qsfp role). Local edits are overwritten.\n"
    "# ConnectX-7 QSFP port 1: both logical interfaces of the cabled port.\n"
    "network:\n"
    "  version: 2\n"
    "  ethernets:\n"
    "    enp1s0f1np1:\n"
    "      dhcp4: false\n"
    "      addresses:\n"
    "        - 192.168.100.11/24\n"
    "    enP2p1s0f1np1:\n"
    "      dhcp4: false\n"
    "      addresses:\n"
    "        - 192.168.101.11/24\n"
)


def ip_text(name):
    with open(os.path.join(IP_FIXTURES, name)) as handle:
        return handle.read()


def links(name='port1_addressed.json'):
    return _netplan.parse_links(ip_text(name))


def with_address(raw_text, ifname, local, prefix):
    """The fixture with one more IPv4 address on ifname (e.g. Ansible connected over the fabric)."""
    data = json.loads(raw_text)
    for link in data:
        if link['ifname'] == ifname:
            link['addr_info'].append({'family': 'inet', 'local': local, 'prefixlen': prefix, 'scope': 'global'})
    return json.dumps(data)


# ---------------------------------------------------------------------------- plan


def test_render_is_the_former_template_output():
    assert _netplan.render(PAIR, ['192.168.100.11/24', '192.168.101.11/24'], 1) == TEMPLATE_OUTPUT


def test_render_without_port_and_mark():
    text = _netplan.render(PAIR, ['10.0.0.1/24', '10.0.1.1/24'])
    assert '# ConnectX-7 QSFP port: both' in text
    assert _netplan.is_ours(text) and not _netplan.is_ours('network: {}\n') and not _netplan.is_ours(None)


def test_addresses_in_file_reads_our_own_format_only():
    assert _netplan.addresses_in_file(TEMPLATE_OUTPUT) == ['enp1s0f1np1 192.168.100.11/24',
                                                           'enP2p1s0f1np1 192.168.101.11/24']
    foreign = TEMPLATE_OUTPUT.replace('Managed by sparkops.specdec', 'Written by hand')
    assert _netplan.addresses_in_file(foreign) == []
    assert _netplan.addresses_in_file(None) == []


@pytest.mark.parametrize('existing, take_over, expected', [
    (None, False, 'create'),
    (TEMPLATE_OUTPUT, False, 'none'),
    (TEMPLATE_OUTPUT.replace('192.168.101.11', '192.168.101.12'), False, 'update'),
    ('network:\n  version: 2\n', False, 'refuse'),
    ('network:\n  version: 2\n', True, 'update'),
])
def test_file_decision(existing, take_over, expected):
    assert _netplan.file_decision(existing, TEMPLATE_OUTPUT, take_over) == expected


def test_refuse_message_names_the_fixes():
    msg = _netplan.refuse_message('/etc/netplan/40-cx7.yaml')
    assert 'was not written by sparkops.specdec' in msg and 'netplan_qsfp_take_over: true' in msg
    assert 'Nothing was changed' in msg and '\n' not in msg


@pytest.mark.parametrize('addresses, error', [
    (['192.168.100.10/24'], 'one address per interface'),
    (['192.168.100.10', '192.168.101.10/24'], 'has no prefix length'),
    (['192.168.300.10/24', '192.168.101.10/24'], 'is not an IPv4 address'),
    (['fd00::1/64', '192.168.101.10/24'], 'is not an IPv4 address'),
    (['192.168.100.0/24', '192.168.101.10/24'], 'network or broadcast'),
    (['192.168.100.255/24', '192.168.101.10/24'], 'network or broadcast'),
    (['192.168.100.10/24', '192.168.100.10/24'], 'given twice'),
])
def test_check_addresses_errors(addresses, error):
    with pytest.raises(_netplan.PlanError, match=error):
        _netplan.check_addresses(PAIR, addresses)


def test_check_addresses_normalises_and_needs_two_interfaces():
    assert _netplan.check_addresses(PAIR, ['192.168.100.10/24', '10.0.0.1/31']) == ['192.168.100.10/24', '10.0.0.1/31']
    with pytest.raises(_netplan.PlanError, match='two logical interfaces'):
        _netplan.check_addresses(['enp1s0f1np1'], ['192.168.100.10/24'])
    with pytest.raises(_netplan.PlanError, match='two logical interfaces'):
        _netplan.check_addresses(['a', 'a'], ['192.168.100.10/24', '192.168.101.10/24'])


def test_check_in_subnets():
    _netplan.check_in_subnets(['192.168.100.10/24', '192.168.101.10/24'], ['192.168.100.0/24', '192.168.101.0/24'], 'x')
    with pytest.raises(_netplan.PlanError, match='host_offset: the derived address 192.168.101.44 lies outside'):
        _netplan.check_in_subnets(['192.168.101.44/24'], ['192.168.100.0/24'], 'host_offset')
    with pytest.raises(_netplan.PlanError, match='is not an IPv4 subnet'):
        _netplan.check_in_subnets(['192.168.101.44/24'], ['nope'], 'host_offset')


# ---------------------------------------------------------------------------- links


def test_parse_links_and_pair_state():
    parsed = links()
    by_name = {link['ifname']: link for link in parsed}
    assert by_name['enp1s0f1np1'] == {'ifname': 'enp1s0f1np1', 'up': True, 'inet': ['192.168.100.10/24'],
                                      'all': ['192.168.100.10', 'fe80::4ebb:47ff:fe2c:3']}
    assert by_name['enp1s0f0np0']['up'] is True  # admin UP without carrier: the flags say UP
    state = _netplan.pair_state(parsed, PAIR)
    assert state == {'up': PAIR, 'addresses': ['enp1s0f1np1 192.168.100.10/24', 'enP2p1s0f1np1 192.168.101.10/24'],
                     'missing': []}
    assert _netplan.pair_state(parsed, ['enp1s0f1np1', 'nope0'])['missing'] == ['nope0']


def test_pair_state_down_link_and_link_local_only():
    data = json.loads(ip_text('port1_link_local.json'))
    for link in data:
        if link['ifname'] == 'enP2p1s0f1np1':
            link['flags'] = [f for f in link['flags'] if f != 'UP']
    state = _netplan.pair_state(_netplan.parse_links(json.dumps(data)), PAIR)
    # A link without the UP flag is down (admin state); link-local IPv4 addresses are addresses of the pair too.
    assert state == {'up': ['enp1s0f1np1'], 'missing': [],
                     'addresses': ['enp1s0f1np1 169.254.31.7/16', 'enP2p1s0f1np1 169.254.200.9/16']}


@pytest.mark.parametrize('text', [ip_text('not_json.txt'), '{"ifname": "x"}', None])
def test_parse_links_rejects_what_is_not_ip_json(text):
    with pytest.raises(ValueError, match='ip -j addr show'):
        _netplan.parse_links(text)


def test_parse_default_route():
    text = '[{"dst":"default","gateway":"10.20.0.1","dev":"enP7s7","protocol":"dhcp","flags":[]}]'
    assert _netplan.parse_default_route(text) == ['enP7s7']
    assert _netplan.parse_default_route('[]') == []
    assert _netplan.parse_default_route('garbage') == []
    assert _netplan.parse_default_route('') == []


def test_same_pair_state_ignores_order():
    a = {'up': ['x', 'y'], 'addresses': ['x 1.1.1.1/24', 'y 2.2.2.2/24']}
    b = {'up': ['y', 'x'], 'addresses': ['y 2.2.2.2/24', 'x 1.1.1.1/24'], 'missing': []}
    assert _netplan.same_pair_state(a, b)
    assert not _netplan.same_pair_state(a, dict(b, up=['x']))


# ---------------------------------------------------------------------------- management guard


@pytest.mark.parametrize('value, expected', [
    ('10.20.0.5 51234 10.20.0.37 22', '10.20.0.37'),
    ('fe80::1%eth0 51234 fe80::2%eth0 22', 'fe80::2'),
    ('10.20.0.5 51234', None),
    ('', None),
    (None, None),
    ('a b not-an-ip d', None),
])
def test_ssh_server_address(value, expected):
    assert _netplan.ssh_server_address(value) == expected


def test_management_from_ansible_host_and_default_route():
    mgmt = _netplan.management(links(), ['10.20.0.37', 'spark-1.example', ''], [])
    assert mgmt == {'addresses': ['10.20.0.37'], 'interfaces': ['enP7s7'], 'networks': ['10.20.0.0/24']}
    mgmt = _netplan.management(links(), ['spark-1.example'], ['docker0'])
    assert mgmt == {'addresses': [], 'interfaces': ['docker0'], 'networks': ['172.17.0.0/16']}


def test_guard_passes_a_separate_fabric():
    mgmt = _netplan.management(links(), ['10.20.0.37'], ['enP7s7'])
    assert _netplan.guard(PAIR, ['192.168.100.10/24', '192.168.101.10/24'], mgmt) == []


def test_guard_stops_ansible_over_the_fabric_pair():
    text = with_address(ip_text('port1_addressed.json'), 'enp1s0f1np1', '192.168.100.50', 24)
    mgmt = _netplan.management(_netplan.parse_links(text), ['192.168.100.50'], [])
    problems = _netplan.guard(PAIR, ['192.168.100.10/24', '192.168.101.10/24'], mgmt)
    assert problems[0] == ('the selected QSFP pair enp1s0f1np1, enP2p1s0f1np1 includes the management interface '
                           'enp1s0f1np1')
    msg = _netplan.guard_message(mgmt, problems)
    assert msg.startswith('netplan_qsfp stops before any change: the management connection (192.168.100.50 on '
                          'enp1s0f1np1, subnets 192.168.100.0/24) would be touched: ')
    assert msg.endswith(_netplan.FIX) and '\n' not in msg


def test_guard_stops_an_overlapping_subnet():
    mgmt = _netplan.management(links(), ['10.20.0.37'], [])
    problems = _netplan.guard(PAIR, ['10.20.0.200/16', '192.168.101.10/24'], mgmt)
    assert problems == ['planned fabric subnet 10.20.0.0/16 overlaps the management subnet 10.20.0.0/24']


def test_guard_stops_a_subnet_containing_a_management_address_not_on_any_interface():
    mgmt = _netplan.management(links(), ['192.168.100.77'], [])
    assert mgmt['interfaces'] == [] and mgmt['networks'] == []
    problems = _netplan.guard(PAIR, ['192.168.100.10/24', '192.168.101.10/24'], mgmt)
    assert problems == ['planned fabric subnet 192.168.100.0/24 contains the management address 192.168.100.77']
    assert 'an unknown interface' in _netplan.guard_message(mgmt, problems)


# ---------------------------------------------------------------------------- ip method


OLD = ['enp1s0f1np1 192.168.100.10/24', 'enP2p1s0f1np1 192.168.101.10/24']
NEW = ['enp1s0f1np1 10.99.0.10/24', 'enP2p1s0f1np1 10.99.1.10/24']


def test_ours_before_from_file_and_checkpoint():
    old_file = _netplan.render(PAIR, ['192.168.100.10/24', '192.168.101.10/24'], 1)
    cp = {'status': _netplan.APPLIED, 'applied': {'addresses': ['enp1s0f1np1 172.16.0.1/24']}}
    assert _netplan.ours_before(old_file, cp) == OLD + ['enp1s0f1np1 172.16.0.1/24']
    assert _netplan.ours_before(old_file, dict(cp, status=_netplan.ROLLED_BACK)) == OLD
    assert _netplan.ours_before('network: {}\n', None) == []


def test_ip_actions_warm_run_does_nothing():
    before = _netplan.pair_state(links(), PAIR)
    actions = _netplan.ip_actions(before, OLD, OLD, PAIR)
    assert actions == {'add': [], 'remove': [], 'up': []}
    assert _netplan.no_actions(actions)


def test_ip_actions_replace_our_stale_addresses_and_keep_foreign_ones():
    text = with_address(ip_text('port1_addressed.json'), 'enp1s0f1np1', '192.168.100.50', 24)
    before = _netplan.pair_state(_netplan.parse_links(text), PAIR)
    actions = _netplan.ip_actions(before, NEW, OLD, PAIR)
    assert actions == {'add': NEW, 'remove': OLD, 'up': []}
    after = _netplan.after_ip(before, actions)
    assert sorted(after['addresses']) == sorted(NEW + ['enp1s0f1np1 192.168.100.50/24'])


def test_ip_actions_first_install_adds_and_brings_up():
    before = {'up': ['enp1s0f1np1'], 'addresses': [], 'missing': []}
    actions = _netplan.ip_actions(before, NEW, [], PAIR)
    assert actions == {'add': NEW, 'remove': [], 'up': ['enP2p1s0f1np1']}
    assert _netplan.after_ip(before, actions) == {'up': PAIR, 'addresses': NEW}


def test_ip_actions_never_touch_other_interfaces():
    before = {'up': PAIR, 'addresses': OLD + ['enP7s7 192.168.102.1/24'], 'missing': []}
    actions = _netplan.ip_actions(before, NEW, OLD + ['enP7s7 192.168.102.1/24'], PAIR)
    assert 'enP7s7 192.168.102.1/24' not in actions['remove']


# ---------------------------------------------------------------------------- checkpoint and rollback


def checkpoint(existed=True, content=TEMPLATE_OUTPUT, pair=None, **extra):
    existing = {'content': content, 'owner': 'root', 'group': 'root', 'mode': '0600'} if existed else None
    cp = _netplan.new_checkpoint('cp-1', '2026-11-23T07:00:00+00:00', '/etc/netplan/40-cx7.yaml', existing,
                                 pair or {'up': PAIR, 'addresses': OLD}, PAIR, True, 'ip')
    cp.update(extra)
    return cp


def test_new_checkpoint_records_the_file_and_the_pair():
    cp = checkpoint()
    assert cp['status'] == _netplan.APPLYING and cp['schema'] == _netplan.CHECKPOINT_SCHEMA
    assert cp['file'] == {'existed': True, 'content': TEMPLATE_OUTPUT, 'owner': 'root', 'group': 'root', 'mode': '0600'}
    assert cp['pair'] == {'up': PAIR, 'addresses': OLD}
    assert checkpoint(existed=False)['file']['existed'] is False
    assert _netplan.check_checkpoint(cp) == [] and _netplan.check_checkpoint(cp, 'cp-1') == []


def test_check_checkpoint_problems():
    assert _netplan.check_checkpoint(['x']) == ['the checkpoint is not a JSON object']
    assert 'a later run replaced it' in _netplan.check_checkpoint(checkpoint(), 'cp-2')[0]
    cp = checkpoint()
    del cp['pair']
    cp['schema'] = 99
    assert _netplan.check_checkpoint(cp) == ['checkpoint schema 99 is not 1', 'the checkpoint has no pair']


def test_restore_actions_after_a_replaced_file_and_addresses():
    cp = checkpoint(file_changed=True, backup_file='/etc/netplan/40-cx7.yaml.1.x~')
    changed_file = _netplan.render(PAIR, ['10.99.0.10/24', '10.99.1.10/24'], 1)
    acts = _netplan.restore_actions(cp, changed_file, {'up': PAIR, 'addresses': NEW})
    assert acts == {'file': 'restore', 'attributes': True, 'netplan_apply': False, 'remove': NEW, 'add': OLD,
                    'down': [], 'up': [], 'backup': '/etc/netplan/40-cx7.yaml.1.x~'}
    assert _netplan.file_outcome(cp) == 'restored to its previous content'


def test_restore_actions_after_a_first_install():
    cp = checkpoint(existed=False, pair={'up': ['enp1s0f1np1'], 'addresses': []}, file_changed=True,
                    netplan_applied=True)
    acts = _netplan.restore_actions(cp, 'x', {'up': PAIR, 'addresses': NEW})
    assert (acts['file'], acts['netplan_apply'], acts['remove'], acts['add'], acts['down']) == (
        'remove', True, NEW, [], ['enP2p1s0f1np1'])
    assert _netplan.file_outcome(cp) == 'removed (there was none before)'
    assert _netplan.restore_actions(cp, None, {'up': ['enp1s0f1np1'], 'addresses': []})['file'] == 'none'


def test_restore_actions_brings_up_a_link_that_was_up():
    cp = checkpoint()
    acts = _netplan.restore_actions(cp, TEMPLATE_OUTPUT, {'up': ['enp1s0f1np1'], 'addresses': OLD})
    assert (acts['file'], acts['up'], acts['down'], acts['add'], acts['remove']) == (
        'none', ['enP2p1s0f1np1'], [], [], [])
    assert _netplan.file_outcome(cp) == 'unchanged'


def test_restore_actions_does_not_mutate_the_checkpoint():
    cp = checkpoint()
    frozen = copy.deepcopy(cp)
    _netplan.restore_actions(cp, None, {'up': [], 'addresses': NEW})
    assert cp == frozen


def test_addresses_in_subnets_are_the_links_two_nodes_share():
    """The ring's hostfile, the peer copy and the SSH mesh's verification read a node's addresses on shared links."""
    s1 = ['192.168.0.1/24', '192.168.1.1/24', '192.168.2.1/24', '192.168.3.1/24']
    s3 = ['192.168.2.2/24', '192.168.3.2/24', '192.168.4.2/24', '192.168.5.2/24']
    assert _netplan.addresses_in_subnets(s1, s3) == ['192.168.2.1', '192.168.3.1']
    assert _netplan.addresses_in_subnets(s3, s1) == ['192.168.2.2', '192.168.3.2']
    # A bare address is a subnet of one address; items that are not addresses are left out; IPv6 only meets IPv6.
    assert _netplan.addresses_in_subnets(['10.20.0.38'], ['10.20.0.37']) == []
    assert _netplan.addresses_in_subnets(['10.20.0.38', 'x', 'fd00::2/64'], ['10.20.0.0/24', 'fd00::1/64', 'y']) == [
        '10.20.0.38', 'fd00::2']
    assert _netplan.addresses_in_subnets(None, s1) == [] and _netplan.addresses_in_subnets(s1, None) == []
