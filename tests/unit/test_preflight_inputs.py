"""Table-driven: invalid inputs are rejected by the preflight play, before any host changes,
with a message naming the setting. Each case runs the real deployment playbook (in check mode,
against a loopback-only inventory); it must fail inside "Preflight 1/2" with no later play started."""
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
INV = ROOT / "tests" / "unit" / "fixtures" / "inventories"
PLAYBOOK = str(pathlib.Path(sys.executable).parent / "ansible-playbook")

# (case id, extra vars, text the failure must contain, playbook, inventory)
CASES = [
    ("method-unknown", {"specdec_server_method": "eagle4"}, "specdec_server_method", "two_sparks", "two_nodes"),
    ("draft-missing", {"specdec_server_method": "draft_target", "specdec_server_draft_model": ""}, "specdec_server_draft_model",
     "single_spark", "two_nodes"),
    ("tp1-two-nodes", {"specdec_server_tp_size": 1}, "specdec_server_tp_size", "two_sparks", "two_nodes"),
    ("tp2-one-node", {"specdec_server_tp_size": 2}, "specdec_server_tp_size", "single_spark", "two_nodes"),
    ("tp-not-int", {"specdec_server_tp_size": "two"}, "specdec_server_tp_size", "two_sparks", "two_nodes"),
    ("draft-len-0", {"specdec_server_max_draft_len": 0}, "specdec_server_max_draft_len", "two_sparks", "two_nodes"),
    ("draft-len-negative", {"specdec_server_max_draft_len": -3}, "specdec_server_max_draft_len", "two_sparks", "two_nodes"),
    ("draft-len-text", {"specdec_server_max_draft_len": "abc"}, "specdec_server_max_draft_len", "two_sparks", "two_nodes"),
    ("port-too-big", {"specdec_server_port": 70000}, "specdec_server_port", "two_sparks", "two_nodes"),
    ("port-zero", {"specdec_server_port": 0}, "specdec_server_port", "two_sparks", "two_nodes"),
    ("port-text", {"specdec_server_port": "http"}, "specdec_server_port", "two_sparks", "two_nodes"),
    ("preset-unknown", {"specdec_server_preset": "qwen-4"}, "specdec_server_preset", "two_sparks", "two_nodes"),
    ("kv-fraction-high", {"specdec_server_kv_cache_free_gpu_memory_fraction": 1.5}, "KV-cache fraction", "single_spark", "two_nodes"),
    ("kv-fraction-zero", {"specdec_server_kv_cache_free_gpu_memory_fraction": 0}, "KV-cache fraction", "single_spark", "two_nodes"),
    ("kv-fraction-twice", {"specdec_server_method": "eagle3", "specdec_server_kv_cache_free_gpu_memory_fraction": 0.8},
     "specdec_server_kv_cache_free_gpu_memory_fraction", "single_spark", "two_nodes"),
    ("llm-options-not-dict", {"specdec_server_llm_api_options": "speculative_config"}, "specdec_server_llm_api_options",
     "two_sparks", "two_nodes"),
    ("extra-args-string", {"specdec_server_extra_args": "--foo"}, "specdec_server_extra_args", "two_sparks", "two_nodes"),
    ("extra-args-dup-port", {"specdec_server_extra_args": ["--port", "9000"]}, "specdec_server_extra_args", "two_sparks", "two_nodes"),
    ("health-timeout-negative", {"specdec_server_health_timeout": -1}, "timeouts", "two_sparks", "two_nodes"),
    ("allow-restart-not-bool", {"specdec_server_allow_restart": "maybe"}, "specdec_server_allow_restart", "two_sparks", "two_nodes"),
    ("target-id-bad", {"specdec_server_target_model": "not a repo id"}, "Hugging Face ids", "two_sparks", "two_nodes"),
    ("draft-id-bad", {"specdec_server_draft_model": "bad id/with spaces"}, "Hugging Face ids", "two_sparks", "two_nodes"),
    ("head-not-in-play", {"specdec_server_head_host": "spark-9"}, "specdec_server_head_host", "two_sparks", "two_nodes"),
    ("tiktoken-url-ftp", {"specdec_server_tiktoken_base_url": "ftp://mirror/encodings"}, "specdec_server_tiktoken_base_url",
     "two_sparks", "two_nodes"),
    ("batch-size-zero", {"specdec_server_max_batch_size": 0}, "max_batch_size", "two_sparks", "two_nodes"),
    ("num-tokens-negative", {"specdec_server_max_num_tokens": -5}, "max_num_tokens", "two_sparks", "two_nodes"),
    ("misspelt-server-var", {"specdec_server_max_draft_length": 3}, "specdec_server_max_draft_length", "two_sparks", "two_nodes"),
    ("scheme-unknown", {"netplan_qsfp_scheme": "dhcp"}, "netplan_qsfp_scheme", "two_sparks", "two_nodes"),
    ("one-link-subnet", {"netplan_qsfp_link_subnets": ["192.168.100.0/24"]}, "netplan_qsfp_link_subnets", "two_sparks", "two_nodes"),
    ("bad-cidr", {"netplan_qsfp_link_subnets": ["192.168.100.0/33", "192.168.101.0/24"]}, "netplan_qsfp_link_subnets",
     "two_sparks", "two_nodes"),
    ("same-subnet-both-links", {"netplan_qsfp_link_subnets": ["192.168.100.0/24", "192.168.100.0/24"]}, "different subnets",
     "two_sparks", "two_nodes"),
    ("single-subnet-bad", {"netplan_qsfp_scheme": "single_subnet", "netplan_qsfp_single_subnet": "10.0.0.0/40"},
     "netplan_qsfp_single_subnet", "two_sparks", "two_nodes"),
    ("one-address", {"netplan_qsfp_addresses": ["192.168.100.10/24"]}, "netplan_qsfp_addresses", "two_sparks", "two_nodes"),
    ("duplicate-addresses", {"netplan_qsfp_addresses": ["192.168.100.10/24", "192.168.101.10/24"]}, "Duplicate fabric addresses",
     "two_sparks", "two_nodes"),
    ("address-not-ip", {"netplan_qsfp_addresses": ["not-an-ip", "x"]}, "netplan_qsfp_addresses", "two_sparks", "two_nodes"),
    ("qsfp-port-2", {"netplan_qsfp_port": "2"}, "netplan_qsfp_port", "two_sparks", "two_nodes"),
    ("apply-method-nmcli", {"netplan_qsfp_apply_method": "nmcli"}, "netplan_qsfp_apply_method", "two_sparks", "two_nodes"),
    ("host-offset-out-of-subnet", {"netplan_qsfp_host_offset": 300}, "netplan_qsfp_host_offset", "two_sparks", "two_nodes"),
    ("netplan-file-relative", {"netplan_qsfp_file": "relative/path.yaml"}, "netplan_qsfp_file", "two_sparks", "two_nodes"),
    ("apply-not-bool", {"netplan_qsfp_apply": "yes please"}, "netplan_qsfp_apply", "two_sparks", "two_nodes"),
    ("misspelt-netplan-var", {"netplan_qsfp_aply": True}, "netplan_qsfp_aply", "two_sparks", "two_nodes"),
    ("image-source-unknown", {"trtllm_container_image_source": "registry"}, "trtllm_container_image_source", "two_sparks", "two_nodes"),
    ("archive-without-path", {"trtllm_container_image_source": "archive"}, "trtllm_container_image_archive", "two_sparks", "two_nodes"),
    ("container-ssh-port-big", {"trtllm_container_ssh_port": 70000}, "trtllm_container_ssh_port", "two_sparks", "two_nodes"),
    ("ulimits-string", {"trtllm_container_ulimits": "memlock=-1"}, "trtllm_container_ulimits", "two_sparks", "two_nodes"),
    ("ulimits-bad-item", {"trtllm_container_ulimits": ["memlock=-1"]}, "trtllm_container_ulimits", "two_sparks", "two_nodes"),
    ("container-name-bad", {"trtllm_container_name": "bad name!"}, "trtllm_container_name", "two_sparks", "two_nodes"),
    ("port-clash-with-sshd", {"specdec_server_port": 2233}, "trtllm_container_ssh_port", "two_sparks", "two_nodes"),
    ("mesh-port-zero", {"ssh_mesh_container_port": 0}, "ssh_mesh_container_port", "two_sparks", "two_nodes"),
    ("mesh-key-traversal", {"ssh_mesh_key_name": "../evil"}, "ssh_mesh_key_name", "two_sparks", "two_nodes"),
    ("mesh-user-bad", {"ssh_mesh_user": "root; rm"}, "ssh_mesh_user", "two_sparks", "two_nodes"),
    ("docker-group-empty", {"docker_group_name": ""}, "docker_group_name", "two_sparks", "two_nodes"),
    ("no-worker", {}, "spark_workers", "two_sparks", "head_only"),
    ("three-nodes", {}, "spark_workers", "two_sparks", "three_nodes"),
    ("single-two-hosts", {"single_spark_host": "spark_nodes"}, "single_spark.yml serves on one Spark", "single_spark", "two_nodes"),
]


