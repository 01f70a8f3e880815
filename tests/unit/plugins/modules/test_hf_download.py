# -*- coding: utf-8 -*-
# Unit tests for sparkops.specdec.hf_download: main() runs in-process against the lab hub
# (tests/lab/images/hub/hub_server.py on 127.0.0.1, see tests/unit/conftest.py) and the real
# module output (stdout JSON of exit_json/fail_json, with Ansible's no_log masking) is checked.

from __future__ import annotations

import importlib.util
import json
import os
import threading
import time

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.sparkops.specdec.plugins.module_utils import _hf
from ansible_collections.sparkops.specdec.plugins.modules import hf_download

from ansible_collections.sparkops.specdec.tests.unit.conftest import (
    GATED_REPO, HF_TOKEN_GATED, HF_TOKEN_INVALID, HF_TOKEN_NO_GATE, HUB_REPOS, HUB_SERVER, LAB_TOKENS,
)

pytestmark = pytest.mark.usefixtures('hf_env', 'loopback_only')

REPO = 'openai/gpt-oss-120b'
REPO_FILES = [
    '.gitattributes', 'README.md', 'config.json', 'generation_config.json',
    'model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors',
    'model.safetensors.index.json', 'tokenizer_config.json',
]
ALL_TOKENS = (HF_TOKEN_GATED, HF_TOKEN_NO_GATE, HF_TOKEN_INVALID)


def run_module(capsys, args, check_mode=False, diff=False):
    """Run the module's main() and return (result dict, raw stdout, raw stderr)."""
    module_args = dict(args)
    if check_mode:
        module_args['_ansible_check_mode'] = True
    if diff:
        module_args['_ansible_diff'] = True
    capsys.readouterr()
    with patch_module_args(module_args):
        with pytest.raises(SystemExit):
            hf_download.main()
    captured = capsys.readouterr()
    return json.loads(captured.out), captured.out, captured.err


def ok(capsys, args, **kwargs):
    result = run_module(capsys, args, **kwargs)[0]
    assert not result.get('failed'), result
    return result


def failed_io(capsys, args, kind=None, **kwargs):
    """Run, expect a failure (of that kind); return (result, stdout, stderr)."""
    result, out, err = run_module(capsys, args, **kwargs)
    assert result.get('failed'), result
    if kind:
        assert result.get('error_kind') == kind, result
    return result, out, err


def failed(capsys, args, kind=None, **kwargs):
    return failed_io(capsys, args, kind=kind, **kwargs)[0]


def hub_requests(hub, marker='/resolve/'):
    with open(hub.log_path) as f:
        return [line for line in f if marker in line]


def snapshot_files(path):
    found = []
    for root, _dirs, files in os.walk(path):
        for name in files:
            found.append(os.path.relpath(os.path.join(root, name), path).replace(os.sep, '/'))
    return sorted(found)


def assert_no_token(*texts):
    for text in texts:
        for token in ALL_TOKENS:
            assert token not in text


@pytest.fixture
def cache(tmp_path):
    return str(tmp_path / 'huggingface' / 'hub')


# --------------------------------------------------------------------------- download / idempotence


def test_fresh_download_then_noop(capsys, hub, cache, monkeypatch):
    args = dict(repo_id=REPO, cache_dir=cache, endpoint=hub.url)
    first = ok(capsys, args)
    assert first['changed'] is True
    assert len(first['commit']) == 40
    assert first['path'] == os.path.join(cache, 'models--openai--gpt-oss-120b', 'snapshots', first['commit'])
    assert first['files'] == len(REPO_FILES)
    assert first['fetched_files'] == REPO_FILES
    assert first['bytes_fetched'] == first['bytes_total'] > 600 * 1024
    assert isinstance(first['seconds'], float)
    assert snapshot_files(first['path']) == REPO_FILES
    assert sum(os.path.getsize(os.path.join(first['path'], f)) for f in REPO_FILES) == first['bytes_total']
    with open(os.path.join(first['path'], 'config.json')) as f:
        assert json.load(f)['sparkops_lab_standin'] is True
    with open(os.path.join(cache, 'models--openai--gpt-oss-120b', 'refs', 'main')) as f:
        assert f.read() == first['commit']

    # Second run: nothing fetched, no file request sent, snapshot_download not even called.
    resolves_before = len(hub_requests(hub))

    def no_download(**kwargs):
        raise AssertionError('snapshot_download must not run for a complete snapshot')

    monkeypatch.setattr(_hf, 'snapshot_download', no_download)
    second = ok(capsys, args)
    assert second['changed'] is False
    assert second['fetched_files'] == []
    assert second['bytes_fetched'] == 0
    assert second['bytes_total'] == first['bytes_total']
    assert second['commit'] == first['commit'] and second['path'] == first['path']
    assert len(hub_requests(hub)) == resolves_before
    assert 'diff' not in second


