#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: preflight_report
short_description: Judge the tier-2 preflight checks of every node and write the JSON report (controller-side)
version_added: 0.2.0
description:
  - An action plugin, run on the controller with C(run_once); it contacts no host. C(playbooks/preflight.yml) gathers
    raw facts on every node (M(sparkops.specdec.preflight_info), M(sparkops.specdec.nccl_interface_info),
    M(sparkops.specdec.hf_download) in check mode) and this action decides every check, node by node, and compares
    the nodes.
  - "Checks (in report order) are C(docker_nosudo), C(gpu_runtime), C(gpu_run), C(ports_free), C(endpoint_exposure), C(clock_sync),
    C(hf_access), C(hub_reach), C(same_user), C(same_port), C(link_speed), C(fabric_ips), C(ssh_nodes),
    C(ssh_containers), C(nccl_env), C(same_image), C(disk_space), C(memory_budget) and C(mem_available); C(same_port),
    C(link_speed), C(fabric_ips), C(ssh_nodes), C(ssh_containers) and C(nccl_env) only with the two_sparks topology."
  - "C(ssh_nodes) (deploy user to every peer fabric address) and C(ssh_containers) (container to the peer container's
    sshd on O(ssh_port)) fail naming the address and the kind: C(refused) (no sshd there: not running, other port or
    other listen addresses), C(publickey) (key not authorised), C(host_key) (host key not pinned or changed),
    C(timeout), C(no_route), C(dns), C(closed), C(no_client), C(other); the fix depends on the kind. They skip when
    no peer address is known, or (containers) when the container is not running or Docker is not usable."
  - "C(endpoint_exposure) (on the head; skips on the worker): warns when the plan binds the server to every interface
    (C(0.0.0.0), C(::)) without C(specdec_api_key), i.e. the endpoint is open to every network the node is on; a
    host firewall of the user's own is not looked at. Passes for C(loopback), one address, every interface with an API
    key, or when C(specdec_server_allowed_networks) has the role's ufw admit only those client networks."
  - "C(hub_reach): the node's own request to the Hub or mirror (C(specdec_server_hf_endpoint), else the node's
    E(HF_ENDPOINT), else the public Hub). Fails on DNS failure, connection refused, no route, timeout, a closed
    connection, TLS errors (certificate not yet valid: the clock; expired; untrusted issuer; name mismatch), HTTP 407
    and 5xx; warns on HTTP 404 and 429; passes on 2xx/3xx and on 401/403 (no token is sent from the node: access is
    C(hf_access)). Skipped when C(specdec_server_download) is false on the node or the node sets E(HF_HUB_OFFLINE)."
  - "C(gpu_run): C(docker run --rm --gpus all IMAGE nvidia-smi -L) on nodes with a GPU and the image present. Fails
    naming the kind: C(toolkit) (could not select device driver, unknown runtime nvidia), C(driver), C(mismatch)
    (driver/library version mismatch), C(no_device), C(no_smi), C(docker), C(timeout), C(no_gpu_listed), C(other).
    Skipped with the reason when the node has no GPU, C(trtllm_container_gpus) is false or the image is not there."
  - Each result is C(id), C(node), C(status) (V(pass), V(warn), V(fail) or V(skip)), C(message) and C(fix). A node
    that was not reached (no facts) fails every check, saying so.
  - Writes the results as a JSON list to O(report_path), readable by its owner only (mode 0600), also in check mode
    (the report is output on the controller, not a change to a node).
  - Never fails because a check failed; the playbook asserts RV(passed) with RV(msg).
author:
  - sparkops maintainers (@sparkops)
