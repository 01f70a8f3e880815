# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Network guard shared by the unit tests (tests/unit/conftest.py) and the benchmark (tests/bench).

Project rule: tests and benchmarks talk only to loopback and to the lab's own containers. ``guard`` patches
``socket.getaddrinfo`` and ``socket.socket.connect``/``connect_ex`` so that any other name or address is
refused with an OSError and recorded (also when best-effort code swallows the error).
"""

from __future__ import annotations

import ipaddress
import socket


def is_loopback(host):
    if host in ('localhost', 'localhost.localdomain'):
        return True
    try:
        return ipaddress.ip_address(str(host).split('%', maxsplit=1)[0]).is_loopback
    except ValueError:
        return False


def guard(allowed, label, setattr_fn=setattr):
    """Refuse traffic to hosts for which allowed(host) is false; returns the list of recorded violations.

    setattr_fn: how to patch (``setattr`` for a whole process, ``monkeypatch.setattr`` for one pytest test).
    """
    real_getaddrinfo = socket.getaddrinfo
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex
    violations = []

    def getaddrinfo(host, *args, **kwargs):
        name = host.decode() if isinstance(host, bytes) else host
        if name is not None and not allowed(name):
            violations.append('resolve %r' % (name,))
            raise OSError('%s: no traffic to %r (only loopback and the lab)' % (label, name))
        return real_getaddrinfo(host, *args, **kwargs)

    def check(address):
        if isinstance(address, tuple) and not allowed(str(address[0])):
            violations.append('connect %r' % (address,))
            raise OSError('%s: no connection to %r (only loopback and the lab)' % (label, address))

    def connect(self, address):
        check(address)
        return real_connect(self, address)

    def connect_ex(self, address):
        check(address)
        return real_connect_ex(self, address)

    setattr_fn(socket, 'getaddrinfo', getaddrinfo)
    setattr_fn(socket.socket, 'connect', connect)
    setattr_fn(socket.socket, 'connect_ex', connect_ex)
    return violations
