# -*- coding: utf-8 -*-
"""Fetch once per pair (module_utils/_peer_copy.py): who fetches, the sender's manifest, and the receiver's
verified copy. Transports are stand-ins that read the sender's file locally, one of which flips a byte in transit:
the copy must be refused with one line naming the file, leaving neither the file nor a temporary copy; the real
SshTransport runs against a stand-in ``ssh`` that runs the remote command locally."""

from __future__ import annotations

import hashlib
import os
import stat
import sys

import pytest

from ansible_collections.sparkops.specdec.plugins.module_utils import _hf, _peer_copy
from ansible_collections.sparkops.specdec.plugins.module_utils._hf import RemoteFile, Target

REPO = 'org/model'
COMMIT = 'a' * 40
FILES = {
    'config.json': (b'{"hidden": 8}\n', False),
    'tokenizer.json': (b'{"vocab": {}}\n' * 50, False),
    'model-00001-of-00002.safetensors': (os.urandom(300 * 1024), True),
    'model-00002-of-00002.safetensors': (os.urandom(70 * 1024 + 3), True),
    'sub/extra.bin': (os.urandom(4096), True),
    'README.md': (b'# model\n', False),
}


def _git_blob(data):
    return hashlib.sha1(b'blob %d\0' % len(data) + data).hexdigest()


def _etag(data, lfs):
    return hashlib.sha256(data).hexdigest() if lfs else _git_blob(data)


def make_sender(root, local=False, files=None, commit=COMMIT):
    """A model as hf_download leaves it: blobs + snapshot links + listing + ref (or local_dir + metadata)."""
    target = Target(REPO, 'model', cache_dir=None if local else str(root), local_dir=str(root) if local else None)
    listing = []
    files = FILES if files is None else files
    if not local:
        os.makedirs(os.path.join(target.storage_folder, 'blobs'))
    for path, (data, lfs) in files.items():
        rfile = RemoteFile(path, len(data), _etag(data, lfs))
        listing.append(rfile)
        tmp = os.path.join(str(root), 'incoming-%s' % rfile.etag)
        os.makedirs(os.path.dirname(tmp), exist_ok=True)
        with open(tmp, 'wb') as f:
            f.write(data)
        target.finish(rfile, commit, tmp)
        if not local:
            _peer_copy._link_snapshot(target, commit, rfile)
    target.write_listing(commit, listing, 'http://hub', 'main')
    target.write_ref('main', commit)
    return target


def local_transport(calls=None):
    def transport(path, sink):
        if calls is not None:
            calls.append(path)
        with open(path, 'rb') as f:
            for block in iter(lambda: f.read(8192), b''):
                sink(block)
    return transport


def flipping_transport(at_path_suffix, offset=100):
    """Flips one bit of one byte of the file whose path ends so, in transit (the sender's file is intact)."""
    def transport(path, sink):
        with open(path, 'rb') as f:
            data = bytearray(f.read())
        if path.endswith(at_path_suffix):
            data[offset] ^= 0x01
        sink(bytes(data))
    return transport


def _receiver(tmp_path, local=False):
    root = tmp_path / 'recv'
    return Target(REPO, 'model', cache_dir=None if local else str(root), local_dir=str(root) if local else None)


def _content(target, path):
    with open(os.path.join(target.path_for(COMMIT), *path.split('/')), 'rb') as f:
        return f.read()


def _all_names(root):
    out = []
    for dirpath, dirnames, filenames in os.walk(str(root)):
        out.extend(os.path.join(dirpath, n) for n in filenames + dirnames)
    return out


# --------------------------------------------------------------------------- who fetches


def _fabrics(ips=('192.168.100.10', '192.168.101.10')):
    # Each member's published netplan_qsfp_fabric, by member (as the roles build it with map('extract', hostvars)).
    return {'spark-1': {'ips': list(ips)}, 'spark-2': {'ips': ['x']}}