def test_check_mode_on_empty_and_on_complete(capsys, hub, cache):
    args = dict(repo_id=REPO, cache_dir=cache, endpoint=hub.url)
    planned = ok(capsys, args, check_mode=True)
    assert planned['changed'] is True
    assert planned['fetched_files'] == REPO_FILES
    assert planned['bytes_fetched'] == planned['bytes_total'] > 0
    assert not os.path.exists(cache), 'check mode must not write anything'

    done = ok(capsys, args)
    assert done['commit'] == planned['commit'] and done['path'] == planned['path']
    assert done['bytes_fetched'] == planned['bytes_fetched']

    again = ok(capsys, args, check_mode=True)
    assert again['changed'] is False
    assert again['fetched_files'] == [] and again['bytes_fetched'] == 0


def test_diff_before_after(capsys, hub, cache):
    args = dict(repo_id=REPO, cache_dir=cache, endpoint=hub.url)
    first = ok(capsys, args, diff=True)
    assert first['diff']['before']['commit'] is None
    assert first['diff']['before']['files_present'] == 0
    assert first['diff']['after'] == {'commit': first['commit'], 'files_present': len(REPO_FILES)}
    second = ok(capsys, args, diff=True)
    assert second['diff']['before'] == second['diff']['after']
    check = ok(capsys, dict(args, revision=first['commit']), diff=True, check_mode=True)
    assert check['changed'] is False
    assert check['diff']['before']['commit'] == first['commit']


def test_revision_as_commit_sha_reuses_snapshot(capsys, hub, cache):
    first = ok(capsys, dict(repo_id=REPO, cache_dir=cache, endpoint=hub.url))
    pinned = ok(capsys, dict(repo_id=REPO, cache_dir=cache, endpoint=hub.url, revision=first['commit']))
    assert pinned['changed'] is False and pinned['path'] == first['path']


def test_ref_pointing_elsewhere_is_moved_and_reported_changed(capsys, hub, cache):
    first = ok(capsys, dict(repo_id=REPO, cache_dir=cache, endpoint=hub.url))
    ref = os.path.join(cache, 'models--openai--gpt-oss-120b', 'refs', 'main')
    with open(ref, 'w') as f:
        f.write('0' * 40)
    moved = ok(capsys, dict(repo_id=REPO, cache_dir=cache, endpoint=hub.url), diff=True)
    assert moved['changed'] is True and moved['fetched_files'] == []
    assert moved['diff']['before']['commit'] == '0' * 40
    with open(ref) as f:
        assert f.read() == first['commit']


def test_partial_file_is_never_complete_and_gets_repaired(capsys, hub, cache):
    first = ok(capsys, dict(repo_id=REPO, cache_dir=cache, endpoint=hub.url))
    victim = os.path.join(first['path'], 'model-00002-of-00002.safetensors')
    blob = os.path.realpath(victim)
    with open(blob, 'r+b') as f:
        f.truncate(1000)
    # a leftover of an interrupted download must not count either
    with open(blob + '.deadbeef.incomplete', 'wb') as f:
        f.write(b'x' * 10)
    check = ok(capsys, dict(repo_id=REPO, cache_dir=cache, endpoint=hub.url), check_mode=True)
    assert check['changed'] is True and check['fetched_files'] == ['model-00002-of-00002.safetensors']
    offline = failed(capsys, dict(repo_id=REPO, cache_dir=cache, offline=True), kind='offline_incomplete')
    assert 'model-00002-of-00002.safetensors' in offline['msg']
    repaired = ok(capsys, dict(repo_id=REPO, cache_dir=cache, endpoint=hub.url))
    assert repaired['changed'] is True
    assert repaired['fetched_files'] == ['model-00002-of-00002.safetensors']
    assert repaired['bytes_fetched'] == os.path.getsize(victim) == 262144


def test_blob_already_in_cache_is_linked_without_download(capsys, hub, cache):
    first = ok(capsys, dict(repo_id=REPO, cache_dir=cache, endpoint=hub.url))
    os.unlink(os.path.join(first['path'], 'model-00001-of-00002.safetensors'))
    relinked = ok(capsys, dict(repo_id=REPO, cache_dir=cache, endpoint=hub.url))
    assert relinked['changed'] is True
    assert relinked['fetched_files'] == ['model-00001-of-00002.safetensors']
    assert relinked['bytes_fetched'] == 0
    assert os.path.getsize(os.path.join(first['path'], 'model-00001-of-00002.safetensors')) == 393216


