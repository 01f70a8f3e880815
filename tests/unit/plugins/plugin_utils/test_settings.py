# -*- coding: utf-8 -*-
# Unit tests for the PRIVATE module_util sparkops.specdec.plugins.plugin_utils._settings: the
# inventory checks of the preflight (names, types, bounds, fabric subnets), one line per problem.
# Pure: no network, no subprocess. tests/unit/test_option_coverage.py checks that NEGATIVE_CASES
# has a case for every option of the roles' argument specs.

from __future__ import annotations

import copy
import os

import pytest
import yaml

from ansible_collections.sparkops.specdec.plugins.plugin_utils import _settings

HERE = os.path.dirname(os.path.abspath(__file__))
COLLECTION_ROOT = os.path.abspath(os.path.join(HERE, '..', '..', '..', '..'))

# The one-name-per-fact layout (roles/specdec_common and the new options). The checks read the
# real specs; the tests run on the real specs without the removed names, plus these declarations
# where the real specs do not have them (yet).
_LAYOUT = {
    'specdec_common': {
        'specdec_deployment_id': {'type': 'str', 'default': ''},
        'specdec_head_host': {'type': 'str'},
        'specdec_container_name': {'type': 'str', 'default': 'trtllm-multinode'},
        'specdec_state_dir': {'type': 'path', 'default': '/var/lib/sparkops/specdec'},
        'specdec_hf_cache_dir': {'type': 'str', 'default': ''},
        'specdec_container_hf_cache_dir': {'type': 'path', 'default': '/root/.cache/huggingface'},
        'specdec_container_ssh_port': {'type': 'int', 'default': 2233},
        'specdec_container_host_key_dir': {'type': 'path', 'default': '/etc/sparkops/trtllm-ssh'},
        'specdec_engine': {'type': 'str', 'choices': ['trtllm', 'llamacpp'], 'default': 'trtllm'},
    },
    'specdec_server': {
        'specdec_server_return_perf_metrics': {'type': 'bool', 'default': False},
    },
    'trtllm_container': {
        'trtllm_container_trtllm_version': {'type': 'str', 'default': ''},
    },
}


def fixture_specs():
    specs = {role: {name: option for name, option in options.items() if name not in _settings.REMOVED}
             for role, options in _settings.load_specs(COLLECTION_ROOT).items()}
    for role, options in _LAYOUT.items():
        for name, option in options.items():
            specs.setdefault(role, {}).setdefault(name, option)
    return specs


SPECS = fixture_specs()
SECRET_TOKEN = 'hf_SecretTokenValue0123456789abcdefXYZ'


def check(settings, **kwargs):
    return _settings.check_settings(settings, SPECS, **kwargs)


def load_yaml(*parts):
    with open(os.path.join(COLLECTION_ROOT, *parts), encoding='utf-8') as handle:
        return yaml.safe_load(handle) or {}


# ---------------------------------------------------------------------------------------------
# Negative cases: (case id, settings, the option the message must name, a fragment of it).
# Every option of the argument specs (and of the playbook table) needs at least one, see
# tests/unit/test_option_coverage.py.
# ---------------------------------------------------------------------------------------------

