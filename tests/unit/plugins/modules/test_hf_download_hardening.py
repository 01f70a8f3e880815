# -*- coding: utf-8 -*-
# Unit tests for the hardening of sparkops.specdec.hf_download (issue 10 items 4 and 8), against
# loopback servers only: HTTP 429 retried as Retry-After asks (seconds or HTTP-date) and bounded; a
# TLS certificate not yet valid by the node's clock reported as a clock problem (a real certificate
# on a loopback TLS server); malformed tokens refused before any request; every form of the token
# scrubbed from messages and the progress file; the progress file's heartbeat.

from __future__ import annotations

import datetime
import email.utils
import importlib.util
import ipaddress
import json
import os
import socket
import ssl
import threading
import time

import pytest

from ansible_collections.sparkops.specdec.plugins.module_utils import _hf, _secrets
from ansible_collections.sparkops.specdec.tests.unit.conftest import HF_TOKEN_GATED, HUB_REPOS, HUB_SERVER, LAB_TOKENS
from ansible_collections.sparkops.specdec.tests.unit.plugins.module_utils.test_secrets import _forms, _leaks
from ansible_collections.sparkops.specdec.tests.unit.plugins.modules.test_hf_download import failed, ok

pytestmark = pytest.mark.usefixtures('hf_env', 'loopback_only')

REPO = 'openai/gpt-oss-120b'
SMALL_REPO = 'nvidia/Llama-3.1-8B-Instruct-FP4'


# --------------------------------------------------------------------------- a hub that rate-limits


class Limits(object):
    """What the rate-limiting hub answers: 429 for the next `count` requests whose path contains `match`."""

    def __init__(self):
        self.reset()

    def reset(self, count=0, match='/api/', retry_after=None):
        self.count, self.match, self.retry_after = count, match, retry_after
        self.sent = []  # (time, path) of every 429 sent
        self.requests = []


@pytest.fixture(scope='module')
def limited_hub(tmp_path_factory):
    """The lab hub in a thread of this process, answering HTTP 429 as `limits` says; yields (url, limits)."""
    spec = importlib.util.spec_from_file_location('sparkops_lab_hub_server_429', HUB_SERVER)
    hub_mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hub_mod)
    tokens = tmp_path_factory.mktemp('limited_hub') / 'tokens.json'
    tokens.write_text(json.dumps(LAB_TOKENS))
    limits = Limits()

    class LimitedHandler(hub_mod.HubHandler):
        def _route(self):
            limits.requests.append(self.path)
            if limits.count > 0 and limits.match in self.path:
                limits.count -= 1
                limits.sent.append((time.time(), self.path))
                headers = {'Retry-After': limits.retry_after} if limits.retry_after is not None else {}
                return self._error(429, 'Too Many Requests', headers=headers)
            return super(LimitedHandler, self)._route()

        def _log(self, status, nbytes):
            pass

    state = hub_mod.HubState(HUB_REPOS, str(tokens))
    server = hub_mod.HubServer(('127.0.0.1', 0), type('BoundLimited', (LimitedHandler,), {'state': state}))
    thread = threading.Thread(target=server.serve_forever, kwargs={'poll_interval': 0.1})
    thread.daemon = True
    thread.start()
    try:
        yield 'http://127.0.0.1:%d' % server.server_address[1], limits
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def hub429(limited_hub):
    url, limits = limited_hub
    limits.reset()
    yield url, limits
    limits.reset()


def test_429_with_retry_after_seconds_is_waited_then_succeeds(capsys, hub429, tmp_path):
    url, limits = hub429
    limits.reset(count=2, match='/api/models/', retry_after='1')
    started = time.time()
    result = ok(capsys, dict(repo_id=SMALL_REPO, cache_dir=str(tmp_path / 'hub'), endpoint=url))
    assert result['changed'] is True and result['files'] > 0
    assert result['rate_limit_waits'] == [1.0, 1.0]
    assert len(limits.sent) == 2
    assert limits.sent[1][0] - limits.sent[0][0] >= 0.95  # the Hub was asked again only after Retry-After
    assert time.time() - started >= 2.0


def test_429_with_retry_after_http_date(capsys, hub429, tmp_path):
    url, limits = hub429
    limits.reset(count=1, match='/api/models/', retry_after=email.utils.formatdate(time.time() + 3, usegmt=True))
    result = ok(capsys, dict(repo_id=SMALL_REPO, cache_dir=str(tmp_path / 'hub'), endpoint=url))
    assert len(result['rate_limit_waits']) == 1
    assert 1.0 <= result['rate_limit_waits'][0] <= 3.5  # whole seconds in the date
    assert len(limits.sent) == 1


def test_429_during_a_file_download_is_retried(capsys, hub429, tmp_path):
    url, limits = hub429
    limits.reset(count=1, match='/resolve/', retry_after='1')
    result = ok(capsys, dict(repo_id=SMALL_REPO, cache_dir=str(tmp_path / 'hub'), endpoint=url))
    assert result['rate_limit_waits'] == [1.0]
    assert sorted(os.listdir(result['path'])) == sorted(result['fetched_files'])