def test_bench_repo_with_100_files_parallel(capsys, hub, cache):
    result = ok(capsys, dict(repo_id='sparkops-lab/bench-100', cache_dir=cache, endpoint=hub.url, max_workers=16))
    assert result['files'] == 100 and len(result['fetched_files']) == 100
    assert len(snapshot_files(result['path'])) == 100


# --------------------------------------------------------------------------- patterns, local_dir


def test_allow_and_ignore_patterns(capsys, hub, cache):
    base = dict(repo_id=REPO, cache_dir=cache, endpoint=hub.url)
    jsons = ok(capsys, dict(base, allow_patterns=['*.json']))
    assert jsons['fetched_files'] == ['config.json', 'generation_config.json', 'model.safetensors.index.json',
                                      'tokenizer_config.json']
    assert jsons['files'] == 4
    assert snapshot_files(jsons['path']) == jsons['fetched_files']

    no_weights = ok(capsys, dict(base, ignore_patterns=['*.safetensors']))
    assert no_weights['fetched_files'] == ['.gitattributes', 'README.md']
    assert no_weights['files'] == 6

    both = ok(capsys, dict(base, allow_patterns=['*.safetensors', '*.json'], ignore_patterns=['model-00002*']))
    assert both['fetched_files'] == ['model-00001-of-00002.safetensors']

    rest = ok(capsys, base)
    assert rest['fetched_files'] == ['model-00002-of-00002.safetensors']
    assert rest['bytes_fetched'] == 262144


def test_pattern_matching_nothing_warns(capsys, hub, cache):
    result = ok(capsys, dict(repo_id=REPO, cache_dir=cache, endpoint=hub.url, allow_patterns=['*.gguf']))
    assert result['changed'] is False and result['files'] == 0
    assert 'allow_patterns' in json.dumps(result.get('warnings'))


def test_local_dir_mode(capsys, hub, tmp_path):
    local = str(tmp_path / 'draft')
    args = dict(repo_id='nvidia/gpt-oss-120b-Eagle3-long-context', local_dir=local, endpoint=hub.url)
    planned = ok(capsys, args, check_mode=True)
    assert planned['changed'] is True and not os.path.exists(local)
    first = ok(capsys, args)
    assert first['changed'] is True and first['path'] == local
    assert first['fetched_files'] == ['.gitattributes', 'README.md', 'config.json', 'generation_config.json',
                                      'model.safetensors', 'tokenizer_config.json']
    assert os.path.getsize(os.path.join(local, 'model.safetensors')) == 327680
    assert ok(capsys, args)['changed'] is False
    assert ok(capsys, args, check_mode=True)['changed'] is False
    offline = ok(capsys, dict(repo_id=args['repo_id'], local_dir=local, offline=True))
    assert offline['changed'] is False and offline['commit'] == first['commit']

    # a locally modified file (size changed) is fetched again
    with open(os.path.join(local, 'config.json'), 'a') as f:
        f.write('\n')
    again = ok(capsys, args)
    assert again['fetched_files'] == ['config.json']


def test_cache_dir_and_local_dir_are_exclusive(capsys, hub, cache, tmp_path):
    result = run_module(capsys, dict(repo_id=REPO, cache_dir=cache, local_dir=str(tmp_path / 'x'),
                                     endpoint=hub.url))[0]
    assert result['failed'] and 'mutually exclusive' in result['msg']


# --------------------------------------------------------------------------- gated, tokens


def test_gated_without_token(capsys, hub, cache):
    for check_mode in (True, False):
        result, out, err = failed_io(capsys, dict(repo_id=GATED_REPO, cache_dir=cache, endpoint=hub.url),
                                     kind='gated', check_mode=check_mode)
        assert 'request access to %s on the Hub (%s/%s), then re-run' % (GATED_REPO, hub.url, GATED_REPO) in result['msg']
        assert 'no HF token was given' in result['msg']
    assert not os.path.exists(os.path.join(cache, 'models--nvidia--Llama-3.3-70B-Instruct-FP4', 'snapshots'))


def test_gated_with_token_without_access(capsys, hub, cache):
    result, out, err = failed_io(capsys, dict(repo_id=GATED_REPO, cache_dir=cache, endpoint=hub.url,
                                              token=HF_TOKEN_NO_GATE), kind='gated')
    assert 'request access to %s on the Hub (%s/%s), then re-run' % (GATED_REPO, hub.url, GATED_REPO) in result['msg']
    assert_no_token(out, err)


def test_gated_with_access(capsys, hub, cache):
    result, out, err = run_module(capsys, dict(repo_id=GATED_REPO, cache_dir=cache, endpoint=hub.url,
                                               token=HF_TOKEN_GATED))
    assert not result.get('failed'), result
    assert result['changed'] is True and 'hf_quant_config.json' in result['fetched_files']
    assert_no_token(out, err)


