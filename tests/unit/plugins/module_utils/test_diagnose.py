# -*- coding: utf-8 -*-
# Unit tests of the PRIVATE module_util _diagnose (support bundle): how a command's result becomes an item (ok,
# missing, error), the log tail, the container's fabric environment, the bundle's files and manifest (missing items
# and unreached nodes recorded, everything redacted) and the tarball (mode 0600, atomic, one root directory).

from __future__ import annotations

import json
import tarfile

import pytest

from ansible_collections.sparkops.specdec.plugins.module_utils import _diagnose, _secrets
from ansible_collections.sparkops.specdec.tests.unit.plugins.module_utils.test_secrets import CANARY, _leaks


@pytest.mark.parametrize('rc, out, err, fmt, status, reason', [
    (0, '{"a": 1}', '', 'json', 'ok', ''),
    (0, 'text\n', '', 'text', 'ok', ''),
    (0, 'not json', '', 'json', 'error', 'is not JSON'),
    (127, '', 'ibdev2netdev: command not found', 'text', 'missing', 'command not found'),
    (1, '', 'Error: No such container: trtllm-multinode\n', 'json', 'missing', 'No such container'),
    (1, '', 'Error response from daemon: No such object: x', 'json', 'missing', 'No such object'),
    (1, '', 'Cannot connect to the Docker daemon at unix:///var/run/docker.sock.', 'json', 'error', 'failed (rc 1)'),
    (2, '', '', 'text', 'error', 'exit code 2'),
])
def test_outcome(rc, out, err, fmt, status, reason):
    got = _diagnose.outcome(rc, out, err, 'cmd x', fmt)
    assert got['status'] == status and reason in got['reason'] and got['source'] == 'cmd x'
    if status == 'ok':
        assert got['content'] == ({'a': 1} if fmt == 'json' else out) and got['format'] == fmt
    else:
        assert got['content'] is None and '\n' not in got['reason']


def test_tail_of_a_large_log(tmp_path):
    log = tmp_path / 'server.log'
    log.write_text(''.join('line %d\n' % i for i in range(100000)))
    assert _diagnose.tail(str(log), 3) == 'line 99997\nline 99998\nline 99999\n'
    assert _diagnose.tail(str(log), 0) == ''
    short = tmp_path / 'short.log'
    short.write_bytes(b'a\nb\xff\nc')
    assert _diagnose.tail(str(short), 10) == 'a\nb\ufffd\nc'
    with pytest.raises(OSError):
        _diagnose.tail(str(tmp_path / 'absent'), 5)


def test_fabric_env():
    env = ['PATH=/bin', 'NCCL_SOCKET_IFNAME=enp1s0f1np1', 'UCX_NET_DEVICES=enp1s0f1np1', 'OMPI_MCA_x=a=b',
           'PMIX_MCA_y=1', 'HF_TOKEN=secret', 'NOEQUALS']
    assert _diagnose.fabric_env(env) == {'NCCL_SOCKET_IFNAME': 'enp1s0f1np1', 'UCX_NET_DEVICES': 'enp1s0f1np1',
                                         'OMPI_MCA_x': 'a=b', 'PMIX_MCA_y': '1'}
    assert _diagnose.fabric_env(None) == {}


def node_items(token=CANARY):
    ok = _diagnose.item
    items = {
        'os': ok('ok', source='os', content={'uname': {'release': '6.8.0'}}, fmt='json'),
        'docker_version': ok('ok', source='docker version', content={'Client': {'Version': '26'}}, fmt='json'),
        'docker_info': ok('ok', source='docker info', content={'HttpProxy': 'http://u:pw-123@proxy:3128'}, fmt='json'),
        'nvidia_runtime': ok('missing', 'no nvidia runtime in docker info, no nvidia-ctk or nvidia-smi', 'docker info'),
        'container_inspect': ok('ok', source='inspect', fmt='json',
                                content={'Config': {'Env': ['HF_TOKEN=' + token, 'NCCL_IB_HCA=mlx5_0']}}),
        'container_env': ok('ok', source='env', content={'NCCL_IB_HCA': 'mlx5_0'}, fmt='json'),
        'container_log': ok('ok', source='logs', content='sshd waits for 192.168.100.10\nBearer %s\n' % token),
        'netplan': ok('ok', source='/etc/netplan/40-cx7.yaml', fmt='dir',
                      content={'40-cx7.yaml': '# Managed by sparkops.specdec\nnetwork: {}\n'}),
        'ip_addr': ok('ok', source='ip -j addr', content=[{'ifname': 'enp1s0f1np1'}], fmt='json'),
        'ibdev2netdev': ok('missing', 'ibdev2netdev: command not found', 'ibdev2netdev'),
        'hostfile': ok('ok', source='hostfile', content='192.168.100.10 slots=1\n'),
        'server_log': ok('ok', source='server.log', content='error: token %s rejected\n' % token),
        'state': ok('ok', source='state', fmt='dir', content={'spark-1.json': {'running': {'env': {'HF_TOKEN': token}}}}),
    }
    return items


