#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: container_sshd_wait
short_description: Wait on the head until the engine container sshd of every node answers, before mpirun
version_added: 0.2.0
description:
  - Used by the C(trtllm_container) role on the head of a multi-node deployment, before its C(mpirun) check
    (O(mpirun_hosts), in the same call). From the node it runs on (the head; its engine container uses the host network, so mpirun's ssh leaves from here
    too), it probes every address of O(targets) on O(port) and waits until one round of probes has every one of them
    answering with an SSH banner (C(SSH-)), at most O(timeout) seconds.
  - Each node's own wait (M(sparkops.specdec.engine_container)) proves only that its sshd answered on that node,
    once. A container that Docker's restart policy started (after a node restart) can run while its sshd does not
    listen yet (the entrypoint waits for every fabric address first) or any more (a restart loop); mpirun would then
    fail with C(Connection refused). A round counts only when every target answers in it.
  - On timeout it fails with one line naming each node that did not answer, its address and port, the last reason
    (connection refused, timed out, no SSH banner) and what to check on that node.
  - With O(mpirun_hosts), once every sshd answered it runs C(mpirun -np N hostname) in the head's engine container
    (C(docker exec), N = the hostfile's hosts) and fails with one line unless it exits 0 having printed N distinct host
    names (the role's MPI check, in the same call).
  - Read-only; it changes nothing and behaves the same in check mode.
author:
  - sparkops maintainers (@sparkops)
options:
  targets:
    description:
      - The addresses to probe, one per node, as the filter C(sparkops.specdec.trtllm_container_sshd_targets) makes
        them from the OpenMPI hostfile addresses (C(trtllm_container_hostfile_hosts)).
      - Each item has C(node) (the inventory name, for the messages) and C(address) (an IP address or host name).
    type: list
    elements: dict
    required: true
  port:
    description: The container sshd port (C(specdec_container_ssh_port)).
    type: int
    required: true
  timeout:
    description: Seconds to wait at most for a round where every target answers (C(trtllm_container_start_timeout)).
    type: int
    default: 300
  interval:
    description: Seconds between two rounds of probes.
    type: float
    default: 1.0
  probe_timeout:
    description: Seconds one probe waits for the connection and the SSH banner.
    type: float
    default: 3.0
  container:
    description: The engine container's name (C(specdec_container_name)), for the message.
    type: str
    default: trtllm-multinode
  head:
    description: The node this runs on, for the message (the role passes C(inventory_hostname)).
    type: str
    default: the head
  mpirun_hosts:
    description:
      - The OpenMPI hostfile's hosts (C(trtllm_container_hostfile_hosts)). When set, after the wait, C(docker exec
        O(container) mpirun -np N hostname) runs with N their number, and the module fails unless it exits 0 having
        printed N distinct host names (every node reached over the container sshd).
      - Empty (the default) runs no mpirun.
    type: list
    elements: str
    default: []
extends_documentation_fragment:
  - sparkops.specdec.attributes
  - sparkops.specdec.attributes.platform
attributes:
  check_mode:
    support: full
    details: Probes in check mode too (it changes nothing); the role skips it in check mode, as it skips mpirun.
  diff_mode:
    support: none
    details: It changes nothing, so there is no difference to show.
  idempotent:
    support: full
    details: Changes nothing.
seealso:
  - module: sparkops.specdec.engine_container
"""

EXAMPLES = r"""
- name: Wait until every node's container sshd answers from the head
  sparkops.specdec.container_sshd_wait:
    # Each member's published trtllm_container_spec (null for a member that has none), by member.
    targets: >-
      {{ dict(ansible_play_hosts_all | zip(ansible_play_hosts_all | map('extract', hostvars)
         | map(attribute='trtllm_container_spec', default=none)))
         | sparkops.specdec.trtllm_container_sshd_targets(trtllm_container_hostfile_hosts) }}
    port: 2233
    timeout: 300
    container: trtllm-multinode
    head: "{{ inventory_hostname }}"
    # Then mpirun -np 2 hostname in the container: two distinct host names, or one line of what failed.
    mpirun_hosts: "{{ trtllm_container_hostfile_hosts }}"
"""

RETURN = r"""
targets:
  description: The targets probed, each with C(node), C(address), C(port) and C(answered) (in the last round).
  returned: always
  type: list
  elements: dict
  sample: [{"node": "spark-1", "address": "192.168.100.10", "port": 2233, "answered": true}]
waited:
  description: Seconds from the first probe to the round where every target answered (or to the timeout).
  returned: always
  type: float
rounds:
  description: How many rounds of probes ran.
  returned: always
  type: int
missing:
  description: One C(node address:port (reason)) entry per target that did not answer in the last round; empty on success.
  returned: always
  type: list
  elements: str
mpirun:
  description: The C(mpirun -np N hostname) run in the container (C(rc), C(stdout), C(stderr)).
  returned: when O(mpirun_hosts) is set and every sshd answered
  type: dict
  sample: {"rc": 0, "stdout": "spark-1\nspark-2", "stderr": ""}
"""

import errno
import socket
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkops.specdec.plugins.module_utils import _container


def probe(address, port, timeout):
    """'' when an SSH server answers at address:port within timeout s (its banner), else the reason it did not."""
    try:
        with socket.create_connection((address, int(port)), timeout=timeout) as sock:
            sock.settimeout(timeout)
            data = sock.recv(len(_container.SSH_BANNER))
    except socket.timeout:
        return "timed out"
    except ConnectionRefusedError:
        return "connection refused"
    except OSError as exc:
        if exc.errno == errno.ECONNRESET:
            return "connection reset"
        return " ".join(str(exc.strerror or exc).split()) or "connection failed"
    if _container.banner_answer(data):
        return ""
    return "no SSH banner (%s)" % ("closed at once" if not data else "another service answers")


def wait(targets, port, timeout, interval, probe_timeout, clock=time.monotonic, sleep=time.sleep, check=probe):
    """Probe rounds until one has every target answering or timeout s passed: (missing, rounds, waited)."""
    start = clock()
    deadline = start + max(0, timeout)
    rounds = 0
    while True:
        rounds += 1
        answers = {}
        for target in targets:
            left = deadline - clock()
            answers[target["address"]] = check(target["address"], port, max(0.1, min(probe_timeout, left)))
        missing = _container.sshd_round(targets, answers)
        now = clock()
        if not missing or now >= deadline:
            return missing, rounds, round(now - start, 1)
        sleep(max(0.0, min(interval, deadline - now)))


def run_module():
    module = AnsibleModule(
        argument_spec=dict(
            targets=dict(type="list", elements="dict", required=True),
            port=dict(type="int", required=True),
            timeout=dict(type="int", default=300),
            interval=dict(type="float", default=1.0),
            probe_timeout=dict(type="float", default=3.0),
            container=dict(type="str", default="trtllm-multinode"),
            head=dict(type="str", default="the head"),
            mpirun_hosts=dict(type="list", elements="str", default=[]),
        ),
        supports_check_mode=True,
    )
    p = module.params
    targets = []
    for item in p["targets"]:
        if not item.get("address") or not item.get("node"):
            module.fail_json(msg="container_sshd_wait: every target needs node and address (got %s); make them with "
                                 "the filter sparkops.specdec.trtllm_container_sshd_targets." % item)
        targets.append({"node": str(item["node"]), "address": str(item["address"]), "port": p["port"]})
    missing, rounds, waited = wait(targets, p["port"], p["timeout"], p["interval"], p["probe_timeout"])
    absent = set(t["address"] for t, _reason in missing)
    result = dict(
        changed=False, rounds=rounds, waited=waited,
        targets=[dict(t, answered=t["address"] not in absent) for t in targets],
        missing=["%s %s:%s (%s)" % (t["node"], t["address"], t["port"], reason) for t, reason in missing],
    )
    if missing:
        module.fail_json(msg=_container.sshd_wait_failure(missing, p["head"], p["container"], p["timeout"]), **result)
    if p["mpirun_hosts"]:
        argv = [module.get_bin_path("docker", required=True), "exec", p["container"],
                "mpirun", "-np", str(len(p["mpirun_hosts"])), "hostname"]
        rc, out, err = module.run_command(argv)
        result["mpirun"] = dict(rc=rc, stdout=out.strip(), stderr=err.strip())
        problem = _container.mpi_hostname_problem(rc, out, err, p["mpirun_hosts"], p["container"], p["head"], p["port"])
        if problem:
            module.fail_json(msg=problem, **result)
    module.exit_json(**result)


def main():
    run_module()


if __name__ == "__main__":
    main()