def test_invalid_token(capsys, hub, cache):
    for repo in (REPO, GATED_REPO):
        result, out, err = failed_io(capsys, dict(repo_id=repo, cache_dir=cache, endpoint=hub.url,
                                                  token=HF_TOKEN_INVALID), kind='token_rejected')
        assert result['msg'].startswith(
            'HF token rejected by %s: set a valid token in HF_TOKEN / the token option' % hub.url)
        assert_no_token(out, err)


def test_token_from_hf_token_env(capsys, hub, cache, monkeypatch):
    monkeypatch.setenv('HF_TOKEN', HF_TOKEN_GATED)
    result, out, err = run_module(capsys, dict(repo_id=GATED_REPO, cache_dir=cache, endpoint=hub.url))
    assert not result.get('failed'), result
    assert_no_token(out, err)


def test_token_file(capsys, hub, cache, tmp_path, monkeypatch):
    token_file = tmp_path / 'hf_token'
    token_file.write_text('\n  %s  \n' % HF_TOKEN_GATED)
    # HF_TOKEN in the environment must neither conflict with nor override token_file
    monkeypatch.setenv('HF_TOKEN', HF_TOKEN_NO_GATE)
    result, out, err = run_module(capsys, dict(repo_id=GATED_REPO, cache_dir=cache, endpoint=hub.url,
                                               token_file=str(token_file)))
    assert not result.get('failed'), result
    assert_no_token(out, err)

    empty = tmp_path / 'empty'
    empty.write_text('\n')
    result = failed(capsys, dict(repo_id=GATED_REPO, cache_dir=cache, endpoint=hub.url,
                                 token_file=str(empty)), kind='token_file')
    assert 'is empty' in result['msg']
    result = failed(capsys, dict(repo_id=GATED_REPO, cache_dir=cache, endpoint=hub.url,
                                 token_file=str(tmp_path / 'missing')), kind='token_file')
    assert 'cannot read token_file' in result['msg']
    result = run_module(capsys, dict(repo_id=GATED_REPO, cache_dir=cache, endpoint=hub.url,
                                     token='x' * 30, token_file=str(token_file)))[0]
    assert result['failed'] and 'mutually exclusive' in result['msg']


def test_token_file_remove_deletes_the_file_at_start_whatever_the_outcome(capsys, hub, cache, tmp_path):
    # The role's background download passes a 0600 token file it wrote for this run only: the module reads it and
    # removes it first, so no file on the node holds the token while the download runs (nor after a failure).
    token_file = tmp_path / 'hf_token'
    seen = {}
    real = _hf.run

    def spy(params, check_mode=False):
        seen['exists_during_download'] = token_file.exists()
        return real(params, check_mode=check_mode)

    token_file.write_text(HF_TOKEN_GATED + '\n')
    token_file.chmod(0o600)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(hf_download, 'run', spy)
        result, out, err = run_module(capsys, dict(repo_id=GATED_REPO, cache_dir=cache, endpoint=hub.url,
                                                   token_file=str(token_file), token_file_remove=True))
    assert not result.get('failed'), result
    assert seen == {'exists_during_download': False} and not token_file.exists()
    assert_no_token(out, err)
    # Failures remove it too: a malformed token, an empty file, a rejected token.
    for text, kind in (('Bearer ' + HF_TOKEN_GATED, 'token_malformed'), ('\n', 'token_file'),
                       (HF_TOKEN_INVALID, 'token_rejected')):
        token_file.write_text(text)
        failed(capsys, dict(repo_id=GATED_REPO, cache_dir=cache, endpoint=hub.url, token_file=str(token_file),
                            token_file_remove=True), kind=kind)
        assert not token_file.exists(), kind
    # A missing file is the read error, not a removal error; without token_file_remove the file is kept.
    result = failed(capsys, dict(repo_id=GATED_REPO, cache_dir=cache, endpoint=hub.url, token_file=str(token_file),
                                 token_file_remove=True), kind='token_file')
    assert result['msg'].startswith('cannot read token_file')
    token_file.write_text(HF_TOKEN_GATED)
    ok(capsys, dict(repo_id=GATED_REPO, cache_dir=cache, endpoint=hub.url, token_file=str(token_file)))
    assert token_file.read_text() == HF_TOKEN_GATED


def test_token_never_in_result_messages_or_hub_log(capsys, hub, cache):
    outputs = []
    for token, repo in ((HF_TOKEN_INVALID, REPO), (HF_TOKEN_NO_GATE, GATED_REPO), (HF_TOKEN_GATED, GATED_REPO)):
        result, out, err = run_module(capsys, dict(repo_id=repo, cache_dir=cache, endpoint=hub.url, token=token),
                                      diff=True)
        outputs += [out, err, json.dumps(result)]
    assert_no_token(*outputs)
    with open(hub.log_path) as f:
        log = f.read()
    assert 'user=alice' in log and 'user=bob' in log and 'user=<invalid-token>' in log
    assert_no_token(log)


