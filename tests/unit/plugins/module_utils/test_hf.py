# -*- coding: utf-8 -*-
# Unit tests for plugins/module_utils/_hf.py (planning, local state, error mapping) and for the
# lab hub server tests/lab/images/hub/hub_server.py (protocol details huggingface_hub relies on).

from __future__ import annotations

import base64
import errno
import hashlib
import importlib.util
import json
import os
import threading
import urllib.error
import urllib.request

import pytest

from ansible_collections.sparkops.specdec.plugins.module_utils import _hf

from ansible_collections.sparkops.specdec.tests.unit.conftest import (
    GATED_REPO, HF_TOKEN_GATED, HF_TOKEN_INVALID, HF_TOKEN_NO_GATE, HUB_REPOS, HUB_SERVER, LAB_TOKENS,
)

pytestmark = pytest.mark.usefixtures('hf_env', 'loopback_only')

LAB_REPOS = {
    'openai/gpt-oss-120b', 'nvidia/gpt-oss-120b-Eagle3-long-context', 'nvidia/Llama-3.3-70B-Instruct-FP4',
    'nvidia/Llama-3.1-8B-Instruct-FP4', 'nvidia/Qwen3-235B-A22B-FP4', 'nvidia/Qwen3-235B-A22B-Eagle3',
    'sparkops-lab/bench-100', 'sparkops-lab/bench-large', 'sparkops-lab/slow-resume',
}
# Repos of real files (the lab's GGUFs, served from hub_server.py --files-dir): left out without it.
REAL_FILE_REPOS = {'sparkops-lab/Qwen2.5-Coder-1.5B-Instruct-GGUF', 'sparkops-lab/Qwen2.5-Coder-0.5B-Instruct-GGUF',
                   'sparkops-lab/tiny-llama-vllm', 'sparkops-lab/tiny-llama-vllm-draft'}
BENCH_LARGE = 'sparkops-lab/bench-large'
MIB = 1024 * 1024


def load_hub_module():
    spec = importlib.util.spec_from_file_location('sparkops_lab_hub_server', HUB_SERVER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope='module')
def hub_mod():
    return load_hub_module()