def test_retry_after_beyond_max_wait_fails_at_once(capsys, hub429, tmp_path):
    url, limits = hub429
    limits.reset(count=10, match='/api/models/', retry_after='3600')
    started = time.time()
    result = failed(capsys, dict(repo_id=SMALL_REPO, cache_dir=str(tmp_path / 'hub'), endpoint=url,
                                 rate_limit_max_wait=600), kind='rate_limited')
    assert time.time() - started < 10
    assert len(limits.sent) == 1
    assert 'Retry-After: 3600' in result['msg'] and 'rate_limit_max_wait=600' in result['msg']


def test_retries_are_bounded(capsys, hub429, tmp_path):
    url, limits = hub429
    limits.reset(count=100, match='/api/models/', retry_after='0')
    result = failed(capsys, dict(repo_id=SMALL_REPO, cache_dir=str(tmp_path / 'hub'), endpoint=url,
                                 rate_limit_retries=2), kind='rate_limited')
    assert len(limits.sent) == 3  # the first answer and two retries
    assert 'rate_limit_retries=2' in result['msg']


def test_429_without_retry_after_backs_off_exponentially(monkeypatch):
    waits = []
    policy = _hf.RateLimitPolicy(retries=4, max_wait=100, endpoint='http://hub', sleep=waits.append)
    answers = iter([_hf.RateLimited(None)] * 3 + ['ok'])

    def step():
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert policy.call(step) == 'ok'
    assert waits == [1.0, 2.0, 4.0]


@pytest.mark.parametrize('header, expected', [
    ('120', 120.0), (' 7 ', 7.0), ('0', 0.0), ('', None), (None, None), ('soon', None), ('-5', None),
    ('Wed, 21 Oct 2015 07:28:00 GMT', 0.0),  # in the past
])
def test_parse_retry_after(header, expected):
    assert _hf.parse_retry_after(header, now=1700000000.0) == expected


def test_parse_retry_after_http_date():
    now = 1700000000.0
    assert _hf.parse_retry_after(email.utils.formatdate(now + 90, usegmt=True), now=now) == pytest.approx(90, abs=1)


# --------------------------------------------------------------------------- TLS and the node's clock


def _certificate(tmp_path, not_before, not_after, name='cert'):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, '127.0.0.1')])
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(not_before).not_valid_after(not_after)
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address('127.0.0.1'))]), False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = tmp_path / ('%s.pem' % name), tmp_path / ('%s.key' % name)
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return str(cert_path), str(key_path)


@pytest.fixture
def tls_server(tmp_path):
    """Start a loopback TLS server with a certificate of the given validity; yields a starter."""
    servers = []

    def start(days_from_now, days_valid=30):
        now = datetime.datetime.now(datetime.timezone.utc)
        cert, key = _certificate(tmp_path, now + datetime.timedelta(days=days_from_now),
                                 now + datetime.timedelta(days=days_from_now + days_valid))
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(('127.0.0.1', 0))
        sock.listen(8)
        stop = threading.Event()

        def serve():
            sock.settimeout(0.1)
            while not stop.is_set():
                try:
                    conn, _addr = sock.accept()
                except OSError:
                    continue
                try:
                    context.wrap_socket(conn, server_side=True).close()
                except (ssl.SSLError, OSError):
                    conn.close()

        thread = threading.Thread(target=serve)
        thread.daemon = True
        thread.start()
        servers.append((stop, thread, sock))
        return sock.getsockname()[1], cert

    yield start
    for stop, thread, sock in servers:
        stop.set()
        thread.join(5)
        sock.close()


def _handshake_error(port, cafile):
    context = ssl.create_default_context(cafile=cafile)
    with socket.create_connection(('127.0.0.1', port), timeout=5) as raw:
        with pytest.raises(ssl.SSLError) as info:
            context.wrap_socket(raw, server_hostname='127.0.0.1')
    return info.value


def test_real_not_yet_valid_certificate_is_a_clock_problem(tls_server):
    port, cert = tls_server(days_from_now=2)
    exc = _handshake_error(port, cert)
    assert isinstance(exc, ssl.SSLCertVerificationError) and exc.verify_code == 9
    assert _hf.clock_problem(exc) == 'not_yet_valid'
    # The HTTP library may keep only the text (wrapped in its own ConnectError).
    assert _hf.clock_problem(Exception(str(exc))) == 'not_yet_valid'


def test_real_expired_certificate_is_a_clock_problem(tls_server):
    port, cert = tls_server(days_from_now=-40, days_valid=10)
    exc = _handshake_error(port, cert)
    assert exc.verify_code == 10 and _hf.clock_problem(exc) == 'expired'


