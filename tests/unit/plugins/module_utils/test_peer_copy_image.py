# -*- coding: utf-8 -*-
"""Fetch once per pair, the engine image (module_utils/_peer_copy.copy_image): the worker streams the head's
``docker save`` into its ``docker load`` and requires the head's image id. The Docker here is a stand-in that loads
a ``docker save``-shaped tar the way Docker does it (each layer checked against the config's diff_ids, the image id
the sha256 of the config), and the transports are stand-ins, one flipping a byte in transit."""

from __future__ import annotations

import hashlib
import io
import json
import sys
import tarfile

import pytest

from ansible_collections.sparkops.specdec.plugins.module_utils import _peer_copy

NAME = 'sparkops-lab/engine:1.0'
LAYER = b'layer-bytes-' * 4096


def _tar(members):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode='w') as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def saved_image(label='v1'):
    """A docker save stream of one image and its id."""
    config = json.dumps({'config': {'Labels': {'v': label}},
                         'rootfs': {'type': 'layers', 'diff_ids': ['sha256:' + hashlib.sha256(LAYER).hexdigest()]}},
                        sort_keys=True).encode()
    image_id = 'sha256:' + hashlib.sha256(config).hexdigest()
    manifest = json.dumps([{'Config': 'config.json', 'RepoTags': [NAME], 'Layers': ['l1/layer.tar']}]).encode()
    return _tar([('config.json', config), ('l1/layer.tar', LAYER), ('manifest.json', manifest)]), image_id


class FakeDocker:
    """Images by id, tags by name; load() checks layers against diff_ids and names the image by its config's sha256."""

    def __init__(self):
        self.images, self.tags, self.loads = {}, {}, 0

    def inspect(self, name):
        iid = self.tags.get(name)
        return dict(self.images[iid]) if iid else None

    def load(self, feed):
        self.loads += 1
        chunks = []
        feed(chunks.append)
        try:
            with tarfile.open(fileobj=io.BytesIO(b''.join(chunks)), mode='r:') as tar:
                manifest = json.loads(tar.extractfile('manifest.json').read())[0]
                config = tar.extractfile(manifest['Config']).read()
                diff_ids = json.loads(config)['rootfs']['diff_ids']
                for layer, want in zip(manifest['Layers'], diff_ids):
                    got = 'sha256:' + hashlib.sha256(tar.extractfile(layer).read()).hexdigest()
                    if got != want:
                        return 1, 'Error processing tar file: invalid diffID for layer: expected %s, got %s' % (want, got)
        except (tarfile.TarError, KeyError, ValueError) as exc:
            return 1, 'Error: %s' % exc
        iid = 'sha256:' + hashlib.sha256(config).hexdigest()
        self.images[iid] = {'Id': iid, 'RepoTags': manifest['RepoTags']}
        for tag in manifest['RepoTags']:
            self.tags[tag] = iid
        return 0, 'Loaded image: %s' % NAME

    def tag(self, image_id, name):
        self.tags[name] = image_id
        return True

    def untag(self, name):
        return self.tags.pop(name, None) is not None


def sender(stream, flip_at=None, calls=None):
    def transport(name, sink):
        if calls is not None:
            calls.append(name)
        data = bytearray(stream)
        if flip_at is not None:
            data[flip_at] ^= 0x01
        for i in range(0, len(data), 1000):
            sink(bytes(data[i:i + 1000]))
    return transport


def test_copies_the_image_once_and_checks_its_id():
    stream, iid = saved_image()
    docker, calls = FakeDocker(), []
    r = _peer_copy.copy_image(NAME, iid, docker, sender(stream, calls=calls), 'spark-1')
    assert r['changed'] and r['copied'] and r['image']['Id'] == iid and r['previous_id'] is None
    assert r['bytes_copied'] == len(stream) and r['stream_sha256'] == hashlib.sha256(stream).hexdigest()
    again = _peer_copy.copy_image(NAME, iid, docker, sender(stream, calls=calls), 'spark-1')
    assert again['changed'] is False and again['copied'] is False and calls == [NAME] and docker.loads == 1


