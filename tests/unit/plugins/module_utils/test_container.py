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
        },
        "labels": {"io.sparkops.specdec.role": "trtllm_container", "io.sparkops.specdec.entrypoint-sha1": SHA},
        "volumes": [
            "/home/spark/.cache/huggingface:/root/.cache/huggingface",
            "/var/lib/sparkops/specdec:/var/lib/sparkops/specdec",
            "/home/spark/.ssh:/tmp/.ssh:ro",
            "/etc/sparkops/trtllm-ssh:/run/sparkops/ssh:ro",
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
        "labels": {"maintainer": "NVIDIA"}, "package_version": "1.3.0rc12"}


@pytest.mark.parametrize("inspect", [None, {}, {"Config": None}])
def test_image_info_of_no_image(inspect):
    assert c.image_info("img:tag", inspect) == {"name": "img:tag", "id": "", "env": [], "labels": {}, "package_version": ""}


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
# ssh_mesh
# ---------------------------------------------------------------------------------------------

HOST_PUB = "ssh-ed25519 AAAAnode1 root@spark-1"
MESH_PUB = "ssh-ed25519 AAAAmesh1 spark@spark-1 sparkops-mesh"
CONT_PUB = "ssh-ed25519 AAAAcont1 trtllm-container@spark-1"


def read_lines(**over):
    """Both parts of a warm node's read (cluster user, then root)."""
    values = {
        "user": "spark", "home": "/home/spark", "ssh_dir": "directory|700|spark|spark", "mesh_key": "present",
        "mesh_pub": MESH_PUB, "host_pub": HOST_PUB, "key_dir": "directory|700|root|root", "container_key": "present",
        "container_pub": CONT_PUB,
    }
    values.update(over)
    return ["%s=%s" % (k, v) for k, v in values.items() if v is not None]


def node(**over):
    return c.mesh_node(c.parse_read(read_lines(**over)), "spark-1", ["192.168.100.10", "192.168.101.10"],
                       "/etc/sparkops/trtllm-ssh", "id_ed25519_sparkops")


def test_parse_read_ignores_noise_and_keeps_first():
    assert c.parse_read(["user=spark", "junk", "user=other", "home=/h", "x=1", "ssh_dir="]) == {
        "user": "spark", "home": "/h", "ssh_dir": ""}


def test_warm_node_has_nothing_to_create_or_fix():
    n = node()
    assert n == {
        "user": "spark", "home": "/home/spark", "addresses": ["192.168.100.10", "192.168.101.10"],
        "fix_dirs": [], "create_keys": [],
        "pubs": {"mesh": MESH_PUB, "host": HOST_PUB, "container": CONT_PUB},
    }


def test_new_node_creates_both_dirs_and_keys():
    n = node(ssh_dir="", key_dir="", mesh_key=None, container_key=None, mesh_pub="", container_pub="")
    assert n["fix_dirs"] == [{"path": "/home/spark/.ssh", "owner": "spark"},
                             {"path": "/etc/sparkops/trtllm-ssh", "owner": "root", "group": "root"}]
    assert n["create_keys"] == [
        {"role": "mesh", "path": "/home/spark/.ssh/id_ed25519_sparkops", "owner": "spark",
         "comment": "spark@spark-1 sparkops-mesh"},
        {"role": "container", "path": "/etc/sparkops/trtllm-ssh/ssh_host_ed25519_key", "owner": "root",
         "comment": "trtllm-container@spark-1"},
    ]
    assert n["pubs"] == {"mesh": "", "host": HOST_PUB, "container": ""}


@pytest.mark.parametrize("over, fixed", [
    ({"ssh_dir": "directory|755|spark|spark"}, "/home/spark/.ssh"),
    ({"ssh_dir": "directory|700|root|root"}, "/home/spark/.ssh"),
    ({"ssh_dir": "symbolic link|777|spark|spark"}, "/home/spark/.ssh"),
    ({"key_dir": "directory|700|root|spark"}, "/etc/sparkops/trtllm-ssh"),
    ({"key_dir": "directory|750|root|root"}, "/etc/sparkops/trtllm-ssh"),
    ({"key_dir": "garbage"}, "/etc/sparkops/trtllm-ssh"),
])
def test_dirs_off_their_owner_or_mode_are_fixed(over, fixed):
    assert [d["path"] for d in node(**over)["fix_dirs"]] == [fixed]


