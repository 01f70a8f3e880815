# -*- coding: utf-8 -*-
# Unit tests for the PRIVATE module_util sparkops.specdec.plugins.module_utils._container: the engine container's
# docker_container parameters, the consent rule, the image facts, and the ssh mesh (read, identity, blocks).

from __future__ import annotations

import pytest

from ansible_collections.sparkops.specdec.plugins.module_utils import _container as c

SHA = "0" * 40


def settings(**over):
    """The lab's two-node settings (tests/lab, inventories/lab) as the role's vars/main.yml maps them."""
    base = {
        "name": "trtllm-multinode",
        "image": "sparkops-lab/trtllm-standin:1.3.0rc12",
        "multinode": True,
        "gpus": False,
        "infiniband_device": "",
        "ulimits": ["memlock:8388608:8388608", "stack:67108864:67108864"],
        "ipc_mode": "host",
        "shm_size": "",
        "cuda_env": {"CPATH": "/usr/local/cuda/include", "TRITON_PTXAS_PATH": "/usr/local/cuda/bin/ptxas"},
        "env": {},
        "fabric_interfaces": ["enp1s0f1np1", "enP2p1s0f1np1"],
        "nccl_ib_hca": [],
        "hostfile_hosts": ["192.168.100.10", "192.168.100.11"],
        "state_dir": "/var/lib/sparkops/specdec",
        "hf_cache": "/home/spark/.cache/huggingface",
        "container_hf_cache_dir": "/root/.cache/huggingface",
        "home": "/home/spark",
        "host_key_dir": "/etc/sparkops/trtllm-ssh",
        "ssh_port": 2233,
        "sshd_listen_addresses": ["192.168.100.10", "192.168.101.10"],
        "entrypoint_sha1": SHA,
    }
    base.update(over)
    return base


# ---------------------------------------------------------------------------------------------
# container_spec
# ---------------------------------------------------------------------------------------------

def test_multinode_spec_is_the_runbooks_container():
    spec = c.container_spec(settings())
    assert spec == {
        "name": "trtllm-multinode",
        "image": "sparkops-lab/trtllm-standin:1.3.0rc12",
        "state": "started",
        "restart_policy": "unless-stopped",
        "init": True,
        "network_mode": "host",
        "ipc_mode": "host",
        "ulimits": ["memlock:8388608:8388608", "stack:67108864:67108864"],
        "env": {
            "CPATH": "/usr/local/cuda/include",
            "TRITON_PTXAS_PATH": "/usr/local/cuda/bin/ptxas",
            "NCCL_SOCKET_IFNAME": "enp1s0f1np1,enP2p1s0f1np1",
            "UCX_NET_DEVICES": "enp1s0f1np1,enP2p1s0f1np1",
            "OMPI_MCA_btl_tcp_if_include": "enp1s0f1np1,enP2p1s0f1np1",
            "OMPI_MCA_oob_tcp_if_include": "enp1s0f1np1,enP2p1s0f1np1",
            "OMPI_MCA_orte_default_hostfile": "/var/lib/sparkops/specdec/openmpi-hostfile",
            "OMPI_MCA_rmaps_ppr_n_pernode": "1",
            "OMPI_ALLOW_RUN_AS_ROOT": "1",
            "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
            "SSH_PORT": "2233",
            "SSHD_LISTEN_ADDRESSES": "192.168.100.10 192.168.101.10",
        },
        "labels": {"io.sparkops.specdec.role": "trtllm_container", "io.sparkops.specdec.entrypoint-sha1": SHA},
        "volumes": [
            "/home/spark/.cache/huggingface:/root/.cache/huggingface",
            "/var/lib/sparkops/specdec:/var/lib/sparkops/specdec",
            # The pinned host key and the container mesh directory: nothing of the deploy user's ~/.ssh.
            "/etc/sparkops/trtllm-ssh/ssh_host_ed25519_key:/run/sparkops/ssh/ssh_host_ed25519_key:ro",
            "/etc/sparkops/trtllm-ssh/mesh:/root/.ssh:ro",
        ],
        "command": ["bash", "/var/lib/sparkops/specdec/entrypoint.sh"],
    }