NEGATIVE_CASES = [
    # --- docker_group ---
    ('docker-users-string', {'docker_group_users': 'nvidia'}, 'docker_group_users', 'is a string, not a list'),
    ('docker-users-null', {'docker_group_users': None}, 'docker_group_users', 'is null'),
    ('docker-users-bad-name', {'docker_group_users': ['nvidia', 'Bad User']}, 'docker_group_users',
     'item 2 of the list: "Bad User" is not a user name'),
    ('docker-group-empty', {'docker_group_name': ''}, 'docker_group_name', 'is empty; set a group name'),
    ('docker-group-bad', {'docker_group_name': 'Docker!'}, 'docker_group_name', 'is not a group name'),
    ('docker-verify-not-bool', {'docker_group_verify': 'sure'}, 'docker_group_verify', 'is not a boolean'),

    # --- netplan_qsfp ---
    ('qsfp-port-2', {'netplan_qsfp_port': '2'}, 'netplan_qsfp_port', 'is not one of auto, 0, 1'),
    ('qsfp-port-bool', {'netplan_qsfp_port': True}, 'netplan_qsfp_port', 'is a boolean, not text'),
    ('group-space', {'netplan_qsfp_group': 'spark nodes'}, 'netplan_qsfp_group', 'is not an inventory group name'),
    ('qsfp-nodes-comma', {'netplan_qsfp_nodes': ['spark-1,spark-2']}, 'netplan_qsfp_nodes',
     'item 1 of the list: "spark-1,spark-2" is not an inventory host name'),
    ('qsfp-nodes-twice', {'netplan_qsfp_nodes': ['spark-1', 'spark-1']}, 'netplan_qsfp_nodes',
     'lists spark-1 more than once'),
    ('qsfp-nodes-string', {'netplan_qsfp_nodes': 'spark-1'}, 'netplan_qsfp_nodes', 'write a YAML list'),
    ('scheme-unknown', {'netplan_qsfp_scheme': 'dhcp'}, 'netplan_qsfp_scheme',
     'is not one of per_link_subnets, single_subnet'),
    ('scheme-typo', {'netplan_qsfp_scheme': 'single-subnet'}, 'netplan_qsfp_scheme', 'did you mean single_subnet?'),
    ('one-link-subnet', {'netplan_qsfp_link_subnets': ['192.168.100.0/24']}, 'netplan_qsfp_link_subnets',
     'has 1 subnet; set exactly two'),
    ('three-link-subnets', {'netplan_qsfp_link_subnets': ['10.0.0.0/24', '10.0.1.0/24', '10.0.2.0/24']},
     'netplan_qsfp_link_subnets', 'has 3 subnets'),
    ('link-subnets-string', {'netplan_qsfp_link_subnets': '192.168.100.0/24,192.168.101.0/24'},
     'netplan_qsfp_link_subnets', 'not a list'),
    ('link-subnet-host-bits', {'netplan_qsfp_link_subnets': ['192.168.100.5/24', '192.168.101.0/24']},
     'netplan_qsfp_link_subnets', '"192.168.100.5/24" has host bits set; did you mean 192.168.100.0/24?'),
    ('link-subnet-prefix-33', {'netplan_qsfp_link_subnets': ['192.168.100.0/33', '192.168.101.0/24']},
     'netplan_qsfp_link_subnets', 'is not an IPv4 network'),
    ('link-subnet-ipv6', {'netplan_qsfp_link_subnets': ['fd00::/64', '192.168.101.0/24']},
     'netplan_qsfp_link_subnets', '"fd00::/64" is not an IPv4 network'),
    ('link-subnet-no-prefix', {'netplan_qsfp_link_subnets': ['192.168.100.0', '192.168.101.0/24']},
     'netplan_qsfp_link_subnets', 'has no prefix length; write it as ADDRESS/PREFIX, e.g. 192.168.100.0/24'),
    ('link-subnet-too-small', {'netplan_qsfp_link_subnets': ['192.168.100.0/31', '192.168.101.0/24']},
     'netplan_qsfp_link_subnets', 'room for fewer than two hosts'),
    ('link-subnets-same', {'netplan_qsfp_link_subnets': ['192.168.100.0/24', '192.168.100.0/24']},
     'netplan_qsfp_link_subnets', 'overlap; the two logical links need separate subnets'),
    ('link-subnets-overlap', {'netplan_qsfp_link_subnets': ['192.168.100.0/24', '192.168.100.128/25']},
     'netplan_qsfp_link_subnets', '192.168.100.0/24 and 192.168.100.128/25 overlap'),
    ('host-offset-zero', {'netplan_qsfp_host_offset': 0}, 'netplan_qsfp_host_offset',
     '0 is out of range; set an integer from 1 to 253'),
    ('host-offset-300', {'netplan_qsfp_host_offset': 300}, 'netplan_qsfp_host_offset', '300 is out of range'),
    ('host-offset-text', {'netplan_qsfp_host_offset': 'ten'}, 'netplan_qsfp_host_offset',
     '"ten" is not a whole number; set an integer from 1 to 253'),
    ('single-subnet-prefix-40', {'netplan_qsfp_single_subnet': '10.0.0.0/40'}, 'netplan_qsfp_single_subnet',
     'is not an IPv4 network'),
    ('single-subnet-host-bits', {'netplan_qsfp_single_subnet': '192.168.200.12/24'}, 'netplan_qsfp_single_subnet',
     'has host bits set; did you mean 192.168.200.0/24?'),
    ('single-offset-zero', {'netplan_qsfp_single_host_offset': 0}, 'netplan_qsfp_single_host_offset',
     'set an integer from 1 to 251'),
    ('one-address', {'netplan_qsfp_addresses': ['192.168.100.10/24']}, 'netplan_qsfp_addresses',
     'has 1 address; set [] to use the scheme, or two'),
    ('address-not-ip', {'netplan_qsfp_addresses': ['not-an-ip', '192.168.101.10/24']}, 'netplan_qsfp_addresses',
     '"not-an-ip" has no prefix length; write ADDRESS/PREFIX'),
    ('address-bad-ip', {'netplan_qsfp_addresses': ['192.168.300.10/24', '192.168.101.10/24']},
     'netplan_qsfp_addresses', 'is not an IPv4 address with prefix'),
    ('address-no-prefix', {'netplan_qsfp_addresses': ['192.168.100.10', '192.168.101.10/24']},
     'netplan_qsfp_addresses', 'write it with its prefix, e.g. 192.168.100.10/24'),
    ('address-network', {'netplan_qsfp_addresses': ['192.168.100.0/24', '192.168.101.10/24']},
     'netplan_qsfp_addresses', 'is the network address of 192.168.100.0/24'),
    ('address-broadcast', {'netplan_qsfp_addresses': ['192.168.100.10/24', '192.168.101.255/24']},
     'netplan_qsfp_addresses', 'is the broadcast address of 192.168.101.0/24'),
    ('address-twice', {'netplan_qsfp_addresses': ['192.168.100.10/24', '192.168.100.10/24']},
     'netplan_qsfp_addresses', 'gives 192.168.100.10 to both links'),
    ('addresses-three', {'netplan_qsfp_addresses': ['192.168.0.1/24', '192.168.1.1/24', '192.168.2.1/24']},
     'netplan_qsfp_addresses', 'has 3 addresses; set [] to use the scheme, or two'),
    ('ring-address-twice',
     {'netplan_qsfp_addresses': ['192.168.0.1/24', '192.168.1.1/24', '192.168.2.1/24', '192.168.0.1/24']},
     'netplan_qsfp_addresses', 'gives 192.168.0.1 to several links'),
    ('ring-subnets-four', {'netplan_qsfp_ring_subnets': ['10.0.%d.0/24' % i for i in range(4)]},
     'netplan_qsfp_ring_subnets', 'has 4 subnets; a ring of three Sparks needs six'),
    ('ring-subnets-overlap', {'netplan_qsfp_ring_subnets': ['10.0.0.0/16'] + ['10.0.%d.0/24' % i for i in range(1, 6)]},
     'netplan_qsfp_ring_subnets', '10.0.0.0/16 and 10.0.1.0/24; 10.0.0.0/16 and 10.0.2.0/24'),
    ('ring-subnets-host-bits', {'netplan_qsfp_ring_subnets': ['10.0.0.1/24'] + ['10.0.%d.0/24' % i for i in range(1, 6)]},
     'netplan_qsfp_ring_subnets', 'has host bits set'),
    ('switch-offset-zero', {'netplan_qsfp_switch_host_offset': 0}, 'netplan_qsfp_switch_host_offset',
     'set an integer from 1 to 250'),
    ('netplan-file-relative', {'netplan_qsfp_file': 'relative/path.yaml'}, 'netplan_qsfp_file',
     'is not a netplan file; set a file directly under /etc/netplan ending in .yaml'),
    ('netplan-file-yml', {'netplan_qsfp_file': '/etc/netplan/40-cx7.yml'}, 'netplan_qsfp_file', 'is not a netplan file'),
    ('netplan-file-subdir', {'netplan_qsfp_file': '/etc/netplan/sub/40-cx7.yaml'}, 'netplan_qsfp_file',
     'is not a netplan file'),
    ('take-over-not-bool', {'netplan_qsfp_take_over': 'replace'}, 'netplan_qsfp_take_over', 'is not a boolean'),
    ('apply-not-bool', {'netplan_qsfp_apply': 'yes please'}, 'netplan_qsfp_apply',
     '"yes please" is not a boolean; set true or false, e.g. false.'),
    ('apply-two', {'netplan_qsfp_apply': 2}, 'netplan_qsfp_apply', '2 is not a boolean'),
    ('apply-method-nmcli', {'netplan_qsfp_apply_method': 'nmcli'}, 'netplan_qsfp_apply_method',
     'is not one of netplan, ip'),
    ('ping-not-bool', {'netplan_qsfp_ping': 'always'}, 'netplan_qsfp_ping', 'is not a boolean'),
    ('rollback-not-bool', {'netplan_qsfp_rollback': []}, 'netplan_qsfp_rollback', 'is not a boolean'),
    ('ibdev2netdev-relative', {'netplan_qsfp_ibdev2netdev_path': 'ibdev2netdev'}, 'netplan_qsfp_ibdev2netdev_path',
     'is not an absolute path'),

    # --- ssh_mesh ---
    ('mesh-group-dash', {'ssh_mesh_group': 'spark-nodes'}, 'ssh_mesh_group', 'is not an inventory group name'),
    ('mesh-hosts-blank', {'ssh_mesh_hosts': ['spark 2']}, 'ssh_mesh_hosts',
     'item 1 of the list: "spark 2" is not an inventory host name'),
    ('mesh-hosts-twice', {'ssh_mesh_hosts': ['a', 'b', 'a']}, 'ssh_mesh_hosts', 'lists a more than once'),
    ('mesh-user-bad', {'ssh_mesh_user': 'root; rm'}, 'ssh_mesh_user', 'is not a user name'),
    ('mesh-user-list', {'ssh_mesh_user': ['nvidia']}, 'ssh_mesh_user', 'is a list, not text'),
    ('mesh-addresses-name', {'ssh_mesh_addresses': ['spark-2']}, 'ssh_mesh_addresses',
     'item 1 of the list: "spark-2" is not an IP address'),
    ('mesh-addresses-prefix', {'ssh_mesh_addresses': ['192.168.100.10/33']}, 'ssh_mesh_addresses',
     'item 1 of the list: "192.168.100.10/33" is not an IP address'),
    ('mesh-addresses-string', {'ssh_mesh_addresses': '192.168.100.10'}, 'ssh_mesh_addresses',
     'write a YAML list, e.g. ["192.168.100.10"]'),
    ('mesh-key-traversal', {'ssh_mesh_key_name': '../evil'}, 'ssh_mesh_key_name', 'is not a plain file name'),
    ('mesh-key-hidden', {'ssh_mesh_key_name': '.id_ed25519'}, 'ssh_mesh_key_name', 'not starting with a dot'),
    ('mesh-verify-not-bool', {'ssh_mesh_verify': 'x'}, 'ssh_mesh_verify', 'is not a boolean'),

    # --- trtllm_container ---
    ('image-upper-case', {'trtllm_container_image': 'nvcr.io/NVIDIA/tensorrt-llm/release:1.3.0rc12'},
     'trtllm_container_image', 'is not an image reference Docker accepts'),
    ('image-empty', {'trtllm_container_image': ''}, 'trtllm_container_image', 'is not an image reference'),
    ('image-space', {'trtllm_container_image': 'tensorrt llm:1.3'}, 'trtllm_container_image',
     'is not an image reference'),
    ('image-source-unknown', {'trtllm_container_image_source': 'registry'}, 'trtllm_container_image_source',
     'is not one of pull, archive'),
    ('archive-without-path', {'trtllm_container_image_source': 'archive'}, 'trtllm_container_image_archive',
     'is empty but trtllm_container_image_source is archive'),
    ('archive-relative', {'trtllm_container_image_archive': 'images/trtllm.tar'}, 'trtllm_container_image_archive',
     'is not an absolute path'),
    ('trtllm-version-latest', {'trtllm_container_trtllm_version': 'latest'}, 'trtllm_container_trtllm_version',
     'is not a TensorRT-LLM version; set e.g. 1.3.0rc12'),
    ('multinode-not-bool', {'trtllm_container_multinode': 'two'}, 'trtllm_container_multinode', 'is not a boolean'),
    ('gpus-not-bool', {'trtllm_container_gpus': 'all'}, 'trtllm_container_gpus', 'is not a boolean'),
    ('infiniband-relative', {'trtllm_container_infiniband_device': 'infiniband'}, 'trtllm_container_infiniband_device',
     'is not an absolute path'),
    ('ulimits-string', {'trtllm_container_ulimits': 'memlock=-1'}, 'trtllm_container_ulimits',
     'is a string, not a list; write a YAML list like the default'),
    ('ulimits-bad-item', {'trtllm_container_ulimits': ['memlock=-1']}, 'trtllm_container_ulimits',
     'item 1 ("memlock=-1") is not NAME:SOFT:HARD'),
    ('ulimits-unknown-name', {'trtllm_container_ulimits': ['memlok:-1:-1']}, 'trtllm_container_ulimits',
     'memlok is not a ulimit Docker knows; did you mean memlock?'),
    ('ulimits-soft-above-hard', {'trtllm_container_ulimits': ['nofile:4096:1024']}, 'trtllm_container_ulimits',
     'the soft limit must be at most the hard limit'),
    ('ulimits-unlimited-soft', {'trtllm_container_ulimits': ['memlock:-1:1024']}, 'trtllm_container_ulimits',
     'the soft limit must be at most the hard limit'),
    ('ipc-mode-shared', {'trtllm_container_ipc_mode': 'shared'}, 'trtllm_container_ipc_mode',
     'is not a Docker IPC mode'),
    ('shm-size-lots', {'trtllm_container_shm_size': 'lots'}, 'trtllm_container_shm_size', 'is not a size'),
    ('fabric-interface-long', {'trtllm_container_fabric_interfaces': ['enp1s0f1np1-but-too-long']},
     'trtllm_container_fabric_interfaces', 'is not a network interface name'),
    ('nccl-hca-space', {'trtllm_container_nccl_ib_hca': ['rocep1s0f1 roceP2p1s0f1']}, 'trtllm_container_nccl_ib_hca',
     'is not an RDMA device name'),
    ('hostfile-port', {'trtllm_container_hostfile_hosts': ['192.168.100.10:2233']}, 'trtllm_container_hostfile_hosts',
     'is not an IP address or host name'),
    ('cuda-env-key', {'trtllm_container_cuda_env': {'1CPATH': '/usr/local/cuda/include'}}, 'trtllm_container_cuda_env',
     'key "1CPATH" is not an environment variable name'),
    ('env-key-dash', {'trtllm_container_env': {'NCCL-DEBUG': 'INFO'}}, 'trtllm_container_env',
     'is not an environment variable name'),
    ('env-nested', {'trtllm_container_env': {'NCCL_DEBUG': {'level': 'INFO'}}}, 'trtllm_container_env',
     'NCCL_DEBUG is a mapping; give every variable a single value'),
    ('env-string', {'trtllm_container_env': 'NCCL_DEBUG=INFO'}, 'trtllm_container_env', 'is a string, not a mapping'),
    ('sshd-listen-name', {'trtllm_container_sshd_listen_addresses': ['spark-2']}, 'trtllm_container_sshd_listen_addresses',
     'is not an IP address'),
    ('sshd-image-space', {'trtllm_container_sshd_image': 'trtllm sshd:1'}, 'trtllm_container_sshd_image',
     'is not an image reference'),
    ('sshd-build-not-bool', {'trtllm_container_sshd_build': 'when needed'}, 'trtllm_container_sshd_build',
     'is not a boolean'),
    ('allow-recreate-not-bool', {'trtllm_container_allow_recreate': 'if needed'}, 'trtllm_container_allow_recreate',
     'is not a boolean'),
    ('image-peer-copy-not-auto-or-bool', {'trtllm_container_image_peer_copy': 'maybe'}, 'trtllm_container_image_peer_copy',
     '"maybe" is not one of auto, true, false'),
    ('image-peer-copy-timeout-zero', {'trtllm_container_image_peer_copy_timeout': 0},
     'trtllm_container_image_peer_copy_timeout', 'is out of range'),
    ('start-timeout-zero', {'trtllm_container_start_timeout': 0}, 'trtllm_container_start_timeout',
     '0 is out of range; set an integer of at least 1 (seconds)'),

    # --- specdec_common ---
    ('layout-unknown', {'specdec_layout': 'mesh'}, 'specdec_layout', 'is not one of auto, direct, ring, switch'),
    ('layout-ring4-not-bool', {'specdec_layout_accept_four_node_ring': 'maybe'}, 'specdec_layout_accept_four_node_ring',
     'is not a boolean'),
    ('bootstrap-unknown', {'specdec_nccl_bootstrap': 'enP7s7'}, 'specdec_nccl_bootstrap',
     'is not one of fabric_interfaces, management_interface'),
    ('management-interface-bad', {'specdec_nccl_management_interface': 'en p7/s7'}, 'specdec_nccl_management_interface',
     'is not a network interface name'),
    ('deployment-id-space', {'specdec_deployment_id': 'my deployment'}, 'specdec_deployment_id',
     'is not a plain file name (it names the deployment'),
    ('head-host-space', {'specdec_head_host': 'spark 1'}, 'specdec_head_host', 'is not an inventory host name'),
    ('head-host-empty', {'specdec_head_host': ''}, 'specdec_head_host', 'is not an inventory host name'),
    ('container-name-bad', {'specdec_container_name': 'bad name!'}, 'specdec_container_name',
     'is not a Docker container name'),
    ('container-name-one-char', {'specdec_container_name': 't'}, 'specdec_container_name',
     'is not a Docker container name'),
    ('state-dir-relative', {'specdec_state_dir': 'var/lib/sparkops'}, 'specdec_state_dir',
     'is not an absolute path; set a path starting with /'),
    ('state-dir-tilde', {'specdec_state_dir': '~/specdec'}, 'specdec_state_dir', '(~ is not expanded here)'),
    ('hf-cache-relative', {'specdec_hf_cache_dir': 'hf-cache'}, 'specdec_hf_cache_dir',
     'or "" for ~/.cache/huggingface of the deploy user'),
    ('report-dir-list', {'specdec_report_dir': ['reports']}, 'specdec_report_dir', 'is a list, not text; set a path'),
    ('container-hf-cache-empty', {'specdec_container_hf_cache_dir': ''}, 'specdec_container_hf_cache_dir',
     'is empty; set an absolute path'),
    ('container-ssh-port-big', {'specdec_container_ssh_port': 70000}, 'specdec_container_ssh_port',
     '70000 is out of range; set an integer from 1 to 65535'),
    ('container-ssh-port-text', {'specdec_container_ssh_port': 'ssh'}, 'specdec_container_ssh_port',
     'is not a whole number'),
    ('host-key-dir-relative', {'specdec_container_host_key_dir': 'trtllm-ssh'}, 'specdec_container_host_key_dir',
     'is not an absolute path'),

    # --- specdec_server ---
    ('preset-unknown', {'specdec_server_preset': 'qwen-4'}, 'specdec_server_preset', 'is not one of auto'),
    ('engine-sglang', {'specdec_engine': 'sglang'}, 'specdec_engine',
     'is not one of trtllm, llamacpp, vllm'),
    ('gpu-memory-utilization-over-one', {'specdec_server_gpu_memory_utilization': 1.5},
     'specdec_server_gpu_memory_utilization', 'set a fraction above 0 and at most 1'),
    ('max-model-len-zero', {'specdec_server_max_model_len': 0}, 'specdec_server_max_model_len', 'is out of range'),
    ('draft-tp-size-zero', {'specdec_server_draft_tp_size': 0}, 'specdec_server_draft_tp_size', 'is out of range'),
    ('pp-size-five', {'specdec_server_pp_size': 5}, 'specdec_server_pp_size', 'is out of range'),
    ('master-port-zero', {'specdec_server_master_port': 0}, 'specdec_server_master_port', 'is out of range'),
    ('speculative-config-not-dict', {'specdec_server_speculative_config': 'ngram'},
     'specdec_server_speculative_config', 'is a string, not a mapping'),
    ('target-file-not-gguf', {'specdec_server_target_file': 'model.safetensors'}, 'specdec_server_target_file',
     'is not a GGUF file in a repo'),
    ('target-file-escapes', {'specdec_server_target_file': '../x.gguf'}, 'specdec_server_target_file',
     'is not a GGUF file in a repo'),
    ('target-file-empty', {'specdec_server_target_file': ''}, 'specdec_server_target_file', 'is empty'),
    ('draft-file-absolute', {'specdec_server_draft_file': '/models/d.gguf'}, 'specdec_server_draft_file',
     'a path relative to the repo ending in .gguf'),
    ('ctx-size-negative', {'specdec_server_ctx_size': -1}, 'specdec_server_ctx_size', 'is out of range'),
    ('ctx-size-text', {'specdec_server_ctx_size': 'big'}, 'specdec_server_ctx_size', 'is not a whole number'),
    ('threads-zero', {'specdec_server_threads': 0}, 'specdec_server_threads', '0 is out of range'),
    ('method-unknown', {'specdec_server_method': 'eagle4'}, 'specdec_server_method',
     '"eagle4" is not one of eagle3, draft_target, mtp, ngram, dflash, none; did you mean eagle3?'),
    ('target-id-spaces', {'specdec_server_target_model': 'not a repo id'}, 'specdec_server_target_model',
     'is not a Hugging Face model id; set a Hugging Face model id ORG/NAME'),
    ('target-id-no-org', {'specdec_server_target_model': 'gpt-oss-120b'}, 'specdec_server_target_model',
     'is not a Hugging Face model id'),
    ('target-id-double-dash', {'specdec_server_target_model': 'nvidia/Qwen3--FP4'}, 'specdec_server_target_model',
     'is not a Hugging Face model id'),
    ('target-id-empty', {'specdec_server_target_model': ''}, 'specdec_server_target_model', 'is empty'),
    ('target-revision-empty', {'specdec_server_target_revision': ''}, 'specdec_server_target_revision',
     'is not a revision; set a branch, tag or commit without spaces'),
    ('target-revision-null', {'specdec_server_target_revision': None}, 'specdec_server_target_revision',
     'is null (an empty value in YAML); set a quoted string, e.g. "main", or delete the line to use the default "main"'),
    ('draft-id-bad', {'specdec_server_draft_model': 'bad id/with spaces'}, 'specdec_server_draft_model',
     'is not a Hugging Face model id'),
    ('draft-id-git', {'specdec_server_draft_model': 'nvidia/Qwen3-235B-A22B-Eagle3.git'}, 'specdec_server_draft_model',
     'is not a Hugging Face model id'),
    ('draft-revision-space', {'specdec_server_draft_revision': 'v 1'}, 'specdec_server_draft_revision',
     'is not a revision'),
    ('draft-len-0', {'specdec_server_max_draft_len': 0}, 'specdec_server_max_draft_len',
     '0 is out of range; set an integer from 1 to 32 (the runbook uses 3 to 5).'),
    ('draft-len-negative', {'specdec_server_max_draft_len': -3}, 'specdec_server_max_draft_len', 'is out of range'),
    ('draft-len-33', {'specdec_server_max_draft_len': 33}, 'specdec_server_max_draft_len', '33 is out of range'),
    ('draft-len-text', {'specdec_server_max_draft_len': 'abc'}, 'specdec_server_max_draft_len',
     '"abc" is not a whole number; set an integer from 1 to 32'),
    ('draft-len-fraction', {'specdec_server_max_draft_len': 3.5}, 'specdec_server_max_draft_len',
     '3.5 is not a whole number'),
    ('draft-len-bool', {'specdec_server_max_draft_len': True}, 'specdec_server_max_draft_len', 'is a boolean'),
    ('tp-5', {'specdec_server_tp_size': 5}, 'specdec_server_tp_size', '5 is out of range; set an integer from 1 to 4'),
    ('pp-0', {'specdec_server_pp_size': 0}, 'specdec_server_pp_size', '0 is out of range; set an integer from 1 to 4'),
    ('pp-not-int', {'specdec_server_pp_size': 'three'}, 'specdec_server_pp_size', 'is not a whole number'),
    ('tp-not-int', {'specdec_server_tp_size': 'two'}, 'specdec_server_tp_size', 'is not a whole number'),
    ('port-too-big', {'specdec_server_port': 70000}, 'specdec_server_port', 'set an integer from 1 to 65535'),
    ('port-zero', {'specdec_server_port': 0}, 'specdec_server_port', '0 is out of range'),
    ('port-text', {'specdec_server_port': 'http'}, 'specdec_server_port', '"http" is not a whole number'),
    ('host-bad', {'specdec_server_host': 'every interface'}, 'specdec_server_host', 'is not an address to bind'),
    ('allowed-networks-string', {'specdec_server_allowed_networks': '10.0.0.0/8'}, 'specdec_server_allowed_networks',
     'is a string, not a list'),
    ('allowed-networks-bad', {'specdec_server_allowed_networks': ['10.0.0.0/8', '10.1.0.0/33']},
     'specdec_server_allowed_networks', 'item 2 of the list: "10.1.0.0/33" is not an IP network; write it in CIDR form'),
    ('allowed-networks-host-bits', {'specdec_server_allowed_networks': ['192.168.1.7/24']},
     'specdec_server_allowed_networks', 'item 1 of the list: "192.168.1.7/24" has host bits set; write the network, '
     '192.168.1.0/24'),
    ('firewall-enable-not-bool', {'specdec_server_firewall_enable': 'sure'}, 'specdec_server_firewall_enable',
     'is not a boolean'),
    ('api-key-short', {'specdec_api_key': 'Zq7xK2'}, 'specdec_api_key',
     'the value (hidden) is shorter than 16 characters'),
    ('api-key-newline', {'specdec_api_key': 'lab-api-key-0123456789abcdef\n'}, 'specdec_api_key',
     'the value (hidden) has white space, a line break'),
    ('batch-size-zero', {'specdec_server_max_batch_size': 0}, 'specdec_server_max_batch_size',
     'set an integer of at least 1'),
    ('num-tokens-negative', {'specdec_server_max_num_tokens': -5}, 'specdec_server_max_num_tokens',
     '-5 is out of range'),
    ('kv-fraction-high', {'specdec_server_kv_cache_free_gpu_memory_fraction': 1.5},
     'specdec_server_kv_cache_free_gpu_memory_fraction', '1.5 is out of range; set a fraction above 0 and at most 1'),
    ('kv-fraction-zero', {'specdec_server_kv_cache_free_gpu_memory_fraction': 0},
     'specdec_server_kv_cache_free_gpu_memory_fraction', 'is out of range'),
    ('kv-fraction-text', {'specdec_server_kv_cache_free_gpu_memory_fraction': 'most'},
     'specdec_server_kv_cache_free_gpu_memory_fraction', '"most" is not a number; set a fraction'),
    ('llm-options-not-dict', {'specdec_server_llm_api_options': 'speculative_config'},
     'specdec_server_llm_api_options', 'is a string, not a mapping; write a YAML mapping'),
    ('extra-args-string', {'specdec_server_extra_args': '--foo'}, 'specdec_server_extra_args',
     'is a string, not a list; write a YAML list, e.g. ["--foo"]'),
    ('extra-args-mapping-item', {'specdec_server_extra_args': [{'--log_level': 'info'}]}, 'specdec_server_extra_args',
     'item 1 ({"--log_level": "info"}) is a mapping, not text; every item of the list must be a string'),
    ('server-env-key', {'specdec_server_env': {'TRT LLM': '1'}}, 'specdec_server_env',
     'is not an environment variable name'),
    ('return-perf-metrics-not-bool', {'specdec_server_return_perf_metrics': 'maybe'},
     'specdec_server_return_perf_metrics', 'is not a boolean'),
    ('hf-token-newline', {'specdec_server_hf_token': SECRET_TOKEN + '\n'}, 'specdec_server_hf_token',
     'the value (hidden) has trailing white space'),
    ('hf-token-list', {'specdec_server_hf_token': [SECRET_TOKEN]}, 'specdec_server_hf_token',
     'the value (hidden) is a list, not text'),
    ('hf-endpoint-no-scheme', {'specdec_server_hf_endpoint': 'hf-mirror.example.com'}, 'specdec_server_hf_endpoint',
     'is not a http:// or https:// URL'),
    ('download-not-bool', {'specdec_server_download': 'later'}, 'specdec_server_download', 'is not a boolean'),
    ('peer-copy-not-auto-or-bool', {'specdec_server_peer_copy': 'sometimes'}, 'specdec_server_peer_copy',
     '"sometimes" is not one of auto, true, false'),
    ('download-timeout-zero', {'specdec_server_download_timeout': 0}, 'specdec_server_download_timeout',
     'is out of range'),
    ('max-workers-zero', {'specdec_server_download_max_workers': 0}, 'specdec_server_download_max_workers',
     'set an integer from 1 to 64'),
    ('max-workers-65', {'specdec_server_download_max_workers': 65}, 'specdec_server_download_max_workers',
     '65 is out of range'),
    ('poll-interval-zero', {'specdec_server_download_poll_interval': 0}, 'specdec_server_download_poll_interval',
     'is out of range'),
    ('async-timeout-negative', {'specdec_server_download_async_timeout': -1}, 'specdec_server_download_async_timeout',
     'is out of range'),
    ('poll-deadline-zero', {'specdec_server_download_poll_deadline': 0}, 'specdec_server_download_poll_deadline',
     'is out of range'),
    ('stale-timeout-too-short', {'specdec_server_download_stale_timeout': 5}, 'specdec_server_download_stale_timeout',
     '5 is out of range'),
    ('hf-venv-relative', {'specdec_server_hf_venv': 'hf-venv'}, 'specdec_server_hf_venv', 'is not an absolute path'),
    ('hf-hub-requirement-other', {'specdec_server_hf_hub_requirement': 'requests>=2'},
     'specdec_server_hf_hub_requirement', 'is not an exact pin of huggingface_hub'),
    ('hf-hub-requirement-range', {'specdec_server_hf_hub_requirement': 'huggingface_hub>=1.0,<3'},
     'specdec_server_hf_hub_requirement', 'is not an exact pin of huggingface_hub'),
    ('wheel-dir-relative', {'specdec_server_wheel_dir': 'wheels'}, 'specdec_server_wheel_dir', 'is not an absolute path'),
    ('controller-cache-tilde', {'specdec_server_controller_cache_dir': '~/.cache/sparkops'},
     'specdec_server_controller_cache_dir', '~ is not expanded here'),
    ('hf-hub-offline-not-bool', {'specdec_server_hf_hub_offline': 'mostly'}, 'specdec_server_hf_hub_offline',
     'is not a boolean'),
    ('tiktoken-url-ftp', {'specdec_server_tiktoken_base_url': 'ftp://mirror/encodings'},
     'specdec_server_tiktoken_base_url', 'is not a http:// or https:// or file:// URL'),
    ('tiktoken-url-bare-scheme', {'specdec_server_tiktoken_base_url': 'https://'}, 'specdec_server_tiktoken_base_url',
     'URL'),
    ('tiktoken-files-path', {'specdec_server_tiktoken_files': ['../o200k_base.tiktoken']},
     'specdec_server_tiktoken_files', 'is not a plain file name'),
    ('autostart-not-bool', {'specdec_server_autostart': 'always'}, 'specdec_server_autostart', 'is not a boolean'),
    ('hang-timeout-negative', {'specdec_server_hang_timeout': -5}, 'specdec_server_hang_timeout', 'is out of range'),
    ('max-failed-starts-zero', {'specdec_server_max_failed_starts': 0}, 'specdec_server_max_failed_starts',
     'is out of range'),
    ('backoff-initial-negative', {'specdec_server_restart_backoff_initial': -1},
     'specdec_server_restart_backoff_initial', 'is out of range'),
    ('backoff-max-too-long', {'specdec_server_restart_backoff_max': 100000}, 'specdec_server_restart_backoff_max',
     'is out of range'),
    ('min-memory-negative', {'specdec_server_min_available_memory': -1}, 'specdec_server_min_available_memory',
     'is out of range'),
    ('server-drop-caches-not-bool', {'specdec_server_drop_caches': 'sometimes'}, 'specdec_server_drop_caches',
     'is not a boolean'),
    ('completion-probe-below-60', {'specdec_server_completion_probe_interval': 30},
     'specdec_server_completion_probe_interval', 'at least 60'),
    ('liveness-interval-negative', {'specdec_server_liveness_probe_interval': -1},
     'specdec_server_liveness_probe_interval', 'is out of range'),
    ('liveness-timeout-zero', {'specdec_server_liveness_probe_timeout': 0}, 'specdec_server_liveness_probe_timeout',
     'is out of range'),
    ('liveness-failures-zero', {'specdec_server_liveness_probe_failures': 0},
     'specdec_server_liveness_probe_failures', 'is out of range'),
    ('liveness-timeout-above-interval', {'specdec_server_liveness_probe_interval': 20,
                                         'specdec_server_liveness_probe_timeout': 30},
     'specdec_server_liveness_probe_timeout', 'is not below specdec_server_liveness_probe_interval'),
    ('memory-wait-timeout-negative', {'specdec_server_memory_wait_timeout': -1}, 'specdec_server_memory_wait_timeout',
     'is out of range'),
    ('liveness-grace-negative', {'specdec_server_liveness_probe_grace': -1}, 'specdec_server_liveness_probe_grace',
     'is out of range'),
    ('liveness-cooldown-too-long', {'specdec_server_liveness_restart_cooldown': 10 ** 7},
     'specdec_server_liveness_restart_cooldown', 'is out of range'),
    ('boot-loop-starts-not-int', {'specdec_server_boot_loop_starts': 'three'}, 'specdec_server_boot_loop_starts',
     'is not a whole number'),
    ('boot-loop-window-zero', {'specdec_server_boot_loop_window': 0}, 'specdec_server_boot_loop_window',
     'is out of range'),
    ('allow-restart-not-bool', {'specdec_server_allow_restart': 'maybe'}, 'specdec_server_allow_restart',
     'is not a boolean'),
    ('defer-restart-not-bool', {'specdec_server_defer_restart': 'later'}, 'specdec_server_defer_restart',
     'is not a boolean'),
    ('health-timeout-negative', {'specdec_server_health_timeout': -1}, 'specdec_server_health_timeout',
     'is out of range'),
    ('health-interval-zero', {'specdec_server_health_interval': 0}, 'specdec_server_health_interval',
     'is out of range'),
    ('smoke-test-not-bool', {'specdec_server_smoke_test': 'quick'}, 'specdec_server_smoke_test', 'is not a boolean'),
    ('smoke-max-tokens-zero', {'specdec_server_smoke_max_tokens': 0}, 'specdec_server_smoke_max_tokens',
     'is out of range'),
    ('tool-smoke-not-a-mode', {'specdec_server_tool_smoke_test': 'yes'}, 'specdec_server_tool_smoke_test',
     'auto, always'),
    ('tool-smoke-max-tokens-zero', {'specdec_server_tool_smoke_max_tokens': 0},
     'specdec_server_tool_smoke_max_tokens', 'is out of range'),
    ('fabric-test-not-a-mode', {'specdec_server_fabric_test': False}, 'specdec_server_fabric_test', 'auto, always'),
    ('fabric-test-binary-empty', {'specdec_server_fabric_test_binary': ''}, 'specdec_server_fabric_test_binary',
     'all_gather_perf'),
    ('fabric-test-timeout-zero', {'specdec_server_fabric_test_timeout': 0}, 'specdec_server_fabric_test_timeout',
     'is out of range'),
    ('fabric-test-warn-fraction-above-one', {'specdec_server_fabric_test_warn_fraction': 1.5},
     'specdec_server_fabric_test_warn_fraction', 'is out of range'),
    ('fabric-test-env-secret', {'specdec_server_fabric_test_env': {'HF_TOKEN': 'x'}},
     'specdec_server_fabric_test_env', 'looks like a secret'),

    # --- specdec_benchmark ---
    ('bench-consent-not-bool', {'specdec_benchmark_allow_restart': 'maybe'}, 'specdec_benchmark_allow_restart',
     'is not a boolean'),
    ('bench-apply-not-bool', {'specdec_benchmark_apply': 'later'}, 'specdec_benchmark_apply', 'is not a boolean'),
    ('bench-gate-not-bool', {'specdec_benchmark_gate': 'strict'}, 'specdec_benchmark_gate', 'is not a boolean'),
    ('bench-plots-not-bool', {'specdec_benchmark_plots': 'png'}, 'specdec_benchmark_plots', 'is not a boolean'),
    ('bench-mode-unknown', {'specdec_benchmark_mode': 'grid'}, 'specdec_benchmark_mode', 'is not one of sweep, tune'),
    ('bench-points-string', {'specdec_benchmark_points': 'all'}, 'specdec_benchmark_points', 'is a string, not a list'),
    ('bench-points-zero-len', {'specdec_benchmark_points': ['none', 40]}, 'specdec_benchmark_points',
     'item 2 of the list: 40 is not a point'),
    ('bench-probes-bad', {'specdec_benchmark_probes': [1, 40]}, 'specdec_benchmark_probes', '40 is not a number of draft tokens'),
    ('bench-concurrency-zero', {'specdec_benchmark_concurrency': [1, 0]}, 'specdec_benchmark_concurrency',
     'item 2 of the list: 0 is not a number of concurrent requests'),
    ('bench-prompt-sets-path', {'specdec_benchmark_prompt_sets': ['../short']}, 'specdec_benchmark_prompt_sets',
     'is not a plain file name'),
    ('bench-prompts-dir-list', {'specdec_benchmark_prompts_dir': ['a']}, 'specdec_benchmark_prompts_dir',
     'is a list, not text'),
    ('bench-requests-zero', {'specdec_benchmark_num_requests': 0}, 'specdec_benchmark_num_requests', 'is out of range'),
    ('bench-max-tokens-text', {'specdec_benchmark_max_tokens': 'many'}, 'specdec_benchmark_max_tokens',
     'is not a whole number'),
    ('bench-warmup-negative', {'specdec_benchmark_warmup_requests': -1}, 'specdec_benchmark_warmup_requests',
     'is out of range'),
    ('bench-repeats-zero', {'specdec_benchmark_repeats': 0}, 'specdec_benchmark_repeats', 'is out of range'),
    ('bench-seed-text', {'specdec_benchmark_seed': 'random'}, 'specdec_benchmark_seed', 'is not a whole number'),
    ('bench-objective-string', {'specdec_benchmark_objective': 'fast'}, 'specdec_benchmark_objective',
     'is a string, not a mapping'),
    ('bench-objective-no-concurrency', {'specdec_benchmark_objective': {'prompt_set': 'short'}},
     'specdec_benchmark_objective', 'has no concurrency'),
    ('bench-objective-bound', {'specdec_benchmark_objective': {'concurrency': 1, 'ttft_p90_max': -2}},
     'specdec_benchmark_objective', 'ttft_p90_max -2 is not seconds'),
    ('bench-restart-zero', {'specdec_benchmark_restart_seconds': 0}, 'specdec_benchmark_restart_seconds',
     'is out of range'),
    ('bench-mem-negative', {'specdec_benchmark_min_mem_available': -1}, 'specdec_benchmark_min_mem_available',
     'is out of range'),
    ('bench-gate-early-negative', {'specdec_benchmark_gate_max_early': -1}, 'specdec_benchmark_gate_max_early',
     'is out of range'),
    ('bench-gate-late-above-one', {'specdec_benchmark_gate_max_late_fraction': 1.5},
     'specdec_benchmark_gate_max_late_fraction', 'is out of range'),
    ('bench-gate-tie-margin-negative', {'specdec_benchmark_gate_tie_margin': -0.1},
     'specdec_benchmark_gate_tie_margin', 'is out of range'),
    ('bench-output-dir-empty', {'specdec_benchmark_output_dir': ' '}, 'specdec_benchmark_output_dir', 'is empty'),

    # --- playbook settings ---
    ('usable-memory-negative', {'preflight_usable_memory_bytes': -1}, 'preflight_usable_memory_bytes',
     '-1 is out of range; set an integer of at least 0 (bytes'),
    ('usable-memory-units', {'preflight_usable_memory_bytes': '119GiB'}, 'preflight_usable_memory_bytes',
     'is not a whole number'),
    ('memory-reserve-negative', {'preflight_memory_reserve_bytes': -4}, 'preflight_memory_reserve_bytes',
     'is out of range'),
    ('disk-reserve-units', {'preflight_disk_reserve_bytes': '10G'}, 'preflight_disk_reserve_bytes',
     'is not a whole number'),
    ('drop-caches-not-bool', {'preflight_drop_caches': 'please'}, 'preflight_drop_caches', 'is not a boolean'),
    ('report-path-empty', {'preflight_report_path': ' '}, 'preflight_report_path', 'is empty; set a file name'),
    ('topology-unknown', {'preflight_topology': 'three_sparks'}, 'preflight_topology',
     'is not one of two_sparks, single_spark'),
    ('remove-models-not-bool', {'teardown_remove_models': 'all'}, 'teardown_remove_models', 'is not a boolean'),
    # --- diagnose.yml and status.yml ---
    ('diagnose-path-list', {'diagnose_bundle_path': ['a']}, 'diagnose_bundle_path', 'is a list, not text'),
    ('diagnose-hosts-list', {'diagnose_hosts': ['x']}, 'diagnose_hosts', 'is a list, not text'),
    ('diagnose-log-lines-zero', {'diagnose_log_lines': 0}, 'diagnose_log_lines', 'is out of range'),
    ('diagnose-secrets-string', {'diagnose_secrets': 'pw'}, 'diagnose_secrets', '(hidden) is a string, not a list'),
    ('status-become-not-bool', {'status_become': 'sometimes'}, 'status_become', 'is not a boolean'),
    ('status-hosts-mapping', {'status_hosts': {'a': 1}}, 'status_hosts', 'is a mapping, not text'),
    ('status-timeout-zero', {'status_http_timeout': 0}, 'status_http_timeout', 'is out of range'),
    ('status-report-path-empty', {'status_report_path': ' '}, 'status_report_path', 'is empty; set a file name'),
    ('status-require-not-bool', {'status_require_serving': 'maybe'}, 'status_require_serving', 'is not a boolean'),
    ('remove-netplan-not-bool', {'teardown_remove_netplan': 'ours'}, 'teardown_remove_netplan', 'is not a boolean'),
    ('remove-state-not-bool', {'teardown_remove_state': 'forever'}, 'teardown_remove_state', 'is not a boolean'),
    ('remove-mesh-not-bool', {'teardown_remove_mesh': 'peers'}, 'teardown_remove_mesh', 'is not a boolean'),
    ('teardown-netplan-file-list', {'teardown_netplan_file': ['a']}, 'teardown_netplan_file', 'is a list, not text'),
    ('confirm-list', {'confirm': ['yes']}, 'confirm', 'is a list, not text'),
    # --- single_spark.yml and benchmark.yml ---
    ('single-spark-host-list', {'single_spark_host': ['spark-1']}, 'single_spark_host', 'is a list, not text'),
    ('single-spark-host-empty', {'single_spark_host': ' '}, 'single_spark_host', 'is empty'),
    # --- fleet.yml ---
    ('fleet-hosts-list', {'fleet_hosts': ['spark-1']}, 'fleet_hosts', 'is a list, not text'),
    ('fleet-deployments-string', {'fleet_deployments': 'pair-a'}, 'fleet_deployments', 'is a string, not a list'),
    ('fleet-parallel-negative', {'fleet_parallel': -1}, 'fleet_parallel', 'is out of range'),
    ('fleet-max-failures-negative', {'fleet_max_failures': -1}, 'fleet_max_failures', 'is out of range'),
    ('fleet-log-dir-empty', {'fleet_log_dir': ' '}, 'fleet_log_dir', 'is empty'),
    ('fleet-report-path-empty', {'fleet_report_path': ''}, 'fleet_report_path', 'is empty'),
]


