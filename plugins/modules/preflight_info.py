#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: preflight_info
short_description: Read one node's raw preflight facts (Docker, ports, clock, memory, disk, SSH, Hub reach, GPU run)
version_added: 0.2.0
description:
  - Read-only fact gathering of C(playbooks/preflight.yml), run on every node. It only reads and returns raw outputs;
    M(sparkops.specdec.preflight_report) (plugin_utils C(_preflight.py)) judges them on the controller, compares the
    nodes and writes the report.
  - "Every command's result is returned as RV(facts.NAME) with C(rc), C(stdout) and C(stderr). A command missing on the
    node is reported with rc V(127) and C(NAME: command not found), never as a module failure."
  - "O(part=user) (as the deploy user): C(docker_ps) (docker ps), C(runtimes) (docker info), C(image) (docker image
    inspect of O(image)), C(env) (docker container inspect of O(container)), C(user) (id -un), C(clock) (timedatectl
    NTPSynchronized), C(meminfo) (/proc/meminfo), C(hostfile) (O(state_dir)/openmpi-hostfile), C(disk_free) (bytes
    available to the user on the file system of O(hf_cache_dir), or of its nearest existing parent), C(cache)
    (du -b --max-depth=2 of O(hf_cache_dir)); then C(ssh_nodes), C(ssh_containers), C(hub) and C(gpu) (below)."
  - "O(part=root) (with become): C(ours) (docker top O(container) -eo pid) and C(listen) (ss -Hltnp)."
  - "C(ssh_nodes): for every peer address (the IPv4 addresses on the Up ConnectX-7 interfaces of every other node in
    O(fabric)), C(ssh -o BatchMode=yes -o ConnectTimeout=O(ssh_timeout) -o StrictHostKeyChecking=yes ADDRESS true) as
    the deploy user (the node mesh of the ssh_mesh role). C(ssh_containers): the same from inside O(container) to the
    peer container's sshd, C(docker exec O(container) ssh ... -p O(container_ssh_port) ADDRESS true) (the container
    mesh key in C(specdec_container_host_key_dir)/mesh is the container's C(/root/.ssh)). Nothing is written: no
    password is tried, an unknown host key is a failure (never added), and each attempt is bounded by C(timeout)."
  - "C(hub): one C(GET) of C(ENDPOINT/api/models/O(hub_repo)/revision/O(hub_revision)) from the node itself, without
    a token, through the node's own proxy settings (C(https_proxy)). ENDPOINT is O(hub_endpoint), else the node's
    E(HF_ENDPOINT), else C(https://huggingface.co). Returned: C(url), C(status) (HTTP status, also for errors like
    401 or 503), or C(error) (C(type), C(errno), C(text), C(verify_message) of the exception: DNS, refused, timeout,
    TLS), C(offline) (the node's E(HF_HUB_OFFLINE) when set: then no request is made), C(skipped) and C(reason)."
  - "C(gpu): C(present) (C(nvidia-smi) on PATH or a C(/dev/nvidia*) device), C(evidence), and only when a GPU is
    present, O(gpu_check) is true and O(image) is already on the node (nothing is pulled): C(docker run --rm
    --pull never --network none --gpus all --entrypoint nvidia-smi O(image) -L) with C(ran), C(rc), C(stdout),
    C(stderr). The throw-away container is removed (C(--rm)); nothing else changes."
  - "C(pending_change): the record of a container change an earlier run left pending
    (C(O(state_dir)/container-previous.json), written by M(sparkops.specdec.engine_container)): C(record) (its path),
    C(present), C(text) (its content), C(error) (why it could not be read, else empty) and, when it is there, C(kept)
    (C(docker container inspect) of C(O(container)-previous), the container it keeps: C(rc), C(stdout), C(stderr);
    null otherwise)."
author:
  - sparkops maintainers (@sparkops)
options:
  part:
    description: Which reads to run. V(root) needs become (the listening ports with their processes).
    type: str
    choices: [user, root]
    default: user
  container:
    description: Name of the engine container (C(specdec_container_name)).
    type: str
    required: true
  image:
    description: The engine image of the plan (C(deployment.image)); inspected, and run for the GPU check.
    type: str
    default: ""
  state_dir:
    description: C(specdec_state_dir); the OpenMPI hostfile is read from it.
    type: path
    default: /var/lib/sparkops/specdec
  hf_cache_dir:
    description: The HF cache directory (C(specdec_hf_cache_dir)); empty means C(~/.cache/huggingface) of the user.
    type: path
    default: ""
  node:
    description: This node's inventory name (its own addresses are not SSH targets).
    type: str
    default: ""
  fabric:
    description:
      - Inventory name -> that node's registered M(sparkops.specdec.nccl_interface_info) result. The SSH targets are
        the IPv4 addresses of the selected interfaces of every node but O(node). Empty (single Spark) means no SSH
        test.
    type: dict
    default: {}
  container_ssh_port:
    description: Port of the containers' sshd (C(specdec_container_ssh_port)).
    type: int
    default: 2233
  ssh_timeout:
    description: C(ConnectTimeout) of each SSH attempt, in seconds (the whole attempt is stopped after 3 times this).
    type: int
    default: 5
  hub_endpoint:
    description: The Hub or mirror URL (C(specdec_server_hf_endpoint)); empty means the node's E(HF_ENDPOINT), else the public Hub.
    type: str
    default: ""
  hub_repo:
    description: A repo of the plan whose revision is requested (public or gated; the answer only proves reach).
    type: str
    default: ""
  hub_revision:
    description: Revision requested for O(hub_repo).
    type: str
    default: main
  hub_check:
    description: Contact the Hub at all (V(false) when the nodes download nothing, C(specdec_server_download=false)).
    type: bool
    default: true
  hub_timeout:
    description: Seconds to wait for the Hub's answer.
    type: int
    default: 10
  gpu_check:
    description: Run the image with C(--gpus all) where the node has a GPU (V(false) when the inventory runs the container without GPUs).
    type: bool
    default: true
  gpu_timeout:
    description: Seconds the C(docker run) of the GPU check may take.
    type: int
    default: 120
extends_documentation_fragment:
  - sparkops.specdec.attributes
  - sparkops.specdec.attributes.info_module
  - sparkops.specdec.attributes.platform
notes:
  - Named C(sparkops.specdec.preflight_facts) before 0.3.0; renamed because it returns no C(ansible_facts). The
    old name is a deprecated alias (C(meta/runtime.yml) redirect), removed in 0.4.0; it runs this module and
    prints a deprecation warning naming C(sparkops.specdec.preflight_info).
  - Fails only on bad arguments (a timeout below 1, a port outside 1-65535), with one line naming the option.
  - The module never sends the HF token anywhere; the token and gated access are the C(hf_access) row, checked from
    the controller.
seealso:
  - module: sparkops.specdec.preflight_report
  - module: sparkops.specdec.nccl_interface_info
"""

EXAMPLES = r"""
- name: Read each node (as the deploy user, then the listening ports as root)
  sparkops.specdec.preflight_info:
    part: "{{ item }}"
    container: "{{ specdec_container_name }}"
    image: "{{ preflight_plan.deployment.image }}"
    state_dir: "{{ specdec_state_dir }}"
    hf_cache_dir: "{{ specdec_hf_cache_dir }}"
    node: "{{ inventory_hostname }}"
    fabric: "{{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars, '__pf_fabric'))) }}"
    container_ssh_port: "{{ specdec_container_ssh_port }}"
    hub_endpoint: "{{ specdec_server_hf_endpoint | default('') }}"
    hub_repo: "{{ preflight_plan.plan.models[0].repo }}"
  become: "{{ item == 'root' }}"
  loop: [user, root]
  register: __pf_probe
"""

RETURN = r"""
facts:
  description: The raw results, by name (see the description for the names of each part).
  returned: always
  type: dict
  contains:
    NAME:
      description: A command's result, C(rc) (int; 127 when the command is missing, 124 when it overran), C(stdout), C(stderr) (str).
      type: dict
    ssh_nodes:
      description: One result per peer address, C(host), C(address), C(rc), C(stdout), C(stderr). Only with O(part=user).
      type: list
      elements: dict
    ssh_containers:
      description: The same through C(docker exec O(container)). Only with O(part=user).
      type: list
      elements: dict
    hub:
      description: C(url), C(status) (int or null), C(error) (dict or null), C(offline), C(skipped), C(reason), C(seconds) (float). Only with O(part=user).
      type: dict
    gpu:
      description: C(present), C(evidence), C(ran), C(rc), C(stdout), C(stderr), C(reason). Only with O(part=user).
      type: dict
    pending_change:
      description: C(record) (str, path), C(present) (bool), C(text) (str), C(error) (str), C(kept) (dict or null). Only with O(part=user).
      type: dict
  sample:
    clock: {rc: 0, stdout: "yes", stderr: ""}
    ssh_containers: [{host: spark-2, address: 192.168.100.11, rc: 255, stdout: "",
                      stderr: "root@192.168.100.11: Permission denied (publickey)."}]
    hub: {url: "http://192.168.250.5:8080/api/models/nvidia/Qwen3-235B-A22B-FP4/revision/main", status: 200,
          error: null, offline: "", skipped: false, reason: "", seconds: 0.02}
    gpu: {present: false, evidence: "", ran: false, rc: null, stdout: "", stderr: "", reason: "no GPU on this node"}
    pending_change: {record: /var/lib/sparkops/specdec/container-previous.json, present: false, text: "", error: "",
                     kept: null}
"""

import glob
import os
import pwd
import socket
import ssl
import time
import urllib.error
import urllib.parse

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import ConnectionError as UrlsConnectionError, open_url

from ansible_collections.sparkops.specdec.plugins.module_utils._container_change import kept_name
from ansible_collections.sparkops.specdec.plugins.module_utils._nccl import ssh_targets

PUBLIC_HUB = "https://huggingface.co"
# The record of a pending container change in state_dir (sparkops.specdec.engine_container writes it).
RECORD_FILE = "container-previous.json"


def run(module, argv, timeout=None):
    """{'rc', 'stdout', 'stderr'} of argv (rc 127 when the program is missing; bounded by timeout(1) if asked)."""
    if not module.get_bin_path(argv[0]):
        return {"rc": 127, "stdout": "", "stderr": "%s: command not found" % argv[0]}
    if timeout:
        if module.get_bin_path("timeout"):
            argv = ["timeout", str(int(timeout))] + list(argv)
    rc, out, err = module.run_command(argv)
    return {"rc": rc, "stdout": (out or "").rstrip("\n"), "stderr": (err or "").rstrip("\n")}


def disk_free(path):
    """Bytes available to the user on the file system of path (or of its nearest existing parent)."""
    path = os.path.abspath(path)
    while not os.path.isdir(path) and path != os.path.dirname(path):
        path = os.path.dirname(path)
    try:
        st = os.statvfs(path)
    except OSError as exc:
        return {"rc": 1, "stdout": "", "stderr": "statvfs %s: %s" % (path, exc)}
    return {"rc": 0, "stdout": str(st.f_bavail * st.f_frsize), "stderr": ""}


def read_file(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return {"rc": 0, "stdout": handle.read().rstrip("\n"), "stderr": ""}
    except OSError as exc:
        return {"rc": 1, "stdout": "", "stderr": "cat: %s: %s" % (path, exc.strerror or exc)}


def ssh_argv(timeout, port=None):
    argv = ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=%d" % timeout, "-o", "StrictHostKeyChecking=yes",
            "-o", "PasswordAuthentication=no", "-o", "LogLevel=ERROR"]
    if port:
        argv += ["-p", str(port)]
    return argv


def hub_url(endpoint, repo, revision):
    base = (endpoint or os.environ.get("HF_ENDPOINT") or PUBLIC_HUB).rstrip("/")
    return "%s/api/models/%s/revision/%s" % (base, repo, urllib.parse.quote(revision or "main", safe=""))


def _error(exc):
    """The parts of a urllib error that classify_hub reads."""
    reason = exc.reason if isinstance(exc, urllib.error.URLError) and isinstance(exc.reason, BaseException) else exc
    return {"type": type(reason).__name__, "errno": getattr(reason, "errno", None), "text": str(reason),
            "verify_message": getattr(reason, "verify_message", None)}


def hub_fact(params):
    out = {"url": "", "status": None, "error": None, "offline": "", "skipped": False, "reason": "", "seconds": None}
    offline = os.environ.get("HF_HUB_OFFLINE", "")
    if offline and offline.lower() not in ("0", "false", "no", "off"):
        out.update(offline=offline, skipped=True, reason="HF_HUB_OFFLINE=%s in the node's environment" % offline)
        return out
    if not params["hub_check"]:
        out.update(skipped=True, reason="hub_check is false (the nodes download nothing)")
        return out
    if not params["hub_repo"]:
        out.update(skipped=True, reason="no model in the plan")
        return out
    url = out["url"] = hub_url(params["hub_endpoint"], params["hub_repo"], params["hub_revision"])
    if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
        out["error"] = {"type": "bad_url", "errno": None, "text": "not an http(s) URL: %s" % url, "verify_message": None}
        return out
    start = time.monotonic()
    try:
        # The node's own proxy settings apply (use_proxy); no token and no netrc credentials are sent.
        response = open_url(url, method="GET", timeout=params["hub_timeout"], http_agent="sparkops-preflight",
                            use_netrc=False)
        out["status"] = response.status
        response.close()
    except urllib.error.HTTPError as exc:
        out["status"] = exc.code
    except (urllib.error.URLError, OSError, ssl.SSLError, socket.timeout, ValueError, UrlsConnectionError) as exc:
        out["error"] = _error(exc)
    out["seconds"] = round(time.monotonic() - start, 3)
    return out


def gpu_fact(module, params, image_present):
    smi = module.get_bin_path("nvidia-smi")
    devices = sorted(glob.glob("/dev/nvidia[0-9]*")) or sorted(glob.glob("/dev/nvidiactl"))
    out = {"present": bool(smi or devices), "evidence": smi or (devices[0] if devices else ""), "ran": False,
           "rc": None, "stdout": "", "stderr": "", "reason": ""}
    if not out["present"]:
        out["reason"] = "no GPU on this node"
    elif not params["gpu_check"]:
        out["reason"] = "gpu_check is false"
    elif not image_present:
        out["reason"] = "the image is not on this node"
    else:
        result = run(module, ["docker", "run", "--rm", "--pull", "never", "--network", "none", "--gpus", "all",
                              "--entrypoint", "nvidia-smi", params["image"], "-L"], timeout=params["gpu_timeout"])
        out.update(result, ran=True)
    return out


def pending_fact(module, params):
    """The record of a pending container change and the container it keeps (read only when the record is there)."""
    path = os.path.join(params["state_dir"], RECORD_FILE)
    out = {"record": path, "present": os.path.lexists(path), "text": "", "error": "", "kept": None}
    if out["present"]:
        read = read_file(path)
        out.update(text=read["stdout"], error=read["stderr"] if read["rc"] else "")
        out["kept"] = run(module, ["docker", "container", "inspect", kept_name(params["container"])])
    return out


def user_part(module, params):
    container, image = params["container"], params["image"]
    cache = params["hf_cache_dir"] or os.path.join(pwd.getpwuid(os.getuid()).pw_dir, ".cache", "huggingface")
    facts = {
        "docker_ps": run(module, ["docker", "ps", "--quiet"]),
        "runtimes": run(module, ["docker", "info"]),
        "image": run(module, ["docker", "image", "inspect", image]) if image else
        {"rc": 1, "stdout": "", "stderr": "no image named"},
        "env": run(module, ["docker", "container", "inspect", container]),
        "user": run(module, ["id", "-un"]),
        "clock": run(module, ["timedatectl", "show", "--property", "NTPSynchronized", "--value"]),
        "meminfo": read_file("/proc/meminfo"),
        "hostfile": read_file(os.path.join(params["state_dir"], "openmpi-hostfile")),
        "disk_free": disk_free(cache),
        "cache": run(module, ["du", "-b", "--max-depth=2", cache]),
    }
    targets = ssh_targets(params["node"], list(params["fabric"]), params["fabric"])
    bound = params["ssh_timeout"] * 3
    facts["ssh_nodes"] = [dict(t, **run(module, ssh_argv(params["ssh_timeout"]) + [t["address"], "true"], timeout=bound))
                          for t in targets]
    facts["ssh_containers"] = [
        dict(t, **run(module, ["docker", "exec", container] + ssh_argv(params["ssh_timeout"], params["container_ssh_port"])
                      + [t["address"], "true"], timeout=bound))
        for t in targets]
    facts["hub"] = hub_fact(params)
    facts["gpu"] = gpu_fact(module, params, image and facts["image"]["rc"] == 0)
    facts["pending_change"] = pending_fact(module, params)
    return facts


def main():
    module = AnsibleModule(
        argument_spec={
            "part": {"type": "str", "choices": ["user", "root"], "default": "user"},
            "container": {"type": "str", "required": True},
            "image": {"type": "str", "default": ""},
            "state_dir": {"type": "path", "default": "/var/lib/sparkops/specdec"},
            "hf_cache_dir": {"type": "path", "default": ""},
            "node": {"type": "str", "default": ""},
            "fabric": {"type": "dict", "default": {}},
            "container_ssh_port": {"type": "int", "default": 2233},
            "ssh_timeout": {"type": "int", "default": 5},
            "hub_endpoint": {"type": "str", "default": ""},
            "hub_repo": {"type": "str", "default": ""},
            "hub_revision": {"type": "str", "default": "main"},
            "hub_check": {"type": "bool", "default": True},
            "hub_timeout": {"type": "int", "default": 10},
            "gpu_check": {"type": "bool", "default": True},
            "gpu_timeout": {"type": "int", "default": 120},
        },
        supports_check_mode=True,
    )
    params = module.params
    for name in ("ssh_timeout", "hub_timeout", "gpu_timeout"):
        if params[name] < 1:
            module.fail_json(msg="preflight_info: %s=%s is below 1: set a number of seconds >= 1." % (name, params[name]))
    if not 1 <= params["container_ssh_port"] <= 65535:
        module.fail_json(msg="preflight_info: container_ssh_port=%s is not a port: set specdec_container_ssh_port to "
                             "1-65535." % params["container_ssh_port"])
    if params["part"] == "root":
        facts = {"ours": run(module, ["docker", "top", params["container"], "-eo", "pid"]),
                 "listen": run(module, ["ss", "-Hltnp"])}
    else:
        facts = user_part(module, params)
    module.exit_json(changed=False, facts=facts)


if __name__ == "__main__":
    main()