def test_single_node_spec_has_no_mpi_no_ssh():
    spec = c.container_spec(settings(multinode=False, hostfile_hosts=[], fabric_interfaces=[]))
    assert spec["env"] == {"CPATH": "/usr/local/cuda/include", "TRITON_PTXAS_PATH": "/usr/local/cuda/bin/ptxas"}
    assert spec["volumes"] == ["/home/spark/.cache/huggingface:/root/.cache/huggingface",
                               "/var/lib/sparkops/specdec:/var/lib/sparkops/specdec"]


def test_real_spark_spec_has_gpus_rdma_and_hca():
    spec = c.container_spec(settings(gpus=True, infiniband_device="/dev/infiniband", nccl_ib_hca=["rocep1s0f1", "roceP2p1s0f1"],
                                     shm_size="16g", ipc_mode="private"))
    assert spec["device_requests"] == [{"driver": "nvidia", "count": -1, "capabilities": [["gpu"]]}]
    assert spec["devices"] == ["/dev/infiniband:/dev/infiniband"]
    assert spec["env"]["NCCL_IB_HCA"] == "rocep1s0f1,roceP2p1s0f1"
    assert spec["shm_size"] == "16g" and spec["ipc_mode"] == "private"


@pytest.mark.parametrize("over", [{}, {"gpus": "false"}, {"gpus": 0}])
def test_lab_spec_has_no_gpu_rdma_shm_keys(over):
    spec = c.container_spec(settings(**over))
    assert not {"device_requests", "devices", "shm_size"} & set(spec)


def test_env_order_user_over_cuda_and_ours_over_user():
    spec = c.container_spec(settings(env={"CPATH": "/opt/cuda/include", "SSH_PORT": "22", "EXTRA": "x"}))
    assert spec["env"]["CPATH"] == "/opt/cuda/include"
    assert spec["env"]["SSH_PORT"] == "2233"
    assert spec["env"]["EXTRA"] == "x"


@pytest.mark.parametrize("over", [
    {"hostfile_hosts": []},
    {"hostfile_hosts": ["192.168.100.10"]},
    {"fabric_interfaces": []},
    {"multinode": "true", "fabric_interfaces": None},
])
def test_multinode_without_fabric_inputs_is_refused(over):
    with pytest.raises(c.ContainerError) as err:
        c.container_spec(settings(**over))
    msg = str(err.value)
    assert "\n" not in msg
    assert "trtllm_container_hostfile_hosts" in msg and "trtllm_container_fabric_interfaces" in msg
    assert "netplan_qsfp" in msg


@pytest.mark.parametrize("listen", [[], None, ""])
def test_multinode_without_listen_addresses_is_refused(listen):
    with pytest.raises(c.ContainerError) as err:
        c.container_spec(settings(sshd_listen_addresses=listen))
    msg = str(err.value)
    assert "\n" not in msg and "trtllm_container_sshd_listen_addresses" in msg and "netplan_qsfp_fabric.ips" in msg


def test_no_volume_of_the_deploy_users_home_but_the_hf_cache():
    spec = c.container_spec(settings(home="/home/spark", host_key_dir="/etc/sparkops/trtllm-ssh/"))
    assert [v for v in spec["volumes"] if v.startswith("/home/spark")] == [
        "/home/spark/.cache/huggingface:/root/.cache/huggingface"]
    assert "/etc/sparkops/trtllm-ssh/mesh:/root/.ssh:ro" in spec["volumes"]  # trailing slash of the setting dropped


@pytest.mark.parametrize("env, address", [
    ({"SSHD_LISTEN_ADDRESSES": "192.168.100.11 192.168.101.11"}, "192.168.100.11"),
    ({"SSHD_LISTEN_ADDRESSES": ""}, "127.0.0.1"),
    ({}, "127.0.0.1"),
])
def test_sshd_wait_address(env, address):
    assert c.sshd_wait_address({"env": env}) == address