def assert_well_formed(lines):
    assert lines == sorted(lines), 'not sorted'
    assert len(lines) == len(set(lines)), 'duplicates'
    for line in lines:
        assert len(line.splitlines()) == 1, repr(line)
        assert len(line) < 400, line
        assert line.endswith(('.', '?')), line
        assert ':' in line and ' ' not in line.split(':', 1)[0], line
        for noise in ('Traceback', '<class', 'argument_spec', 'TypeError', 'ValueError', "'type':"):
            assert noise not in line, line
        assert SECRET_TOKEN not in line, line


def test_case_ids_are_unique():
    ids = [case[0] for case in NEGATIVE_CASES]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize('case_id,settings,option,fragment', NEGATIVE_CASES, ids=[c[0] for c in NEGATIVE_CASES])
def test_negative_case(case_id, settings, option, fragment):
    lines = check(settings)
    assert_well_formed(lines)
    mine = [line for line in lines if line.startswith(option + ': ')]
    assert mine, '%s: no message names %s: %s' % (case_id, option, lines)
    assert any(fragment in line for line in mine), '%s: %r not in %s' % (case_id, fragment, mine)
    # One problem, one message.
    assert len(lines) == 1, lines


def test_the_briefs_example_message():
    assert check({'specdec_server_max_draft_len': 0}) == [
        'specdec_server_max_draft_len: 0 is out of range; set an integer from 1 to 32 (the runbook uses 3 to 5).']