options:
  plan:
    description:
      - The registered result of M(sparkops.specdec.specdec_plan) (C(preflight_plan)). Uses C(plan.models),
        C(plan.port), C(plan.tp_size), C(deployment.image) and C(deployment.topology).
    type: dict
    required: true
  probes:
    description:
      - Inventory name -> the node's registered M(sparkops.specdec.preflight_info) loop result (one item per part,
        C(user) and C(root)), whose C(facts) are read. An older shell probe whose stdout has one line per command,
        C(NAME<TAB>RC<TAB>base64 stdout<TAB>base64 stderr), is read too.
      - "Facts read, by name: C(docker_ps) (docker ps), C(runtimes) (docker info), C(image) (docker image inspect),
        C(env) (docker container inspect), C(user) (id -un), C(clock) (timedatectl), C(meminfo), C(hostfile),
        C(disk_free), C(cache) (du of the HF cache), C(ssh_nodes), C(ssh_containers), C(hub), C(gpu) in the user
        part; C(ours) (docker top of the container) and C(listen) (ss -Hltnp) in the root part."
    type: dict
    default: {}
  fabric:
    description: Inventory name -> the node's registered M(sparkops.specdec.nccl_interface_info) result.
    type: dict
    default: {}
  hf_results:
    description: The loop results of M(sparkops.specdec.hf_download) in check mode, one per model of the plan, in order.
    type: list
    elements: dict
    default: []
  container:
    description: Name of the engine container (C(specdec_container_name)).
    type: str
  ssh_port:
    description: The container sshd port (C(specdec_container_ssh_port)), checked with the server port.
    type: int
  hf_cache_dir:
    description: The HF cache directory (C(specdec_hf_cache_dir)); empty means C(~/.cache/huggingface).
    type: str
  host_key_dir:
    description:
      - C(specdec_container_host_key_dir) (default C(/etc/sparkops/trtllm-ssh)), named in the fixes of
        C(ssh_containers).
    type: str
  usable_memory_bytes:
    description: Unified memory usable per node (C(preflight_usable_memory_bytes)); default 119 GiB.
    type: int
  memory_reserve_bytes:
    description: Memory needed beyond the weights (C(preflight_memory_reserve_bytes)); default 4 GiB.
    type: int
  disk_reserve_bytes:
    description: Disk to keep free beyond the models still to download (C(preflight_disk_reserve_bytes)); default 10 GiB.
    type: int
  report_path:
    description:
      - Where to write the JSON report on the controller (C(preflight_report_path)); relative paths are in
        O(report_dir). Default C(preflight-report.json) in O(report_dir).
    type: path
  reach:
    description:
      - Node -> its registered reach result (C(ansible.builtin.ping) with C(ignore_unreachable)). A node whose result
        says C(unreachable) is one row of the report (id C(reachable), status C(fail), the connection's message) and
        none of its checks is judged; the report is written all the same. A node without facts for another reason
        (it left the play) is one such row too.
    type: dict
    default: {}
extends_documentation_fragment:
  - sparkops.specdec.attributes
  - sparkops.specdec.attributes.action
  - sparkops.specdec.reports
attributes:
  check_mode:
    support: full
    details: Decides the same in check mode, and writes the report (controller output).
  diff_mode:
    support: none
    details: Changes nothing on any node, so there is nothing to show.
  idempotent:
    support: full
    details: Never reports a change (the report is controller output).
notes:
  - The per-node C(trtllm_container_gpus) and C(specdec_server_download) settings are read from each node's variables
    (default V(true), the roles').
seealso:
  - module: sparkops.specdec.specdec_plan
  - module: sparkops.specdec.preflight_info
  - module: sparkops.specdec.nccl_interface_info
"""

EXAMPLES = r"""
- name: Judge every check on every node and write the JSON report
  sparkops.specdec.preflight_report:
    plan: "{{ preflight_plan }}"
    probes: "{{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars, '__pf_probe'))) }}"
    fabric: "{{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars, '__pf_fabric'))) }}"
    hf_results: "{{ __pf_hf.results }}"
    container: "{{ specdec_container_name }}"
    ssh_port: "{{ specdec_container_ssh_port }}"
    hf_cache_dir: "{{ specdec_hf_cache_dir }}"
    host_key_dir: "{{ specdec_container_host_key_dir }}"
    report_path: /tmp/preflight.json
  run_once: true
  register: preflight

- name: Fail when a check failed
  ansible.builtin.assert:
    that: preflight.passed
    fail_msg: "{{ preflight.msg }}"
    success_msg: "{{ preflight.msg }}"
  run_once: true
"""

RETURN = r"""
checks:
  description: One result per check and node, node by node in play order, checks in report order.
  returned: always
  type: list
  elements: dict
  contains:
    id: {description: 'The check, e.g. ports_free.', type: str}
    node: {description: 'Inventory name of the node.', type: str}
    status: {description: 'pass, warn, fail or skip.', type: str}
    message: {description: 'What was found (for a port taken by another process, the port and the process).', type: str}
    fix: {description: 'How to fix it.', type: str}
  sample:
    - {id: ports_free, node: spark-1, status: pass, message: ports 8355 and 2233 are free or ours,
       fix: "Stop that process, or set specdec_server_port / specdec_container_ssh_port to free ports."}
failed_checks:
  description: The results with status fail.
  returned: success
  type: list
  elements: dict
summary:
  description: One line per result, C(STATUS | id | node | message).
  returned: success
  type: list
  elements: str
passed:
  description: No check failed.
  returned: success
  type: bool
msg:
  description:
    - The verdict, either the pass line with the number of checks or every failed check as C(id | node | message | fix),
      joined by C( || ).
  returned: always
  type: str
report_path:
  description: Absolute path of the JSON report written.
  returned: success
  type: str
  sample: /home/me/sparkops/preflight-report.json
"""