# ---------------------------------------------------------------------------------------------
# the image with sshd
# ---------------------------------------------------------------------------------------------

BASE = "nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc12"
DERIVED = BASE + "-sparkops-sshd"
BASE_INFO = {"Id": "sha256:base", "Config": {"Labels": {}}}
OURS = {"Id": "sha256:derived", "Config": {"Labels": {c.SSHD_LABEL: "/usr/sbin/sshd", c.SSHD_BASE_LABEL: "sha256:base"}}}
STALE = {"Id": "sha256:old", "Config": {"Labels": {c.SSHD_LABEL: "/usr/sbin/sshd", c.SSHD_BASE_LABEL: "sha256:older"}}}
FOREIGN = {"Id": "sha256:theirs", "Config": {"Labels": {}}}


def sshd(**over):
    s = {"multinode": True, "image": BASE, "sshd_image": "", "sshd_build": True}
    s.update(over)
    return s


@pytest.mark.parametrize("image, derived", [
    (BASE, DERIVED),
    ("sparkops-lab/trtllm-standin:1.3.0rc12-nosshd", "sparkops-lab/trtllm-standin:1.3.0rc12-nosshd-sparkops-sshd"),
    ("registry:5000/trtllm", "registry:5000/trtllm:latest-sparkops-sshd"),
    ("nvcr.io/nvidia/tensorrt-llm/release@sha256:" + "ab" * 32,
     "nvcr.io/nvidia/tensorrt-llm/release:sha256-abababababab-sparkops-sshd"),
])
def test_sshd_image_name(image, derived):
    assert c.sshd_image_name(image) == derived


def test_dockerfile_is_the_image_plus_openssh_server_with_our_labels():
    text = c.sshd_dockerfile(BASE, "sha256:base")
    lines = text.splitlines()
    assert lines[1] == "FROM " + BASE
    assert "openssh-server" in text and "rm -f /etc/ssh/ssh_host_*" in text and "test -x /usr/sbin/sshd" in text
    assert lines[-1] == 'LABEL io.sparkops.specdec.sshd="/usr/sbin/sshd" io.sparkops.specdec.sshd-base="sha256:base"'


def test_single_node_and_check_mode_run_the_image_as_is():
    assert c.sshd_image_plan(sshd(multinode=False), None, None)["image"] == BASE
    plan = c.sshd_image_plan(sshd(), None, None)  # not loaded yet (check mode on a new node)
    assert (plan["image"], plan["build"], plan["probe"]) == (BASE, False, "")


def test_our_current_derived_image_is_used_without_probe_or_build():
    plan = c.sshd_image_plan(sshd(sshd_build=False), BASE_INFO, OURS)
    assert (plan["image"], plan["build"], plan["probe"]) == (DERIVED, False, "")


def test_an_image_with_sshd_is_probed_once_then_used_as_is():
    plan = c.sshd_image_plan(sshd(), BASE_INFO, None)
    assert plan["probe"] == BASE and plan["probe_command"] == ["/bin/sh", "-c", c.SSHD_PROBE]
    plan = c.sshd_image_plan(sshd(), BASE_INFO, None, {BASE: {"status": 0, "container": {"Output": "sshd=yes\n"}}})
    assert (plan["image"], plan["build"], plan["probe"]) == (BASE, False, "")


def test_an_image_labelled_as_ours_needs_no_probe():
    plan = c.sshd_image_plan(sshd(image=DERIVED), OURS, None)
    assert (plan["image"], plan["probe"]) == (DERIVED, "")


@pytest.mark.parametrize("derived_info", [None, STALE])
def test_an_image_without_sshd_gets_its_derived_image_built(derived_info):
    plan = c.sshd_image_plan(sshd(), BASE_INFO, derived_info, {BASE: {"status": 3, "failed": True}})
    assert (plan["image"], plan["build"]) == (DERIVED, True)
    assert plan["dockerfile"] == c.sshd_dockerfile(BASE, "sha256:base")