# --------------------------------------------------------------------------- not found, network, offline


def test_repo_not_found(capsys, hub, cache):
    result = failed(capsys, dict(repo_id='nvidia/no-such-model', cache_dir=cache, endpoint=hub.url),
                    kind='repo_not_found')
    assert 'nvidia/no-such-model' in result['msg'] and hub.url in result['msg']
    assert 'check repo_id and repo_type' in result['msg']
    result = failed(capsys, dict(repo_id=REPO, repo_type='dataset', cache_dir=cache, endpoint=hub.url),
                    kind='repo_not_found')
    assert 'dataset repository' in result['msg']


def test_revision_not_found(capsys, hub, cache):
    for revision in ('v9.9-does-not-exist', 'f' * 40):
        result = failed(capsys, dict(repo_id=REPO, revision=revision, cache_dir=cache, endpoint=hub.url),
                        kind='revision_not_found')
        assert repr(revision) in result['msg'] and 'existing branch, tag or full 40-character commit SHA' in result['msg']


def test_endpoint_unreachable(capsys, cache, closed_port):
    endpoint = 'http://127.0.0.1:%d' % closed_port
    started = time.time()
    result = failed(capsys, dict(repo_id=REPO, cache_dir=cache, endpoint=endpoint), kind='unreachable')
    assert time.time() - started < 20
    assert 'cannot reach the Hugging Face Hub at %s' % endpoint in result['msg']
    assert 'offline=true' in result['msg']


def test_endpoint_timeout(capsys, cache, silent_port):
    endpoint = 'http://127.0.0.1:%d' % silent_port
    started = time.time()
    result = failed(capsys, dict(repo_id=REPO, cache_dir=cache, endpoint=endpoint, timeout=1), kind='unreachable')
    assert time.time() - started < 20
    assert 'timed out after 1 seconds' in result['msg'] and endpoint in result['msg']


def test_endpoint_from_hf_endpoint_env(capsys, hub, cache, monkeypatch):
    monkeypatch.setenv('HF_ENDPOINT', hub.url)
    result = ok(capsys, dict(repo_id='nvidia/Llama-3.1-8B-Instruct-FP4', cache_dir=cache, allow_patterns=['*.json']))
    assert result['changed'] is True


def test_hf_hub_offline_env_is_explained(capsys, hub, cache, monkeypatch):
    monkeypatch.setattr(_hf.hf_constants, 'HF_HUB_OFFLINE', True)
    result = failed(capsys, dict(repo_id=REPO, cache_dir=cache, endpoint=hub.url), kind='offline_env')
    assert 'HF_HUB_OFFLINE' in result['msg']


def test_offline_complete_uses_no_network(capsys, hub, cache, closed_port):
    first = ok(capsys, dict(repo_id=REPO, cache_dir=cache, endpoint=hub.url))
    # unreachable endpoint: offline must not even try
    args = dict(repo_id=REPO, cache_dir=cache, endpoint='http://127.0.0.1:%d' % closed_port, offline=True)
    for check_mode in (False, True):
        result = ok(capsys, args, check_mode=check_mode, diff=True)
        assert result['changed'] is False and result['commit'] == first['commit']
        assert result['path'] == first['path'] and result['files'] == len(REPO_FILES)
    pinned = ok(capsys, dict(args, revision=first['commit']))
    assert pinned['changed'] is False


def test_offline_incomplete_or_unknown(capsys, hub, cache):
    result = failed(capsys, dict(repo_id=REPO, cache_dir=cache, offline=True), kind='offline_incomplete')
    assert 'no local record' in result['msg'] and 'offline=false' in result['msg']

    first = ok(capsys, dict(repo_id=REPO, cache_dir=cache, endpoint=hub.url, allow_patterns=['*.json']))
    # asking offline for more than what was downloaded
    result = failed(capsys, dict(repo_id=REPO, cache_dir=cache, offline=True), kind='offline_incomplete')
    assert 'incomplete' in result['msg'] and '4 of 8' in result['msg'] and 'offline=false' in result['msg']
    # only the json files: complete
    assert ok(capsys, dict(repo_id=REPO, cache_dir=cache, offline=True, allow_patterns=['*.json']))['changed'] is False
    # deleted file
    os.unlink(os.path.join(first['path'], 'config.json'))
    result = failed(capsys, dict(repo_id=REPO, cache_dir=cache, offline=True, allow_patterns=['*.json']),
                    kind='offline_incomplete')
    assert 'config.json' in result['msg']


