# -*- coding: utf-8 -*-
# Unit tests for the PRIVATE module_util sparkops.specdec.plugins.module_utils._secrets and its use in
# _settings (preflight): a canary token scrubbed in every form, malformed tokens refused without the
# value, secret-looking env names refused (and no false positive on the usual NCCL/UCX/count names).
# Pure: no network.

from __future__ import annotations

import base64
import json
import re
from urllib.parse import quote, quote_plus

import pytest

from ansible_collections.sparkops.specdec.plugins.module_utils import _secrets
from ansible_collections.sparkops.specdec.plugins.plugin_utils import _settings
from ansible_collections.sparkops.specdec.plugins.filter.downloads import hf_token_env

from ansible_collections.sparkops.specdec.tests.unit.plugins.plugin_utils.test_settings import COLLECTION_ROOT

CANARY = 'hf_CanaryQ7xZ0pLmN3vB8sK2dF5gH1jW4tY6uR9e'
CANARY_NL = CANARY + '\n'
# The base64 alphabet run that a leftover of a scrubbed base64 form would be.
B64_RUN = re.compile(r'[A-Za-z0-9+/_-]{12,}')


def _b64(text):
    return base64.b64encode(text.encode()).decode()


def _forms(token):
    """Every form a library message can carry the token in (the issue's list)."""
    stripped = token.strip()
    forms = {
        'raw': token,
        'stripped': stripped,
        'repr': repr(token),
        'repr-escaped-inner': repr(token)[1:-1],
        'json': json.dumps(token),
        'bytes-repr': repr(token.encode()),
        'url': quote(token, safe=''),
        'url-lower-hex': re.sub(r'%[0-9A-F]{2}', lambda m: m.group(0).lower(), quote(token, safe='')),
        'url-plus': quote_plus(token),
        'query': 'https://hub.example/api?token=%s&x=1' % quote(token, safe=''),
        'b64': _b64(token),
        'b64-stripped': _b64(stripped),
        'b64-urlsafe': base64.urlsafe_b64encode(stripped.encode()).decode(),
        'basic-user': 'Authorization: Basic ' + _b64('user:' + stripped),
        'basic-long-user': 'Basic ' + _b64('deploy-bot:' + stripped),
        'basic-user-two': _b64('ab:' + stripped),
        'bearer': 'Bearer ' + stripped,
        'bearer-header-repr': repr({'authorization': 'Bearer ' + token}),
        'illegal-header': "Illegal header value b'Bearer %s'" % repr(token.encode())[2:-1],
        'double-repr': repr(repr(token)),
    }
    return forms


def _leaks(text, token):
    """Which plain fragments of the token are still in text (pieces of 8+ characters)."""
    stripped = token.strip()
    pieces = {stripped[i:i + 8] for i in range(0, len(stripped) - 7)}
    found = [p for p in pieces if p in text]
    for run in B64_RUN.findall(text):
        padded = run + '=' * (-len(run) % 4)
        for candidate in (padded, padded.replace('-', '+').replace('_', '/')):
            try:
                decoded = base64.b64decode(candidate).decode('utf-8', 'replace')
            except ValueError:
                continue
            found.extend(p for p in pieces if p in decoded)
    return found


@pytest.mark.parametrize('token', [CANARY, CANARY_NL, ' ' + CANARY + '\r\n', 'Bearer ' + CANARY])
@pytest.mark.parametrize('form', sorted(_forms(CANARY)))
def test_canary_scrubbed_in_every_form(token, form):
    text = 'error talking to the Hub: %s (see above)' % _forms(token)[form]
    out = _secrets.scrub(text, [token])
    assert not _leaks(out, token), (form, out)
    assert _secrets.MASK in out
    assert out.startswith('error talking to the Hub: ') and out.endswith(' (see above)')


def test_scrub_keeps_ordinary_text():
    text = 'cannot reach the Hugging Face Hub at https://huggingface.co (ConnectError: [Errno 111] refused)'
    assert _secrets.scrub(text, [CANARY]) == text
    assert _secrets.scrub(None, [CANARY]) == ''
    assert _secrets.scrub('nothing', []) == 'nothing'


def test_any_bearer_or_basic_credential_is_scrubbed_without_knowing_it():
    out = _secrets.scrub("headers {'Authorization': 'Bearer hf_unknownSecret123'} and Basic dXNlcjpwYXNzd29yZA==", [])
    assert 'hf_unknownSecret123' not in out and 'dXNlcjpwYXNzd29yZA' not in out
    assert out.count(_secrets.MASK) == 2


# --------------------------------------------------------------------------- token shape


@pytest.mark.parametrize('token, defect', [
    (CANARY + '\n', 'trailing white space'),
    (' ' + CANARY, 'leading white space'),
    ('\t' + CANARY + ' ', 'leading and trailing white space'),
    (CANARY[:10] + '\n' + CANARY[10:], 'line break'),
    (CANARY[:10] + ' ' + CANARY[10:], 'space or tab'),
    ('Bearer ' + CANARY, 'Bearer'),
    ('bearer\t' + CANARY, 'Bearer'),
    ('"%s"' % CANARY, 'quotes'),
    (CANARY + '\x00', 'non-printable'),
    (CANARY + '\x1b[0m', 'non-printable'),
    (CANARY.replace('Q', '\u2011'), 'non-ASCII'),
])
def test_malformed_tokens_name_the_defect_never_the_value(token, defect):
    defects = _secrets.token_defects(token)
    assert any(defect in d for d in defects), defects
    assert not _leaks(' '.join(defects), token)


@pytest.mark.parametrize('token', ['', None, CANARY, 'hf_' + 'a' * 34, 'api_org_ABCdef123', 'x-y.z_0'])
def test_well_formed_tokens_pass(token):
    assert _secrets.token_defects(token) == []


