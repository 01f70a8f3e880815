# -*- coding: utf-8 -*-
# Layouts as data (issue 24): module_utils/_layout.py. Pure: no network, no subprocess.

from __future__ import annotations

import pytest

from ansible_collections.sparkops.specdec.plugins.module_utils import _layout, _netplan

# NVIDIA's manual 3-ring plan (dgx-spark-playbooks nvidia/connect-three-sparks; docs/layouts.md), per node in the
# order enp1s0f0np0, enP2p1s0f0np0, enp1s0f1np1, enP2p1s0f1np1.
RUNBOOK_RING = [
    ['192.168.0.1/24', '192.168.1.1/24', '192.168.2.1/24', '192.168.3.1/24'],
    ['192.168.4.1/24', '192.168.5.1/24', '192.168.0.2/24', '192.168.1.2/24'],
    ['192.168.2.2/24', '192.168.3.2/24', '192.168.4.2/24', '192.168.5.2/24'],
]
THREE = ['s1', 's2', 's3']


@pytest.mark.parametrize('setting,count,accept,expected', [
    ('auto', 1, False, None), ('', 2, False, 'direct'), (None, 2, False, 'direct'), ('direct', 2, False, 'direct'),
    ('ring', 3, False, 'ring'), ('ring', 4, True, 'ring'), ('switch', 2, False, 'switch'), ('switch', 4, False, 'switch'),
])
def test_layouts_accepted(setting, count, accept, expected):
    assert _layout.resolve_layout(setting, count, accept) == (expected, None)


@pytest.mark.parametrize('setting,count,accept,fragment', [
    ('auto', 3, False, 'the deployment has 3 Sparks and no layout; set specdec_layout: ring'),
    ('auto', 4, False, 'the deployment has 4 Sparks and no layout'),
    ('ring', 4, False, 'a 4-node ring is not an NVIDIA-supported layout'),
    ('ring', 2, False, 'a ring needs three Sparks'),
    ('direct', 3, False, 'direct cables two Sparks, the deployment has 3'),
    ('switch', 5, False, 'a deployment has 1 to 4 Sparks, this one has 5'),
    ('switch', 1, False, 'switch needs two or more Sparks'),
    ('mesh', 2, False, "'mesh' is not a layout"),
])
def test_layouts_refused_with_one_line(setting, count, accept, fragment):
    layout, error = _layout.resolve_layout(setting, count, accept)
    assert layout is None and fragment in error
    assert error.startswith('specdec_layout: ') and '\n' not in error


def test_parallel_sizes_must_multiply_to_the_gpus():
    assert _layout.parallel_problem(1, 3, 3, 'ring-a') is None
    assert _layout.parallel_problem(4, 1, 4, 'sw') is None
    line = _layout.parallel_problem(2, 2, 3, 'ring-a')
    assert line.startswith('specdec_server_tp_size: tp_size 2 x pp_size 2 = 4 ranks, but deployment ring-a has 3 GPU(s)')
    assert 'tp 3 x pp 1 or tp 1 x pp 3' in line


def test_ring_plan_is_nvidias_manual_plan():
    assert [_layout.ring_addresses(i, 3) for i in range(3)] == RUNBOOK_RING
    assert _layout.check_plan('ring', THREE, lambda h: {}, {}) == []


def test_ring_cables_join_port0_to_the_next_nodes_port1():
    assert _layout.ring_cables(3) == [(0, 1), (1, 2), (2, 0)]
    assert _layout.ring_peer(0, 3, 'enp1s0f0np0') == (1, 'enp1s0f1np1')
    assert _layout.ring_peer(0, 3, 'enP2p1s0f1np1') == (2, 'enP2p1s0f0np0')


def test_four_node_ring_uses_eight_distinct_subnets():
    plan = [_layout.ring_addresses(i, 4) for i in range(4)]
    nets = {a.rsplit('.', 1)[0] for node in plan for a in node}
    assert len(nets) == 8
    assert _layout.check_plan('ring', ['a', 'b', 'c', 'd'], lambda h: {}, {}) == []


def test_switch_plan_is_nvidias():
    assert [_layout.switch_addresses(i) for i in range(4)] == [
        ['192.168.100.%d/24' % n, '192.168.101.%d/24' % n] for n in (1, 2, 3, 4)]
    assert _layout.check_plan('switch', ['a', 'b', 'c', 'd'], lambda h: {}, {}) == []


