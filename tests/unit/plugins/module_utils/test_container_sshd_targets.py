# -*- coding: utf-8 -*-
# Unit tests for the head's wait for every node's container sshd before mpirun (PRIVATE module_util _container):
# the targets (hostfile addresses named by node), the SSH banner, a round, and the one-line timeout error.

from __future__ import annotations

import pytest

from ansible_collections.sparkops.specdec.plugins.module_utils import _container as c

LISTEN = {"spark-1": ["192.168.100.10", "192.168.101.10"], "spark-2": ["192.168.100.11", "192.168.101.11"]}
HOSTFILE = ["192.168.100.10", "192.168.100.11"]


def test_targets_follow_the_hostfile_order_with_the_node_that_listens_there():
    assert c.sshd_targets(HOSTFILE, LISTEN) == [
        {"node": "spark-1", "address": "192.168.100.10"},
        {"node": "spark-2", "address": "192.168.100.11"},
    ]
    # the head first even when the deployment lists it second
    assert [t["node"] for t in c.sshd_targets(HOSTFILE, dict(reversed(list(LISTEN.items()))))] == [
        "spark-1", "spark-2"]


def test_a_hostfile_address_no_container_sshd_listens_on_is_refused_in_one_line():
    with pytest.raises(c.ContainerError) as err:
        c.sshd_targets(["192.168.100.10", "192.168.100.99"], LISTEN)
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith("trtllm_container_hostfile_hosts: 192.168.100.99 is not an address")
    assert "spark-2: 192.168.100.11, 192.168.101.11" in msg


@pytest.mark.parametrize("data, answered", [
    (b"SSH-", True),
    (b"SSH-2.0-OpenSSH_9.2p1", True),
    (b"", False),          # accepted and closed at once (a proxy, or sshd dropping the connection)
    (b"HTTP", False),      # another service on the port
    (None, False),
])
def test_only_an_ssh_banner_counts(data, answered):
    assert c.banner_answer(data) is answered


def test_a_round_counts_only_when_every_target_answers():
    # as the module probes them: each target with its port option
    targets = [dict(t, port=2233) for t in c.sshd_targets(HOSTFILE, LISTEN)]
    assert c.sshd_round(targets, {"192.168.100.10": "", "192.168.100.11": ""}) == []
    missing = c.sshd_round(targets, {"192.168.100.10": "", "192.168.100.11": "connection refused"})
    assert missing == [(targets[1], "connection refused")]
    # a target without an answer was not probed: it does not count as answered
    assert c.sshd_round(targets, {"192.168.100.10": ""}) == [(targets[1], "not probed")]


def test_the_timeout_error_is_one_line_naming_node_address_port_and_what_to_check():
    # as the module probes them: each target with its port option
    targets = [dict(t, port=2233) for t in c.sshd_targets(HOSTFILE, LISTEN)]
    msg = c.sshd_wait_failure([(targets[1], "connection refused")], "spark-1", "trtllm-multinode", 300)
    assert "\n" not in msg
    assert msg.startswith("The container sshd of spark-2 does not answer from spark-1 (the head, where mpirun starts) "
                          "after 300 s: spark-2 at 192.168.100.11:2233 (connection refused).")
    for check in ("docker ps", "docker inspect trtllm-multinode", "docker logs trtllm-multinode", "ip -br addr",
                  "port 2233", "trtllm_container_start_timeout"):
        assert check in msg
    two = c.sshd_wait_failure([(targets[0], "timed out"), (targets[1], "connection refused")], "spark-1", "t", 5)
    assert two.startswith("The container sshd of spark-1, spark-2 does not answer")
    assert "spark-1 at 192.168.100.10:2233 (timed out); spark-2 at 192.168.100.11:2233 (connection refused)" in two
