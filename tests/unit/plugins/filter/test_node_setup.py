# -*- coding: utf-8 -*-
# Unit tests for the PRIVATE filters of plugins/filter/node_setup.py (trtllm_container role): what they
# read from hostvars and how a refusal becomes the task's error.

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.sparkops.specdec.plugins.filter import node_setup


def test_filters_are_registered():
    assert set(node_setup.FilterModule().filters()) == {"trtllm_container_spec",
                                                        "trtllm_sshd_build_failure",
                                                        "trtllm_container_mounts", "trtllm_image_reference_problems",
                                                        "trtllm_image_problems", "trtllm_image_fetch_failure",
                                                        "trtllm_container_sshd_targets", "fabric_hostfile_hosts"}


def test_container_mounts_filter_lists_every_volume_with_its_type():
    settings = {"hf_cache": "/h", "container_hf_cache_dir": "/root/h", "state_dir": "/s", "multinode": "true",
                "host_key_dir": "/k"}
    mounts = node_setup.trtllm_container_mounts(settings)
    assert [(m["source"], m["type"]) for m in mounts] == [("/h", "directory"), ("/s", "directory"),
                                                          ("/k/ssh_host_ed25519_key", "file"), ("/k/mesh", "directory")]


def test_trtllm_container_spec_refusal_is_a_filter_error():
    with pytest.raises(AnsibleFilterError, match="A multi-node container needs trtllm_container_hostfile_hosts"):
        node_setup.trtllm_container_spec({"multinode": True, "hostfile_hosts": [], "fabric_interfaces": []})
    spec = node_setup.trtllm_container_spec({
        "multinode": False, "name": "c", "image": "i", "state_dir": "/s", "hf_cache": "/h", "container_hf_cache_dir": "/r",
        "entrypoint_sha1": "x"})
    assert spec["command"] == ["bash", "/s/entrypoint.sh"]


# --- trtllm_container_sshd_targets: what the head probes before mpirun ------------------------------------------------

def spec_of(addresses):
    """A node's published trtllm_container_spec as the role sets it (only its environment matters here)."""
    return {"env": {"SSHD_LISTEN_ADDRESSES": addresses, "SSH_PORT": "2233"}}


def test_sshd_targets_name_each_hostfile_address_by_the_node_that_listens_there():
    specs = {"spark-1": spec_of("192.168.100.10 192.168.101.10"), "spark-2": spec_of("192.168.100.11 192.168.101.11")}
    targets = node_setup.trtllm_container_sshd_targets(specs, ["192.168.100.10", "192.168.100.11"])
    assert targets == [{"node": "spark-1", "address": "192.168.100.10"},
                       {"node": "spark-2", "address": "192.168.100.11"}]


def test_sshd_targets_refuse_a_hostfile_address_no_node_listens_on():
    specs = {"spark-1": spec_of("192.168.100.10"), "spark-2": None}  # spark-2 published no spec
    with pytest.raises(AnsibleFilterError) as err:
        node_setup.trtllm_container_sshd_targets(specs, ["192.168.100.10", "192.168.100.11"])
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith("trtllm_container_hostfile_hosts: 192.168.100.11 ")
    assert "spark-1: 192.168.100.10; spark-2: none" in msg


def test_fabric_hostfile_hosts_of_a_pair_and_a_ring():
    filters = node_setup
    pair = {"spark-1": {"ips": ["192.168.100.10", "192.168.101.10"]},
            "spark-2": {"ips": ["192.168.100.11", "192.168.101.11"]}}
    assert filters.fabric_hostfile_hosts(pair, "direct", "spark-2") == ["192.168.100.11", "192.168.100.10"]
    assert filters.fabric_hostfile_hosts(pair, "auto", "spark-1") == ["192.168.100.10", "192.168.100.11"]
    four = {h: {"addresses": a, "ips": [x.split("/", maxsplit=1)[0] for x in a]} for h, a in (
        ("s1", ["192.168.0.1/24", "192.168.1.1/24", "192.168.6.2/24", "192.168.7.2/24"]),
        ("s2", ["192.168.2.1/24", "192.168.3.1/24", "192.168.0.2/24", "192.168.1.2/24"]),
        ("s3", ["192.168.4.1/24", "192.168.5.1/24", "192.168.2.2/24", "192.168.3.2/24"]),
        ("s4", ["192.168.6.1/24", "192.168.7.1/24", "192.168.4.2/24", "192.168.5.2/24"]))}
    with pytest.raises(AnsibleFilterError, match="^specdec_layout: s3 is not cabled to the head s1"):
        filters.fabric_hostfile_hosts(four, "ring", "s1")
    management = {"s1": "10.0.0.1", "s2": "10.0.0.2", "s3": "10.0.0.3", "s4": "10.0.0.4"}
    assert filters.fabric_hostfile_hosts(four, "ring", "s1", management) == [
        "10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"]
    assert filters.fabric_hostfile_hosts(pair, "direct", "spark-1", management) == ["192.168.100.10", "192.168.100.11"]
    with pytest.raises(AnsibleFilterError, match="expected a mapping"):
        filters.fabric_hostfile_hosts(["s1"], "ring", "s1")