def test_direct_pair_keeps_todays_scheme():
    # Today's pair (netplan_qsfp defaults): .10 and .11 in 192.168.100/24 and 192.168.101/24, as before issue 24.
    for index, host in ((0, '10'), (1, '11')):
        assert _layout.node_addresses('direct', {}, index, 2) == (
            ['192.168.100.%s/24' % host, '192.168.101.%s/24' % host], None)
        assert _layout.node_addresses('direct', {}, index, 2) == _netplan.fabric_addresses({}, index, 2)


def test_per_node_override_and_its_cable_check():
    good = {'s2': {'netplan_qsfp_addresses': ['10.9.4.1/24', '10.9.5.1/24', '10.9.0.2/24', '10.9.1.2/24']}}
    subnets = {'netplan_qsfp_ring_subnets': ['10.9.%d.0/24' % i for i in range(6)]}
    assert _layout.check_plan('ring', THREE, lambda h: dict(subnets, **good.get(h, {})), {}) == []
    bad = {'s2': {'netplan_qsfp_addresses': ['10.9.4.1/24', '10.9.5.1/24', '10.9.7.2/24', '10.9.1.2/24']}}
    errors = _layout.check_plan('ring', THREE, lambda h: dict(subnets, **bad.get(h, {})), {})
    # One line for the one parted link (seen from both of its ends, as it was reported before issue 38).
    assert errors == ['netplan_qsfp_addresses: 1 logical link(s) of the ring have their two ends in different subnets: '
                      's1 enp1s0f0np0 (10.9.0.1/24) -- s2 enp1s0f1np1 (10.9.7.2/24); give both ends of each link '
                      'addresses in one subnet, or drop netplan_qsfp_addresses to use the runbook\'s plan.'], errors
    three = {'s1': {'netplan_qsfp_addresses': ['10.9.0.1/24', '10.9.1.1/24']}}
    errors = _layout.check_plan('ring', THREE, lambda h: dict(subnets, **three.get(h, {})), {})
    assert errors == ['netplan_qsfp_addresses: s1 has 2 address(es), a ring node needs 4 (enp1s0f0np0, enP2p1s0f0np0, '
                      'enp1s0f1np1, enP2p1s0f1np1); fix the list, or drop it to use the layout\'s plan.']


def test_management_address_inside_a_fabric_subnet_is_refused():
    errors = _layout.check_plan('switch', ['a', 'b'], lambda h: {}, {'a': '192.168.100.7', 'b': 'spark-2.lan'})
    assert errors == ['netplan_qsfp_link_subnets: fabric subnet 192.168.100.0/24 of a contains the management address '
                      '192.168.100.7 of a (ansible_host); pick fabric subnets off the management network.',
                      'netplan_qsfp_link_subnets: fabric subnet 192.168.100.0/24 of b contains the management address '
                      '192.168.100.7 of a (ansible_host); pick fabric subnets off the management network.']


def test_switch_nodes_must_share_both_subnets():
    over = {'b': {'netplan_qsfp_addresses': ['192.168.100.2/24', '192.168.102.2/24']}}
    errors = _layout.check_plan('switch', ['a', 'b'], lambda h: over.get(h, {}), {})
    assert errors == ['netplan_qsfp_addresses: logical 2 of b is in 192.168.102.0/24 but a\'s is in 192.168.101.0/24; '
                      'on a switch every node\'s logical 2 shares one subnet.']


def _iface(netdev, port, state='up', ipv4=()):
    return {'netdev': netdev, 'physical_port': port, 'state': state, 'ipv4': list(ipv4)}


def _ring_facts(addressed=True):
    facts = {}
    for index, host in enumerate(THREE):
        facts[host] = {'selected_port': 1, 'interfaces': [
            _iface(dev, 0 if 'f0np0' in dev else 1, ipv4=[RUNBOOK_RING[index][slot]] if addressed else [])
            for slot, dev in enumerate(_layout.RING_NETDEVS)]}
    return facts


def test_ring_cabling_from_link_state():
    assert _layout.cabling_problems('ring', _ring_facts(), THREE) == []
    assert _layout.cabling_problems('ring', _ring_facts(addressed=False), THREE) == []
    facts = _ring_facts()
    facts['s3']['interfaces'][0]['state'] = 'down'
    assert _layout.cabling_problems('ring', facts, THREE) == [
        's3: enp1s0f0np0 (cable to s1 enp1s0f1np1) not Up; a ring needs all four logical interfaces of every Spark Up: '
        'cable port 0 of each Spark to port 1 of the next (S1->S2->S3->S1).']