def test_check_mode_connects_to_nothing():
    stream, iid = saved_image()
    docker, calls = FakeDocker(), []
    r = _peer_copy.copy_image(NAME, iid, docker, sender(stream, calls=calls), 'spark-1', check_mode=True)
    assert r['changed'] and r['image'] == {} and calls == [] and docker.loads == 0


def test_a_byte_flipped_in_a_layer_in_transit_fails_and_leaves_no_image_under_the_name():
    stream, iid = saved_image('new')
    docker = FakeDocker()
    with pytest.raises(_peer_copy.PeerCopyError) as err:
        _peer_copy.copy_image(NAME, iid, docker, sender(stream, flip_at=stream.index(LAYER) + 7), 'spark-1')
    msg = err.value.msg
    assert err.value.kind == 'mismatch' and '\n' not in msg
    assert msg.startswith("%s: the image copied from spark-1 does not match the sender's id %s: docker load failed "
                          "(Error processing tar file: invalid diffID" % (NAME, iid))
    assert 'the name still names no image' in msg and NAME not in docker.tags


def test_a_byte_flipped_in_the_config_gives_another_id_which_is_refused_and_untagged():
    stream, iid = saved_image('new')
    docker = FakeDocker()
    at = stream.index(b'"new"') + 1  # "new" -> "oew": valid JSON, another config, another id
    with pytest.raises(_peer_copy.PeerCopyError, match=r"the loaded image has id sha256:[0-9a-f]{64} .*the wrong image "
                                                       r"was untagged") as err:
        _peer_copy.copy_image(NAME, iid, docker, sender(stream, flip_at=at), 'spark-1')
    assert err.value.kind == 'mismatch' and NAME not in docker.tags
    # a clean re-run copies it
    assert _peer_copy.copy_image(NAME, iid, docker, sender(stream), 'spark-1')['image']['Id'] == iid


def test_another_image_already_under_the_name_is_never_replaced():
    old_stream, old_id = saved_image('old')
    stream, iid = saved_image('new')
    docker, calls = FakeDocker(), []
    docker.load(lambda write: write(old_stream))
    r = _peer_copy.copy_image(NAME, iid, docker, sender(stream, calls=calls), 'spark-1')
    assert r['changed'] is False and r['copied'] is False and r['differs'] is True and r['image']['Id'] == old_id
    assert calls == [] and docker.loads == 1 and docker.tags[NAME] == old_id


def test_the_name_is_given_back_to_the_image_it_named_when_a_load_retags_it():
    """_give_name_back: a load that moved the name from an image to a wrong one gives it back."""
    docker = FakeDocker()
    docker.images['sha256:' + '1' * 64] = {'Id': 'sha256:' + '1' * 64}
    docker.tags[NAME] = 'sha256:' + '2' * 64
    assert _peer_copy._give_name_back(docker, NAME, 'sha256:' + '1' * 64, 'sha256:' + '2' * 64) == \
        'the name was given back to sha256:' + '1' * 64
    assert docker.tags[NAME] == 'sha256:' + '1' * 64


def test_a_failed_transport_is_reported_as_such():
    stream, iid = saved_image()

    def broken(name, sink):
        sink(stream[:100])
        raise _peer_copy.PeerCopyError('ssh 10.0.0.1 docker save %s exited 255: Connection refused' % name, 'transport')

    docker = FakeDocker()
    with pytest.raises(_peer_copy.PeerCopyError, match='exited 255: Connection refused .*the name still names no image') as err:
        _peer_copy.copy_image(NAME, iid, docker, broken, 'spark-1')
    assert err.value.kind == 'transport'