def test_offline_with_huggingface_hub_tree_cache_only(capsys, hub, cache):
    first = ok(capsys, dict(repo_id=REPO, cache_dir=cache, endpoint=hub.url))
    state = os.path.join(cache, 'models--openai--gpt-oss-120b', _hf.STATE_DIR_NAME)
    os.unlink(os.path.join(state, first['commit'] + '.json'))
    trees = os.path.join(cache, 'models--openai--gpt-oss-120b', 'trees', first['commit'] + '.json')
    if not os.path.exists(trees):  # huggingface_hub < 2 writes no tree cache
        pytest.skip('installed huggingface_hub keeps no trees/ cache')
    assert ok(capsys, dict(repo_id=REPO, cache_dir=cache, offline=True))['changed'] is False
    os.unlink(trees)
    failed(capsys, dict(repo_id=REPO, cache_dir=cache, offline=True), kind='offline_incomplete')


# --------------------------------------------------------------------------- environment problems


def test_disk_full_detected_before_download(capsys, hub, cache, monkeypatch):
    class Usage(object):
        free = 1000
        total = 10 ** 9
        used = 10 ** 9 - 1000

    monkeypatch.setattr(_hf.shutil, 'disk_usage', lambda path: Usage())
    result = failed(capsys, dict(repo_id=REPO, cache_dir=cache, endpoint=hub.url), kind='disk_full')
    assert 'ENOSPC' in result['msg'] and 'larger filesystem' in result['msg']
    assert not os.path.exists(os.path.join(cache, 'models--openai--gpt-oss-120b', 'snapshots'))
    planned = ok(capsys, dict(repo_id=REPO, cache_dir=cache, endpoint=hub.url), check_mode=True)
    assert 'ENOSPC' in json.dumps(planned.get('warnings'))


def test_disk_full_during_download(capsys, hub, cache, monkeypatch):
    import errno

    def enospc(**kwargs):
        raise OSError(errno.ENOSPC, 'No space left on device')

    monkeypatch.setattr(_hf, 'snapshot_download', enospc)
    result = failed(capsys, dict(repo_id=REPO, cache_dir=cache, endpoint=hub.url), kind='disk_full')
    assert 'no space left on device (ENOSPC)' in result['msg']


def test_not_writable(capsys, hub, tmp_path, monkeypatch):
    import errno

    def eacces(**kwargs):
        raise PermissionError(errno.EACCES, 'Permission denied')

    monkeypatch.setattr(_hf, 'snapshot_download', eacces)
    result = failed(capsys, dict(repo_id=REPO, cache_dir=str(tmp_path), endpoint=hub.url), kind='not_writable')
    assert str(tmp_path) in result['msg']


def test_huggingface_hub_missing(capsys, monkeypatch):
    monkeypatch.setattr(hf_download, 'HAS_HF', False)
    monkeypatch.setattr(hf_download, 'HF_IMPORT_ERROR', 'ModuleNotFoundError: No module named huggingface_hub')
    result = failed(capsys, dict(repo_id=REPO), kind='missing_library')
    assert 'huggingface_hub' in result['msg']
    assert 'Failed to import the required Python library' in result['msg']


# --------------------------------------------------------------------------- progress_file

PROGRESS_KEYS = {'repo_id', 'revision', 'commit', 'state', 'files_total', 'files_done', 'bytes_total', 'bytes_done',
                 'bytes_per_second', 'started', 'updated', 'pid'}
SLOW_REPO = 'nvidia/Llama-3.1-8B-Instruct-FP4'  # model.safetensors: 262144 bytes
SLOW_PIECE = 16384
SLOW_DELAY = 0.05  # 262144 bytes in 16 pieces: about 0.8 s per weights file


@pytest.fixture(scope='module')
def slow_hub(tmp_path_factory):
    """The lab hub in a thread of this process, sending *.safetensors bodies slowly (16 KiB every 50 ms)."""
    spec = importlib.util.spec_from_file_location('sparkops_lab_hub_server_slow', HUB_SERVER)
    hub_mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hub_mod)
    tokens = tmp_path_factory.mktemp('slow_hub') / 'tokens.json'
    tokens.write_text(json.dumps(LAB_TOKENS))

    class SlowWriter(object):
        def __init__(self, raw):
            self.raw = raw

        def write(self, data):
            for pos in range(0, len(data), SLOW_PIECE):
                self.raw.write(data[pos:pos + SLOW_PIECE])
                time.sleep(SLOW_DELAY)

        def flush(self):
            self.raw.flush()

    class SlowHandler(hub_mod.HubHandler):
        def _resolve(self, repo_type, repo_id, revision, path, token_info):
            if self.command != 'GET' or not path.endswith('.safetensors'):
                return super(SlowHandler, self)._resolve(repo_type, repo_id, revision, path, token_info)
            raw, self.wfile = self.wfile, SlowWriter(self.wfile)
            try:
                return super(SlowHandler, self)._resolve(repo_type, repo_id, revision, path, token_info)
            finally:
                self.wfile = raw

        def _log(self, status, nbytes):
            pass

    state = hub_mod.HubState(HUB_REPOS, str(tokens))
    server = hub_mod.HubServer(('127.0.0.1', 0), type('BoundSlow', (SlowHandler,), {'state': state}))
    thread = threading.Thread(target=server.serve_forever, kwargs={'poll_interval': 0.1})
    thread.daemon = True
    thread.start()
    try:
        yield 'http://127.0.0.1:%d' % server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


