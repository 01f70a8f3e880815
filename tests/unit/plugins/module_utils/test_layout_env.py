# -*- coding: utf-8 -*-
# The NCCL/UCX/OpenMPI environment per layout (issue 24, item 2): module_utils/_layout.fabric_env, the one function
# the engine container (module_utils/_container.container_spec) and the vLLM engine take it from.

from __future__ import annotations

import json
import pathlib

import jinja2

from ansible_collections.sparkops.specdec.plugins.module_utils import _container, _layout
from ansible_collections.sparkops.specdec.tests.unit.plugins.module_utils.test_container import settings

ROOT = pathlib.Path(__file__).resolve().parents[4]
PAIR_IF = ["enp1s0f1np1", "enP2p1s0f1np1"]
PAIR_HCA = ["rocep1s0f1", "roceP2p1s0f1"]
HOSTS = ["192.168.100.10", "192.168.100.11"]
# The engine container's env of the lab pair, in order, from main at 7b43883 (before layouts): with and without HCAs.
PAIR_ENV = ('{"CPATH": "/usr/local/cuda/include", "TRITON_PTXAS_PATH": "/usr/local/cuda/bin/ptxas", '
            '"NCCL_SOCKET_IFNAME": "enp1s0f1np1,enP2p1s0f1np1", "UCX_NET_DEVICES": "enp1s0f1np1,enP2p1s0f1np1", '
            '"OMPI_MCA_btl_tcp_if_include": "enp1s0f1np1,enP2p1s0f1np1", '
            '"OMPI_MCA_oob_tcp_if_include": "enp1s0f1np1,enP2p1s0f1np1", '
            '"OMPI_MCA_orte_default_hostfile": "/var/lib/sparkops/specdec/openmpi-hostfile", '
            '"OMPI_MCA_rmaps_ppr_n_pernode": "1", "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", '
            '"SSH_PORT": "2233", "SSHD_LISTEN_ADDRESSES": "192.168.100.10 192.168.101.10"%s}')


def test_pair_container_env_is_byte_identical():
    assert json.dumps(_container.container_spec(settings())["env"]) == PAIR_ENV % ""
    hca = _container.container_spec(settings(nccl_ib_hca=PAIR_HCA))["env"]
    assert json.dumps(hca) == PAIR_ENV % ', "NCCL_IB_HCA": "rocep1s0f1,roceP2p1s0f1"'


def test_direct_fabric_env_is_todays_pair_env():
    got = _layout.fabric_env("direct", PAIR_IF, PAIR_HCA, HOSTS)
    today = json.loads(PAIR_ENV % ', "NCCL_IB_HCA": "rocep1s0f1,roceP2p1s0f1"')
    assert got["env"] == {k: v for k, v in today.items() if k.startswith(("NCCL_", "UCX_", "OMPI_"))}
    assert got["ranks"] == 2
    assert got["forward"] == ["NCCL_IB_HCA", "NCCL_SOCKET_IFNAME", "UCX_NET_DEVICES"]


def test_hostfile_is_the_roles_template_output():
    # Ansible's template lookup renders with trim_blocks (as the role's vars/main.yml uses it).
    template = (ROOT / "roles" / "trtllm_container" / "templates" / "openmpi-hostfile.j2").read_text()
    rendered = jinja2.Environment(trim_blocks=True).from_string(template).render(trtllm_container_hostfile_hosts=HOSTS)
    assert _layout.fabric_env("direct", PAIR_IF, (), HOSTS)["hostfile"] == rendered
    assert rendered.splitlines()[1:] == HOSTS


def test_ring_adds_the_runbooks_nccl_settings():
    env = _layout.fabric_env("ring", _layout.RING_NETDEVS, _layout.RING_ROCE, ["a", "b", "c"])
    assert env["env"]["NCCL_IB_SUBNET_AWARE_ROUTING"] == "1" and env["env"]["NCCL_NET_PLUGIN"] == "none"
    assert env["env"]["NCCL_IB_HCA"] == "rocep1s0f0,roceP2p1s0f0,rocep1s0f1,roceP2p1s0f1"
    assert "NCCL_ALGO" not in env["env"] and env["ranks"] == 3
    assert env["hostfile"].splitlines()[1:] == ["a", "b", "c"]
    assert {"NCCL_IB_SUBNET_AWARE_ROUTING", "NCCL_NET_PLUGIN"} <= set(env["forward"])


def test_accepted_four_node_ring_runs_nccl_algo_ring():
    four = ["a", "b", "c", "d"]
    assert _layout.fabric_env("ring", _layout.RING_NETDEVS, (), four, accept_four_node_ring=True)["env"]["NCCL_ALGO"] == "Ring"
    assert "NCCL_ALGO" not in _layout.fabric_env("switch", PAIR_IF, (), four, accept_four_node_ring=True)["env"]


def test_management_bootstrap_is_the_newer_nccl_runbooks():
    env = _layout.fabric_env("switch", PAIR_IF, PAIR_HCA, HOSTS, bootstrap="management_interface")["env"]
    for name in ("NCCL_SOCKET_IFNAME", "UCX_NET_DEVICES", "OMPI_MCA_btl_tcp_if_include", "OMPI_MCA_oob_tcp_if_include"):
        assert env[name] == "enP7s7"
    assert env["NCCL_IB_HCA"] == "rocep1s0f1,roceP2p1s0f1"
    assert _layout.fabric_env("direct", PAIR_IF, (), HOSTS, bootstrap="management_interface",
                              management_interface="eno1")["env"]["NCCL_SOCKET_IFNAME"] == "eno1"


def test_container_spec_takes_its_env_from_fabric_env():
    spec = _container.container_spec(settings(layout="ring", fabric_interfaces=list(_layout.RING_NETDEVS),
                                              hostfile_hosts=["10.0.0.1", "10.0.0.2", "10.0.0.3"]))
    assert spec["env"]["NCCL_IB_SUBNET_AWARE_ROUTING"] == "1"
    mgmt = _container.container_spec(settings(bootstrap="management_interface"))
    assert mgmt["env"]["NCCL_SOCKET_IFNAME"] == "enP7s7" and mgmt["env"]["SSH_PORT"] == "2233"
