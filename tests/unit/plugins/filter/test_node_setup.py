# -*- coding: utf-8 -*-
# Unit tests for the PRIVATE filters of plugins/filter/node_setup.py (ssh_mesh and trtllm_container roles): what they
# read from hostvars and how a refusal becomes the task's error.

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.sparkops.specdec.plugins.filter import node_setup

HOSTS = ["spark-1", "spark-2"]


def read(user="spark", home="/home/spark", n="1"):
    """A registered two-part read (__ssh_mesh_read) of a warm node."""
    return {"results": [
        {"stdout_lines": ["user=%s" % user, "home=%s" % home, "ssh_dir=directory|700|%s|%s" % (user, user),
                          "mesh_key=present", "mesh_pub=ssh-ed25519 AAAAmesh%s m" % n,
                          "host_pub=ssh-ed25519 AAAAnode%s h" % n]},
        {"stdout_lines": ["key_dir=directory|700|root|root", "container_key=present",
                          "container_pub=ssh-ed25519 AAAAcont%s c" % n, "mesh_dir=directory|700|root|root",
                          "container_mesh_key=present", "container_mesh_pub=ssh-ed25519 AAAAcmesh%s" % n]},
    ]}


def test_filters_are_registered():
    assert set(node_setup.FilterModule().filters()) == {"trtllm_container_spec", "ssh_mesh_node", "ssh_mesh_files",
                                                        "trtllm_sshd_image", "trtllm_sshd_image_name", "trtllm_sshd_build_failure",
                                                        "trtllm_container_mounts", "trtllm_image_reference_problems",
                                                        "trtllm_image_problems", "trtllm_image_fetch_failure",
                                                        "trtllm_container_sshd_targets"}


def test_container_mounts_filter_lists_every_volume_with_its_type():
    settings = {"hf_cache": "/h", "container_hf_cache_dir": "/root/h", "state_dir": "/s", "multinode": "true",
                "host_key_dir": "/k"}
    mounts = node_setup.trtllm_container_mounts(settings)
    assert [(m["source"], m["type"]) for m in mounts] == [("/h", "directory"), ("/s", "directory"),
                                                          ("/k/ssh_host_ed25519_key", "file"), ("/k/mesh", "directory")]


def test_ssh_mesh_node_from_hostvars():
    hostvars = {"spark-1": {"__ssh_mesh_read": read()}, "spark-2": {"__ssh_mesh_read": read(n="2")}}
    out = node_setup.ssh_mesh_node(hostvars, "spark-2", HOSTS, "spark_nodes", ["192.168.100.11"],
                                   "/etc/sparkops/trtllm-ssh", "id_ed25519_sparkops")
    assert out["user"] == "spark" and out["addresses"] == ["192.168.100.11"]
    assert out["pubs"]["host"] == "ssh-ed25519 AAAAnode2 h"
    assert out["fix_dirs"] == [] and out["create_keys"] == []


@pytest.mark.parametrize("hostvars, text", [
    ({"spark-1": {"__ssh_mesh_read": read()}, "spark-2": {"__ssh_mesh_read": read(user="dgx")}},
     "The cluster user differs between nodes (spark-1: spark, spark-2: dgx)"),
    ({"spark-1": {"__ssh_mesh_read": read()}, "spark-2": {}}, "spark-2 of group spark_nodes did not run the mesh"),
    ({"spark-1": {"__ssh_mesh_read": read()}}, "spark-2 of group spark_nodes did not run the mesh"),
])
def test_ssh_mesh_node_refusals_are_filter_errors(hostvars, text):
    with pytest.raises(AnsibleFilterError) as err:
        node_setup.ssh_mesh_node(hostvars, "spark-1", HOSTS, "spark_nodes", [], "/etc/k", "k")
    assert text in str(err.value)


def test_ssh_mesh_files_use_keys_created_in_this_run():
    hostvars = {h: {"__ssh_mesh_read": read(n=h[-1])} for h in HOSTS}
    for h in HOSTS:
        hostvars[h]["__ssh_mesh_node"] = node_setup.ssh_mesh_node(
            hostvars, h, HOSTS, "spark_nodes", ["10.0.0.%s" % h[-1]], "/etc/k", "k")
    hostvars["spark-2"]["__ssh_mesh_created"] = {"results": [
        {"item": {"role": "mesh"}, "stdout": "ssh-ed25519 AAAAfresh2 m"}]}
    hostvars["spark-1"]["__ssh_mesh_created"] = {"skipped": True, "results": []}
    out = node_setup.ssh_mesh_files(hostvars, "spark-1", HOSTS, "k", 2233)
    files = {f["name"]: f["block"] for f in out["files"]}
    assert files["authorized_keys"].splitlines() == ["ssh-ed25519 AAAAmesh1 m", "ssh-ed25519 AAAAfresh2 m"]
    assert "[10.0.0.2]:2233 ssh-ed25519 AAAAcont2" in files["known_hosts_sparkops"]
    assert out["peers"] == ["10.0.0.2"]
    # The containers' files: their own mesh keys (from the fabric addresses), never the cluster user's.
    assert out["container_files"][0] == {"path": "/etc/k/mesh/authorized_keys", "mode": "0600", "content":
                                         'restrict,from="10.0.0.1" ssh-ed25519 AAAAcmesh1 trtllm-mesh@spark-1\n'
                                         'restrict,from="10.0.0.2" ssh-ed25519 AAAAcmesh2 trtllm-mesh@spark-2\n'}
    assert out["container_files"][1]["content"] == "[10.0.0.1]:2233 ssh-ed25519 AAAAcont1\n[10.0.0.2]:2233 ssh-ed25519 AAAAcont2\n"


