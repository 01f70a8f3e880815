# -*- coding: utf-8 -*-
# Unit tests of the leak finder and the redactor of the PRIVATE module_util _secrets (labelled_forms, Finder,
# Redactor): a canary planted in a temp tree in each form is found, with the right kind and file, across read
# chunks, under nested directories and through the /proc-style globs; symbolic links, FIFOs and excluded paths are
# not read; a near miss is not found. The redactor removes every form and the values of secret-looking names
# without masking ordinary Docker/NCCL values. Pure: no network.

from __future__ import annotations

import base64
import json
import os
from urllib.parse import quote, quote_plus

import pytest

from ansible_collections.sparkops.specdec.plugins.module_utils import _secrets
from ansible_collections.sparkops.specdec.tests.unit.plugins.module_utils.test_secrets import CANARY, _forms, _leaks

# A canary whose forms all differ: JSON escapes '"' and '\', URL encoding '/', '+', '&', '"' and '\'.
SPECIAL = 'hf_Canary"Q7x\\Z0p/Lm+N3&vB8sK'


def _b64(text):
    return base64.b64encode(text.encode()).decode()


def planted(token):
    """kind -> (file content with the token in that form only, the kinds the finder must report)."""
    return {
        'raw': ('log line: token=%s end\n' % token, ['raw']),
        'escaped': ('{"token": %s}\n' % json.dumps(token), ['escaped']),
        'url': ('GET /api?token=%s HTTP/1.1\n' % quote(token, safe=''), ['url']),
        'url-plus': ('form: t=%s\n' % quote_plus(token), ['url']),
        'base64': ('blob %s blob\n' % _b64(token), ['base64']),
        'base64-basic': ('Authorization: Basic %s\n' % _b64('deploy-bot:' + token), ['base64']),
        'base64-urlsafe': ('jwt.%s.sig\n' % base64.urlsafe_b64encode(token.encode()).decode().rstrip('='), ['base64']),
        'bearer': ('curl -H "Authorization: Bearer %s"\n' % token, ['raw', 'bearer']),
    }


def test_labelled_forms_partition_the_scrubbed_forms():
    forms = _secrets.labelled_forms(SPECIAL)
    assert set(forms) == set(_secrets.FORM_KINDS)
    assert all(forms[kind] for kind in _secrets.FORM_KINDS), forms
    for a in _secrets.FORM_KINDS:
        for b in _secrets.FORM_KINDS:
            assert a == b or not forms[a] & forms[b]
    plain, cores = _secrets.secret_forms(SPECIAL)
    assert plain == forms['raw'] | forms['escaped'] | forms['url'] and cores == forms['base64']
    # An alphanumeric token has no escaped or URL form of its own (they are the raw one).
    alnum = _secrets.labelled_forms(CANARY)
    assert alnum['escaped'] == set() and alnum['url'] == set() and CANARY in alnum['raw']
    assert _secrets.labelled_forms('') == dict((k, set()) for k in _secrets.FORM_KINDS)


@pytest.mark.parametrize('token', [SPECIAL, CANARY])
@pytest.mark.parametrize('name', sorted(planted(SPECIAL)))
def test_each_planted_form_is_found_in_a_tree(tmp_path, token, name):
    content, kinds = planted(token)[name]
    if token == CANARY and name in ('escaped', 'url', 'url-plus'):
        kinds = ['raw']  # the same string as the raw form
    deep = tmp_path / 'a' / 'b' / 'c'
    deep.mkdir(parents=True)
    # Far into a file, cut across the read chunks (chunk 64 bytes; the form starts 1000 bytes in).
    (deep / 'planted.log').write_text('x' * 1000 + content + 'y' * 1000)
    (tmp_path / 'clean.txt').write_text('nothing here ' * 100)
    result = _secrets.Finder([token]).scan_tree([str(tmp_path)], chunk=64)
    assert [f['path'] for f in result['found']] == [str(deep / 'planted.log')], result
    assert result['found'][0]['kinds'] == kinds
    assert all(result['found'][0]['offsets'][k] >= 1000 for k in kinds)
    assert result['files'] == 2 and result['unreadable'] == 0


def test_every_form_of_the_issue_list_is_found():
    finder = _secrets.Finder([CANARY])
    for form, text in sorted(_forms(CANARY).items()):
        assert finder.kinds('before %s after' % text), form


def test_a_near_miss_and_other_secrets_are_not_found(tmp_path):
    # One character changed in the middle (at an end, base64 cores rightly still match: most of it leaked).
    middle = len(CANARY) // 2
    near = CANARY[:middle] + ('x' if CANARY[middle] != 'x' else 'y') + CANARY[middle + 1:]
    (tmp_path / 'near').write_text('%s %s Bearer %s' % (near, _b64(near), near))
    (tmp_path / 'short').write_text(CANARY[:5])
    result = _secrets.Finder([CANARY]).scan_tree([str(tmp_path)])
    assert result['found'] == [] and result['files'] == 2
    assert _secrets.Finder([]).find('anything') == {}
    assert not _secrets.Finder([])