def test_an_image_without_sshd_and_no_build_stops_up_front():
    with pytest.raises(c.ContainerError) as err:
        c.sshd_image_plan(sshd(sshd_build=False), BASE_INFO, STALE, {BASE: False})
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith("trtllm_container_image %s has no /usr/sbin/sshd and trtllm_container_sshd_build is false" % BASE)
    assert "trtllm_container_sshd_build: true" in msg and "trtllm_container_sshd_image" in msg


def test_a_named_image_is_probed_and_used_when_it_has_sshd():
    named = "site/trtllm-sshd:1"
    plan = c.sshd_image_plan(sshd(sshd_image=named, sshd_build=False), BASE_INFO, FOREIGN)
    assert plan["probe"] == named
    plan = c.sshd_image_plan(sshd(sshd_image=named, sshd_build=False), BASE_INFO, FOREIGN, {named: True})
    assert (plan["image"], plan["build"]) == (named, False)
    # Labelled as ours: no probe, whatever base it came from (the user named it).
    assert c.sshd_image_plan(sshd(sshd_image=named), BASE_INFO, STALE)["image"] == named


def test_a_named_image_without_sshd_is_refused():
    with pytest.raises(c.ContainerError, match=r"^trtllm_container_sshd_image site/x:1 has no /usr/sbin/sshd"):
        c.sshd_image_plan(sshd(sshd_image="site/x:1"), BASE_INFO, FOREIGN, {"site/x:1": False})


def test_a_named_image_not_on_the_node_is_built_or_refused():
    plan = c.sshd_image_plan(sshd(sshd_image="site/x:1"), BASE_INFO, None, {BASE: False})
    assert (plan["image"], plan["build"]) == ("site/x:1", True)
    with pytest.raises(c.ContainerError, match=r"^trtllm_container_sshd_image site/x:1 is not on the node"):
        c.sshd_image_plan(sshd(sshd_image="site/x:1", sshd_build=False), BASE_INFO, None, {BASE: False})


@pytest.mark.parametrize("result, has", [
    (True, True), (False, False), ({"status": 0}, True), ({"status": 3, "failed": True}, False),
    ({"container": {"Output": "sshd=yes\n"}}, True), ({"container": {"Output": "sshd=no\n"}}, False),
    ({"skipped": True}, False), (None, False),
])
def test_probe_results(result, has):
    assert c.probe_has_sshd(result) is has


# ---------------------------------------------------------------------------------------------
# consent
# ---------------------------------------------------------------------------------------------

RUNNING = {"State": {"Running": True}}
STOPPED = {"State": {"Running": False}}


def plan(changed=True, container="running", before=None, after=None, image_different=False):
    out = {"changed": changed, "container": RUNNING if container == "running" else container}
    if before is not None:
        out["diff"] = {"before": before, "after": after, "image_different": image_different}
    return out


@pytest.mark.parametrize("p, allow", [
    (plan(changed=False), False),
    (plan(container=None), False),
    (plan(container={}), False),
    (plan(container=STOPPED), False),
    (plan(), True),
    (plan(), "true"),
])
def test_no_refusal(p, allow):
    assert c.recreate_refusal(p, allow, "trtllm-multinode") is None


def test_refusal_names_the_differences_on_one_line():
    p = plan(before={"env": ["A=1"], "volumes": ["a:b"], "running": True, "labels": {"x": "1"}},
             after={"env": ["A=2"], "volumes": ["a:b", "c:d"], "running": True, "labels": {"x": "1"}})
    msg = c.recreate_refusal(p, False, "trtllm-multinode")
    assert msg.startswith("The running container trtllm-multinode has other settings than requested (env, volumes).")
    assert "trtllm_container_allow_recreate=true" in msg and "\n" not in msg


def test_refusal_without_diff_says_what_may_differ():
    msg = c.recreate_refusal(plan(), False, "trtllm-multinode")
    assert "(image, environment, mounts or entrypoint)" in msg


def test_image_difference_is_named_first():
    assert c.plan_differences(plan(before={"env": 1}, after={"env": 2}, image_different=True)) == ["image", "env"]
    assert c.plan_differences({}) == [] and c.plan_differences(None) == []