def test_role_head_fetches_and_worker_receives_from_the_heads_first_fabric_address():
    members = ['spark-1', 'spark-2']
    head = _peer_copy.peer_copy_role(_fabrics(), 'spark-1', members, 'spark-1')
    worker = _peer_copy.peer_copy_role(_fabrics(), 'spark-2', members, 'spark-1')
    assert head['mode'] == 'fetch' and head['source'] is None
    assert worker == {'mode': 'receive', 'source': 'spark-1', 'source_address': '192.168.100.10',
                      'reason': 'copied from spark-1 over the fabric (192.168.100.10)'}


def _ring():
    # NVIDIA's three-node ring plan (docs/layouts.md), as netplan_qsfp publishes it (ips and addresses).
    plan = {'s1': ['192.168.0.1/24', '192.168.1.1/24', '192.168.2.1/24', '192.168.3.1/24'],
            's2': ['192.168.4.1/24', '192.168.5.1/24', '192.168.0.2/24', '192.168.1.2/24'],
            's3': ['192.168.2.2/24', '192.168.3.2/24', '192.168.4.2/24', '192.168.5.2/24']}
    return {h: {'ips': [a.split('/', 1)[0] for a in v], 'addresses': v} for h, v in plan.items()}


def test_ring_receivers_copy_from_the_heads_address_on_their_cable():
    """s3 is cabled to port 1 of s1 (192.168.2.x): s1's first address (192.168.0.1, its cable to s2) is no route."""
    members = ['s1', 's2', 's3']
    assert _peer_copy.peer_copy_role(_ring(), 's2', members, 's1')['source_address'] == '192.168.0.1'
    assert _peer_copy.peer_copy_role(_ring(), 's3', members, 's1')['source_address'] == '192.168.2.1'
    assert _peer_copy.image_peer_copy_role(_ring(), 's3', members, 's1', 'auto', 'img:1')['source_address'] == '192.168.2.1'
    # Head s2: s1 reaches it on 192.168.0.2 (its port 1), s3 on 192.168.4.1 (its port 0).
    assert _peer_copy.peer_copy_role(_ring(), 's1', members, 's2')['source_address'] == '192.168.0.2'
    assert _peer_copy.peer_copy_role(_ring(), 's3', members, 's2')['source_address'] == '192.168.4.1'


def test_the_spark_opposite_the_head_in_a_four_node_ring_copies_over_the_management_network():
    from ansible_collections.sparkops.specdec.plugins.module_utils import _layout
    nodes = ['s1', 's2', 's3', 's4']
    fabrics = {h: {'ips': [a.split('/', 1)[0] for a in _layout.ring_addresses(i, 4)],
                   'addresses': _layout.ring_addresses(i, 4)} for i, h in enumerate(nodes)}
    management = {'s1': '10.20.0.1', 's2': '10.20.0.2', 's3': '10.20.0.3', 's4': '10.20.0.4'}
    # Each entry with its management address, as the filter peer_copy_fabrics adds it.
    fabrics = {h: dict(f, management=management[h]) for h, f in fabrics.items()}
    far = _peer_copy.peer_copy_role(fabrics, 's3', nodes, 's1')
    assert far == {'mode': 'receive', 'source': 's1', 'source_address': '10.20.0.1',
                   'reason': 'copied from s1 over the management network (10.20.0.1): no fabric link to it'}
    assert _peer_copy.image_peer_copy_role(fabrics, 's3', nodes, 's1', 'auto', 'img:1')['source_address'] == \
        '10.20.0.1'
    # The neighbours keep their cable to the head (s2 on s1's port 0, s4 on its port 1).
    assert _peer_copy.peer_copy_role(fabrics, 's2', nodes, 's1')['source_address'] == \
        '192.168.0.1'
    assert _peer_copy.peer_copy_role(fabrics, 's4', nodes, 's1')['source_address'] == \
        '192.168.2.1'
    # A 3-node ring and a pair never use it.
    three = ['s1', 's2', 's3']
    ring = {h: dict(f, management=management[h]) for h, f in _ring().items()}
    assert _peer_copy.peer_copy_role(ring, 's3', three, 's1')['source_address'] == '192.168.2.1'