def test_links_fifos_and_excluded_paths_are_not_read_globs_are(tmp_path):
    outside = tmp_path / 'outside'
    outside.mkdir()
    (outside / 'token').write_text(CANARY)
    tree = tmp_path / 'tree'
    (tree / 'skip').mkdir(parents=True)
    (tree / 'skip' / 'token').write_text(CANARY)
    os.symlink(str(outside / 'token'), str(tree / 'link'))
    os.symlink(str(outside), str(tree / 'dirlink'))
    os.mkfifo(str(tree / 'fifo'))  # reading it would block the scan
    proc = tmp_path / 'proc' / '42'
    proc.mkdir(parents=True)
    (proc / 'environ').write_bytes(b'PATH=/bin\0HF_TOKEN=' + CANARY.encode() + b'\0')
    # /proc-like: the directory is excluded, its environ files are read through the glob all the same.
    result = _secrets.Finder([CANARY]).scan_tree(
        [str(tree), str(tmp_path / 'proc')], exclude=[str(tree / 'skip'), str(tmp_path / 'proc')],
        globs=[str(tmp_path / 'proc' / '[0-9]*' / 'environ')])
    assert [f['path'] for f in result['found']] == [str(proc / 'environ')]
    # An explicit root under an excluded path is searched all the same.
    again = _secrets.Finder([CANARY]).scan_tree([str(tree / 'skip')], exclude=[str(tree / 'skip')])
    assert [f['path'] for f in again['found']] == [str(tree / 'skip' / 'token')]


def test_unreadable_files_are_counted_not_fatal(tmp_path, monkeypatch):
    (tmp_path / 'a').write_text(CANARY)
    (tmp_path / 'b').write_text('clean')
    real = _secrets.Finder.scan_file

    def scan_file(self, path, chunk=_secrets.SCAN_CHUNK):
        if path.endswith('/a'):
            raise PermissionError(13, 'Permission denied')
        return real(self, path, chunk)

    monkeypatch.setattr(_secrets.Finder, 'scan_file', scan_file)
    result = _secrets.Finder([CANARY]).scan_tree([str(tmp_path)])
    assert result['unreadable'] == 1 and result['unreadable_sample'] == [str(tmp_path / 'a')]
    assert result['found'] == [] and result['files'] == 1


def test_the_finder_never_returns_the_value(tmp_path):
    (tmp_path / 'f').write_text(' '.join(text for text, _k in planted(SPECIAL).values()))
    result = _secrets.Finder([SPECIAL]).scan_tree([str(tmp_path)])
    assert result['found'][0]['kinds'] == list(_secrets.FORM_KINDS)
    assert not _leaks(json.dumps(result), SPECIAL)


# --------------------------------------------------------------------------- redaction

INSPECT = {
    'Id': 'abc123', 'Name': '/trtllm-multinode',
    'Config': {
        'Env': ['PATH=/usr/bin', 'HF_TOKEN=' + CANARY, 'MY_SECRET=s3cr3t-value', 'NCCL_SOCKET_IFNAME=enp1s0f1np1',
                'MAX_NUM_TOKENS=8192', 'TOKENIZERS_PARALLELISM=false', 'EMPTY_PASSWORD=', 'OMPI_MCA_btl_tcp_if_include=enp1s0f1np1'],
        'Cmd': ['bash', '-c', 'curl -H "Authorization: Bearer %s" http://x' % CANARY],
        'Labels': {'io.sparkops.specdec.role': 'trtllm_container', 'note': 'b64 %s' % _b64('u:' + CANARY)},
    },
    'HostConfig': {'SecurityOpt': ['seccomp=unconfined'], 'Isolation': '', 'ShmSize': 67108864, 'Privileged': False},
    'Password': 'hunter2-long', 'IdentityToken': 'idt-value-123', 'MaxNumTokens': 4,
}


def test_redactor_removes_secrets_from_inspect_and_keeps_the_rest():
    out = _secrets.Redactor([CANARY]).data(INSPECT)
    text = json.dumps(out)
    assert not _leaks(text, CANARY) and not _secrets.Finder([CANARY]).find(text)
    env = out['Config']['Env']
    assert env[1] == 'HF_TOKEN=********' and env[2] == 'MY_SECRET=********'
    assert 'NCCL_SOCKET_IFNAME=enp1s0f1np1' in env and 'MAX_NUM_TOKENS=8192' in env
    assert 'TOKENIZERS_PARALLELISM=false' in env and 'EMPTY_PASSWORD=' in env
    assert 'OMPI_MCA_btl_tcp_if_include=enp1s0f1np1' in env
    assert out['Password'] == '********' and out['IdentityToken'] == '********' and out['MaxNumTokens'] == 4
    assert out['HostConfig'] == INSPECT['HostConfig'] and out['Id'] == 'abc123'
    assert out['Config']['Labels']['io.sparkops.specdec.role'] == 'trtllm_container'
    assert 's3cr3t-value' not in text and 'hunter2-long' not in text and 'idt-value-123' not in text


def test_redactor_text_masks_secret_lines_and_url_passwords():
    text = ('network:\n  wifis:\n    wlan0:\n      password: "wifi-pass-123"\n  max_num_tokens: 8192\n'
            'export HF_TOKEN=abc-def-ghi\nHTTPS_PROXY=http://bob:proxy-pass@proxy:3128\nnote: %s\n'
            '- api_key: k-123456\nkv_cache_free_gpu_memory_fraction: 0.9\nempty_token: ""\n' % SPECIAL)
    out = _secrets.Redactor([SPECIAL]).text(text)
    for gone in ('wifi-pass-123', 'abc-def-ghi', 'proxy-pass', 'k-123456'):
        assert gone not in out
    assert not _leaks(out, SPECIAL) and not _secrets.Finder([SPECIAL]).find(out)
    assert 'max_num_tokens: 8192' in out and 'kv_cache_free_gpu_memory_fraction: 0.9' in out
    assert 'HTTPS_PROXY=http://bob:********@proxy:3128' in out and 'empty_token: ""' in out


@pytest.mark.parametrize('form', sorted(_forms(CANARY)))
def test_redactor_removes_every_form(form):
    out = _secrets.Redactor([CANARY]).data({'a': ['x %s y' % _forms(CANARY)[form]], 'b': 'plain'})
    assert not _leaks(json.dumps(out), CANARY), (form, out)
    assert out['b'] == 'plain'
