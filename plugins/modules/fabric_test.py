#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: fabric_test
short_description: The fabric test before serving (nccl-tests all_gather_perf over mpirun, one rank per Spark)
version_added: 0.3.0
description:
  - Used by the C(specdec_server) role on the head of a deployment across Sparks, before the server starts. It runs
    nccl-tests' C(all_gather_perf -b 16G -e 16G -f 2), the test NVIDIA's multi-Spark runbooks end with, from a binary
    already present (O(binary)), one rank per node at the OpenMPI hostfile's addresses. It never builds NCCL or
    nccl-tests.
  - O(run_from=container) (TensorRT-LLM) - with the engine image's C(mpirun) in the head's engine container
    (C(docker exec)), with the OpenMPI hostfile, the NCCL/UCX/OpenMPI environment and the container SSH mesh the
    server's launch uses.
  - O(run_from=host) (vLLM, whose containers run no sshd) - NVIDIA's NCCL runbook as written - the host's C(mpirun
    -H ip1:1,ip2:1) over the host SSH mesh (the C(ssh_mesh) role), run as the cluster user, with the C(NCCL_)
    variables of the engine container (O(container_env)) and UCX's and OpenMPI's interface set to
    C(NCCL_SOCKET_IFNAME)'s, as the runbook exports them. The binary is O(binary) in the C(PATH), else the runbooks'
    builds C(~/nccl-tests/build/all_gather_perf) and C(~/nccl-tests_spark_cluster/build/all_gather_perf); without an
    C(LD_LIBRARY_PATH) in O(env), the runbook's (the NCCL build beside it, C(/usr/local/cuda/lib64),
    C(/usr/lib/aarch64-linux-gnu/openmpi/lib), those that exist). No C(mpirun) on the head is a C(missing_tool)
    warning saying how to install OpenMPI.
  - When (O(mode) C(auto)) before the first start (no baseline in O(state)) and after a layout change (the layout,
    the nodes or the hostfile addresses differ from the baseline's), never while a server of the deployment runs
    (O(server_running); in the container the script checks again under the server's lock, which it holds during the
    test so that the supervisor does not start the server meanwhile), as 16 GB buffers would compete with the loaded
    model for the unified memory. C(always) runs it before every start, C(never) never.
  - Verdicts (see docs/layouts.md) - C(pass); C(warn) (below O(warn_fraction) of the baseline on the same layout,
    a warning); C(missing_tool) (no such binary in the container, a warning that says how to install it; the start
    goes on); C(fail) (below the runbook's figure for the layout, wrong values, a missing rank, no
    C(# Avg bus bandwidth) line), C(hang) (no end within O(timeout) s) and C(missing_library) (C(libnccl.so.2) not
    found) fail with one line naming the nodes and the figure, before anything starts.
  - It changes nothing on the node; the role keeps the returned RV(record) (the baseline) in the deployment state
    file once the server serves.
author:
  - sparkops maintainers (@sparkops)
options:
  run_from:
    description:
      - Where C(mpirun) starts - C(container), the head's engine container (TensorRT-LLM); C(host), the head host as
        the user the module runs as, the cluster user of the host SSH mesh (vLLM).
    type: str
    choices: [container, host]
    default: container
  container:
    description: The engine container on the head (C(specdec_container_name)); O(run_from=container) only.
    type: str
    default: trtllm-multinode
  container_env:
    description:
      - The engine container's environment (C(trtllm_container_spec.env)) - O(run_from=host) takes its C(NCCL_) and
        C(UCX_) variables, the ones the server's NCCL runs with.
    type: dict
    default: {}
  state_dir:
    description:
      - C(specdec_state_dir), mounted at the same path in the container; its C(openmpi-hostfile) gives the ranks'
        addresses, its C(server.sh) whether a server runs.
    type: path
    required: true
  mode:
    description: C(specdec_server_fabric_test).
    type: str
    choices: [auto, always, never]
    default: auto
  binary:
    description:
      - C(specdec_server_fabric_test_binary), the C(all_gather_perf) to run, a path or a name looked up in the
        C(PATH) - in the engine container (O(run_from=container)) or on the host (O(run_from=host), then also in the
        runbooks' build directories). Every node needs it at the same path.
    type: str
    default: all_gather_perf
  timeout:
    description: C(specdec_server_fabric_test_timeout), seconds the test may take before it counts as a hang.
    type: int
    default: 300
  warn_fraction:
    description: C(specdec_server_fabric_test_warn_fraction); below this fraction of the baseline is a warning.
    type: float
    default: 0.8
  env:
    description:
      - C(specdec_server_fabric_test_env), extra variables for the test (e.g. C(NCCL_DEBUG=INFO), or the host's
        C(LD_LIBRARY_PATH)), given to mpirun and forwarded to every rank with C(mpirun -x).
    type: dict
    default: {}
  layout:
    description: The deployment's layout (C(direct), C(ring), C(switch)); the runbook's figure depends on it.
    type: str
    required: true
  nodes:
    description: The deployment's nodes (inventory names, head first), one rank each; the messages name them.
    type: list
    elements: str
    required: true
  state:
    description: The deployment state file as the head's probe read it (its C(fabric) key is the baseline).
    type: dict
    default: {}
  server_running:
    description: Whether the probe found a server of the deployment running.
    type: bool
    default: false
extends_documentation_fragment:
  - sparkops.specdec.attributes
  - sparkops.specdec.attributes.platform
attributes:
  check_mode:
    support: full
    details: Decides, runs nothing and reports whether a run would have run the test.
  diff_mode:
    support: none
    details: It changes nothing on the node.
  idempotent:
    support: full
    details: Changes nothing; the test runs again only as O(mode) says.
seealso:
  - module: sparkops.specdec.container_sshd_wait
  - module: sparkops.specdec.server_lifecycle
"""

EXAMPLES = r"""
- name: The fabric test before the first start (a baseline in the state file afterwards)
  sparkops.specdec.fabric_test:
    container: trtllm-multinode
    state_dir: /var/lib/sparkops/specdec
    layout: direct
    nodes: [spark-1, spark-2]
    state: "{{ probe.state }}"
    server_running: "{{ probe.running }}"
  register: fabric

- name: The fabric test of a vLLM pair from the head host (the host's mpirun over the host SSH mesh)
  sparkops.specdec.fabric_test:
    run_from: host
    container_env: "{{ trtllm_container_spec.env }}"
    state_dir: /var/lib/sparkops/specdec
    layout: direct
    nodes: [spark-1, spark-2]
    state: "{{ probe.state }}"
    server_running: "{{ probe.running }}"
  become: true
  become_user: "{{ ssh_mesh_identity.user }}"
"""

RETURN = r"""
fabric_test:
  description:
    - The decision and the verdict. C(ran), C(reason) (why it ran or not), C(status) (C(pass), C(warn), C(fail),
      C(hang), C(missing_library), C(missing_tool); null when it did not run), C(busbw) and C(threshold) (GB/s),
      C(baseline) (GB/s, the figure it was compared with), C(message) (the verdict's line), C(nodes), C(hosts),
      C(seconds), C(rc), C(stdout) and C(stderr) (their last 4000 characters).
  returned: always
  type: dict
  sample: {"ran": true, "reason": "no baseline in the state file (first start)", "status": "pass", "busbw": 22.9611,
           "threshold": 21.875, "baseline": null, "message": null, "nodes": ["spark-1", "spark-2"],
           "hosts": ["192.168.100.10", "192.168.100.11"], "seconds": 41.2, "rc": 0}
record:
  description:
    - The state file's C(fabric) to keep (the previous one when this run measured nothing new), with C(busbw) (GB/s),
      C(measured_at), C(layout), C(nodes), C(hosts), C(threshold), C(binary), C(args), C(last) (C(busbw), C(status),
      C(measured_at) of the latest run). Null when never measured.
  returned: always
  type: dict
"""

import datetime
import os
import subprocess
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkops.specdec.plugins.module_utils import _fabric_test

# Seconds past O(timeout) before the module stops waiting for docker exec itself (timeout(1) in the container ends
# mpirun first; this bounds a docker exec that hangs on its own).
GRACE = 30


def _tail(text, size=4000):
    return text[-size:] if text else ""


def run(argv, limit, env=None):
    """(rc, stdout, stderr, timed_out) of argv, waiting at most ``limit`` s; ``env`` is added to the module's."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=limit, check=False,
                              env=dict(os.environ, **env) if env else None)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        return None, out, err, True
    return proc.returncode, proc.stdout, proc.stderr, False


def run_module():
    module = AnsibleModule(
        argument_spec=dict(
            run_from=dict(type="str", choices=list(_fabric_test.RUN_FROM), default="container"),
            container=dict(type="str", default="trtllm-multinode"),
            container_env=dict(type="dict", default={}),
            state_dir=dict(type="path", required=True),
            mode=dict(type="str", choices=list(_fabric_test.MODES), default="auto"),
            binary=dict(type="str", default="all_gather_perf"),
            timeout=dict(type="int", default=300),
            warn_fraction=dict(type="float", default=0.8),
            env=dict(type="dict", default={}),
            layout=dict(type="str", required=True),
            nodes=dict(type="list", elements="str", required=True),
            state=dict(type="dict", default={}),
            server_running=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    p = module.params
    previous = (p["state"] or {}).get("fabric")
    try:
        with open(os.path.join(p["state_dir"], _fabric_test.HOSTFILE)) as handle:
            hosts = _fabric_test.hostfile_hosts(handle.read())
    except OSError as exc:
        hosts = []
        if p["mode"] != "never" and not p["server_running"] and not module.check_mode:
            module.fail_json(msg="The fabric test needs the OpenMPI hostfile %s (written by the trtllm_container role): "
                                 "%s; run playbooks/two_sparks.yml, which writes it before the server starts." % (
                                     os.path.join(p["state_dir"], _fabric_test.HOSTFILE), exc.strerror or exc),
                             fabric_test={}, record=previous)
    current = _fabric_test.key(p["layout"], p["nodes"], hosts)
    decision = _fabric_test.decide(p["mode"], previous, current, p["server_running"])
    out = {"ran": False, "reason": decision["reason"], "status": None, "busbw": None, "threshold": None,
           "baseline": decision["baseline"], "message": None, "nodes": p["nodes"], "hosts": hosts, "seconds": None,
           "rc": None, "stdout": "", "stderr": ""}
    if not decision["run"] or module.check_mode:
        if decision["run"]:
            out["reason"] = "check mode: would run (%s)" % decision["reason"]
        module.exit_json(changed=False, fabric_test=out, record=previous)
    if p["run_from"] == "host":
        argv = _fabric_test.host_command(p["binary"], hosts, p["timeout"])
        env = _fabric_test.host_env(p["container_env"], p["env"])
    else:
        argv = _fabric_test.command(module.get_bin_path("docker", required=True), p["container"], p["binary"],
                                    len(p["nodes"]), p["timeout"], p["state_dir"], p["env"], lock_dir=_fabric_test.LOCK_DIR)
        env = None
    start = time.monotonic()
    rc, stdout, stderr, timed_out = run(argv, p["timeout"] + GRACE, env)
    result = _fabric_test.result_of(rc, stdout, stderr, p["timeout"], timed_out)
    out.update(seconds=round(time.monotonic() - start, 1), rc=rc, stdout=_tail(stdout), stderr=_tail(stderr))
    if _fabric_test.server_runs(result):
        out["reason"] = "not run: %s" % stderr.strip().split(_fabric_test.MARK, 1)[-1].strip()
        module.exit_json(changed=False, fabric_test=out, record=previous)
    verdict = _fabric_test.classify(result, p["layout"], p["nodes"], decision["baseline"], p["warn_fraction"],
                                    run_from=p["run_from"])
    out.update(ran=True, status=verdict["status"], busbw=verdict["busbw"], threshold=verdict["threshold"],
               message=verdict["message"])
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    kept = _fabric_test.record(previous, current, verdict, now, p["binary"])
    if verdict["status"] in ("fail", "hang", "missing_library"):
        module.fail_json(msg=verdict["message"], fabric_test=out, record=kept)
    if verdict["message"]:
        module.warn(verdict["message"])
    module.exit_json(changed=False, fabric_test=out, record=kept)


def main():
    run_module()


if __name__ == "__main__":
    main()