def test_a_pair_with_addresses_still_copies_from_link_1():
    fabrics = {'spark-1': {'ips': ['192.168.100.10', '192.168.101.10'],
                           'addresses': ['192.168.100.10/24', '192.168.101.10/24']},
               'spark-2': {'ips': ['192.168.100.11', '192.168.101.11'],
                           'addresses': ['192.168.100.11/24', '192.168.101.11/24']}}
    assert _peer_copy.peer_copy_role(fabrics, 'spark-2', ['spark-1', 'spark-2'], 'spark-1')['source_address'] == \
        '192.168.100.10'


@pytest.mark.parametrize('members,enabled,download', [(['spark-1'], True, True), (['spark-1', 'spark-2'], False, True),
                                                      (['spark-1', 'spark-2'], True, False)])
def test_role_alone_for_single_nodes_and_when_switched_off(members, enabled, download):
    for me in members:
        assert _peer_copy.peer_copy_role(_fabrics(), me, members, 'spark-1', enabled, download)['mode'] == 'alone'


def test_role_errors_name_the_setting():
    with pytest.raises(_peer_copy.PeerCopyError, match='netplan_qsfp_fabric.ips.*specdec_server_peer_copy: false'):
        _peer_copy.peer_copy_role({'spark-1': {}}, 'spark-2', ['spark-1', 'spark-2'], 'spark-1')
    with pytest.raises(_peer_copy.PeerCopyError, match='netplan_qsfp_fabric.ips.*specdec_server_peer_copy: false'):
        _peer_copy.peer_copy_role({'spark-1': None, 'spark-2': None}, 'spark-2', ['spark-1', 'spark-2'], 'spark-1')
    with pytest.raises(_peer_copy.PeerCopyError, match='specdec_head_host'):
        _peer_copy.peer_copy_role(_fabrics(), 'spark-2', ['spark-1', 'spark-2'], 'spark-9')
    with pytest.raises(_peer_copy.PeerCopyError, match='not a member'):
        _peer_copy.peer_copy_role(_fabrics(), 'spark-3', ['spark-1', 'spark-2'], 'spark-1')


def _hostvars():
    # What the filters took before: the play's hostvars (each member's variables).
    return {member: {'inventory_hostname': member, 'netplan_qsfp_fabric': fabric} for member, fabric in _fabrics().items()}


@pytest.mark.parametrize('me', ['spark-1', 'spark-2'])
@pytest.mark.parametrize('role', [_peer_copy.peer_copy_role, _peer_copy.image_peer_copy_role])
def test_role_takes_each_members_fabric_not_hostvars(role, me):
    # The roles pass each member's published netplan_qsfp_fabric; hostvars (a member's variables) is refused, by the
    # head and its peer alike, with one line saying what to pass.
    with pytest.raises(_peer_copy.PeerCopyError) as err:
        role(_hostvars(), me, ['spark-1', 'spark-2'], 'spark-1')
    assert '\n' not in err.value.msg and "map(attribute='netplan_qsfp_fabric'" in err.value.msg
    assert err.value.msg.startswith('peer copy: expected the netplan_qsfp_fabric of spark-1, got its variables')
    for bad, what in ((['spark-1'], 'got list'), ({'spark-1': ['192.168.100.10']}, 'got list')):
        with pytest.raises(_peer_copy.PeerCopyError, match=what):
            role(bad, me, ['spark-1', 'spark-2'], 'spark-1')


# --------------------------------------------------------------------------- the sender's manifest