def http(url, method='GET', headers=None):
    req = urllib.request.Request(url, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def base_params(**kwargs):
    params = dict(repo_id='openai/gpt-oss-120b', revision='main', repo_type='model', cache_dir=None, local_dir=None,
                  allow_patterns=None, ignore_patterns=None, token=None, endpoint=None, offline=False,
                  max_workers=4, timeout=30)
    params.update(kwargs)
    return params


# --------------------------------------------------------------------------- pure helpers


def test_private_header_comment():
    with open(_hf.__file__) as f:
        assert 'PRIVATE to the sparkops.specdec collection' in f.readline() + f.readline()


def test_repo_folder_name_matches_huggingface_hub():
    from huggingface_hub.file_download import repo_folder_name
    for repo_type in ('model', 'dataset'):
        assert _hf.repo_folder_name('nvidia/Qwen3-235B-A22B-FP4', repo_type) == repo_folder_name(
            repo_id='nvidia/Qwen3-235B-A22B-FP4', repo_type=repo_type)


def test_scrub():
    assert _hf.scrub('token abc123 leaked abc123', ['abc123']) == 'token ******** leaked ********'
    assert _hf.scrub(None, ['x']) == ''
    assert _hf.scrub('nothing', [None, '']) == 'nothing'


def test_select_paths_same_semantics_as_snapshot_download():
    paths = ['a.json', 'sub/b.json', 'model.safetensors', 'README.md']
    assert _hf.select_paths(paths, None, None) == paths
    assert _hf.select_paths(paths, ['*.json'], None) == ['a.json', 'sub/b.json']  # '*' crosses '/'
    assert _hf.select_paths(paths, None, ['*.md', 'sub/*']) == ['a.json', 'model.safetensors']
    assert _hf.select_paths(paths, ['*.json', '*.md'], ['a.*']) == ['sub/b.json', 'README.md']


def test_cache_file_state(tmp_path):
    target = _hf.Target('org/name', 'model', cache_dir=str(tmp_path))
    commit = 'a' * 40
    rfile = _hf.RemoteFile('dir/w.safetensors', 10, 'e' * 64)
    assert target.file_state(commit, rfile) == 'missing'
    blobs = os.path.join(target.storage_folder, 'blobs')
    os.makedirs(blobs)
    with open(os.path.join(blobs, rfile.etag), 'wb') as f:
        f.write(b'0123456789')
    assert target.file_state(commit, rfile) == 'link'
    snap = os.path.join(target.storage_folder, 'snapshots', commit, 'dir')
    os.makedirs(snap)
    os.symlink(os.path.join('..', '..', '..', 'blobs', rfile.etag), os.path.join(snap, 'w.safetensors'))
    assert target.file_state(commit, rfile) == 'present'
    with open(os.path.join(blobs, rfile.etag), 'wb') as f:
        f.write(b'01234')  # truncated: never complete
    assert target.file_state(commit, rfile) == 'missing'
    assert target.discard_invalid(commit, [rfile]) == ['dir/w.safetensors']
    assert not os.path.lexists(os.path.join(snap, 'w.safetensors'))
    assert not os.path.exists(os.path.join(blobs, rfile.etag))


def test_local_dir_file_state(tmp_path):
    local = tmp_path / 'local'
    target = _hf.Target('org/name', 'model', local_dir=str(local))
    commit = 'b' * 40
    rfile = _hf.RemoteFile('sub/config.json', 5, 'c' * 40)
    (local / 'sub').mkdir(parents=True)
    (local / 'sub' / 'config.json').write_bytes(b'12345')
    assert target.file_state(commit, rfile) == 'missing'  # no huggingface_hub metadata
    meta_dir = local / '.cache' / 'huggingface' / 'download' / 'sub'
    meta_dir.mkdir(parents=True)
    meta = meta_dir / 'config.json.metadata'
    stamp = os.stat(str(local / 'sub' / 'config.json')).st_mtime + 5
    meta.write_text('%s\n%s\n%f\n' % (commit, rfile.etag, stamp))
    assert target.file_state(commit, rfile) == 'present'
    meta.write_text('%s\n%s\n%f\n' % ('d' * 40, rfile.etag, stamp))
    assert target.file_state(commit, rfile) == 'present'  # other commit, same content
    meta.write_text('%s\n%s\n%f\n' % ('d' * 40, 'f' * 40, stamp))
    assert target.file_state(commit, rfile) == 'missing'
    meta.write_text('%s\n%s\n%f\n' % (commit, rfile.etag, stamp - 100))
    assert target.file_state(commit, rfile) == 'missing'  # file modified after download
    meta.write_text('garbage')
    assert target.file_state(commit, rfile) == 'missing'


def test_refs_and_listing_roundtrip(tmp_path):
    for kwargs in (dict(cache_dir=str(tmp_path / 'c')), dict(local_dir=str(tmp_path / 'l'))):
        target = _hf.Target('org/name', 'model', **kwargs)
        commit = '1' * 40
        assert target.read_ref('main') is None and target.recorded_commit('main') is None
        assert target.write_ref('main', commit) is True
        assert target.write_ref('main', commit) is False
        assert target.read_ref('main') == commit
        assert target.write_ref(commit, commit) is False
        assert target.read_listing(commit) is None
        files = [_hf.RemoteFile('a', 1, 'x'), _hf.RemoteFile('b/c', 2, 'y')]
        target.write_listing(commit, files, 'http://hub', 'main')
        listing = target.read_listing(commit)
        assert [(f.path, f.size, f.etag) for f in listing] == [('a', 1, 'x'), ('b/c', 2, 'y')]


def test_listing_falls_back_to_huggingface_hub_tree_cache(tmp_path):
    target = _hf.Target('org/name', 'model', cache_dir=str(tmp_path))
    commit = '2' * 40
    trees = os.path.join(target.storage_folder, 'trees')
    os.makedirs(trees)
    with open(os.path.join(trees, commit + '.json'), 'w') as f:
        json.dump({'format_version': 1, 'files': {
            'config.json': {'size': 10, 'blob_id': 'g' * 40},
            'w.safetensors': {'size': 130, 'blob_id': 'p' * 40, 'lfs_sha256': 's' * 64, 'lfs_size': 1000},
        }}, f)
    listing = target.read_listing(commit)
    assert [(f.path, f.size, f.etag) for f in listing] == [('config.json', 10, 'g' * 40), ('w.safetensors', 1000, 's' * 64)]
    with open(os.path.join(trees, commit + '.json'), 'w') as f:
        json.dump({'format_version': 99, 'files': {}}, f)
    assert target.read_listing(commit) is None


# --------------------------------------------------------------------------- progress accounting


def _plan_for(target, commit, files):
    return _hf.Plan(target, commit, files, None, None)


@pytest.mark.parametrize('mode', ['cache_dir', 'local_dir'])
def test_progress_counts_incomplete_files_of_every_huggingface_hub_layout(tmp_path, mode):
    """bytes_done = complete files + fresh *.incomplete files of missing ones, for the 1.0 and 1.3x/2.x names."""
    target = _hf.Target('org/name', 'model', **{mode: str(tmp_path / mode)})
    commit = '3' * 40
    big = _hf.RemoteFile('sub/w.safetensors', 1000, 'e' * 64)
    other = _hf.RemoteFile('x.safetensors', 500, 'f' * 64)
    progress = _hf.Progress(str(tmp_path / 'p' / 'progress.json'), 'org/name', 'main', interval=3600)
    progress.start()
    progress.planned(_plan_for(target, commit, [big, other]))
    assert progress.doc['bytes_total'] == 1500 and progress.doc['bytes_done'] == 0
    if mode == 'cache_dir':
        where = os.path.join(target.storage_folder, 'blobs')
        names = ['%s.incomplete' % big.etag, '%s.0123abcd.incomplete' % big.etag, '%s.incomplete' % other.etag]
    else:
        where = os.path.join(target.local_dir, '.cache', 'huggingface', 'download', 'sub')
        names = ['Ab12Cd.%s.incomplete' % big.etag, 'Ab12Cd.%s.0123abcd.incomplete' % big.etag,
                 'Zz99Yy.%s.incomplete' % other.etag]
    os.makedirs(where)
    stale = os.path.join(where, names[2])
    with open(stale, 'wb') as f:
        f.write(b'x' * 400)
    os.utime(stale, (1, 1))  # left over by an old run: not counted
    progress.downloading(target)
    for name, size in ((names[0], 300), (names[1], 700)):
        with open(os.path.join(where, name), 'wb') as f:
            f.write(b'x' * size)
    progress._sample()
    assert progress.doc['bytes_done'] == 700 and progress.doc['files_done'] == 0  # largest per etag
    for name in names:
        os.unlink(os.path.join(where, name))
    progress._sample()
    assert progress.doc['bytes_done'] == 700  # never decreases (rename window)
    if mode == 'cache_dir':
        with open(os.path.join(where, big.etag), 'wb') as f:
            f.write(b'x' * 1000)
    else:
        os.makedirs(os.path.join(target.local_dir, 'sub'))
        with open(os.path.join(target.local_dir, 'sub', 'w.safetensors'), 'wb') as f:
            f.write(b'x' * 1000)
    progress._sample()
    assert progress.doc['bytes_done'] == 1000 and progress.doc['files_done'] == 1
    progress.failed('interrupted', 'boom')
    with open(progress.path) as f:
        doc = json.load(f)
    assert doc['state'] == 'failed' and doc['error_kind'] == 'interrupted' and doc['bytes_done'] == 1000
    assert oct(os.stat(progress.path).st_mode & 0o777) == oct(0o644)
    assert os.listdir(os.path.dirname(progress.path)) == ['progress.json']  # no temporary file left


# --------------------------------------------------------------------------- error mapping


def ctx(**kwargs):
    base = dict(repo_id='org/model', repo_type='model', revision='main', endpoint='http://hub:8080',
                token_given=False, timeout=7, target=_hf.Target('org/model', 'model', cache_dir='/srv/hf'))
    base.update(kwargs)
    return base


def test_describe_error_disk_and_permissions():
    kind, msg = _hf.describe_error(OSError(errno.ENOSPC, 'No space left on device'), ctx())
    assert kind == 'disk_full' and 'ENOSPC' in msg and '/srv/hf' in msg
    wrapped = RuntimeError('outer')
    wrapped.__cause__ = OSError(errno.EDQUOT, 'Disk quota exceeded')
    assert _hf.describe_error(wrapped, ctx())[0] == 'disk_full'
    kind, msg = _hf.describe_error(PermissionError(errno.EACCES, 'Permission denied'), ctx())
    assert kind == 'not_writable' and '/srv/hf' in msg
    assert _hf.describe_error(OSError(errno.EROFS, 'Read-only file system'), ctx())[0] == 'not_writable'


def test_describe_error_network_by_class_name():
    class ConnectError(Exception):
        pass

    class ReadTimeout(Exception):
        pass

    kind, msg = _hf.describe_error(ConnectError('[Errno 111] Connection refused'), ctx())
    assert kind == 'unreachable' and 'http://hub:8080' in msg and 'Connection refused' in msg
    kind, msg = _hf.describe_error(ReadTimeout('timed out'), ctx())
    assert kind == 'unreachable' and 'timed out after 7 seconds' in msg and 'http://hub:8080' in msg
    inner = ConnectError('Name or service not known')
    outer = _hf.LocalEntryNotFoundError('An error happened while trying to locate the file on the Hub')
    outer.__cause__ = inner
    assert _hf.describe_error(outer, ctx())[0] == 'unreachable'


def test_describe_error_generic_and_passthrough():
    kind, msg = _hf.describe_error(ValueError('weird\nsecond line'), ctx())
    assert kind == 'error' and 'ValueError: weird' in msg and 'second line' not in msg
    assert _hf.describe_error(_hf.HfDownloadError('m', kind='k'), ctx()) == ('k', 'm')


def test_describe_error_real_hub_errors(hub):
    """Errors raised by huggingface_hub itself against the lab hub, mapped to actionable messages."""
    _hf.configure_hf(10)  # as the module does: no telemetry, timeouts
    from huggingface_hub import HfApi
    api = HfApi(endpoint=hub.url, token=False)
    cases = [
        (dict(repo_id='org/none'), False, 'repo_not_found'),
        (dict(repo_id='openai/gpt-oss-120b', revision='nope'), False, 'revision_not_found'),
    ]
    for kwargs, token_given, kind in cases:
        with pytest.raises(Exception) as excinfo:
            api.repo_info(**kwargs)
        assert _hf.describe_error(excinfo.value, ctx(endpoint=hub.url, token_given=token_given))[0] == kind
    with pytest.raises(Exception) as excinfo:
        HfApi(endpoint=hub.url, token=HF_TOKEN_INVALID).repo_info('openai/gpt-oss-120b')
    kind, msg = _hf.describe_error(excinfo.value, ctx(endpoint=hub.url, token_given=True))
    assert kind == 'token_rejected' and HF_TOKEN_INVALID not in msg


# --------------------------------------------------------------------------- run() directly


def test_run_messages_never_contain_the_token(hub, tmp_path):
    for token, repo, kind in ((HF_TOKEN_INVALID, 'openai/gpt-oss-120b', 'token_rejected'),
                              (HF_TOKEN_NO_GATE, GATED_REPO, 'gated')):
        with pytest.raises(_hf.HfDownloadError) as excinfo:
            _hf.run(base_params(repo_id=repo, token=token, endpoint=hub.url, cache_dir=str(tmp_path)))
        assert excinfo.value.kind == kind
        assert token not in excinfo.value.msg and token not in repr(excinfo.value.details)
    result = _hf.run(base_params(repo_id=GATED_REPO, token=HF_TOKEN_GATED, endpoint=hub.url, cache_dir=str(tmp_path)))
    assert HF_TOKEN_GATED not in json.dumps(result)
    for root, _dirs, files in os.walk(str(tmp_path)):
        for name in files:
            path = os.path.join(root, name)
            if not os.path.islink(path) and os.path.getsize(path) < 100000:
                with open(path, 'rb') as f:
                    assert HF_TOKEN_GATED.encode() not in f.read(), path


def test_run_offline_needs_no_huggingface_hub_network(tmp_path, monkeypatch):
    def boom(*args, **kwargs):
        raise AssertionError('no huggingface_hub call expected offline')

    monkeypatch.setattr(_hf, 'HfApi', boom)
    monkeypatch.setattr(_hf, 'snapshot_download', boom)
    with pytest.raises(_hf.HfDownloadError) as excinfo:
        _hf.run(base_params(cache_dir=str(tmp_path), offline=True))
    assert excinfo.value.kind == 'offline_incomplete'


# --------------------------------------------------------------------------- hub server: content


def test_repos_json_is_small_and_declarative():
    assert os.path.getsize(HUB_REPOS) < 20000
    with open(HUB_REPOS) as f:
        spec = json.load(f)
    assert {r['id'] for r in spec['repos']} == LAB_REPOS | REAL_FILE_REPOS
    assert {r['id'] for r in spec['repos'] if r.get('files')} == REAL_FILE_REPOS
    assert [r['id'] for r in spec['repos'] if r.get('gated')] == [GATED_REPO]


def test_generated_repos(hub_mod):
    state = hub_mod.HubState(HUB_REPOS, None)
    assert {repo_id for _t, repo_id in state.repos} == LAB_REPOS
    for (_t, repo_id), repo in state.repos.items():
        names = set(repo.files)
        assert {'config.json', 'tokenizer_config.json', 'generation_config.json', 'README.md'} <= names
        config = json.loads(repo.files['config.json'].data)
        assert config['sparkops_lab_standin'] is True and config['architectures'] and config['model_type']
        assert json.loads(repo.files['tokenizer_config.json'].data)['sparkops_lab_standin'] is True
        assert b'lab stand-in' in repo.files['README.md'].data
        blobs = [f for f in repo.files.values() if f.path.endswith('.safetensors')]
        if repo_id == 'sparkops-lab/bench-100':
            assert len(repo.files) == 100
        elif repo_id == BENCH_LARGE:  # generated on the fly, never held in memory
            assert len(blobs) == 4 and sum(b.size for b in blobs) == 256 * MIB
            assert all(isinstance(b, hub_mod.StreamedFile) and b.data is None for b in blobs)
        elif repo_id == 'sparkops-lab/slow-resume':  # throttled: tests kill a download in the middle of a file
            # 24 MiB: larger than huggingface_hub's 10 MB write unit, so a kill leaves a non-empty partial file
            assert len(blobs) == 3 and all(b.size == 24 * MIB for b in blobs) and repo.rate == 3 * MIB
        else:
            assert 1 <= len(blobs) <= 2 and repo.rate == 0
            assert all(100 * 1024 <= b.size <= 1024 * 1024 for b in blobs)
        for blob in blobs:  # valid safetensors container
            head = blob.data[:65536] if blob.data is not None else b''.join(blob.read(0, 65536))
            header_len = int.from_bytes(head[:8], 'little')
            header = json.loads(head[8:8 + header_len])
            assert header['__metadata__']['sparkops_lab_standin'] == 'true'
            (tensor,) = [v for k, v in header.items() if k != '__metadata__']
            assert 8 + header_len + tensor['data_offsets'][1] == blob.size
        assert len(repo.sha) == 40
    assert state.repos[('model', GATED_REPO)].gated == 'manual'


def test_generation_is_deterministic(hub_mod):
    one = hub_mod.HubState(HUB_REPOS, None)
    two = hub_mod.HubState(HUB_REPOS, None)
    for key, repo in one.repos.items():
        assert repo.sha == two.repos[key].sha
        for path, f in repo.files.items():
            g = two.repos[key].files[path]
            if f.data is None and f.disk_path is None:  # streamed: compare some ranges, not 2 x 256 MiB
                for start, end in ((0, 4096), (f.size // 2 - 5, f.size // 2 + 300000), (f.size - 10, f.size)):
                    assert b''.join(f.read(start, end)) == b''.join(g.read(start, end))
            else:
                assert f.sha256 == g.sha256
    assert all(f._sha256 is None for f in one.repos[('model', BENCH_LARGE)].files.values()
               if isinstance(f, hub_mod.StreamedFile)), 'streamed files must not be hashed at start-up'


def test_streamed_file(hub_mod):
    f = hub_mod.StreamedFile('w.safetensors', 3 * hub_mod.STREAM_BLOCK + 12345, 'unit#1', 'standin.weight')
    full = b''.join(f.read(0, f.size))
    assert len(full) == f.size and max(len(c) for c in f.read(0, f.size)) <= hub_mod.STREAM_BLOCK
    header_len = int.from_bytes(full[:8], 'little')
    (tensor,) = [v for k, v in json.loads(full[8:8 + header_len]).items() if k != '__metadata__']
    assert 8 + header_len + tensor['data_offsets'][1] == f.size
    for start, end in ((0, 1), (5, 9), (100, hub_mod.STREAM_BLOCK + 7), (f.size - 1, f.size), (f.size, f.size)):
        assert b''.join(f.read(start, end)) == full[start:end]
    payload = full[8 + header_len:]
    blocks = [payload[i:i + hub_mod.STREAM_BLOCK] for i in range(0, len(payload), hub_mod.STREAM_BLOCK)]
    assert len(set(blocks)) == len(blocks)
    key = f.commit_key
    assert f._sha256 is None and f.sha256 == hashlib.sha256(full).hexdigest() and f.commit_key == key
    assert f.tree_entry()['lfs'] == {'oid': f.sha256, 'size': f.size, 'pointerSize': f.pointer_size}
    assert f.oid == hashlib.sha1(b'blob %d\0' % f.pointer_size + hub_mod._lfs_pointer(f.sha256, f.size)).hexdigest()


def test_data_dir_mode(hub_mod, tmp_path):
    state = hub_mod.HubState(HUB_REPOS, None, data_dir=str(tmp_path))
    repo = state.repos[('model', 'nvidia/Llama-3.1-8B-Instruct-FP4')]
    f = repo.files['model.safetensors']
    assert f.data is None and os.path.getsize(f.disk_path) == f.size
    assert b''.join(f.read(0, f.size)) == open(f.disk_path, 'rb').read()
    assert hub_mod.HubState(HUB_REPOS, None, data_dir=str(tmp_path)).repos[('model', repo.id)].sha == repo.sha


def test_tiktoken_standins(hub):
    for name in ('o200k_base', 'cl100k_base'):
        status, headers, body = http('%s/encodings/%s.tiktoken' % (hub.url, name))
        assert status == 200 and headers['X-Sparkops-Lab-Standin'] == 'true'
        lines = body.decode('ascii').splitlines()
        ranks = []
        tokens = set()
        for line in lines:
            token_b64, rank = line.split()
            tokens.add(base64.b64decode(token_b64))
            ranks.append(int(rank))
        assert ranks == list(range(len(lines)))
        assert all(bytes([b]) in tokens for b in range(256))
        assert any(b'SPARKOPS-LAB-STANDIN' in t for t in tokens)
    assert http('%s/encodings/r50k_base.tiktoken' % hub.url)[0] == 404


# --------------------------------------------------------------------------- hub server: protocol


def test_resolve_headers_and_ranges(hub):
    url = '%s/openai/gpt-oss-120b/resolve/main/model-00002-of-00002.safetensors' % hub.url
    status, headers, body = http(url, 'HEAD')
    assert status == 200 and body == b''
    assert len(headers['X-Repo-Commit']) == 40
    assert headers['Content-Length'] == headers['X-Linked-Size'] == '262144'
    assert headers['ETag'] == headers['X-Linked-Etag'] and len(headers['ETag'].strip('"')) == 64
    assert headers['Accept-Ranges'] == 'bytes'
    assert not [h for h in headers if h.lower().startswith('x-xet')]
    status, full = http(url)[0::2]
    assert status == 200 and len(full) == 262144
    assert hashlib.sha256(full).hexdigest() == headers['ETag'].strip('"')
    status, headers, part = http(url, headers={'Range': 'bytes=1000-'})
    assert status == 206 and part == full[1000:] and headers['Content-Range'] == 'bytes 1000-262143/262144'
    status, headers, part = http(url, headers={'Range': 'bytes=10-19'})
    assert status == 206 and part == full[10:20]
    status, headers, part = http(url, headers={'Range': 'bytes=-16'})
    assert status == 206 and part == full[-16:]
    status, headers = http(url, headers={'Range': 'bytes=262144-'})[:2]
    assert status == 416 and headers['Content-Range'] == 'bytes */262144'
    status, headers, body = http('%s/openai/gpt-oss-120b/resolve/main/config.json' % hub.url, 'HEAD')
    assert status == 200 and 'X-Linked-Etag' not in headers and len(headers['ETag'].strip('"')) == 40
    commit = http('%s/api/models/openai/gpt-oss-120b' % hub.url)[2]
    sha = json.loads(commit)['sha']
    assert http('%s/openai/gpt-oss-120b/resolve/%s/config.json' % (hub.url, sha))[0] == 200


def test_error_codes_like_the_real_hub(hub):
    status, headers, body = http('%s/api/models/org/none' % hub.url)
    assert status == 404 and headers['X-Error-Code'] == 'RepoNotFound'
    status, headers = http('%s/api/models/openai/gpt-oss-120b/revision/v0' % hub.url)[:2]
    assert status == 404 and headers['X-Error-Code'] == 'RevisionNotFound'
    status, headers = http('%s/openai/gpt-oss-120b/resolve/v0/config.json' % hub.url)[:2]
    assert status == 404 and headers['X-Error-Code'] == 'RevisionNotFound'
    status, headers = http('%s/openai/gpt-oss-120b/resolve/main/nope.json' % hub.url)[:2]
    assert status == 404 and headers['X-Error-Code'] == 'EntryNotFound' and len(headers['X-Repo-Commit']) == 40
    status, headers, body = http('%s/api/models/openai/gpt-oss-120b' % hub.url,
                                 headers={'Authorization': 'Bearer ' + HF_TOKEN_INVALID})
    assert status == 401 and json.loads(body) == {'error': 'Invalid credentials in Authorization header'}
    assert headers['X-Error-Message'] == 'Invalid credentials in Authorization header'
    gated = '%s/%s/resolve/main/config.json' % (hub.url, GATED_REPO)
    status, headers = http(gated)[:2]
    assert status == 401 and headers['X-Error-Code'] == 'GatedRepo'
    status, headers = http(gated, headers={'Authorization': 'Bearer ' + HF_TOKEN_NO_GATE})[:2]
    assert status == 403 and headers['X-Error-Code'] == 'GatedRepo'
    assert http(gated, headers={'Authorization': 'Bearer ' + HF_TOKEN_GATED})[0] == 200
    # like the real Hub, gated repos' metadata stays public
    status, body = http('%s/api/models/%s' % (hub.url, GATED_REPO))[0::2]
    assert status == 200 and json.loads(body)['gated'] == 'manual'
    status, body = http('%s/api/whoami-v2' % hub.url, headers={'Authorization': 'Bearer ' + HF_TOKEN_GATED})[0::2]
    assert status == 200 and json.loads(body)['name'] == LAB_TOKENS[HF_TOKEN_GATED]['name']


def test_streamed_file_over_http(hub, hub_mod):
    url = '%s/%s/resolve/main/model-00004-of-00004.safetensors' % (hub.url, BENCH_LARGE)
    status, headers, body = http(url, 'HEAD')
    assert status == 200 and headers['Content-Length'] == headers['X-Linked-Size'] == str(32 * MIB)
    local = hub_mod.HubState(HUB_REPOS, None).repos[('model', BENCH_LARGE)].files['model-00004-of-00004.safetensors']
    start = 20 * MIB + 3
    status, headers, part = http(url, headers={'Range': 'bytes=%d-%d' % (start, start + 99999)})
    assert status == 206 and part == b''.join(local.read(start, start + 100000))
    assert headers['ETag'].strip('"') == local.sha256


def test_huggingface_hub_api_against_server(hub):
    _hf.configure_hf(10)  # as the module does: no telemetry, timeouts
    from huggingface_hub import HfApi
    api = HfApi(endpoint=hub.url, token=False)
    info = api.model_info('nvidia/Qwen3-235B-A22B-FP4', files_metadata=True)
    assert info.sha and info.config['model_type'] == 'qwen3_moe'
    sizes = {s.rfilename: s.size for s in info.siblings}
    lfs = {s.rfilename: s.lfs for s in info.siblings}
    assert sizes['model-00001-of-00002.safetensors'] == 458752 and lfs['model-00001-of-00002.safetensors'] is not None
    tree = list(api.list_repo_tree('sparkops-lab/bench-100', recursive=True, revision=info.sha and 'main'))
    assert len([e for e in tree if hasattr(e, 'blob_id')]) == 100
    assert [e.path for e in tree if not hasattr(e, 'blob_id')] == ['data']
    top = list(api.list_repo_tree('sparkops-lab/bench-100'))
    assert 'data' in [e.path for e in top] and 'data/part-000.safetensors' not in [e.path for e in top]


def test_tree_pagination_with_link_header(hub_mod):
    _hf.configure_hf(10)  # as the module does: no telemetry, timeouts
    from huggingface_hub import HfApi
    state = hub_mod.HubState(HUB_REPOS, None)
    server = hub_mod.make_server('127.0.0.1', 0, state)
    old_page = hub_mod.TREE_PAGE_SIZE
    hub_mod.TREE_PAGE_SIZE = 7
    thread = threading.Thread(target=server.serve_forever, kwargs={'poll_interval': 0.1})
    thread.daemon = True
    thread.start()
    try:
        url = 'http://127.0.0.1:%d' % server.server_address[1]
        status, headers, body = http(url + '/api/models/sparkops-lab/bench-100/tree/main?recursive=true')
        assert len(json.loads(body)) == 7 and 'rel="next"' in headers['Link']
        tree = list(HfApi(endpoint=url, token=False).list_repo_tree('sparkops-lab/bench-100', recursive=True))
        assert len(tree) == 101  # 100 files + the data/ directory
    finally:
        hub_mod.TREE_PAGE_SIZE = old_page
        server.shutdown()
        server.server_close()


def test_server_log_has_one_line_per_request_and_no_token(hub):
    http('%s/api/models/openai/gpt-oss-120b' % hub.url, headers={'Authorization': 'Bearer ' + HF_TOKEN_GATED})
    http('%s/api/models/openai/gpt-oss-120b' % hub.url, headers={'Authorization': 'Bearer ' + HF_TOKEN_INVALID})
    with open(hub.log_path) as f:
        log = f.read()
    assert 'GET /api/models/openai/gpt-oss-120b 200' in log and 'user=alice' in log
    for token in (HF_TOKEN_GATED, HF_TOKEN_INVALID, HF_TOKEN_NO_GATE):
        assert token not in log


def test_server_is_stdlib_only():
    import ast
    with open(HUB_SERVER) as f:
        tree = ast.parse(f.read())
    modules = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(a.name.split('.')[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            modules.add(node.module.split('.')[0])
    import sys
    stdlib = getattr(sys, 'stdlib_module_names', None)
    if stdlib is None:
        pytest.skip('needs python >= 3.10')
    assert modules <= set(stdlib), modules - set(stdlib)


def test_interrupted_transfer_resumes_with_range_requests(hub_mod, tmp_path, monkeypatch):
    """The server drops the first GET of each weight file half-way; huggingface_hub resumes with Range.

    huggingface_hub >= 1.x retries within the same call (2.x, 1.3x) or on the next run from the kept
    *.incomplete file (1.0); either way the rest of the file is fetched with a Range request.
    """
    import socket
    _hf.configure_hf(10)
    # huggingface_hub writes in DOWNLOAD_CHUNK_SIZE (10 MB) pieces: use small ones so a 256 KB file can resume
    monkeypatch.setattr(_hf.hf_constants, 'DOWNLOAD_CHUNK_SIZE', 16384)
    state = hub_mod.HubState(HUB_REPOS, None)
    seen = {'dropped': set(), 'ranges': []}

    class FlakyHandler(hub_mod.HubHandler):
        def _resolve(self, repo_type, repo_id, revision, path, token_info):
            if self.command == 'GET' and path.endswith('.safetensors'):
                if self.headers.get('Range'):
                    seen['ranges'].append((path, self.headers['Range']))
                elif path not in seen['dropped']:
                    seen['dropped'].add(path)
                    rfile = self.state.repos[(repo_type, repo_id)].files[path]
                    self.send_response(200)
                    self.send_header('Content-Length', str(rfile.size))
                    self.end_headers()
                    self.wfile.write(rfile.data[:rfile.size // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return None
            return super(FlakyHandler, self)._resolve(repo_type, repo_id, revision, path, token_info)

    server = hub_mod.HubServer(('127.0.0.1', 0), type('BoundFlaky', (FlakyHandler,), {'state': state}))
    thread = threading.Thread(target=server.serve_forever, kwargs={'poll_interval': 0.1})
    thread.daemon = True
    thread.start()
    try:
        url = 'http://127.0.0.1:%d' % server.server_address[1]
        params = base_params(repo_id='nvidia/Llama-3.1-8B-Instruct-FP4', endpoint=url, cache_dir=str(tmp_path))
        try:
            result = _hf.run(params)
        except _hf.HfDownloadError as e:
            assert e.kind == 'interrupted' and 're-run' in e.msg, e.msg
            result = _hf.run(params)
    finally:
        server.shutdown()
        server.server_close()
    assert seen['dropped'] == {'model.safetensors'}
    assert len(seen['ranges']) == 1 and seen['ranges'][0][0] == 'model.safetensors'
    start = int(seen['ranges'][0][1].split('=')[1].rstrip('-'))
    assert 0 < start <= 131072
    assert 'model.safetensors' in result['fetched_files'] and result['files'] == 7
    weights = os.path.join(result['path'], 'model.safetensors')
    expected = state.repos[('model', 'nvidia/Llama-3.1-8B-Instruct-FP4')].files['model.safetensors']
    with open(weights, 'rb') as f:
        assert hashlib.sha256(f.read()).hexdigest() == expected.sha256


# --------------------------------------------------------------------------- resume after a killed run

RESUME_REPO = 'nvidia/Llama-3.1-8B-Instruct-FP4'  # model.safetensors: 262144 bytes, LFS (etag = sha256)


def _partial_dir(target, rfile_path, mode):
    if mode == 'cache_dir':
        return os.path.join(target.storage_folder, 'blobs')
    parts = rfile_path.split('/')
    return os.path.join(target.local_dir, '.cache', 'huggingface', 'download', *parts[:-1])


def _partial_name(etag, mode, suffix):
    # huggingface_hub 2.x: <etag>.<8 hex>.incomplete (cache) / <hash>.<etag>.<8 hex>.incomplete (local_dir)
    return ('%s%s.incomplete' if mode == 'cache_dir' else 'Qk3vZ8.%s%s.incomplete') % (etag, suffix)


def _hub_log_lines(hub, path):
    with open(hub.log_path) as f:
        return [line.split() for line in f if (' /%s/resolve/' % RESUME_REPO) in line and line.split()[3].endswith(path)]


@pytest.mark.parametrize('mode', ['cache_dir', 'local_dir'])
def test_killed_download_resumes_from_the_partial_file(hub, hub_mod, tmp_path, mode):
    """A kill leaves <etag>.<8 hex>.incomplete; the next run fetches only the rest, with a Range request."""
    expected = hub_mod.HubState(HUB_REPOS, None).repos[('model', RESUME_REPO)].files['model.safetensors']
    where = str(tmp_path / mode)
    params = base_params(repo_id=RESUME_REPO, endpoint=hub.url, **{mode: where})
    target = _hf.Target(RESUME_REPO, 'model', **{mode: where})
    pdir = _partial_dir(target, 'model.safetensors', mode)
    os.makedirs(pdir)
    kept = 100000
    with open(os.path.join(pdir, _partial_name(expected.sha256, mode, '.0a1b2c3d')), 'wb') as f:
        f.write(expected.data[:kept])  # what the killed process had written
    with open(os.path.join(pdir, _partial_name(expected.sha256, mode, '.99ff00ee')), 'wb') as f:
        f.write(expected.data[:4096])  # an older, shorter attempt: removed

    planned = _hf.run(params, check_mode=True)
    assert planned['bytes_reused'] == kept and planned['changed']
    assert planned['bytes_fetched'] + kept == planned['bytes_total']  # nothing else is on disk yet
    before = len(_hub_log_lines(hub, 'model.safetensors'))

    result = _hf.run(params)
    assert result['bytes_reused'] == kept
    assert result['bytes_fetched'] == planned['bytes_fetched']
    assert 'model.safetensors' in result['fetched_files']
    with open(os.path.join(result['path'], 'model.safetensors'), 'rb') as f:
        assert hashlib.sha256(f.read()).hexdigest() == expected.sha256
    gets = [line for line in _hub_log_lines(hub, 'model.safetensors')[before:] if line[2] == 'GET']
    assert [(line[4], int(line[5])) for line in gets] == [('206', expected.size - kept)]
    assert not [n for n in os.listdir(pdir) if n.endswith('.incomplete')]
    if mode == 'local_dir':
        meta = os.path.join(where, '.cache', 'huggingface', 'download', 'model.safetensors.metadata')
        with open(meta) as f:
            assert f.read().split('\n')[:2] == [result['commit'], expected.sha256]

    again = _hf.run(params)
    assert not again['changed'] and again['bytes_fetched'] == 0 and again['bytes_reused'] == 0


def test_partial_file_with_wrong_content_is_dropped_and_downloaded_again(hub, hub_mod, tmp_path):
    expected = hub_mod.HubState(HUB_REPOS, None).repos[('model', RESUME_REPO)].files['model.safetensors']
    params = base_params(repo_id=RESUME_REPO, endpoint=hub.url, cache_dir=str(tmp_path))
    target = _hf.Target(RESUME_REPO, 'model', cache_dir=str(tmp_path))
    pdir = _partial_dir(target, 'model.safetensors', 'cache_dir')
    os.makedirs(pdir)
    with open(os.path.join(pdir, _partial_name(expected.sha256, 'cache_dir', '.0a1b2c3d')), 'wb') as f:
        f.write(b'\0' * 50000)  # e.g. zero-filled after a power loss
    with open(os.path.join(pdir, _partial_name(expected.sha256, 'cache_dir', '')), 'wb') as f:
        f.write(b'\0' * (expected.size + 1))  # longer than the file: never resumed
    result = _hf.run(params)
    assert result['bytes_reused'] == 0
    assert any('did not complete to the expected content' in w for w in result['warnings']), result['warnings']
    with open(os.path.join(result['path'], 'model.safetensors'), 'rb') as f:
        assert hashlib.sha256(f.read()).hexdigest() == expected.sha256
    assert not [n for n in os.listdir(pdir) if n.endswith('.incomplete')]


def test_partials_only_match_their_own_etag(tmp_path):
    target = _hf.Target('org/name', 'model', cache_dir=str(tmp_path))
    rfile = _hf.RemoteFile('w.safetensors', 1000, 'a' * 64)
    blobs = os.path.join(target.storage_folder, 'blobs')
    os.makedirs(blobs)
    for name, size in (('a' * 64 + '.incomplete', 10), ('a' * 64 + '.0123abcd.incomplete', 20),
                       ('a' * 63 + 'b.0123abcd.incomplete', 30), ('a' * 64 + '.xyz.incomplete', 40),
                       ('a' * 64, 50)):
        with open(os.path.join(blobs, name), 'wb') as f:
            f.write(b'x' * size)
    assert [size for _p, size in target.partials(rfile)] == [20, 10]
    assert target.reusable_bytes([rfile]) == 20
    assert target.partials(_hf.RemoteFile('n.json', 5, None)) == []