# ---------------------------------------------------------------------------------------------
# image facts
# ---------------------------------------------------------------------------------------------

RELEASE = {"Id": "sha256:abc", "Config": {"Env": ["PATH=/usr/bin", "TRT_LLM_VERSION=1.3.0rc12", "TRT_LLM_GIT=x"],
                                          "Labels": {"maintainer": "NVIDIA"}}}
UNNAMED = {"Id": "sha256:def", "Config": {"Env": ["PATH=/usr/bin"], "Labels": None}}


def test_image_info_keeps_trtllm_env_and_labels():
    assert c.image_info("img:tag", RELEASE, " 1.3.0rc12\n") == {
        "name": "img:tag", "id": "sha256:abc", "env": ["TRT_LLM_VERSION=1.3.0rc12", "TRT_LLM_GIT=x"],
        "labels": {"maintainer": "NVIDIA"}, "package_version": "1.3.0rc12", "digest": "", "repo_digests": [],
        "container_image_id": ""}


@pytest.mark.parametrize("inspect", [None, {}, {"Config": None}])
def test_image_info_of_no_image(inspect):
    assert c.image_info("img:tag", inspect) == {"name": "img:tag", "id": "", "env": [], "labels": {}, "package_version": "",
                                                "digest": "", "repo_digests": [], "container_image_id": ""}


@pytest.mark.parametrize("inspect, override, needed", [
    (RELEASE, "", False),
    (UNNAMED, "", True),
    (UNNAMED, "1.3.0rc12", False),
    ({"Config": {"Env": ["TRT_LLM_VERSION="]}}, "", True),
    ({"Config": {"Labels": {"org.opencontainers.image.version": "1.4.0rc1"}}}, "", False),
    ({}, "", False),
    (None, "", False),
])
def test_package_version_only_when_the_image_names_none(inspect, override, needed):
    assert c.needs_package_version(inspect, override) is needed


# ---------------------------------------------------------------------------------------------
# engine llamacpp
# ---------------------------------------------------------------------------------------------

def test_llamacpp_container_replaces_the_image_entrypoint_without_sshd():
    single = settings(multinode=False, image="sparkops-lab/llamacpp-server:test", engine="llamacpp")
    spec = c.container_spec(single)
    assert spec["entrypoint"] == ["bash"] and spec["command"] == ["/var/lib/sparkops/specdec/entrypoint.sh"]
    assert "SSH_PORT" not in spec["env"] and not any(".ssh" in v for v in spec["volumes"])
    # Everything else is the single-node trtllm container's.
    trt = c.container_spec(settings(multinode=False, image="sparkops-lab/llamacpp-server:test"))
    assert {k: v for k, v in spec.items() if k not in ("entrypoint", "command")} == \
        {k: v for k, v in trt.items() if k != "command"}


def test_trtllm_container_spec_unchanged_by_the_engine_setting():
    assert c.container_spec(settings(engine="trtllm")) == c.container_spec(settings())
    assert "entrypoint" not in c.container_spec(settings(multinode=False, engine="trtllm"))


def test_llamacpp_multinode_container_is_refused():
    with pytest.raises(c.ContainerError, match="specdec_engine: llamacpp serves on one Spark"):
        c.container_spec(settings(engine="llamacpp"))


# The message of community.docker.docker_image when the build of the derived image fails on a node without apt's
# network (as on the lab node, shortened): one long line with docker's logs as a list.
BUILD_NO_NETWORK = (
    "Error building sparkops-lab/trtllm-standin - code: 100, message: The command '/bin/sh -c set -e; apt-get update' "
    "returned a non-zero code: 100, logs: ['Step 1/4 : FROM sparkops-lab/trtllm-standin:1.3.0rc12-nosshd', "
    "'Err:1 http://deb.debian.org/debian bookworm InRelease', \"  Temporary failure resolving 'deb.debian.org'\", "
    "\"\\x1b[91mE: Package 'openssh-server' has no installation candidate\", '\\x1b[0m']")