class ProgressWatcher(object):
    """Reads progress_file every 10 ms in a thread; every read must be a complete JSON document."""

    def __init__(self, path):
        self.path = path
        self.docs = []
        self.raw = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)
        self._thread.daemon = True

    def _run(self):
        while not self._stop.is_set():
            try:
                with open(self.path) as f:
                    text = f.read()
            except (IOError, OSError):
                text = None
            if text is not None and (not self.raw or text != self.raw[-1]):
                self.raw.append(text)
                self.docs.append(json.loads(text))  # raises (and the test fails) on a partial document
            time.sleep(0.01)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(5)
        with open(self.path) as f:
            text = f.read()
        if not self.raw or text != self.raw[-1]:
            self.raw.append(text)
            self.docs.append(json.loads(text))


@pytest.fixture
def fast_progress(monkeypatch):
    """Refresh progress_file every 0.1 s, and let huggingface_hub write downloads in 16 KiB pieces (10 MB by
    default, which would make a 256 KiB file appear in one go)."""
    monkeypatch.setattr(_hf, 'PROGRESS_INTERVAL', 0.1)
    monkeypatch.setattr(_hf.hf_constants, 'DOWNLOAD_CHUNK_SIZE', SLOW_PIECE)


@pytest.mark.parametrize('mode', ['cache_dir', 'local_dir'])
def test_progress_file_during_a_download(capsys, slow_hub, tmp_path, fast_progress, mode):
    progress_file = str(tmp_path / 'run' / 'progress.json')  # parent directory created by the module
    args = dict(repo_id=SLOW_REPO, endpoint=slow_hub, token=HF_TOKEN_GATED, progress_file=progress_file,
                allow_patterns=['*.safetensors', 'config.json'])
    args[mode] = str(tmp_path / mode)
    started = time.time()
    with ProgressWatcher(progress_file) as watcher:
        result, out, err = run_module(capsys, args)
    assert not result.get('failed'), result
    docs = watcher.docs
    assert_no_token(out, err, *watcher.raw)
    for doc in docs:
        assert set(doc) == PROGRESS_KEYS, doc
        assert doc['repo_id'] == SLOW_REPO and doc['revision'] == 'main' and doc['pid'] == os.getpid()
        assert started - 1 <= doc['started'] <= doc['updated'] <= time.time()
    states = [d['state'] for d in docs]
    assert states[0] == 'resolving' and states[-1] == 'done'
    assert states == sorted(states, key=['resolving', 'downloading', 'done'].index)
    done = [d['bytes_done'] for d in docs]
    assert done == sorted(done), 'bytes_done must never decrease: %s' % done
    final = docs[-1]
    assert final['commit'] == result['commit']
    assert final['files_total'] == final['files_done'] == 2
    assert final['bytes_total'] == final['bytes_done'] == result['bytes_total'] > 262144
    assert final['bytes_per_second'] > 0
    # bytes move inside the single weights file, not only when it is complete
    within = [d for d in docs if d['state'] == 'downloading' and 0 < d['bytes_done'] - 1000 < 262144 - SLOW_PIECE
              and d['files_done'] < 2]
    assert len(within) >= 2, [(d['state'], d['files_done'], d['bytes_done']) for d in docs]
    assert any(d['bytes_per_second'] > 0 for d in within)
    assert os.stat(progress_file).st_mode & 0o777 == 0o644

    # a run with nothing to download: resolving, then done with everything on disk and no rate
    with ProgressWatcher(progress_file) as watcher:
        again = ok(capsys, args)
    assert again['changed'] is False
    assert [d['state'] for d in watcher.docs][-1] == 'done'
    assert 'downloading' not in [d['state'] for d in watcher.docs]
    final = watcher.docs[-1]
    assert final['files_done'] == final['files_total'] == 2 and final['bytes_done'] == final['bytes_total']
    assert final['bytes_per_second'] == 0