def test_ssh_mesh_files_need_every_node():
    with pytest.raises(AnsibleFilterError, match="spark-2 did not publish its mesh identity"):
        node_setup.ssh_mesh_files({"spark-1": {"__ssh_mesh_node": {"addresses": []}}}, "spark-1", HOSTS, "k", 22)


def test_trtllm_container_spec_refusal_is_a_filter_error():
    with pytest.raises(AnsibleFilterError, match="A multi-node container needs trtllm_container_hostfile_hosts"):
        node_setup.trtllm_container_spec({"multinode": True, "hostfile_hosts": [], "fabric_interfaces": []})
    spec = node_setup.trtllm_container_spec({
        "multinode": False, "name": "c", "image": "i", "state_dir": "/s", "hf_cache": "/h", "container_hf_cache_dir": "/r",
        "entrypoint_sha1": "x"})
    assert spec["command"] == ["bash", "/s/entrypoint.sh"]


SSHD = {"multinode": True, "image": "sparkops-lab/trtllm-standin:1.3.0rc12-nosshd", "sshd_image": "", "sshd_build": False}
DERIVED = "sparkops-lab/trtllm-standin:1.3.0rc12-nosshd-sparkops-sshd"


def info(*images):
    """The docker_image_info loop results of the image and its derived one (images: [] when absent)."""
    return [{"item": "x", "images": [i] if i else []} for i in images]


def test_trtllm_sshd_image_reads_the_info_loop_and_the_registered_probe():
    base = {"Id": "sha256:nosshd", "Config": {"Labels": {}}}
    plan = node_setup.trtllm_sshd_image(dict(SSHD, sshd_build=True), info(base, None))
    assert plan["probe"] == SSHD["image"]
    probe = {"changed": False, "failed": True, "status": 3, "container": {"Output": "sshd=no\n"}}  # failed_when: false
    plan = node_setup.trtllm_sshd_image(dict(SSHD, sshd_build=True), info(base, None), {SSHD["image"]: probe})
    assert (plan["image"], plan["build"]) == (DERIVED, True)
    derived = {"Id": "sha256:d", "Config": {"Labels": {"io.sparkops.specdec.sshd": "/usr/sbin/sshd",
                                                       "io.sparkops.specdec.sshd-base": "sha256:nosshd"}}}
    assert node_setup.trtllm_sshd_image(SSHD, info(base, derived))["image"] == DERIVED
    assert node_setup.trtllm_sshd_image(dict(SSHD, multinode=False), [])["image"] == SSHD["image"]


def test_trtllm_sshd_image_refusal_is_a_filter_error():
    base = {"Id": "sha256:nosshd", "Config": {"Labels": {}}}
    with pytest.raises(AnsibleFilterError, match="has no /usr/sbin/sshd and trtllm_container_sshd_build is false"):
        node_setup.trtllm_sshd_image(SSHD, info(base, None), {SSHD["image"]: {"status": 3}})


def test_trtllm_sshd_image_name():
    assert node_setup.trtllm_sshd_image_name(SSHD["image"]) == DERIVED
    assert node_setup.trtllm_sshd_image_name(SSHD["image"], "site/sshd:1") == "site/sshd:1"


# --- trtllm_container_sshd_targets: what the head probes before mpirun ------------------------------------------------

def spec_of(addresses):
    """A node's __trtllm_container_spec as the role sets it (only its environment matters here)."""
    return {"__trtllm_container_spec": {"env": {"SSHD_LISTEN_ADDRESSES": addresses, "SSH_PORT": "2233"}}}


def test_sshd_targets_name_each_hostfile_address_by_the_node_that_listens_there():
    hostvars = {"spark-1": spec_of("192.168.100.10 192.168.101.10"), "spark-2": spec_of("192.168.100.11 192.168.101.11")}
    targets = node_setup.trtllm_container_sshd_targets(hostvars, HOSTS, ["192.168.100.10", "192.168.100.11"])
    assert targets == [{"node": "spark-1", "address": "192.168.100.10"},
                       {"node": "spark-2", "address": "192.168.100.11"}]


def test_sshd_targets_refuse_a_hostfile_address_no_node_listens_on():
    hostvars = {"spark-1": spec_of("192.168.100.10"), "spark-2": {}}  # spark-2 published no spec
    with pytest.raises(AnsibleFilterError) as err:
        node_setup.trtllm_container_sshd_targets(hostvars, HOSTS, ["192.168.100.10", "192.168.100.11"])
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith("trtllm_container_hostfile_hosts: 192.168.100.11 ")
    assert "spark-1: 192.168.100.10; spark-2: none" in msg