def test_build_redacts_everything_and_records_missing_and_unreached():
    controller = {'items': {'preflight_report': _diagnose.item('missing', '/x/preflight-report.json: No such file', '')},
                  'node_errors': {'spark-2': 'Failed to connect to the host via ssh: %s' % CANARY}}
    files, manifest = _diagnose.build({'spark-1': node_items(), 'spark-2': None}, controller,
                                      _secrets.Redactor([CANARY]), '2026-11-23T18:00:00+00:00')
    names = [name for name, _data in files]
    assert names[0] == 'manifest.json'
    assert 'nodes/spark-1/container-inspect.json' in names and 'nodes/spark-1/netplan/40-cx7.yaml' in names
    assert 'nodes/spark-1/state/spark-1.json' in names and 'nodes/spark-1/ibdev2netdev.txt' not in names
    assert not [n for n in names if n.startswith('nodes/spark-2/')]
    blob = b'\n'.join(data for _name, data in files).decode()
    assert not _leaks(blob, CANARY) and not _secrets.Finder([CANARY]).find(blob)
    assert 'pw-123' not in blob
    assert json.loads(dict(files)['manifest.json']) == manifest
    assert manifest['missing'] == [
        'spark-1: nvidia_runtime (no nvidia runtime in docker info, no nvidia-ctk or nvidia-smi)',
        'spark-1: ibdev2netdev (ibdev2netdev: command not found)',
        'controller: preflight_report (/x/preflight-report.json: No such file)']
    assert manifest['errors'] == ['spark-2: not collected (Failed to connect to the host via ssh: ********)']
    assert manifest['nodes']['spark-2'] == {'collected': False, 'items': {},
                                            'reason': 'Failed to connect to the host via ssh: ********'}
    entry = manifest['nodes']['spark-1']['items']['hostfile']
    assert entry == {'status': 'ok', 'reason': '', 'source': 'hostfile', 'files': ['nodes/spark-1/openmpi-hostfile']}
    assert set(manifest['nodes']['spark-1']['items']) == set(_diagnose.ITEMS)


def test_an_item_the_node_did_not_return_is_an_error():
    items = node_items()
    del items['state']
    _files, manifest = _diagnose.build({'n': items}, {}, _secrets.Redactor([]), 'now')
    assert 'n: state (not returned by the node)' in manifest['errors']
    assert 'controller: preflight_report (not collected)' in manifest['missing']


def test_hostile_names_stay_inside_the_bundle():
    items = node_items()
    items['netplan'] = _diagnose.item('ok', source='x', fmt='dir', content={'../../etc/passwd': 'x'})
    files, _manifest = _diagnose.build({'../evil': items}, {}, _secrets.Redactor([]), 'now')
    assert all('..' not in name.split('/') for name, _data in files)


def test_tarball_members_0600_with_mtime(tmp_path):
    path = tmp_path / 'b.tar.gz'
    path.write_bytes(_diagnose.tarball('b', [('manifest.json', b'{}'), ('nodes/n/x', b'1')], 1000))
    with tarfile.open(str(path)) as tar:
        assert tar.getnames() == ['b/manifest.json', 'b/nodes/n/x']
        assert tar.extractfile('b/nodes/n/x').read() == b'1'
        assert all(m.mode == 0o600 and m.mtime == 1000 for m in tar.getmembers())


def test_tarball_refuses_text_before_anything_is_written():
    with pytest.raises(TypeError):
        _diagnose.tarball('b', [('x', 'not bytes')], 0)


@pytest.mark.parametrize('value, expected', [
    (None, []), ('', []), ('tok', ['tok']), (['a', '', None, ' ', b'b'], ['a', 'b']), (('x',), ['x']),
])
def test_secret_values(value, expected):
    assert _diagnose.secret_values(value) == expected


def test_secret_values_refuses_other_types():
    with pytest.raises(ValueError, match='secrets must be a list of strings'):
        _diagnose.secret_values({'a': 1})


def test_default_path():
    assert _diagnose.default_path('/d', '20261123T180000Z') == '/d/sparkops-diagnose-20261123T180000Z.tar.gz'


def test_the_manifest_names_a_give_up_of_the_supervisor():
    items = node_items()
    gave = {'key': 'k', 'at': '2026-11-27T10:00:00Z', 'failed_starts': 3, 'max_failed_starts': 3,
            'last_failure': 'exited before /health answered 200 (token %s)' % CANARY}
    items['state'] = _diagnose.item('ok', source='state', fmt='dir', content={
        'spark-1.json': {'running': {}, 'supervisor_gave_up': gave}, 'other.json': {'running': {}}})
    files, manifest = _diagnose.build({'spark-1': items}, {}, _secrets.Redactor([CANARY]), 'now')
    assert manifest['supervisor_gave_up'] == [
        'spark-1: spark-1.json: the supervisor gave up at 2026-11-27T10:00:00Z after 3 consecutive failed starts '
        '(last: exited before /health answered 200 (token ********)); a start by the deploy playbook clears it']
    assert json.loads(dict(files)['manifest.json'])['supervisor_gave_up'] == manifest['supervisor_gave_up']
    _files, manifest = _diagnose.build({'spark-1': node_items()}, {}, _secrets.Redactor([CANARY]), 'now')
    assert manifest['supervisor_gave_up'] == []
