# -*- coding: utf-8 -*-
"""Fetch once per pair only over the SSH mesh of the deploy user (module_utils/_peer_copy.py, filter peer_copy).

The copy runs ``ssh <head>`` as the deploy user; the ssh_mesh role sets up passwordless SSH for ``ssh_mesh_user``
(empty: the deploy user). auto (the default) falls back to every node fetching by itself when the mesh user is another
user; true demands the copy and is then a one-line error; false is off. true/false as YAML or -e gives them still work.
"""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.sparkops.specdec.plugins.filter import peer_copy as peer_copy_filter
from ansible_collections.sparkops.specdec.plugins.module_utils import _peer_copy

PAIR = ['spark-1', 'spark-2']
NAME = 'nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc12'


def _hv():
    # Each member's published netplan_qsfp_fabric, by member (None: it has none).
    return {'spark-1': {'ips': ['192.168.100.10', '192.168.101.10']}, 'spark-2': {}}


@pytest.mark.parametrize('value,expected', [
    ('auto', 'auto'), (' AUTO ', 'auto'), (True, True), (False, False), ('true', True), ('True', True),
    ('false', False), ('yes', True), ('no', False)])
def test_setting_value_accepts_auto_and_the_booleans_it_was(value, expected):
    got = _peer_copy.setting_value(_peer_copy.MODELS_SETTING, value)
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize('value', ['sometimes', '', None, 2])
def test_setting_value_refuses_anything_else_naming_the_setting(value):
    with pytest.raises(_peer_copy.PeerCopyError) as err:
        _peer_copy.setting_value(_peer_copy.IMAGE_SETTING, value)
    assert err.value.kind == 'invalid_option'
    assert err.value.msg.startswith('trtllm_container_image_peer_copy: ') and '\n' not in err.value.msg


@pytest.mark.parametrize('mesh_user,deploy_user', [('', 'spark'), ('spark', 'spark'), ('mpi', ''), ('', '')])
def test_mesh_of_the_deploy_user_or_unknown_keeps_the_copy(mesh_user, deploy_user):
    for value in ('auto', True):
        assert _peer_copy.mesh_user_decision(_peer_copy.MODELS_SETTING, value, mesh_user, deploy_user) == (True, None)
        worker = _peer_copy.peer_copy_role(_hv(), 'spark-2', PAIR, 'spark-1', value, True, mesh_user, deploy_user)
        assert worker['mode'] == 'receive' and worker['source_address'] == '192.168.100.10'
        head = _peer_copy.peer_copy_role(_hv(), 'spark-1', PAIR, 'spark-1', value, True, mesh_user, deploy_user)
        assert head['mode'] == 'fetch'


def test_auto_with_another_mesh_user_makes_every_node_fetch_by_itself_and_says_why():
    for me in PAIR:
        role = _peer_copy.peer_copy_role(_hv(), me, PAIR, 'spark-1', 'auto', True, 'mpi', 'spark')
        assert role['mode'] == 'alone' and role['source'] is None and role['source_address'] is None
        assert 'ssh_mesh_user mpi is not the deploy user spark' in role['reason']
        image = _peer_copy.image_peer_copy_role(_hv(), me, PAIR, 'spark-1', 'auto', NAME, 'mpi', 'spark')
        assert image['mode'] == 'alone'
        assert image['reason'].startswith('trtllm_container_image_peer_copy is auto and ssh_mesh_user mpi')


def test_true_with_another_mesh_user_is_one_line_naming_setting_problem_and_fix():
    for value in (True, 'true'):
        with pytest.raises(_peer_copy.PeerCopyError) as err:
            _peer_copy.peer_copy_role(_hv(), 'spark-1', PAIR, 'spark-1', value, True, 'mpi', 'spark')
        msg = err.value.msg
        assert err.value.kind == 'mesh_user' and '\n' not in msg
        assert msg.startswith('specdec_server_peer_copy: true, but ssh_mesh_user mpi is not the deploy user spark')
        assert 'set specdec_server_peer_copy: auto' in msg and 'set ssh_mesh_user to spark' in msg
    with pytest.raises(_peer_copy.PeerCopyError) as err:
        _peer_copy.image_peer_copy_role(_hv(), 'spark-2', PAIR, 'spark-1', True, NAME, 'mpi', 'spark')
    assert err.value.kind == 'mesh_user' and err.value.msg.startswith('trtllm_container_image_peer_copy: true, but')


def test_no_error_where_no_copy_would_run():
    # One Spark, false, downloads off (each node checks its cache) and an image pinned by digest: nothing to copy.
    assert _peer_copy.peer_copy_role(_hv(), 'spark-1', ['spark-1'], 'spark-1', True, True, 'mpi', 'spark')['mode'] == 'alone'
    off = _peer_copy.peer_copy_role(_hv(), 'spark-2', PAIR, 'spark-1', 'false', True, 'mpi', 'spark')
    assert off['mode'] == 'alone' and off['reason'].startswith('specdec_server_peer_copy is false')
    checks = _peer_copy.peer_copy_role(_hv(), 'spark-2', PAIR, 'spark-1', True, False, 'mpi', 'spark')
    assert checks['mode'] == 'alone' and checks['reason'].startswith('specdec_server_download is false')
    pinned = 'nvcr.io/nvidia/tensorrt-llm/release@sha256:' + 'a' * 64
    assert _peer_copy.image_peer_copy_role(_hv(), 'spark-2', PAIR, 'spark-1', True, pinned, 'mpi', 'spark')['mode'] == 'alone'