def test_one_message_per_problem_and_sorted():
    settings = {
        'specdec_server_port': 0,
        'docker_group_name': '',
        'netplan_qsfp_link_subnets': ['192.168.100.5/24', '192.168.101.7/24'],
        'trtllm_container_ulimits': ['memlock=-1', 'stack:1:0'],
        'specdec_server_max_draft_length': 3,
    }
    lines = check(settings)
    assert_well_formed(lines)
    assert [line.split(':', 1)[0] for line in lines] == [
        'docker_group_name',
        'netplan_qsfp_link_subnets', 'netplan_qsfp_link_subnets',
        'specdec_server_max_draft_length',
        'specdec_server_port',
        'trtllm_container_ulimits', 'trtllm_container_ulimits',
    ]
    assert check(settings) == lines  # deterministic


# ---------------------------------------------------------------------------------------------
# Coercion as ansible.builtin.validate_argument_spec does it, and null
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize('settings', [
    {'specdec_server_max_draft_len': '3'},
    {'specdec_server_max_draft_len': 3.0},
    {'specdec_server_port': '8355'},
    {'specdec_server_port': ' 8355 '},
    {'netplan_qsfp_apply': 'yes'},
    {'netplan_qsfp_apply': 'true'},
    {'netplan_qsfp_apply': 'True'},
    {'netplan_qsfp_apply': 'on'},
    {'netplan_qsfp_apply': 1},
    {'netplan_qsfp_apply': 'no'},
    {'netplan_qsfp_port': 0},
    {'netplan_qsfp_port': '1'},
    {'specdec_server_kv_cache_free_gpu_memory_fraction': '0.9'},
    {'specdec_server_kv_cache_free_gpu_memory_fraction': 1},
    {'netplan_qsfp_host_offset': '10'},
    {'specdec_server_method': None},
    {'specdec_server_max_draft_len': None},
    {'specdec_head_host': None},
    {'specdec_server_target_revision': 'a' * 40},
    {'trtllm_container_hostfile_hosts': ['192.168.100.10', 'spark-2.fabric']},
    {'trtllm_container_env': {'NCCL_DEBUG': 'INFO', 'OMP_NUM_THREADS': 4}},
    {'trtllm_container_ipc_mode': 'container:trtllm-multinode'},
    {'trtllm_container_shm_size': '16g'},
    {'trtllm_container_ulimits': ['memlock:-1:-1', 'nofile:1024:4096']},
    {'trtllm_container_image': 'localhost:5000/trtllm@sha256:' + '0' * 64},
    {'trtllm_container_trtllm_version': '1.3.0rc12'},
    {'trtllm_container_trtllm_version': '1.2.0'},
    {'specdec_server_tiktoken_base_url': 'file:///srv/mirror/encodings'},
    {'specdec_server_hf_hub_requirement': 'huggingface-hub==2.4.0'},
    {'specdec_server_wheel_dir': '/srv/sparkops/wheels', 'specdec_server_controller_cache_dir': ''},
    {'specdec_server_extra_args': ['--log_level', 'info']},
    {'specdec_server_host': '::'},
    {'netplan_qsfp_addresses': ['192.168.100.10/24', '192.168.101.10/24']},
    {'netplan_qsfp_addresses': []},
    {'netplan_qsfp_link_subnets': ['10.10.0.0/30', '10.10.0.4/30']},
    {'ssh_mesh_addresses': ['192.168.100.10', 'fd00::10', '192.168.0.1/24']},
    {'netplan_qsfp_nodes': ['spark-1', 'spark-2']},
    {'ssh_mesh_hosts': ['spark-3', 'spark-4']},
    {'specdec_server_hf_token': ''},
    {'specdec_server_hf_token': SECRET_TOKEN},
    {'preflight_usable_memory_bytes': 0},
    {'preflight_report_path': '/tmp/preflight.json'},
    # auto, true or false; the booleans they were stay accepted.
    {'specdec_server_peer_copy': 'auto'},
    {'specdec_server_peer_copy': True},
    {'specdec_server_peer_copy': 'false'},
    {'trtllm_container_image_peer_copy': False},
    {'trtllm_container_image_peer_copy': 'True'},
], ids=lambda s: '%s=%r' % next(iter(s.items())))
def test_valid_values_are_accepted(settings):
    assert check(settings) == []