def test_ring_crossed_cable_shows_in_the_subnets():
    facts = _ring_facts()
    # s1's port 0 cabled to s3 instead of s2: its addresses face the wrong neighbour.
    facts['s2']['interfaces'][2]['ipv4'] = ['192.168.4.9/24']
    problems = _layout.cabling_problems('ring', facts, THREE)
    assert problems == ['s1 enp1s0f0np0 and s2 enp1s0f1np1 share no subnet (192.168.0.0/24 vs 192.168.4.0/24): that '
                        'cable does not join the ring\'s neighbours as planned; check which port each cable is in.']


def test_switch_cabling_needs_the_same_port_everywhere():
    facts = {h: {'selected_port': 1, 'interfaces': []} for h in ('a', 'b', 'c')}
    assert _layout.cabling_problems('switch', facts, ['a', 'b', 'c']) == []
    facts['c']['selected_port'] = 0
    assert _layout.cabling_problems('switch', facts, ['a', 'b', 'c']) == [
        'The Sparks use different QSFP ports (a: port 1; b: port 1; c: port 0); switch needs the same physical port on '
        'every Spark: recable, or set netplan_qsfp_port.']
    assert _layout.cabling_problems('switch', {'a': facts['a']}, ['a', 'b']) == [
        'b: no link state (sparkops.specdec.nccl_interface_info did not run there).']


def _published(addresses):
    return {'addresses': list(addresses), 'ips': [a.split('/', maxsplit=1)[0] for a in addresses]}


def test_hostfile_of_a_pair_is_link_1_head_first_as_before():
    fabric = {'spark-1': _published(['192.168.100.10/24', '192.168.101.10/24']),
              'spark-2': _published(['192.168.100.11/24', '192.168.101.11/24'])}
    assert _layout.hostfile_addresses('direct', 'spark-1', ['spark-1', 'spark-2'], fabric) == (
        ['192.168.100.10', '192.168.100.11'], None)
    # The head first, whatever the inventory order (the play's former expression did the same).
    assert _layout.hostfile_addresses(None, 'spark-2', ['spark-1', 'spark-2'], fabric) == (
        ['192.168.100.11', '192.168.100.10'], None)


def test_hostfile_of_a_switch_is_the_shared_subnet():
    nodes = ['a', 'b', 'c', 'd']
    fabric = {h: _published(_layout.switch_addresses(i)) for i, h in enumerate(nodes)}
    assert _layout.hostfile_addresses('switch', 'a', nodes, fabric) == (
        ['192.168.100.1', '192.168.100.2', '192.168.100.3', '192.168.100.4'], None)


def test_hostfile_of_a_ring_uses_each_nodes_cable_to_the_head():
    fabric = {h: _published(RUNBOOK_RING[i]) for i, h in enumerate(THREE)}
    # s1's neighbours: s2 on the s1-s2 cable (192.168.0.2, s2's port 1), s3 on the s3-s1 cable (192.168.2.2).
    assert _layout.hostfile_addresses('ring', 's1', THREE, fabric) == (['192.168.0.1', '192.168.0.2', '192.168.2.2'],
                                                                       None)
    assert _layout.hostfile_addresses('ring', 's2', THREE, fabric) == (['192.168.4.1', '192.168.0.1', '192.168.4.2'],
                                                                       None)


def test_hostfile_of_a_four_node_ring_is_the_management_network():
    four = ['s1', 's2', 's3', 's4']
    fabric = {h: _published(_layout.ring_addresses(i, 4)) for i, h in enumerate(four)}
    # s3 is opposite the head: without the management addresses, one line.
    assert _layout.hostfile_addresses('ring', 's1', four, fabric) == ([], (
        "specdec_layout: s3 is not cabled to the head s1 in this ring, so mpirun on the head cannot reach it over the "
        "fabric, and the management addresses (ansible_host) of the Sparks are not known; set ansible_host of every "
        "Spark to its management IP address, or use specdec_layout: switch for four Sparks."))
    management = {'s1': '10.0.0.1', 's2': '10.0.0.2', 's3': '10.0.0.3', 's4': '10.0.0.4'}
    hosts, error = _layout.hostfile_addresses('ring', 's2', four, fabric, management)
    assert error is None and hosts == ['10.0.0.2', '10.0.0.1', '10.0.0.3', '10.0.0.4']
    # A 3-node ring and a pair keep their fabric hostfile, management addresses or not.
    three = {h: _published(RUNBOOK_RING[i]) for i, h in enumerate(THREE)}
    hosts3, error3 = _layout.hostfile_addresses('ring', 's1', THREE, three, management)
    assert (hosts3, error3) == (['192.168.0.1', '192.168.0.2', '192.168.2.2'], None)