def test_manifest_uses_the_hubs_sha256_for_lfs_files_and_hashes_the_others(tmp_path):
    sender = make_sender(tmp_path / 'send')
    hashed = []

    def hasher(path):
        hashed.append(os.path.basename(path))
        return _peer_copy.sha256_file(path)

    m = _peer_copy.sender_manifest(sender, REPO, COMMIT, hasher=hasher)
    assert m['complete'] and m['missing'] == [] and m['commit'] == COMMIT
    by = dict((e['path'], e) for e in m['files'])
    assert sorted(by) == sorted(FILES)
    for path, (data, lfs) in FILES.items():
        assert by[path]['sha256'] == hashlib.sha256(data).hexdigest()
        assert by[path]['sha256_source'] == ('hub' if lfs else 'sender')
        with open(by[path]['source'], 'rb') as f:  # the blob itself, not the snapshot link
            assert f.read() == data
        assert not os.path.islink(by[path]['source'])
    # only the non-LFS files were read
    assert sorted(hashed) == sorted(_git_blob(d) for d, lfs in FILES.values() if not lfs)
    assert m['bytes_total'] == sum(len(d) for d, _lfs in FILES.values())
    assert set(m['listing']) == set(FILES)


def test_manifest_reports_missing_files_and_honours_patterns(tmp_path):
    sender = make_sender(tmp_path / 'send')
    os.unlink(os.path.join(sender.path_for(COMMIT), 'config.json'))
    m = _peer_copy.sender_manifest(sender, REPO, COMMIT, allow_patterns=['*.json'])
    assert [e['path'] for e in m['files']] == ['config.json', 'tokenizer.json']
    assert m['complete'] is False and m['missing'] == ['config.json']


def test_manifest_errors(tmp_path):
    sender = make_sender(tmp_path / 'send')
    with pytest.raises(_peer_copy.PeerCopyError, match='not a full commit SHA'):
        _peer_copy.sender_manifest(sender, REPO, 'main')
    with pytest.raises(_peer_copy.PeerCopyError, match='no file listing of commit ' + 'b' * 40):
        _peer_copy.sender_manifest(sender, REPO, 'b' * 40)


# --------------------------------------------------------------------------- the receiver


@pytest.mark.parametrize('local', [False, True])
def test_copy_is_complete_verified_and_idempotent(tmp_path, local):
    sender = make_sender(tmp_path / 'send', local=local)
    manifest = _peer_copy.sender_manifest(sender, REPO, COMMIT)
    recv = _receiver(tmp_path, local)
    calls = []
    r = _peer_copy.receive(recv, REPO, 'main', manifest, local_transport(calls), 'spark-1', endpoint='http://hub')
    assert r['changed'] is True and r['commit'] == COMMIT and r['bytes_fetched'] == 0
    assert r['copied_files'] == sorted(FILES) and r['bytes_copied'] == r['bytes_total'] == manifest['bytes_total']
    assert r['path'] == recv.path_for(COMMIT) and r['files'] == len(FILES)
    assert sorted(v['path'] for v in r['verified']) == sorted(FILES)
    assert len(calls) == len(FILES)
    for path, (data, _lfs) in FILES.items():
        assert _content(recv, path) == data
        assert recv.file_state(COMMIT, RemoteFile(path, len(data), _etag(data, _lfs))) == 'present'
    assert not [n for n in _all_names(tmp_path / 'recv') if _peer_copy.TEMP_PREFIX in n]
    # The copy is what hf_download records: listing and ref, so its offline check accepts it.
    assert recv.read_ref('main') == COMMIT and len(recv.read_listing(COMMIT)) == len(FILES)
    plan = _hf.Plan(recv, COMMIT, recv.read_listing(COMMIT), None, None)
    assert plan.missing == [] and plan.link == []
    # Second run: nothing copied, nothing changed.
    calls.clear()
    again = _peer_copy.receive(recv, REPO, 'main', manifest, local_transport(calls), 'spark-1')
    assert again['changed'] is False and again['copied_files'] == [] and calls == []