# --------------------------------------------------------------------------- env names


@pytest.mark.parametrize('name, pattern', [
    ('HF_TOKEN', 'TOKEN'), ('HUGGING_FACE_HUB_TOKEN', 'TOKEN'), ('GITHUB_TOKEN', 'TOKEN'), ('TOKEN', 'TOKEN'),
    ('hf_token', 'TOKEN'), ('HFTOKEN', 'TOKEN'), ('AUTH_TOKEN_VALUE', 'TOKEN'),
    ('NGC_API_KEY', 'API_KEY'), ('OPENAI_APIKEY', 'API_KEY'), ('SSH_PRIVATE_KEY', 'PRIVATE_KEY'),
    ('AWS_SECRET_ACCESS_KEY', 'ACCESS_KEY'), ('CLIENT_SECRET', 'SECRET'), ('DB_PASSWORD', 'PASSWORD'),
    ('MYSQL_PASSWD', 'PASSWORD'), ('GOOGLE_APPLICATION_CREDENTIALS', 'CREDENTIAL'), ('WANDB_API_KEY', 'API_KEY'),
])
def test_secret_env_names_are_refused(name, pattern):
    assert _secrets.secret_env_name(name) == pattern


# False positives: names the runbook, NCCL/UCX/OpenMPI, TensorRT-LLM and the tokenizers use.
SAFE_NAMES = [
    'NCCL_SOCKET_IFNAME', 'NCCL_IB_HCA', 'NCCL_DEBUG', 'NCCL_IB_GID_INDEX', 'UCX_NET_DEVICES', 'UCX_TLS',
    'OMPI_MCA_btl_tcp_if_include', 'CUDA_VISIBLE_DEVICES', 'TOKENIZERS_PARALLELISM', 'TIKTOKEN_ENCODINGS_BASE',
    'HF_HUB_DISABLE_IMPLICIT_TOKEN', 'HF_HUB_OFFLINE', 'HF_HUB_ENABLE_HF_TRANSFER', 'MAX_NUM_TOKENS',
    'TRTLLM_MAX_NUM_TOKENS', 'MAX_TOKEN_LEN', 'MAX_TOKENS', 'BOS_TOKEN_ID', 'TOKEN_LIMIT', 'NUM_TOKENS_PER_BATCH',
    'TRT_LLM_DISABLE_LOAD_WEIGHTS_IN_PARALLEL', 'PYTHONHASHSEED', 'KEYBOARD_LAYOUT', 'MONKEY_PATCH', 'PWD', 'HOME',
    'TRTLLM_ENABLE_PDL', 'TLLM_LOG_LEVEL', 'CPATH', 'TRITON_PTXAS_PATH', 'NCCL_TOKEN_LIKE_FUTURE_VAR',
]


@pytest.mark.parametrize('name', SAFE_NAMES)
def test_safe_env_names_are_not_refused(name):
    assert _secrets.secret_env_name(name) is None


SPECS = _settings.load_specs(COLLECTION_ROOT)
ENV_SETTINGS = sorted(name for name, spec in _settings.known_options(SPECS).items()
                      if name.endswith('_env') and spec.get('type') == 'dict')


def test_every_env_setting_is_covered():
    assert {'specdec_server_env', 'trtllm_container_env', 'trtllm_container_cuda_env'} <= set(ENV_SETTINGS)
    for name in ENV_SETTINGS:
        problems = _settings.check_settings({name: {'HF_TOKEN': CANARY}}, SPECS)
        assert len(problems) == 1 and problems[0].startswith(name + ': key HF_TOKEN looks like a secret'), problems
        assert 'specdec_server_hf_token' in problems[0]
        assert not _leaks(problems[0], CANARY)


@pytest.mark.parametrize('setting', ['specdec_server_env', 'trtllm_container_env'])
def test_env_settings_accept_safe_names(setting):
    assert _settings.check_settings({setting: {n: '1' for n in SAFE_NAMES}}, SPECS) == []


@pytest.mark.parametrize('token', [CANARY_NL, 'Bearer ' + CANARY, ' ' + CANARY, CANARY + '\x07'])
def test_preflight_refuses_malformed_token_without_echo(token):
    problems = _settings.check_settings({'specdec_server_hf_token': token}, SPECS)
    assert len(problems) == 1 and problems[0].startswith('specdec_server_hf_token: the value (hidden) ')
    assert not _leaks(problems[0], token)


def test_preflight_accepts_a_good_token():
    assert _settings.check_settings({'specdec_server_hf_token': CANARY}, SPECS) == []


# --------------------------------------------------------------------------- token for the ranks


@pytest.mark.parametrize('token, rank_env, expected', [
    (CANARY, {'HF_HUB_OFFLINE': '1'}, {}),
    (CANARY, {'HF_HUB_OFFLINE': 'true'}, {}),
    (CANARY, {'HF_HUB_OFFLINE': '0'}, {'HF_TOKEN': CANARY}),
    (CANARY, {}, {'HF_TOKEN': CANARY}),
    (CANARY, None, {'HF_TOKEN': CANARY}),
    ('', {}, {}),
    (None, {'HF_HUB_OFFLINE': '0'}, {}),
])
def test_token_reaches_only_online_ranks(token, rank_env, expected):
    assert _secrets.hf_token_env(token, rank_env) == expected
    assert hf_token_env(token, rank_env) == expected


@pytest.mark.parametrize('form', sorted(_forms(CANARY)))
def test_the_leak_detector_sees_every_unscrubbed_form(form):
    # Guards the test above: without the scrub, every form is found.
    assert _leaks('x %s y' % _forms(CANARY_NL)[form], CANARY_NL)