def test_a_malformed_expected_id_is_refused_before_anything():
    docker = FakeDocker()
    with pytest.raises(_peer_copy.PeerCopyError, match='trtllm_container_image_info.id'):
        _peer_copy.copy_image(NAME, 'abc', docker, sender(b''), 'spark-1')
    assert docker.loads == 0


@pytest.fixture
def fake_cli(tmp_path):
    """Stand-ins for ssh (runs the remote command locally) and docker (save prints a stream file; load stores stdin)."""
    ssh = tmp_path / 'ssh'
    ssh.write_text('#!%s\nimport subprocess, sys\nsys.exit(subprocess.call(["sh", "-c", sys.argv[-1]]))\n' % sys.executable)
    docker = tmp_path / 'docker'
    docker.write_text('#!%s\nimport sys, shutil\nd = %r\n'
                      'if sys.argv[1] == "save":\n    sys.stdout.buffer.write(open(d + "/saved", "rb").read())\n'
                      'elif sys.argv[1] == "load":\n    open(d + "/loaded", "wb").write(sys.stdin.buffer.read()); print("Loaded image")\n'
                      'elif sys.argv[1:3] == ["image", "inspect"]:\n'
                      '    import os\n    p = d + "/loaded"\n'
                      '    if not os.path.exists(p): print("[]"); sys.exit(1)\n'
                      '    import hashlib\n    print(\'[{"Id": "sha256:%%s"}]\' %% hashlib.sha256(open(p, "rb").read()).hexdigest())\n'
                      'else:\n    sys.exit(0)\n' % (sys.executable, str(tmp_path)))
    for f in (ssh, docker):
        f.chmod(0o755)
    return tmp_path, str(ssh), str(docker)


def test_ssh_and_docker_cli_stream_end_to_end(fake_cli, monkeypatch):
    tmp_path, ssh, docker = fake_cli
    data = b'saved-image-stream' * 100000
    (tmp_path / 'saved').write_bytes(data)
    monkeypatch.setenv('PATH', '%s:%s' % (tmp_path, __import__('os').environ['PATH']))
    iid = 'sha256:' + hashlib.sha256(data).hexdigest()
    r = _peer_copy.copy_image(NAME, iid, _peer_copy.DockerCli(docker),
                              _peer_copy.SshImageTransport('192.168.100.10', ssh=ssh), 'spark-1')
    assert r['copied'] and r['image']['Id'] == iid and (tmp_path / 'loaded').read_bytes() == data
    assert r['bytes_copied'] == len(data)


def _hv():
    # Each member's published netplan_qsfp_fabric, by member (None: it has none).
    return {'spark-1': {'ips': ['192.168.100.10', '192.168.101.10']}, 'spark-2': None}


def test_image_role_head_pulls_worker_copies_digest_pins_pull_everywhere():
    pair = ['spark-1', 'spark-2']
    assert _peer_copy.image_peer_copy_role(_hv(), 'spark-1', pair, 'spark-1', True, NAME)['mode'] == 'fetch'
    worker = _peer_copy.image_peer_copy_role(_hv(), 'spark-2', pair, 'spark-1', True, NAME)
    assert worker['mode'] == 'receive' and worker['source_address'] == '192.168.100.10'
    pinned = 'nvcr.io/nvidia/tensorrt-llm/release@sha256:' + 'a' * 64
    for me in pair:
        role = _peer_copy.image_peer_copy_role(_hv(), me, pair, 'spark-1', True, pinned)
        assert role['mode'] == 'alone' and 'pinned by digest' in role['reason']
    off = _peer_copy.image_peer_copy_role(_hv(), 'spark-2', pair, 'spark-1', False, NAME)
    assert off['mode'] == 'alone' and 'trtllm_container_image_peer_copy is false' in off['reason']
    assert _peer_copy.image_peer_copy_role(_hv(), 'spark-1', ['spark-1'], 'spark-1', True, NAME)['mode'] == 'alone'