def test_null_where_the_default_is_not_null():
    assert check({'docker_group_users': None}) == [
        'docker_group_users: is null (an empty value in YAML); write a YAML list, e.g. ["item"], or delete the '
        'line to use the default [].']


def test_untemplated_values_are_not_checked():
    # The caller templates; a value that still holds Jinja is not judged (no false error).
    assert check({'specdec_server_port': '{{ my_port }}', 'specdec_server_hf_token': "{{ lookup('file', 'x') }}"}) == []


def test_type_follows_the_spec_not_the_table():
    specs = copy.deepcopy(SPECS)
    specs['specdec_server']['specdec_server_port']['type'] = 'str'
    # The bound of the table does not apply to an option whose type changed; no crash, no false error.
    assert _settings.check_settings({'specdec_server_port': 'auto'}, specs) == []


def test_choices_of_a_list_apply_to_each_item():
    specs = {'alpha': {'alpha_modes': {'type': 'list', 'elements': 'str', 'choices': ['a', 'b'], 'default': []}}}
    assert _settings.check_settings({'alpha_modes': ['a', 'b']}, specs) == []
    assert _settings.check_settings({'alpha_modes': ['a', 'c']}, specs) == [
        'alpha_modes: item "c" is not one of a, b; set one of them.']


# ---------------------------------------------------------------------------------------------
# Names: unknown, removed, misspelt prefixes, and names that are not ours
# ---------------------------------------------------------------------------------------------