def test_progress_file_failed_states(capsys, hub, cache, tmp_path, monkeypatch):
    import errno
    progress_file = str(tmp_path / 'progress.json')
    # fails while resolving (gated repository, token without access)
    result, out, err = failed_io(capsys, dict(repo_id=GATED_REPO, cache_dir=cache, endpoint=hub.url,
                                              token=HF_TOKEN_NO_GATE, progress_file=progress_file), kind='gated')
    with open(progress_file) as f:
        raw = f.read()
    doc = json.loads(raw)
    assert set(doc) == PROGRESS_KEYS | {'error_kind', 'msg'}
    assert doc['state'] == 'failed' and doc['error_kind'] == 'gated' and doc['msg'] == result['msg']
    assert_no_token(out, err, raw)

    # fails while downloading: the totals are known
    def enospc(**kwargs):
        raise OSError(errno.ENOSPC, 'No space left on device')

    monkeypatch.setattr(_hf, 'snapshot_download', enospc)
    result = failed(capsys, dict(repo_id=REPO, cache_dir=cache, endpoint=hub.url, token=HF_TOKEN_GATED,
                                 progress_file=progress_file), kind='disk_full')
    with open(progress_file) as f:
        raw = f.read()
    doc = json.loads(raw)
    assert doc['state'] == 'failed' and doc['error_kind'] == 'disk_full' and doc['msg'] == result['msg']
    assert len(doc['commit']) == 40 and doc['files_total'] == len(REPO_FILES) and doc['bytes_total'] > 600 * 1024
    assert doc['bytes_done'] == doc['files_done'] == 0
    assert_no_token(raw)


def test_progress_file_not_written_in_check_mode_and_unwritable(capsys, hub, cache, tmp_path):
    progress_file = str(tmp_path / 'progress.json')
    ok(capsys, dict(repo_id=REPO, cache_dir=cache, endpoint=hub.url, progress_file=progress_file), check_mode=True)
    assert not os.path.exists(progress_file)
    blocker = tmp_path / 'a_file'
    blocker.write_text('')
    result = failed(capsys, dict(repo_id=REPO, cache_dir=cache, endpoint=hub.url,
                                 progress_file=str(blocker / 'progress.json')))
    assert result['error_kind'] in ('invalid_option', 'not_writable')
    assert 'cannot write progress_file %s' % (blocker / 'progress.json') in result['msg']
    assert not os.path.exists(cache), 'nothing is downloaded when progress_file cannot be written'


@pytest.mark.parametrize('args, needle', [
    (dict(repo_id='not a/valid/id'), 'repo_id'),
    (dict(repo_id=REPO, endpoint='ftp://example'), 'endpoint'),
    (dict(repo_id=REPO, max_workers=0), 'max_workers'),
    (dict(repo_id=REPO, timeout=0), 'timeout'),
    (dict(repo_id=REPO, revision=' '), 'revision'),
])
def test_invalid_options(capsys, args, needle):
    result = failed(capsys, args, kind='invalid_option')
    assert needle in result['msg']


# --------------------------------------------------------------------------- manifest (the head's list in the look)


def test_manifest_of_a_complete_snapshot_is_what_hf_peer_manifest_returns(capsys, hub, cache, monkeypatch):
    from ansible_collections.sparkops.specdec.plugins.module_utils import _peer_copy
    args = dict(repo_id=REPO, cache_dir=cache, endpoint=hub.url, manifest=True)
    # Incomplete (check mode before the download): something is to be fetched, no manifest.
    looked = ok(capsys, args, check_mode=True)
    assert looked['changed'] is True and 'manifest' not in looked
    done = ok(capsys, args)
    assert done['changed'] is True and 'manifest' not in done
    # Complete: the warm look carries the list, the same as hf_peer_manifest's for the commit.
    warm = ok(capsys, args, check_mode=True)
    target = _hf.Target(REPO, 'model', cache_dir=cache)
    expected = json.loads(json.dumps(_peer_copy.sender_manifest(target, REPO, done['commit'])))
    assert warm['changed'] is False and warm['manifest'] == expected
    assert warm['manifest']['complete'] is True
    assert sorted(f['path'] for f in warm['manifest']['files']) == REPO_FILES
    # Not asked: not returned.
    assert 'manifest' not in ok(capsys, dict(args, manifest=False), check_mode=True)

    # A list that cannot be made (hf_peer_manifest would fail: here an unreadable file): left out, the look as it is.
    def unreadable(*_args, **_kwargs):
        raise OSError(13, 'Permission denied', 'config.json')

    monkeypatch.setattr(_peer_copy, 'sender_manifest', unreadable)
    bare = ok(capsys, args, check_mode=True)
    assert bare['changed'] is False and bare['commit'] == done['commit'] and 'manifest' not in bare
