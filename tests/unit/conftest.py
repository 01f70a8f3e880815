# -*- coding: utf-8 -*-
# Shared pytest fixtures for the sparkops.specdec unit tests.
#
# Hugging Face fixtures (used by tests/unit/plugins/*/test_hf*.py):
#   hub          - tests/lab/images/hub/hub_server.py started once per session in a subprocess
#                  (stdlib only: run with `python -I -S`) on 127.0.0.1, free port, lab tokens.
#   closed_port  - a 127.0.0.1 port with nothing listening (connection refused).
#   silent_port  - a 127.0.0.1 port that accepts connections but never answers (timeouts).
#   hf_env       - a clean environment for huggingface_hub (no HF_TOKEN/HF_ENDPOINT/HF_HUB_OFFLINE/proxies).
#   loopback_only - fails the test if anything tries to resolve or connect to a non-loopback address.
#
# In CI (environment variable CI set, as .ci/run is run) a skipped test fails: every unit test must run
# there (a missing tool belongs in requirements-test.txt, not in a skip).

from __future__ import annotations

import collections
import json
import os
import socket

import pytest

from ansible_collections.sparkops.specdec.tests import labhub, netguard

HUB_SERVER = labhub.HUB_SERVER
HUB_REPOS = labhub.HUB_REPOS

# Lab tokens (not real Hugging Face tokens).
HF_TOKEN_GATED = 'hf_labAliceHasGatedAccess0123456789abcdef'
HF_TOKEN_NO_GATE = 'hf_labBobHasNoGatedAccess9876543210fedcba'
HF_TOKEN_INVALID = 'hf_labUnknownTokenZZZZ00000000000000000000'
GATED_REPO = 'nvidia/Llama-3.3-70B-Instruct-FP4'
LAB_TOKENS = {
    HF_TOKEN_GATED: {'name': 'alice', 'gated_access': [GATED_REPO]},
    HF_TOKEN_NO_GATE: {'name': 'bob', 'gated_access': []},
}

HubInfo = collections.namedtuple('HubInfo', 'url port log_path process')


def _ci():
    return os.environ.get('CI', '').strip().lower() not in ('', '0', 'false', 'no')


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """In CI a skip is a failure (expected failures, xfail, stay as they are)."""
    outcome = yield
    report = outcome.get_result()
    if _ci() and report.skipped and not hasattr(report, 'wasxfail'):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = 'failed'
        report.longrepr = 'skipped in CI (CI=%s), where every test must run: %s' % (os.environ.get('CI'), reason)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    """In CI a module skipped at collection (pytest.importorskip, allow_module_level) fails too."""
    outcome = yield
    report = outcome.get_result()
    if _ci() and report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = 'failed'
        report.longrepr = 'skipped in CI (CI=%s), where every test must run: %s' % (os.environ.get('CI'), reason)


@pytest.fixture(scope='session')
def hub(tmp_path_factory):
    """Start hub_server.py on 127.0.0.1 (free port); yields HubInfo(url, port, log_path, process)."""
    workdir = tmp_path_factory.mktemp('hub')
    tokens = workdir / 'tokens.json'
    tokens.write_text(json.dumps(LAB_TOKENS))
    log_path = str(workdir / 'hub.log')
    proc, url = labhub.start(log_path, tokens)
    try:
        yield HubInfo(url=url, port=int(url.rsplit(':', 1)[1]), log_path=log_path, process=proc)
    finally:
        labhub.stop(proc)


@pytest.fixture
def closed_port():
    """A loopback port with no listener (binds, reads the port, closes)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(('127.0.0.1', 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


@pytest.fixture
def silent_port():
    """A loopback port that accepts TCP connections (kernel backlog) but never sends a byte."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(('127.0.0.1', 0))
    sock.listen(16)
    try:
        yield sock.getsockname()[1]
    finally:
        sock.close()


@pytest.fixture
def hf_env(monkeypatch, tmp_path):
    """Environment without HF / proxy variables that would change huggingface_hub behaviour.

    huggingface_hub's import-time settings are reset for every test: telemetry is re-enabled and the
    agent-harness registry forgotten, so that code under test must itself keep huggingface_hub from
    contacting the public Hub (loopback_only reports it otherwise).
    """
    for name in ('HF_TOKEN', 'HUGGING_FACE_HUB_TOKEN', 'HF_ENDPOINT', 'HF_HUB_OFFLINE', 'TRANSFORMERS_OFFLINE',
                 'HTTP_PROXY', 'HTTPS_PROXY', 'ALL_PROXY', 'http_proxy', 'https_proxy', 'all_proxy'):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv('NO_PROXY', '127.0.0.1,localhost')
    try:
        from huggingface_hub import constants as hf_constants
    except ImportError:
        return monkeypatch
    monkeypatch.setattr(hf_constants, 'HF_HUB_DISABLE_TELEMETRY', False)
    monkeypatch.setattr(hf_constants, 'HF_HUB_OFFLINE', False)
    if hasattr(hf_constants, 'AGENT_HARNESSES_PATH'):
        monkeypatch.setattr(hf_constants, 'AGENT_HARNESSES_PATH', str(tmp_path / 'agent-harnesses.json'))
    try:
        from huggingface_hub.utils import _detect_agent
        monkeypatch.setattr(_detect_agent, '_registry', None)
    except ImportError:
        pass
    return monkeypatch


@pytest.fixture
def loopback_only(monkeypatch):
    """Fail loudly if code under test talks to anything but 127.0.0.1 / ::1."""
    violations = netguard.guard(netguard.is_loopback, 'loopback_only', monkeypatch.setattr)
    yield violations
    assert not violations, 'non-loopback network access: %s' % violations