def test_hf_download_offline_accepts_the_copy(tmp_path):
    if not _hf.HAS_HF:  # pragma: no cover - huggingface_hub is in requirements-test.txt
        pytest.fail('huggingface_hub is needed for this test')
    sender = make_sender(tmp_path / 'send')
    recv = _receiver(tmp_path)
    _peer_copy.receive(recv, REPO, 'main', _peer_copy.sender_manifest(sender, REPO, COMMIT), local_transport(), 'spark-1')
    res = _hf.run({'repo_id': REPO, 'revision': 'main', 'cache_dir': recv.cache_dir, 'offline': True})
    assert res['commit'] == COMMIT and res['changed'] is False and res['files'] == len(FILES)


def test_a_byte_flipped_in_transit_is_detected_and_nothing_is_kept(tmp_path):
    sender = make_sender(tmp_path / 'send')
    manifest = _peer_copy.sender_manifest(sender, REPO, COMMIT)
    recv = _receiver(tmp_path)
    victim = 'model-00001-of-00002.safetensors'
    with pytest.raises(_peer_copy.PeerCopyError) as err:
        _peer_copy.receive(recv, REPO, 'main', manifest, flipping_transport(_etag(*FILES[victim])), 'spark-1',
                           max_workers=1)
    msg = err.value.msg
    assert err.value.kind == 'mismatch' and '\n' not in msg
    assert msg.startswith('%s: %s copied from spark-1 does not match the Hub\'s recorded sha256' % (REPO, victim))
    assert hashlib.sha256(FILES[victim][0]).hexdigest() in msg
    # no file where the complete one is expected, no temporary copy left, no ref pointing at an incomplete commit
    assert not os.path.lexists(os.path.join(recv.path_for(COMMIT), victim))
    assert not os.path.exists(os.path.join(recv.storage_folder, 'blobs', _etag(*FILES[victim])))
    assert not [n for n in _all_names(tmp_path / 'recv') if _peer_copy.TEMP_PREFIX in n]
    assert recv.read_ref('main') is None
    # The other files were verified and kept; a clean re-run copies only the victim.
    calls = []
    r = _peer_copy.receive(recv, REPO, 'main', manifest, local_transport(calls), 'spark-1')
    assert r['copied_files'] == [victim] and len(calls) == 1
    assert _content(recv, victim) == FILES[victim][0]


def test_a_flipped_byte_in_a_non_lfs_file_names_the_senders_sha256(tmp_path):
    sender = make_sender(tmp_path / 'send', local=True)
    recv = _receiver(tmp_path, local=True)
    with pytest.raises(_peer_copy.PeerCopyError, match=r"^org/model: tokenizer.json copied from spark-1 does not match "
                                                       r"the sender's sha256") as err:
        _peer_copy.receive(recv, REPO, 'main', _peer_copy.sender_manifest(sender, REPO, COMMIT),
                           flipping_transport('tokenizer.json', 5), 'spark-1')
    assert not os.path.exists(os.path.join(recv.local_dir, 'tokenizer.json'))
    assert '\n' not in err.value.msg


def test_a_corrupt_sender_file_is_caught_by_the_hubs_sha256(tmp_path):
    sender = make_sender(tmp_path / 'send')
    manifest = _peer_copy.sender_manifest(sender, REPO, COMMIT)
    victim = [e for e in manifest['files'] if e['path'] == 'sub/extra.bin'][0]
    os.chmod(victim['source'], stat.S_IRUSR | stat.S_IWUSR)
    with open(victim['source'], 'r+b') as f:  # same size, other content: the sender's own copy is damaged
        f.write(b'\0' * 16)
    with pytest.raises(_peer_copy.PeerCopyError, match="sub/extra.bin copied from spark-1 does not match the Hub's"):
        _peer_copy.receive(_receiver(tmp_path), REPO, 'main', manifest, local_transport(), 'spark-1')