def test_filter_takes_the_setting_as_given_and_turns_errors_into_filter_errors():
    # 'auto' was bool()-ed to True before: the filter passes the value through.
    role = peer_copy_filter.peer_copy_role(_hv(), 'spark-2', 'spark-1', 'auto', True, ['mpi', 'spark'])
    assert role['mode'] == 'alone'
    assert peer_copy_filter.peer_copy_role(_hv(), 'spark-2', 'spark-1', 'auto', True, ['', 'spark'])['mode'] == 'receive'
    # Without the users (an older caller): no check of the mesh user.
    assert peer_copy_filter.peer_copy_role(_hv(), 'spark-2', 'spark-1', True, True)['mode'] == 'receive'
    assert peer_copy_filter.image_peer_copy_role(_hv(), 'spark-2', 'spark-1', 'false', NAME, ['', 'spark'])['mode'] == 'alone'
    with pytest.raises(AnsibleFilterError, match='^trtllm_container_image_peer_copy: true, but ssh_mesh_user mpi'):
        peer_copy_filter.image_peer_copy_role(_hv(), 'spark-2', 'spark-1', True, NAME, ['mpi', 'spark'])


def _settings(**kw):
    base = {'specdec_server_peer_copy': 'auto', 'trtllm_container_image_peer_copy': 'auto', 'ssh_mesh_user': '',
            'specdec_server_download': True, 'trtllm_container_image': NAME}
    base.update(kw)
    return base


def test_plan_default_copies_over_the_deploy_users_mesh():
    peer, errors = _peer_copy.plan_peer_copy(_settings(), PAIR, 'spark')
    assert errors == []
    assert [(k, v['value'], v['use'], v['mesh_user_differs']) for k, v in sorted(peer.items())] == [
        ('image', 'auto', True, False), ('models', 'auto', True, False)]
    peer, errors = _peer_copy.plan_peer_copy(_settings(ssh_mesh_user='spark'), PAIR, 'spark')
    assert errors == [] and peer['models']['use'] is True and peer['image']['use'] is True


def test_plan_auto_with_another_mesh_user_fetches_on_every_node_and_flags_it():
    peer, errors = _peer_copy.plan_peer_copy(_settings(ssh_mesh_user='mpi'), PAIR, 'spark')
    assert errors == []
    for key in ('models', 'image'):
        assert peer[key]['use'] is False and peer[key]['mesh_user_differs'] is True
        assert peer[key]['reason'].startswith('%s is auto and ssh_mesh_user mpi' % peer[key]['setting'])


def test_plan_true_with_another_mesh_user_is_an_error_per_setting():
    peer, errors = _peer_copy.plan_peer_copy(
        _settings(ssh_mesh_user='mpi', specdec_server_peer_copy=True, trtllm_container_image_peer_copy='false'),
        PAIR, 'spark')
    assert len(errors) == 1 and errors[0].startswith('specdec_server_peer_copy: true, but ssh_mesh_user mpi')
    assert peer['models']['use'] is False and peer['image']['use'] is False
    assert peer['image']['value'] == 'false' and peer['image']['mesh_user_differs'] is False


def test_plan_without_a_known_deploy_user_leaves_the_verdict_to_the_nodes():
    peer, errors = _peer_copy.plan_peer_copy(_settings(ssh_mesh_user='mpi', specdec_server_peer_copy=True), PAIR, '')
    assert errors == [] and peer['models']['use'] is None and peer['image']['use'] is None


def test_plan_single_node_and_bad_values():
    peer, errors = _peer_copy.plan_peer_copy(_settings(ssh_mesh_user='mpi', specdec_server_peer_copy=True),
                                             ['spark-1'], 'spark')
    assert errors == [] and peer['models']['use'] is False and peer['models']['reason'] == 'single node'
    peer, errors = _peer_copy.plan_peer_copy(_settings(specdec_server_peer_copy='maybe'), PAIR, 'spark')
    assert len(errors) == 1 and errors[0].startswith('specdec_server_peer_copy: ') and peer['models']['value'] is None


@pytest.mark.parametrize('me', PAIR)
def test_filters_take_each_members_fabric_and_refuse_hostvars(me):
    # Each member's published netplan_qsfp_fabric (what the roles pass) works; hostvars (each member's variables) is a
    # one-line filter error, on the head and its peer alike.
    hostvars = {m: {'inventory_hostname': m, 'netplan_qsfp_fabric': f} for m, f in _hv().items()}
    for role, setting in ((peer_copy_filter.peer_copy_role, True), (peer_copy_filter.image_peer_copy_role, True)):
        # the members are the keys (spark-2 has no fabric: {})
        assert role(_hv(), me, 'spark-1', setting)['mode'] == ('fetch' if me == 'spark-1' else 'receive')
        with pytest.raises(AnsibleFilterError, match=r"^peer copy: expected the netplan_qsfp_fabric of spark-1, got its "
                                                     r"variables: pass dict\(members \| zip"):
            role(hostvars, me, 'spark-1', setting)
    # a member missing from the keys is not a member; the keys' order is the members' order
    with pytest.raises(AnsibleFilterError, match=r"^spark-2 is not a member of its deployment \(spark-1\)"):
        peer_copy_filter.peer_copy_role({'spark-1': _hv()['spark-1']}, 'spark-2', 'spark-1', True)