@pytest.mark.parametrize("message, cause", [
    (BUILD_NO_NETWORK, "Temporary failure resolving 'deb.debian.org'"),
    ("logs: ['E: Unable to locate package openssh-server', '']", "E: Unable to locate package openssh-server"),
    ("no apt-get, dnf or apk in site/img:1 to install openssh-server with", "no apt-get, dnf or apk in site/img:1"),
    ("Error connecting:\n  docker.sock   refused", "Error connecting: docker.sock refused"),
    ("", "no message"),
])
def test_build_failure_is_one_line_with_its_cause_and_the_way_out(message, cause):
    msg = c.sshd_build_failure(message, DERIVED, BASE, "spark-1")
    assert "\n" not in msg and "\x1b" not in msg
    assert msg.startswith("Building %s (%s plus openssh-server) on spark-1 failed: %s. " % (DERIVED, BASE, cause))
    assert "air-gapped" in msg and "trtllm_container_sshd_image" in msg
    assert len(msg) < 500


def test_vllm_across_sparks_is_the_fabric_env_without_sshd():
    # Engine vllm across Sparks (issue 23 item 2): vllm serve on each node, torch.distributed rendezvous, no mpirun:
    # the NCCL/Gloo environment of _layout.fabric_env(engine='vllm') and VLLM_HOST_IP (this node's first fabric
    # address), no SSH_PORT/SSHD_LISTEN_ADDRESSES, no sshd key or mesh mounts, the image's ENTRYPOINT replaced.
    spec = c.container_spec(settings(engine="vllm", image="vllm/vllm-openai:v0.28.0"))
    assert spec["env"] == {
        "CPATH": "/usr/local/cuda/include", "TRITON_PTXAS_PATH": "/usr/local/cuda/bin/ptxas",
        "NCCL_SOCKET_IFNAME": "enp1s0f1np1,enP2p1s0f1np1", "GLOO_SOCKET_IFNAME": "enp1s0f1np1,enP2p1s0f1np1",
        "VLLM_HOST_IP": "192.168.100.10", "VLLM_CACHE_ROOT": "/var/lib/sparkops/specdec/vllm-cache"}
    assert spec["volumes"] == ["/home/spark/.cache/huggingface:/root/.cache/huggingface",
                               "/var/lib/sparkops/specdec:/var/lib/sparkops/specdec"]
    assert spec["entrypoint"] == ["bash"] and spec["command"] == ["/var/lib/sparkops/specdec/entrypoint.sh"]
    assert c.uses_sshd(settings()) and not c.uses_sshd(settings(engine="vllm"))
    # No sshd image either.
    plan = c.sshd_image_plan(sshd(engine="vllm"), BASE_INFO, None)
    assert (plan["image"], plan["build"], plan["probe"]) == (BASE, False, "") and "no sshd" in plan["reason"]
    # Without the fabric inputs: refused as for trtllm.
    with pytest.raises(c.ContainerError, match="trtllm_container_fabric_interfaces"):
        c.container_spec(settings(engine="vllm", fabric_interfaces=[]))


def test_vllm_cache_root_on_the_node_in_the_state_dir():
    spec = c.container_spec(settings(engine="vllm", multinode=False, image="vllm/vllm-openai:v0.28.0"))
    assert spec["env"]["VLLM_CACHE_ROOT"] == "/var/lib/sparkops/specdec/vllm-cache"
    # The state directory is mounted at the same path: the cache survives the container.
    assert "/var/lib/sparkops/specdec:/var/lib/sparkops/specdec" in spec["volumes"]
    own = c.container_spec(settings(engine="vllm", multinode=False, env={"VLLM_CACHE_ROOT": "/data/vllm"}))
    assert own["env"]["VLLM_CACHE_ROOT"] == "/data/vllm"
    for engine in ("trtllm", "llamacpp"):
        assert "VLLM_CACHE_ROOT" not in c.container_spec(settings(engine=engine, multinode=False))["env"]