def test_a_longer_or_shorter_stream_is_refused(tmp_path):
    sender = make_sender(tmp_path / 'send')
    manifest = _peer_copy.sender_manifest(sender, REPO, COMMIT, allow_patterns=['config.json'])

    def longer(path, sink):
        local_transport()(path, sink)
        sink(b'x')

    def shorter(path, sink):
        with open(path, 'rb') as f:
            sink(f.read()[:-1])

    for transport in (longer, shorter):
        recv = _receiver(tmp_path)
        with pytest.raises(_peer_copy.PeerCopyError, match='config.json copied from spark-1 does not match'):
            _peer_copy.receive(recv, REPO, 'main', manifest, transport, 'spark-1', allow_patterns=['config.json'])
        assert not os.path.lexists(os.path.join(recv.path_for(COMMIT), 'config.json'))


def test_check_mode_writes_nothing_and_connects_to_nothing(tmp_path):
    sender = make_sender(tmp_path / 'send')
    manifest = _peer_copy.sender_manifest(sender, REPO, COMMIT)
    calls = []
    r = _peer_copy.receive(_receiver(tmp_path), REPO, 'main', manifest, local_transport(calls), 'spark-1',
                           check_mode=True)
    assert r['changed'] is True and r['copied_files'] == sorted(FILES) and calls == []
    assert not (tmp_path / 'recv').exists()


def test_blob_already_in_the_cache_is_only_linked(tmp_path):
    sender = make_sender(tmp_path / 'send')
    manifest = _peer_copy.sender_manifest(sender, REPO, COMMIT)
    recv = _receiver(tmp_path)
    _peer_copy.receive(recv, REPO, 'main', manifest, local_transport(), 'spark-1')
    os.unlink(os.path.join(recv.path_for(COMMIT), 'sub', 'extra.bin'))
    calls = []
    r = _peer_copy.receive(recv, REPO, 'main', manifest, local_transport(calls), 'spark-1')
    assert r['linked_files'] == ['sub/extra.bin'] and r['copied_files'] == [] and calls == [] and r['changed']


def test_stale_temporary_files_of_a_killed_copy_are_removed(tmp_path):
    sender = make_sender(tmp_path / 'send')
    manifest = _peer_copy.sender_manifest(sender, REPO, COMMIT, allow_patterns=['*.safetensors'])
    recv = _receiver(tmp_path)
    etag = _etag(*FILES['model-00001-of-00002.safetensors'])
    blobs = os.path.join(recv.storage_folder, 'blobs')
    os.makedirs(blobs)
    stale = os.path.join(blobs, '%s%s.1.2%s' % (_peer_copy.TEMP_PREFIX, etag, _peer_copy.TEMP_SUFFIX))
    with open(stale, 'wb') as f:
        f.write(b'half')
    _peer_copy.receive(recv, REPO, 'main', manifest, local_transport(), 'spark-1', allow_patterns=['*.safetensors'])
    assert not os.path.exists(stale)


def test_receiver_refuses_bad_or_incomplete_manifests(tmp_path):
    sender = make_sender(tmp_path / 'send')
    recv = _receiver(tmp_path)
    good = _peer_copy.sender_manifest(sender, REPO, COMMIT)
    with pytest.raises(_peer_copy.PeerCopyError, match='manifest has no commit'):
        _peer_copy.receive(recv, REPO, 'main', {}, local_transport(), 'spark-1')
    with pytest.raises(_peer_copy.PeerCopyError, match='manifest is of other/repo'):
        _peer_copy.receive(recv, REPO, 'main', dict(good, repo_id='other/repo'), local_transport(), 'spark-1')
    with pytest.raises(_peer_copy.PeerCopyError, match='no entry for README.md'):
        _peer_copy.receive(recv, REPO, 'main', dict(good, files=[e for e in good['files'] if e['path'] != 'README.md']),
                           local_transport(), 'spark-1')
    os.unlink(os.path.join(sender.path_for(COMMIT), 'config.json'))
    partial = _peer_copy.sender_manifest(sender, REPO, COMMIT)
    with pytest.raises(_peer_copy.PeerCopyError, match='does not hold config.json complete') as err:
        _peer_copy.receive(recv, REPO, 'main', partial, local_transport(), 'spark-1')
    assert err.value.kind == 'sender_incomplete'


