# -*- coding: utf-8 -*-
# Unit tests for sparkops.specdec.container_sshd_wait: the head waits, bounded, until every node's container sshd
# answers with its SSH banner in one round, before mpirun. Real sockets on the loopback only (fake sshds that start
# late, never, or answer without a banner); the rounds with a fake clock.

from __future__ import annotations

import os
import socket
import threading
import time

import pytest

from ansible_collections.sparkops.specdec.plugins.modules import container_sshd_wait as m
from ansible_collections.sparkops.specdec.tests.unit.plugins.modules.conftest import module_failure, run_module


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class FakeServer(object):
    """A listener on 127.0.0.1:port that starts after `delay` s (an sshd waiting for its fabric addresses) and
    greets every connection with `greeting`."""

    def __init__(self, port, delay=0.0, greeting=b"SSH-2.0-OpenSSH_9.2p1\r\n"):
        self.port, self.delay, self.greeting = port, delay, greeting
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.serve, daemon=True)

    def serve(self):
        if self.stop.wait(self.delay):
            return
        srv = socket.socket()
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind(("127.0.0.1", self.port))
        srv.listen(8)
        srv.settimeout(0.1)
        with srv:
            while not self.stop.is_set():
                try:
                    conn, _addr = srv.accept()
                except socket.timeout:
                    continue
                with conn:
                    conn.sendall(self.greeting)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(2)


def run(args, fails=False):
    return module_failure(m, args) if fails else run_module(m, args)


def args(port, timeout=10, nodes=(("spark-1", "127.0.0.1"),)):
    return {"targets": [{"node": n, "address": a} for n, a in nodes], "port": port, "timeout": timeout,
            "interval": 0.2, "probe_timeout": 1.0, "container": "trtllm-multinode", "head": "spark-1"}


def test_waits_for_an_sshd_that_starts_late_instead_of_failing_at_once():
    # The race of the CI rehearsal: the container runs, its sshd does not listen yet (connection refused).
    port = free_port()
    assert m.probe("127.0.0.1", port, 1.0) == "connection refused"
    with FakeServer(port, delay=1.5):
        result = run(args(port))
    assert result["changed"] is False
    assert result["missing"] == []
    assert result["targets"] == [{"node": "spark-1", "address": "127.0.0.1", "port": port, "answered": True}]
    assert result["waited"] >= 1.0 and result["rounds"] >= 2


def test_times_out_with_one_line_naming_node_address_port_and_reason():
    port = free_port()
    started = time.monotonic()
    result = run(args(port, timeout=1, nodes=(("spark-2", "127.0.0.1"),)), fails=True)
    assert time.monotonic() - started < 5  # bounded by the timeout (plus at most one probe)
    assert result["failed"] is True
    assert "\n" not in result["msg"]
    assert result["msg"].startswith("The container sshd of spark-2 does not answer from spark-1 (the head, where "
                                    "mpirun starts) after 1 s: spark-2 at 127.0.0.1:%d (connection refused)." % port)
    assert result["missing"] == ["spark-2 127.0.0.1:%d (connection refused)" % port]
    assert result["targets"][0]["answered"] is False


def test_an_open_port_without_an_ssh_banner_is_not_an_sshd():
    port = free_port()
    with FakeServer(port, greeting=b"HTTP/1.1 400 Bad Request\r\n\r\n"):
        result = run(args(port, timeout=1), fails=True)
    assert result["missing"] == ["spark-1 127.0.0.1:%d (no SSH banner (another service answers))" % port]


def test_a_target_without_node_or_address_is_refused():
    result = run({"targets": [{"address": "127.0.0.1"}], "port": 2233}, fails=True)
    assert result["msg"].startswith("container_sshd_wait: every target needs node and address")


class Clock(object):
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def test_one_round_must_have_every_node_answering():
    # A worker whose container restarts (Docker's restart policy) answers now and then: a round where it answered
    # but the head's own sshd did not, or the other way round, is not ready for mpirun.
    targets = [{"node": "spark-1", "address": "a"}, {"node": "spark-2", "address": "b"}]
    script = {"a": ["", "refused", "", ""], "b": ["refused", "", "refused", ""]}
    calls = {"a": 0, "b": 0}

    def check(address, port, timeout):
        answer = script[address][min(calls[address], 3)]
        calls[address] += 1
        return answer

    clock = Clock()
    missing, rounds, waited = m.wait(targets, 2233, 30, 1.0, 3.0, clock=clock, sleep=clock.sleep, check=check)
    assert (missing, rounds, waited) == ([], 4, 3.0)


def test_the_wait_ends_at_the_timeout():
    clock = Clock()
    missing, rounds, waited = m.wait([{"node": "spark-2", "address": "b"}], 2233, 5, 1.0, 3.0, clock=clock,
                                     sleep=clock.sleep, check=lambda *a: "connection refused")
    assert [reason for _t, reason in missing] == ["connection refused"]
    assert waited == 5.0 and rounds == 6


def fake_docker(tmp_path, monkeypatch, stdout, rc=0, stderr=""):
    """A `docker` first on PATH that records its argv and prints what mpirun would (host names, one a line)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    record = tmp_path / "argv"
    script = bindir / "docker"
    script.write_text("#!/bin/sh\nprintf '%%s\\n' \"$@\" > %s\nprintf '%%s' '%s'\nprintf '%%s' '%s' >&2\nexit %d\n"
                      % (record, stdout, stderr, rc))
    script.chmod(0o755)
    monkeypatch.setenv("PATH", "%s:%s" % (bindir, os.environ.get("PATH", "")))
    return record


def test_then_mpirun_in_the_container_must_print_every_host(tmp_path, monkeypatch):
    record = fake_docker(tmp_path, monkeypatch, "spark-1\nspark-2\n")
    port = free_port()
    with FakeServer(port):
        result = run(dict(args(port), mpirun_hosts=["192.168.100.10", "192.168.100.11"]))
    assert record.read_text().split() == ["exec", "trtllm-multinode", "mpirun", "-np", "2", "hostname"]
    assert result["mpirun"] == {"rc": 0, "stdout": "spark-1\nspark-2", "stderr": ""}
    assert result["changed"] is False


@pytest.mark.parametrize("stdout, rc, stderr", [
    ("spark-1\nspark-1\n", 0, ""),  # both ranks on the head: the worker was not reached
    ("spark-1\n", 1, "ssh: connect to host 192.168.100.11 port 2233: Connection refused"),
])
def test_mpirun_that_misses_a_host_fails_with_one_line(tmp_path, monkeypatch, stdout, rc, stderr):
    fake_docker(tmp_path, monkeypatch, stdout, rc=rc, stderr=stderr)
    port = free_port()
    with FakeServer(port):
        result = run(dict(args(port), mpirun_hosts=["192.168.100.10", "192.168.100.11"]), fails=True)
    assert "\n" not in result["msg"]
    assert result["msg"].startswith("'mpirun -np 2 hostname' in trtllm-multinode on spark-1 did not print 2 distinct "
                                    "host names (rc=%d)" % rc)
    assert "Check the hostfile addresses (192.168.100.10, 192.168.100.11)" in result["msg"]
    assert stderr.split(":")[0] in result["msg"]
    assert result["mpirun"]["rc"] == rc


def test_no_mpirun_without_hosts(tmp_path, monkeypatch):
    record = fake_docker(tmp_path, monkeypatch, "")
    port = free_port()
    with FakeServer(port):
        result = run(args(port))
    assert "mpirun" not in result and not record.exists()