def test_ssh_dir_group_is_not_enforced():
    assert node(ssh_dir="directory|700|spark|users")["fix_dirs"] == []


def test_a_key_whose_private_half_is_missing_is_created_even_with_a_pub():
    assert [k["role"] for k in node(mesh_key=None)["create_keys"]] == ["mesh"]


@pytest.mark.parametrize("over", [{"user": ""}, {"home": None}, {"host_pub": ""}])
def test_unusable_read_is_refused(over):
    with pytest.raises(c.MeshError):
        node(**over)


def test_same_user():
    c.same_user({"spark-1": "spark", "spark-2": "spark"}, "spark_nodes")
    with pytest.raises(c.MeshError, match=r"differs between nodes \(spark-1: spark, spark-2: dgx\)"):
        c.same_user({"spark-1": "spark", "spark-2": "dgx"}, "spark_nodes")
    with pytest.raises(c.MeshError, match="spark-2 of group spark_nodes did not run the mesh"):
        c.same_user({"spark-1": "spark", "spark-2": None}, "spark_nodes")


def test_node_pubs_prefer_keys_created_in_this_run():
    n = node(mesh_pub="", container_pub="")
    created = [
        {"item": {"role": "mesh"}, "stdout": "ssh-ed25519 AAAAnew spark@spark-1 sparkops-mesh", "changed": True},
        {"item": {"role": "container"}, "stdout": "", "changed": True},  # check mode: not run
    ]
    assert c.node_pubs(n, created) == {"mesh": "ssh-ed25519 AAAAnew spark@spark-1 sparkops-mesh", "host": HOST_PUB,
                                       "container": ""}
    assert c.node_pubs(n, None) == n["pubs"]


def test_mesh_files_of_two_nodes():
    n1 = node()
    n2 = dict(node(), addresses=["192.168.100.11", "192.168.101.11"])
    pubs2 = {"mesh": "ssh-ed25519 AAAAmesh2 spark@spark-2", "host": "ssh-ed25519 AAAAnode2 c",
             "container": "ssh-ed25519 AAAAcont2"}
    out = c.mesh_files("spark-1", {"spark-1": n1, "spark-2": n2}, {"spark-1": n1["pubs"], "spark-2": pubs2},
                       "id_ed25519_sparkops", 2233)
    files = {f["name"]: f["block"] for f in out["files"]}
    assert list(files) == ["authorized_keys", "known_hosts_sparkops", "config"]
    assert files["authorized_keys"] == MESH_PUB + "\nssh-ed25519 AAAAmesh2 spark@spark-2"
    assert files["known_hosts_sparkops"].splitlines() == [
        "192.168.100.10,192.168.101.10 ssh-ed25519 AAAAnode1",
        "[192.168.100.10]:2233,[192.168.101.10]:2233 ssh-ed25519 AAAAcont1",
        "192.168.100.11,192.168.101.11 ssh-ed25519 AAAAnode2",
        "[192.168.100.11]:2233,[192.168.101.11]:2233 ssh-ed25519 AAAAcont2",
    ]
    assert files["config"].splitlines() == [
        "Host 192.168.100.10 192.168.101.10 192.168.100.11 192.168.101.11",
        "    IdentityFile ~/.ssh/id_ed25519_sparkops",
        "    IdentitiesOnly yes",
        "    UserKnownHostsFile ~/.ssh/known_hosts_sparkops",
    ]
    assert out["peers"] == ["192.168.100.11", "192.168.101.11"]


def test_mesh_files_leave_out_keys_not_there_yet():
    n1 = node()
    out = c.mesh_files("spark-1", {"spark-1": n1}, {"spark-1": {"mesh": "", "host": HOST_PUB, "container": ""}},
                       "k", 2233)
    files = {f["name"]: f["block"] for f in out["files"]}
    assert files["authorized_keys"] == ""
    assert files["known_hosts_sparkops"] == "192.168.100.10,192.168.101.10 ssh-ed25519 AAAAnode1"
    assert out["peers"] == []


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
    with pytest.raises(c.ContainerError, match="specdec_server_engine: llamacpp serves on one Spark"):
        c.container_spec(settings(engine="llamacpp"))