NAME_CASES = [
    ('unknown-draft-length', 'specdec_server_max_draft_length', 3,
     'specdec_server_max_draft_length: not a setting of sparkops.specdec; did you mean specdec_server_max_draft_len?'),
    ('unknown-apply', 'netplan_qsfp_aply', True, 'netplan_qsfp_aply: not a setting of sparkops.specdec; did you mean '
     'netplan_qsfp_apply?'),
    ('unknown-docker', 'docker_group_user', ['nvidia'], 'did you mean docker_group_users?'),
    ('unknown-mesh', 'ssh_mesh_addrs', [], 'did you mean ssh_mesh_addresses?'),
    ('unknown-container', 'trtllm_container_gpu', True, 'did you mean trtllm_container_gpus?'),
    ('unknown-common', 'specdec_state_directory', '/srv', 'did you mean specdec_state_dir?'),
    ('unknown-preflight', 'preflight_usable_memory', 1, 'did you mean preflight_usable_memory_bytes?'),
    ('unknown-teardown', 'teardown_remove_model', True, 'did you mean teardown_remove_models?'),
    ('unknown-no-match', 'specdec_server_zzzz_qqqq', 1,
     'specdec_server_zzzz_qqqq: not a setting of sparkops.specdec (it would be ignored); remove it, or see '
     'roles/specdec_server/README.md for the settings.'),
    ('near-server', 'specdec_sever_port', 8000, 'specdec_sever_port: not a setting of sparkops.specdec; specdec_sever_ '
     'looks like a misspelling of the prefix specdec_server_; did you mean specdec_server_port?'),
    ('near-container', 'trtlm_container_image', 'x', 'trtlm_container_ looks like a misspelling of the prefix '
     'trtllm_container_; did you mean trtllm_container_image?'),
    ('near-netplan', 'netplan_qfsp_apply', True, 'netplan_qfsp_ looks like a misspelling of the prefix netplan_qsfp_; '
     'did you mean netplan_qsfp_apply?'),
    ('near-mesh', 'sshmesh_user', 'nvidia', 'sshmesh_ looks like a misspelling of the prefix ssh_mesh_; did you mean '
     'ssh_mesh_user?'),
    ('near-docker', 'dockr_group_users', [], 'dockr_group_ looks like a misspelling of the prefix docker_group_; '
     'did you mean docker_group_users?'),
    ('near-common', 'specdc_state_dir', '/srv', 'prefix specdec_; did you mean specdec_state_dir?'),
    ('near-spec-dec', 'spec_dec_server_port', 1, 'prefix specdec_server_; did you mean specdec_server_port?'),
    ('near-preflight', 'prefligt_topology', 'two_sparks', 'prefix preflight_; did you mean preflight_topology?'),
    ('near-teardown', 'tear_down_remove_models', True, 'prefix teardown_; did you mean teardown_remove_models?'),
    ('near-and-misspelt', 'specdec_sever_prot', 8000, 'prefix specdec_server_; did you mean specdec_server_port?'),
    ('near-removed-name', 'trtlm_container_name', 'x', 'prefix trtllm_container_; did you mean specdec_container_name?'),
    ('near-no-match', 'netplan_qfsp_zzzzzzzz', 1, 'prefix netplan_qsfp_; see roles/netplan_qsfp/README.md'),
]


@pytest.mark.parametrize('case_id,name,value,expected', NAME_CASES, ids=[c[0] for c in NAME_CASES])
def test_name_case(case_id, name, value, expected):
    lines = check({name: value})
    assert_well_formed(lines)
    assert len(lines) == 1 and lines[0].startswith(name + ': ') and expected in lines[0], lines


@pytest.mark.parametrize('old,new', sorted(_settings.REMOVED.items()))
def test_removed_name(old, new):
    assert check({old: 'x'}) == [
        '%s: %s was removed: set %s instead (one name for this fact across roles).' % (old, old, new)]


def test_removed_names_are_the_one_name_per_fact_change():
    """Each shared fact of specdec_common replaced exactly two role-prefixed names, none still declared."""
    specs = _settings.load_specs(COLLECTION_ROOT)
    shared = set(specs['specdec_common'])
    declared = {name for options in specs.values() for name in options}
    assert len(_settings.REMOVED) == 14 and not set(_settings.REMOVED) & declared
    # specdec_deployment_id, specdec_engine, specdec_api_key, specdec_report_dir and the layout settings (issue 24)
    # were shared from the start (no old names);
    # specdec_server_hf_token moved here from specdec_server keeping its name.
    assert set(_settings.REMOVED.values()) == shared - {'specdec_deployment_id', 'specdec_engine',
                                                        'specdec_api_key', 'specdec_report_dir',
                                                        'specdec_layout', 'specdec_layout_accept_four_node_ring',
                                                        'specdec_nccl_bootstrap', 'specdec_nccl_management_interface',
                                                        'specdec_server_hf_token'}
    for new in set(_settings.REMOVED.values()):
        olds = sorted(old for old, repl in _settings.REMOVED.items() if repl == new)
        assert len(olds) == 2 and all(old.split('_')[0] in ('trtllm', 'specdec', 'ssh') for old in olds), (new, olds)


def test_removed_name_wins_over_a_spec_that_still_declares_it():
    specs = copy.deepcopy(SPECS)
    specs['trtllm_container']['trtllm_container_name'] = {'type': 'str', 'default': 'trtllm-multinode'}
    assert _settings.check_settings({'trtllm_container_name': 'x'}, specs) == [
        'trtllm_container_name: trtllm_container_name was removed: set specdec_container_name instead '
        '(one name for this fact across roles).']


NOT_OURS = {
    'ansible_host': '10.0.0.21', 'ansible_user': 'nvidia', 'ansible_ssh_common_args': '-o X=y',
    'ansible_python_interpreter': '/usr/bin/python3', 'ansible_become_password': 'pw',
    'spark_rack': 'r1', 'spark_serial': 'x', 'lab_state_dir': '/x', 'lab_netplan_qsfp_x': 1,
    'docker_host': 'unix:///var/run/docker.sock', 'docker_users': ['a'], 'docker_groups': ['docker'],
    'docker_group': 'docker', 'docker_service_state': 'started', 'docker_daemon_options': {},
    'ssh_args': '-C', 'ssh_user': 'nvidia', 'ssh_host': 'x', 'ssh_port': 22, 'ssh_key': '/k', 'ssh_pass': 'x',
    'specdec': 1, 'specdec_server': 1, 'netplan': 1, 'netplan_config_file': '/etc/netplan/x.yaml',
    'group_names': ['spark_nodes'], 'groups': {}, 'inventory_hostname': 'spark-1', 'inventory_dir': '/inv',
    'molecule_yml': {}, 'molecule_scenario_directory': '/m', 'hostvars': {}, 'omit': '__omit', 'playbook_dir': '/p',
    'role_path': '/r', 'confirm': 'yes', 'single_spark_host': 'spark-1', 'http_proxy': 'http://proxy:3128',
    'hf_token': 'x', 'nvidia_driver_version': '580', 'trtllm': 1, 'trtllm_version': '1.3.0rc12', 'mpi_hosts': [],
    'teardown': True, 'preflight': True, 'specs_dir': '/s', 'container_name': 'x',
    '_private': 1, '__netplan_qsfp_addresses': ['x'], '__specdec_server': {},
}


@pytest.mark.parametrize('name', sorted(NOT_OURS))
def test_not_ours_is_never_flagged(name):
    assert check({name: NOT_OURS[name]}) == []


def test_results_are_never_errors():
    published = {
        'netplan_qsfp_fabric': {'interfaces': ['enp1s0f1np1']},
        'specdec_server_endpoint': 'http://10.0.0.21:8355',
        'specdec_server_completion': 'Paris ...',
        'specdec_server_state': {'running': True},
        'trtllm_container_image_info': {'id': 'sha256:x'},
    }
    # tests/unit/test_settings_published.py checks that RESULTS holds every name the collection publishes.
    assert set(published) <= set(_settings.RESULTS)
    assert check({name: 'x' for name in _settings.RESULTS}) == []
    assert check(published) == []
    # The caller's list replaces the default one.
    assert check({'specdec_server_new_fact': 1}, results=['specdec_server_new_fact']) == []
    assert check({'specdec_server_endpoint': 'x'}, results=()) != []


# ---------------------------------------------------------------------------------------------
# Secrets
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize('name,secret', [
    ('specdec_server_hf_token', True),
    ('specdec_server_hftoken', True),
    ('my_api_key', True),
    ('vault_password', True),
    ('ansible_become_pass_secret', True),
    ('aws_secret_access_key', True),
    ('registry_passphrase', True),
    ('ssh_mesh_key_name', False),
    ('specdec_container_host_key_dir', False),
    ('vault_password_file', False),
    ('specdec_server_tiktoken_base_url', False),
    ('specdec_server_tiktoken_files', False),
    ('specdec_server_max_num_tokens', False),
    ('specdec_server_smoke_max_tokens', False),
    ('specdec_server_port', False),
])
def test_looks_secret(name, secret):
    assert _settings.looks_secret(name) is secret


def test_ssh_mesh_key_name_is_shown():
    assert check({'ssh_mesh_key_name': '../evil'})[0].startswith('ssh_mesh_key_name: "../evil" is not')


@pytest.mark.parametrize('name,value', [
    ('specdec_server_hf_token', SECRET_TOKEN + ' '),
    ('specdec_server_hf_token', [SECRET_TOKEN]),
    ('specdec_server_hf_token', {'token': SECRET_TOKEN}),
    ('specdec_server_hf_tokn', SECRET_TOKEN),
    ('specdec_server_hf_token_value', SECRET_TOKEN),
    ('specdec_sever_hf_token', SECRET_TOKEN),
    ('specdec_server_hf_token', True),
])
def test_secret_values_are_never_shown(name, value):
    lines = check({name: value})
    assert lines
    assert_well_formed(lines)
    assert not any(SECRET_TOKEN[:12] in line for line in lines), lines