# --------------------------------------------------------------------------- the SSH transport


@pytest.fixture
def fake_ssh(tmp_path):
    """A stand-in ssh client: records its argv and runs the remote command (its last argument) locally."""
    script = tmp_path / 'ssh'
    log = tmp_path / 'ssh.argv'
    script.write_text('#!%s\nimport subprocess, sys\nopen(%r, "a").write(repr(sys.argv[1:]) + "\\n")\n'
                      'sys.exit(subprocess.call(["sh", "-c", sys.argv[-1]]))\n' % (sys.executable, str(log)))
    script.chmod(0o755)
    return str(script), log


def test_ssh_transport_streams_the_file_and_verifies_it(tmp_path, fake_ssh):
    ssh, log = fake_ssh
    files = {"dir with space/it's.json": (b'{"a": 1}\n' * 1000, False), 'w.safetensors': (os.urandom(9 * 1024 * 1024 + 1), True)}
    sender = make_sender(tmp_path / 'send', files=files)
    recv = _receiver(tmp_path)
    transport = _peer_copy.SshTransport('192.168.100.10', connect_timeout=7, ssh=ssh)
    r = _peer_copy.receive(recv, REPO, 'main', _peer_copy.sender_manifest(sender, REPO, COMMIT), transport, 'spark-1')
    assert r['copied_files'] == sorted(files)
    for path, (data, _lfs) in files.items():
        assert _content(recv, path) == data
    argv = log.read_text().splitlines()[0]
    assert "'-o', 'BatchMode=yes', '-o', 'StrictHostKeyChecking=yes', '-o', 'ConnectTimeout=7', '192.168.100.10'" in argv


def test_ssh_failure_is_one_line_with_its_last_message(tmp_path, fake_ssh):
    ssh, _log = fake_ssh
    sender = make_sender(tmp_path / 'send')
    manifest = _peer_copy.sender_manifest(sender, REPO, COMMIT, allow_patterns=['config.json'])
    entry = manifest['files'][0]
    os.unlink(entry['source'])  # the sender lost the file: cat fails
    recv = _receiver(tmp_path)
    with pytest.raises(_peer_copy.PeerCopyError) as err:
        _peer_copy.receive(recv, REPO, 'main', manifest, _peer_copy.SshTransport('10.0.0.1', ssh=ssh), 'spark-1',
                           allow_patterns=['config.json'])
    assert err.value.kind == 'transport' and '\n' not in err.value.msg
    assert 'ssh 10.0.0.1 cat %s exited 1: ' % entry['source'] in err.value.msg and 'No such file' in err.value.msg
    assert not [n for n in _all_names(tmp_path / 'recv') if _peer_copy.TEMP_PREFIX in n]


@pytest.fixture
def flaky_ssh(tmp_path):
    """A stand-in ssh client whose first N connections fail as sshd's MaxStartups drops them (exit 255, "Connection
    reset by ... port 22"), then runs the remote command locally. N is read from the file ``fail``."""
    script = tmp_path / 'ssh'
    log = tmp_path / 'ssh.argv'
    fail = tmp_path / 'fail'
    script.write_text(
        '#!%s\nimport subprocess, sys\nopen(%r, "a").write(repr(sys.argv[1:]) + "\\n")\n'
        'n = int(open(%r).read())\n'
        'if n > 0:\n    open(%r, "w").write(str(n - 1))\n'
        '    sys.stderr.write("Connection reset by 10.0.0.1 port 22\\n")\n    sys.exit(255)\n'
        'sys.exit(subprocess.call(["sh", "-c", sys.argv[-1]]))\n' % (sys.executable, str(log), str(fail), str(fail)))
    script.chmod(0o755)
    return str(script), log, fail


