# -*- coding: utf-8 -*-
# Unit tests for tests/netguard.py (the guard behind the loopback_only fixture and the benchmark).
# UDP sockets only: connect() on a datagram socket sends no packet, so even a broken guard sends nothing.

from __future__ import annotations

import socket

import pytest

from ansible_collections.sparkops.specdec.tests import netguard


def test_is_loopback():
    assert netguard.is_loopback('127.0.0.1') and netguard.is_loopback('::1') and netguard.is_loopback('localhost')
    assert not netguard.is_loopback('192.0.2.1') and not netguard.is_loopback('huggingface.co')


def test_guard_refuses_and_records_other_hosts(monkeypatch):
    violations = netguard.guard(netguard.is_loopback, 'unit', monkeypatch.setattr)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        with pytest.raises(OSError, match='unit: no connection'):
            sock.connect(('192.0.2.1', 9))
        assert sock.connect_ex(('127.0.0.1', 9)) == 0
        with pytest.raises(OSError, match='unit: no traffic'):
            socket.getaddrinfo('example.invalid', 443)
    finally:
        sock.close()
    assert violations == ["connect ('192.0.2.1', 9)", "resolve 'example.invalid'"]


def test_guard_with_an_allow_list(monkeypatch):
    violations = netguard.guard(lambda host: host in {'192.0.2.7'}, 'bench', monkeypatch.setattr)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        assert sock.connect_ex(('192.0.2.7', 9)) in (0, 101)  # allowed (101: no route, nothing is sent)
        with pytest.raises(OSError):
            sock.connect(('127.0.0.1', 9))
    finally:
        sock.close()
    assert violations == ["connect ('127.0.0.1', 9)"]