def test_secret_in_a_secret_named_option_of_a_spec():
    specs = copy.deepcopy(SPECS)
    specs['specdec_server']['specdec_server_registry_password'] = {'type': 'str', 'choices': ['a', 'b'],
                                                                   'default': 'a'}
    lines = _settings.check_settings({'specdec_server_registry_password': SECRET_TOKEN}, specs)
    assert lines == ['specdec_server_registry_password: the value (hidden) is not one of a, b; set one of them.']


# ---------------------------------------------------------------------------------------------
# The management address and the fabric
# ---------------------------------------------------------------------------------------------

CONTEXT_CASES = [
    ('default-subnets-hold-management', {}, {'ansible_host': '192.168.100.7', 'host': 'spark-a'},
     'netplan_qsfp_link_subnets', 'netplan_qsfp_link_subnets: 192.168.100.0/24 contains the management address '
     '192.168.100.7 of spark-a (ansible_host); addressing the fabric there would take the management address off '
     'its network'),
    ('set-subnets-hold-management', {'netplan_qsfp_link_subnets': ['10.0.0.0/16', '10.1.0.0/16']},
     {'ansible_host': '10.0.0.21'}, 'netplan_qsfp_link_subnets', '10.0.0.0/16 contains the management address 10.0.0.21'),
    ('single-subnet-holds-management', {'netplan_qsfp_scheme': 'single_subnet'}, {'ansible_host': '192.168.200.1'},
     'netplan_qsfp_single_subnet', '192.168.200.0/24 contains the management address 192.168.200.1'),
    ('addresses-hold-management', {'netplan_qsfp_addresses': ['10.0.0.50/24', '10.0.1.50/24']},
     {'ansible_host': '10.0.0.21'}, 'netplan_qsfp_addresses', '10.0.0.0/24 contains the management address'),
]


@pytest.mark.parametrize('case_id,settings,context,option,fragment', CONTEXT_CASES, ids=[c[0] for c in CONTEXT_CASES])
def test_management_address_case(case_id, settings, context, option, fragment):
    lines = check(settings, context=context)
    assert_well_formed(lines)
    assert len(lines) == 1 and lines[0].startswith(option + ': ') and fragment in lines[0], lines


def test_molecule_management_overlap_fault_is_caught():
    settings = load_yaml('molecule', 'netplan_faults', 'vars', 'management_overlap.yml')
    lines = check(settings, context={'ansible_host': '192.168.250.11', 'host': 'spark-1'})
    assert len(lines) == 1 and 'contains the management address 192.168.250.11 of spark-1' in lines[0]


@pytest.mark.parametrize('settings,context', [
    ({}, {'ansible_host': '10.0.0.21'}),
    ({}, {'ansible_host': 'spark-a.example.com'}),
    ({}, {'ansible_host': 'fd00::21'}),
    ({}, None),
    # The subnets not in effect do not matter.
    ({'netplan_qsfp_scheme': 'single_subnet', 'netplan_qsfp_link_subnets': ['10.0.0.0/24', '10.0.1.0/24']},
     {'ansible_host': '10.0.0.21'}),
    ({'netplan_qsfp_addresses': ['192.168.100.10/24', '192.168.101.10/24']}, {'ansible_host': '192.168.200.1'}),
    # One Spark: netplan_qsfp does not run.
    ({}, {'ansible_host': '192.168.100.7', 'topology': 'single_spark'}),
])
def test_management_address_elsewhere(settings, context):
    assert check(settings, context=context) == []


def test_a_bad_subnet_is_reported_once():
    lines = check({'netplan_qsfp_link_subnets': ['192.168.100.5/24', '192.168.101.0/24']},
                  context={'ansible_host': '192.168.100.7'})
    assert lines == ['netplan_qsfp_link_subnets: "192.168.100.5/24" has host bits set; did you mean 192.168.100.0/24?']


# ---------------------------------------------------------------------------------------------
# Valid inventories give no errors
# ---------------------------------------------------------------------------------------------

def inventory_hosts(inventory):
    """host -> variables, from a YAML inventory (all.vars, group vars, host vars; no precedence subtleties)."""
    hosts = {}

    def walk(group, inherited):
        merged = dict(inherited, **(group.get('vars') or {}))
        for host, host_vars in (group.get('hosts') or {}).items():
            hosts.setdefault(host, {}).update(dict(merged, **(host_vars or {})))
        for child in (group.get('children') or {}).values():
            walk(child or {}, merged)

    walk(inventory.get('all') or {}, {})
    return hosts


def fixture_inventories():
    folder = os.path.join(COLLECTION_ROOT, 'tests', 'unit', 'fixtures', 'inventories')
    return sorted(name for name in os.listdir(folder) if name.endswith('.yml'))


@pytest.mark.parametrize('name', fixture_inventories())
def test_unit_fixture_inventories_are_valid(name):
    hosts = inventory_hosts(load_yaml('tests', 'unit', 'fixtures', 'inventories', name))
    for host, host_vars in hosts.items():
        assert check(host_vars, context={'ansible_host': host_vars.get('ansible_host'), 'host': host}) == [], host


def test_lab_inventory_is_valid():
    group_vars = load_yaml('inventories', 'lab', 'group_vars', 'spark_nodes.yml')
    hosts = inventory_hosts(load_yaml('inventories', 'lab', 'hosts.yml'))
    assert sorted(hosts) == ['spark-1', 'spark-2']
    for host, host_vars in hosts.items():
        settings = dict(group_vars, **host_vars)
        context = {'ansible_host': settings['ansible_host'], 'host': host}
        assert check(settings, context=context) == [], host
        # As the caller gives them: templated (the token read from the lab's file, stripped).
        settings['specdec_server_hf_token'] = 'hf_labAliceHasGatedAccess0123456789abcdef'
        settings['lab_state_dir'] = '/work/main/.lab'
        assert check(settings, context=context) == [], host


def test_example_inventory_is_valid():
    group_vars = load_yaml('inventories', 'example', 'group_vars', 'all.yml')
    hosts = inventory_hosts(load_yaml('inventories', 'example', 'hosts.yml'))
    assert sorted(hosts) == ['spark-a', 'spark-b']
    for host, host_vars in hosts.items():
        settings = dict(group_vars, **host_vars)
        assert check(settings, context={'ansible_host': settings['ansible_host'], 'host': host}) == [], host


def test_runbook_setups_are_valid():
    base = {'trtllm_container_image': 'nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc12'}
    setups = [
        {'specdec_server_method': 'eagle3', 'specdec_server_target_model': 'openai/gpt-oss-120b',
         'specdec_server_draft_model': 'nvidia/gpt-oss-120b-Eagle3-long-context', 'specdec_server_max_draft_len': 5,
         'specdec_server_tp_size': 1, 'specdec_server_port': 8000, 'specdec_server_host': 'localhost',
         'specdec_server_max_batch_size': 1},
        {'specdec_server_method': 'draft_target', 'specdec_server_target_model': 'nvidia/Llama-3.3-70B-Instruct-FP4',
         'specdec_server_draft_model': 'nvidia/Llama-3.1-8B-Instruct-FP4', 'specdec_server_max_draft_len': 4,
         'specdec_server_kv_cache_free_gpu_memory_fraction': 0.9},
        {'specdec_server_preset': 'qwen3-235b-eagle3-tp2', 'specdec_server_target_model': 'nvidia/Qwen3-235B-A22B-FP4',
         'specdec_server_draft_model': 'nvidia/Qwen3-235B-A22B-Eagle3', 'specdec_server_max_draft_len': 3,
         'specdec_server_tp_size': 2, 'specdec_server_port': 8355, 'specdec_server_host': '0.0.0.0',
         'specdec_server_max_num_tokens': 1024, 'netplan_qsfp_scheme': 'single_subnet'},
    ]
    for setup in setups:
        assert check(dict(base, **setup), context={'ansible_host': '10.0.0.21'}) == []


# ---------------------------------------------------------------------------------------------
# load_specs and helpers
# ---------------------------------------------------------------------------------------------

def test_load_specs_reads_every_role(tmp_path):
    for role, options in (('alpha', {'alpha_x': {'type': 'int'}}), ('specdec_common', {'specdec_y': {'type': 'str'}})):
        meta = tmp_path / 'roles' / role / 'meta'
        meta.mkdir(parents=True)
        (meta / 'argument_specs.yml').write_text(yaml.safe_dump({'argument_specs': {'main': {'options': options}}}))
    (tmp_path / 'roles' / 'empty' / 'meta').mkdir(parents=True)
    (tmp_path / 'roles' / 'empty' / 'meta' / 'argument_specs.yml').write_text('---\n')
    specs = _settings.load_specs(str(tmp_path))
    assert specs == {'alpha': {'alpha_x': {'type': 'int'}}, 'empty': {}, 'specdec_common': {'specdec_y': {'type': 'str'}}}
    assert _settings.check_settings({'alpha_z': 1}, specs) == [
        'alpha_z: not a setting of sparkops.specdec (it would be ignored); remove it, or see roles/alpha/README.md '
        'for the settings.']
    assert _settings.check_settings({'specdec_q': 1}, specs)[0].startswith('specdec_q: not a setting')
    assert _settings.check_settings({'alpha_x': 'three'}, specs) == [
        'alpha_x: "three" is not a whole number; set a whole number, e.g. 8.']


def test_load_specs_of_this_collection():
    specs = _settings.load_specs(COLLECTION_ROOT)
    assert {'docker_group', 'netplan_qsfp', 'ssh_mesh', 'trtllm_container', 'specdec_server'} <= set(specs)
    assert all(isinstance(options, dict) and options for options in specs.values())


@pytest.mark.parametrize('left,right,distance', [
    ('', '', 0), ('abc', '', 3), ('kitten', 'sitting', 3), ('netplan_qfsp', 'netplan_qsfp', 2),
    ('trtlm_container', 'trtllm_container', 1), ('sshmesh', 'ssh_mesh', 1), ('ssh_host', 'ssh_mesh', 3),
])
def test_levenshtein(left, right, distance):
    assert _settings.levenshtein(left, right) == distance
    assert _settings.levenshtein(right, left) == distance


def test_playbook_settings_of_diagnose_and_status():
    assert check({'diagnose_log_lines': 0})[0].startswith('diagnose_log_lines:')
    assert check({'status_http_timeout': 0})[0].startswith('status_http_timeout:')
    assert 'did you mean diagnose_log_lines?' in ' '.join(check({'diagnose_log_line': 5}))
    assert check({'diagnose_log_lines': 50, 'status_http_timeout': 5, 'status_page_url': 'x'}) == []