def test_untrusted_certificate_is_not_a_clock_problem(tls_server, tmp_path):
    port, _cert = tls_server(days_from_now=-1)
    other, _key = _certificate(tmp_path, datetime.datetime(2020, 1, 1), datetime.datetime(2099, 1, 1), 'other')
    exc = _handshake_error(port, other)
    assert _hf.clock_problem(exc) is None


def test_module_says_check_the_clock_for_a_not_yet_valid_certificate(capsys, tls_server, tmp_path, monkeypatch):
    port, cert = tls_server(days_from_now=2)
    monkeypatch.setenv('SSL_CERT_FILE', cert)  # trusted: the clock is the only problem
    result = failed(capsys, dict(repo_id=REPO, cache_dir=str(tmp_path / 'hub'), endpoint='https://127.0.0.1:%d' % port),
                    kind='clock')
    assert "check this node's clock (date" in result['msg']
    assert 'network' not in result['msg'].split(';')[0] and 'DNS' not in result['msg']


# --------------------------------------------------------------------------- the token


CANARY = 'hf_CanaryQ7xZ0pLmN3vB8sK2dF5gH1jW4tY6uR9e'


@pytest.mark.parametrize('token', [CANARY + '\n', 'Bearer ' + CANARY, ' ' + CANARY, CANARY[:9] + '\n' + CANARY[9:],
                                   CANARY + '\x7f'])
def test_malformed_token_is_refused_before_any_request(capsys, closed_port, tmp_path, token):
    progress = tmp_path / 'progress.json'
    result, out, err = _run(capsys, dict(repo_id=REPO, cache_dir=str(tmp_path / 'hub'), token=token,
                                         endpoint='http://127.0.0.1:%d' % closed_port, progress_file=str(progress)))
    assert result['error_kind'] == 'token_malformed'  # not "unreachable": no request was tried
    assert 'the token option' in result['msg']
    assert not _leaks(out + err, token)
    assert not progress.exists()


def test_malformed_token_file_is_refused(capsys, closed_port, tmp_path):
    token_file = tmp_path / 'token'
    token_file.write_text(CANARY[:9] + '\n' + CANARY[9:] + '\n')
    result, out, err = _run(capsys, dict(repo_id=REPO, cache_dir=str(tmp_path / 'hub'), token_file=str(token_file),
                                         endpoint='http://127.0.0.1:%d' % closed_port))
    assert result['error_kind'] == 'token_malformed' and 'contains a line break' in result['msg']
    assert not _leaks(out + err, CANARY)


def test_malformed_hf_token_env_is_refused(capsys, closed_port, tmp_path, monkeypatch):
    monkeypatch.setenv('HF_TOKEN', 'Bearer ' + CANARY)
    result, out, err = _run(capsys, dict(repo_id=REPO, cache_dir=str(tmp_path / 'hub'),
                                         endpoint='http://127.0.0.1:%d' % closed_port))
    assert result['error_kind'] == 'token_malformed' and 'HF_TOKEN' in result['msg']
    assert not _leaks(out + err, CANARY)


@pytest.mark.parametrize('form', sorted(_forms(HF_TOKEN_GATED)))
def test_exception_quoting_the_token_is_scrubbed_everywhere(capsys, hub, tmp_path, monkeypatch, form):
    text = _forms(HF_TOKEN_GATED)[form]

    def boom(*args, **kwargs):
        raise RuntimeError('library failure with %s inside' % text)

    monkeypatch.setattr(_hf, 'resolve_remote', boom)
    progress = tmp_path / 'progress.json'
    result, out, err = _run(capsys, dict(repo_id=REPO, cache_dir=str(tmp_path / 'hub'), token=HF_TOKEN_GATED,
                                         endpoint=hub.url, progress_file=str(progress)))
    assert result['error_kind'] == 'error' and 'RuntimeError: library failure with' in result['msg']
    written = progress.read_text()
    assert json.loads(written)['state'] == 'failed'
    for where in (out, err, written):
        assert not _leaks(where, HF_TOKEN_GATED), (form, where)


def _run(capsys, args):
    from ansible_collections.sparkops.specdec.tests.unit.plugins.modules.test_hf_download import run_module
    result, out, err = run_module(capsys, args)
    assert result.get('failed'), result
    return result, out, err


def test_scrub_helper_is_the_shared_one():
    # One helper: hf_download's error paths and the progress file use module_utils/_secrets.
    assert _hf.scrub is _secrets.scrub


# --------------------------------------------------------------------------- progress heartbeat


def test_progress_file_heartbeat_before_the_download(tmp_path):
    path = str(tmp_path / 'p.json')
    progress = _hf.Progress(path, REPO, 'main', interval=0.05)
    progress.start()
    try:
        first = json.load(open(path))
        time.sleep(0.4)
        later = json.load(open(path))
    finally:
        progress.halt()
    assert first['state'] == later['state'] == 'resolving'
    assert later['updated'] > first['updated']