def test_ssh_refused_before_any_byte_is_tried_again(tmp_path, flaky_ssh):
    # Issue 24: three or four Sparks copy from one head at once (N-1 receivers x models x 4 streams), more than sshd's
    # MaxStartups (10:30:100) lets through unauthenticated: it resets some connections. ssh exits 255 before any byte.
    ssh, log, fail = flaky_ssh
    fail.write_text('2')
    sender = make_sender(tmp_path / 'send')
    manifest = _peer_copy.sender_manifest(sender, REPO, COMMIT, allow_patterns=['config.json'])
    recv = _receiver(tmp_path)
    transport = _peer_copy.SshTransport('10.0.0.1', ssh=ssh, retry_delays=(0, 0, 0))
    r = _peer_copy.receive(recv, REPO, 'main', manifest, transport, 'spark-1', allow_patterns=['config.json'])
    assert r['copied_files'] == ['config.json'] and len(log.read_text().splitlines()) == 3


def test_ssh_refused_every_time_is_one_line_after_the_retries(tmp_path, flaky_ssh):
    ssh, log, fail = flaky_ssh
    fail.write_text('9')
    sender = make_sender(tmp_path / 'send')
    manifest = _peer_copy.sender_manifest(sender, REPO, COMMIT, allow_patterns=['config.json'])
    with pytest.raises(_peer_copy.PeerCopyError) as err:
        _peer_copy.receive(_receiver(tmp_path), REPO, 'main', manifest,
                           _peer_copy.SshTransport('10.0.0.1', ssh=ssh, retry_delays=(0, 0)), 'spark-1',
                           allow_patterns=['config.json'])
    assert err.value.kind == 'transport' and err.value.msg.endswith('exited 255: Connection reset by 10.0.0.1 port 22')
    assert len(log.read_text().splitlines()) == 3


def test_a_failed_remote_command_is_not_tried_again(tmp_path, flaky_ssh):
    ssh, log, fail = flaky_ssh
    fail.write_text('0')
    sender = make_sender(tmp_path / 'send')
    manifest = _peer_copy.sender_manifest(sender, REPO, COMMIT, allow_patterns=['config.json'])
    os.unlink(manifest['files'][0]['source'])  # cat exits 1: the peer answered, the file is gone
    with pytest.raises(_peer_copy.PeerCopyError):
        _peer_copy.receive(_receiver(tmp_path), REPO, 'main', manifest,
                           _peer_copy.SshTransport('10.0.0.1', ssh=ssh, retry_delays=(0, 0)), 'spark-1',
                           allow_patterns=['config.json'])
    assert len(log.read_text().splitlines()) == 1


def test_the_filters_pass_the_management_addresses_through():
    from ansible_collections.sparkops.specdec.plugins.filter import peer_copy as peer_copy_filter
    from ansible_collections.sparkops.specdec.plugins.module_utils import _layout
    nodes = ['s1', 's2', 's3', 's4']
    fabrics = {h: {'ips': [a.split('/', 1)[0] for a in _layout.ring_addresses(i, 4)],
                   'addresses': _layout.ring_addresses(i, 4)} for i, h in enumerate(nodes)}
    management = {h: '10.20.0.%d' % (i + 1) for i, h in enumerate(nodes)}
    with_management = peer_copy_filter.peer_copy_fabrics(fabrics, management)
    assert with_management['s1'] == dict(fabrics['s1'], management='10.20.0.1')
    assert peer_copy_filter.peer_copy_role(with_management, 's3', 's1', 'auto', True)['source_address'] == '10.20.0.1'
    assert peer_copy_filter.image_peer_copy_role(with_management, 's3', 's1', 'auto', 'img:1')['source_address'] == \
        '10.20.0.1'
    # Without it (or for a neighbour), as before.
    assert peer_copy_filter.peer_copy_role(fabrics, 's3', 's1', 'auto', True)['source_address'] == '192.168.0.1'
    assert peer_copy_filter.peer_copy_role(with_management, 's2', 's1', 'auto', True)['source_address'] == '192.168.0.1'