def test_node_lists_must_hold_the_node_itself():
    """netplan_qsfp_nodes/ssh_mesh_hosts set for a node that is not in them: its index and peers would be wrong."""
    context = {'host': 'spark-3', 'ansible_host': '10.0.0.23', 'topology': 'two_sparks'}
    lines = check({'netplan_qsfp_nodes': ['spark-1', 'spark-2'], 'ssh_mesh_hosts': ['spark-1', 'spark-2']},
                  context=context)
    assert lines == [
        'netplan_qsfp_nodes: spark-1, spark-2 does not list spark-3, a node it runs on; list every node of the '
        'deployment, or set [] for the hosts of the group.',
        'ssh_mesh_hosts: spark-1, spark-2 does not list spark-3, a node it runs on; list every node of the deployment, '
        'or set [] for the hosts of the group.']
    assert check({'netplan_qsfp_nodes': ['spark-3', 'spark-4'], 'ssh_mesh_hosts': []}, context=context) == []
    # One Spark runs neither role.
    assert check({'netplan_qsfp_nodes': ['spark-1']}, context=dict(context, topology='single_spark')) == []


def test_playbook_values_given_directly_are_coerced_and_checked_as_in_an_inventory():
    # fleet_deploy's options: text from -e is converted; null max_failures means no limit.
    assert _settings.check_playbook_values({'fleet_parallel': '2', 'fleet_max_failures': None,
                                            'fleet_deployments': ['pair-a']}) == (
        {'fleet_parallel': 2, 'fleet_max_failures': None, 'fleet_deployments': ['pair-a']}, [])
    bad = {'fleet_parallel': -1, 'fleet_log_dir': '', 'status_http_timeout': 'soon'}
    good, lines = _settings.check_playbook_values(bad)
    assert good == {} and lines == check(bad) and len(lines) == 3
    assert_well_formed(lines)


# Issue 25 item 2: ports that collide with a host service (the node's sshd, the Ansible connection).
@pytest.mark.parametrize('settings,context,lines', [
    ({'specdec_container_ssh_port': 22}, {'host': 'spark-1'},
     ['specdec_container_ssh_port: 22 is the SSH port of spark-1 (its sshd carries the Ansible connection, ansible_port);'
      ' the containers share the host network, so it is taken; choose another port, e.g. 2233.']),
    ({'specdec_server_port': 2222}, {'host': 'spark-2', 'ansible_port': 2222},
     ['specdec_server_port: 2222 is the SSH port of spark-2 (its sshd carries the Ansible connection, ansible_port); '
      'the containers share the host network, so it is taken; choose another port, e.g. 8355.']),
    ({'specdec_server_port': '22', 'specdec_container_ssh_port': 22}, {},
     ['specdec_server_port: 22 is the SSH port (its sshd carries the Ansible connection, ansible_port); the containers '
      'share the host network, so it is taken; choose another port, e.g. 8355.',
      'specdec_container_ssh_port: 22 is the SSH port (its sshd carries the Ansible connection, ansible_port); the '
      'containers share the host network, so it is taken; choose another port, e.g. 2233.']),
])
def test_a_port_that_is_the_nodes_sshd_is_refused(settings, context, lines):
    assert sorted(check(settings, context=context)) == sorted(lines)


@pytest.mark.parametrize('settings,context', [
    ({'specdec_container_ssh_port': 22}, {'ansible_port': 2200}),   # sshd moved: 22 is free
    ({'specdec_server_port': 8355, 'specdec_container_ssh_port': 2233}, {'ansible_port': '22'}),
])
def test_ports_off_the_nodes_sshd_pass(settings, context):
    assert check(settings, context=context) == []


# Issue 25 item 2: an allow-list that admits every client is not counted as a restriction.
@pytest.mark.parametrize('networks,line', [
    (['10.20.0.0/16', '0.0.0.0/0'], 'specdec_server_allowed_networks: 0.0.0.0/0 admits every IPv4 client, so '
     '10.20.0.0/16 restricts nothing; list only the client networks, or only 0.0.0.0/0 to admit every client on '
     'purpose.'),
    (['::/0', '2001:db8::/64', '192.168.1.7/32', 'fd00::/8'], 'specdec_server_allowed_networks: ::/0 admits every IPv6 '
     'client, so 2001:db8::/64, fd00::/8 restrict nothing; list only the client networks, or only ::/0 to admit every '
     'client on purpose.'),
])
def test_an_allow_list_with_everyone_beside_narrower_networks_is_refused(networks, line):
    assert check({'specdec_server_allowed_networks': networks}) == [line]


@pytest.mark.parametrize('networks', [['0.0.0.0/0'], ['0.0.0.0/0', '::/0'], ['0.0.0.0/0', '2001:db8::/64'],
                                      ['10.0.0.0/8', '192.168.1.7/32']])
def test_an_allow_list_of_one_kind_passes(networks):
    assert check({'specdec_server_allowed_networks': networks}) == []


# Issue 25 item 2: a consent with nothing to act on, a timer whose runner is off.
@pytest.mark.parametrize('settings,line', [
    ({'specdec_server_firewall_enable': True}, 'specdec_server_firewall_enable: true, but '
     'specdec_server_allowed_networks is empty, so no firewall of ours is set up and ufw is not turned on; list the '
     'client networks to admit, or remove specdec_server_firewall_enable.'),
    ({'specdec_server_firewall_enable': 'yes', 'specdec_server_allowed_networks': []}, 'specdec_server_firewall_enable: '
     'true, but specdec_server_allowed_networks is empty, so no firewall of ours is set up and ufw is not turned on; '
     'list the client networks to admit, or remove specdec_server_firewall_enable.'),
    ({'specdec_server_hang_timeout': 300, 'specdec_server_autostart': False}, 'specdec_server_hang_timeout: 300 s, but '
     'specdec_server_autostart: false turns off the supervisor that runs the hang watchdog, so no hung server is '
     'recycled; set specdec_server_autostart: true, or remove specdec_server_hang_timeout.'),
    ({'specdec_server_hang_timeout': '900', 'specdec_server_autostart': 'off'}, 'specdec_server_hang_timeout: 900 s, but '
     'specdec_server_autostart: false turns off the supervisor that runs the hang watchdog, so no hung server is '
     'recycled; set specdec_server_autostart: true, or remove specdec_server_hang_timeout.'),
])
def test_a_setting_with_nothing_to_act_on_is_refused(settings, line):
    assert check(settings) == [line]


@pytest.mark.parametrize('settings', [
    {'specdec_server_firewall_enable': True, 'specdec_server_allowed_networks': ['10.0.0.0/8']},
    {'specdec_server_firewall_enable': False},
    {'specdec_server_autostart': False},                                   # the default hang timeout is not given
    {'specdec_server_autostart': False, 'specdec_server_hang_timeout': 0},  # the watchdog off, said twice
    # The roles resolve every option, defaults included: autostart off beside the default hang timeout (600 s) is
    # what specdec_server_autostart: false alone looks like there (molecule/server_faults).
    {'specdec_server_autostart': False, 'specdec_server_hang_timeout': 600},
    {'specdec_server_autostart': 'no', 'specdec_server_hang_timeout': '600', 'specdec_server_firewall_enable': False},
    {'specdec_server_hang_timeout': 15},
])
def test_settings_that_act_pass(settings):
    assert check(settings) == []


# Issue 25 item 2, a timer whose runner is off (audit): the supervisor's own settings (item 4) given while
# specdec_server_autostart: false turns the supervisor off, and the completion probe while the hang watchdog that sends
# it is off. Before, each was accepted and changed nothing.
@pytest.mark.parametrize('settings,lines', [
    ({'specdec_server_autostart': False, 'specdec_server_max_failed_starts': 3},
     ['specdec_server_max_failed_starts: 3, but specdec_server_autostart: false turns off the supervisor, the only '
      'reader of it, so it changes nothing; set specdec_server_autostart: true, or remove '
      'specdec_server_max_failed_starts.']),
    ({'specdec_server_autostart': 'no', 'specdec_server_restart_backoff_initial': '2',
      'specdec_server_restart_backoff_max': 4, 'specdec_server_drop_caches': True},
     ['specdec_server_%s: %s, but specdec_server_autostart: false turns off the supervisor, the only reader of it, so '
      'it changes nothing; set specdec_server_autostart: true, or remove specdec_server_%s.' % (name, value, name)
      for name, value in (('restart_backoff_initial', 2), ('restart_backoff_max', 4), ('drop_caches', 'true'))]),
    ({'specdec_server_autostart': False, 'specdec_server_min_available_memory': 1073741824,
      'specdec_server_completion_probe_interval': 120},
     ['specdec_server_%s: %s, but specdec_server_autostart: false turns off the supervisor, the only reader of it, so '
      'it changes nothing; set specdec_server_autostart: true, or remove specdec_server_%s.' % (name, value, name)
      for name, value in (('min_available_memory', 1073741824), ('completion_probe_interval', 120))]),
    ({'specdec_server_hang_timeout': 0, 'specdec_server_completion_probe_interval': 90},
     ['specdec_server_completion_probe_interval: 90 s, but specdec_server_hang_timeout: 0 turns off the hang watchdog '
      'that sends the completion probe, so none is sent; set specdec_server_hang_timeout above 0, or remove '
      'specdec_server_completion_probe_interval.']),
    ({'specdec_server_hang_timeout': '0', 'specdec_server_completion_probe_interval': '600'},
     ['specdec_server_completion_probe_interval: 600 s, but specdec_server_hang_timeout: 0 turns off the hang watchdog '
      'that sends the completion probe, so none is sent; set specdec_server_hang_timeout above 0, or remove '
      'specdec_server_completion_probe_interval.']),
])
def test_a_supervisor_setting_whose_supervisor_or_watchdog_is_off_is_refused(settings, lines):
    got = check(settings)
    assert sorted(got) == sorted(lines)
    assert_well_formed(got)


@pytest.mark.parametrize('settings', [
    # The roles resolve every option: autostart off beside every supervisor default is what autostart: false alone
    # looks like there (molecule/server_faults).
    {'specdec_server_autostart': False, 'specdec_server_max_failed_starts': 5,
     'specdec_server_restart_backoff_initial': 5, 'specdec_server_restart_backoff_max': 300,
     'specdec_server_min_available_memory': 8589934592, 'specdec_server_drop_caches': False,
     'specdec_server_completion_probe_interval': 300},
    {'specdec_server_max_failed_starts': 3, 'specdec_server_restart_backoff_initial': 2,
     'specdec_server_restart_backoff_max': 4, 'specdec_server_drop_caches': True},   # molecule/single_node's cap test
    {'specdec_server_hang_timeout': 0, 'specdec_server_max_failed_starts': 2},      # the cap works without a watchdog
    {'specdec_server_hang_timeout': 15, 'specdec_server_completion_probe_interval': 60},
])
def test_supervisor_settings_that_act_pass(settings):
    assert check(settings) == []