def _run(playbook, inventory, extra, tmp_path):
    varsfile = tmp_path / "vars.json"
    varsfile.write_text(json.dumps(extra), encoding="utf-8")
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    return subprocess.run(
        [PLAYBOOK, "--check", "-i", str(INV / (inventory + ".yml")), str(ROOT / "playbooks" / (playbook + ".yml")),
         "-e", "@" + str(varsfile)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)


def test_case_count():
    assert len(CASES) >= 40
    assert len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case_id,extra,expected,playbook,inventory", CASES, ids=[c[0] for c in CASES])
def test_invalid_input_rejected_before_any_host_change(case_id, extra, expected, playbook, inventory, tmp_path):
    result = _run(playbook, inventory, extra, tmp_path)
    out = result.stdout + result.stderr
    plays = re.findall(r"^PLAY \[(.*?)\]", result.stdout, re.M)
    assert result.returncode != 0, f"{case_id}: accepted\n{out[-3000:]}"
    assert plays and all(p.startswith("Preflight 1/2") for p in plays), f"{case_id}: got past preflight: {plays}"
    assert expected in out, f"{case_id}: message does not name {expected!r}\n{out[-3000:]}"


@pytest.mark.parametrize("playbook", ["two_sparks", "single_spark"])
def test_valid_settings_pass_the_preflight(playbook, tmp_path):
    topology = {"preflight_topology": playbook}
    result = _run("preflight_inventory", "two_nodes", topology, tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert re.search(r"spark-1\s+:\s+ok=\d+\s+changed=0\s+unreachable=0\s+failed=0", result.stdout)
