#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: specdec_status_info
short_description: Read one node's serving status (container, server process, state files, health, model, counters)
version_added: 0.2.0
description:
  - Read-only fact gathering of C(playbooks/status.yml), run on every node. Nothing on the node changes, in check mode
    or not; M(sparkops.specdec.specdec_status_report) merges the nodes into one row per deployment on the controller.
  - "Container: C(docker container inspect O(container)): exists, running, status, image name and id, start time."
  - "Server process: the pid in C(O(state_dir)/server.pid) (written by the specdec_server role's C(server.sh), a pid in
    the container's namespace), looked up among the container's processes (C(docker top O(container) -eo pid), then
    C(/proc/PID/status) C(NSpid), C(/proc/PID/stat) and C(/proc/PID/cmdline) on the node): running means alive and
    not a zombie, as C(server.sh status) decides. Its age comes from the process's start time in C(/proc/PID/stat)
    and C(/proc/uptime). Nothing is executed in the container."
  - "A pending container change: C(O(state_dir)/container-previous.json), the record of the container the
    C(trtllm_container) role keeps as C(<container>-previous) until the new server serves, and that container's
    C(docker container inspect)."
  - "State files: every C(O(state_dir)/deployments/*.json) (schema 1, written by the specdec_server role), without
    the launch argv, environment and config text."
  - "For each state file that names this node (O(node)) as the deployment's head, except one that
    C(playbooks/teardown.yml) marked torn down (C(running) null and C(torn_down_at)), and with O(probe): C(GET /health),
    C(GET /v1/models) and the engine's Prometheus metrics (llama.cpp C(/metrics), TensorRT-LLM C(/prometheus/metrics))
    on the node's loopback (or the one address the server binds), at the state file's port, without a proxy. Only
    the speculative-decoding counters are returned (read by the benchmark's adapters, module_utils C(_bench.py))."
author:
  - sparkops maintainers (@sparkops)
options:
  node:
    description: This node's inventory name (the state files name the head by it).
    type: str
    required: true
  container:
    description: Name of the engine container (C(specdec_container_name)).
    type: str
    default: trtllm-multinode
  state_dir:
    description: C(specdec_state_dir); the state files are in its C(deployments/) directory, the server's pid file in it.
    type: path
    default: /var/lib/sparkops/specdec
  probe:
    description: Send the HTTP reads to the server of the deployments this node heads (V(false) reads files and Docker only).
    type: bool
    default: true
  timeout:
    description: Seconds to wait for each HTTP answer.
    type: int
    default: 5
  api_key:
    description:
      - "API key of the server (C(specdec_api_key)), sent as C(Authorization: Bearer) with C(/v1/models) and the
        metrics (llama-server refuses them without it; C(/health) is exempt). Never returned."
    type: str
extends_documentation_fragment:
  - sparkops.specdec.attributes
  - sparkops.specdec.attributes.info_module
  - sparkops.specdec.attributes.platform
notes:
  - Named C(sparkops.specdec.specdec_status_facts) before 0.3.0; renamed because it returns no C(ansible_facts). The
    old name is a deprecated alias (C(meta/runtime.yml) redirect), removed in 0.4.0; it runs this module and
    prints a deprecation warning naming C(sparkops.specdec.specdec_status_info).
  - Fails only on a bad argument (a timeout below 1). Docker that cannot be read (not installed, the user not in the
    C(docker) group) is reported in the C(error) of RV(status) C(container), not as a failure.
seealso:
  - module: sparkops.specdec.specdec_status_report
"""

EXAMPLES = r"""
- name: Read this node's serving status (read-only)
  sparkops.specdec.specdec_status_info:
    node: "{{ inventory_hostname }}"
    container: "{{ specdec_container_name }}"
    state_dir: "{{ specdec_state_dir }}"
  register: __status_facts
"""

RETURN = r"""
status:
  description: What the node holds and serves.
  returned: always
  type: dict
  contains:
    node:
      description: O(node).
      type: str
    now:
      description: The node's clock (UTC, ISO 8601) when it was read; container uptimes are measured against it.
      type: str
    container:
      description: C(name), C(exists), C(running) (bool), C(status), C(image), C(image_id), C(started_at) (ISO 8601 or null),
        C(restart_count), C(error) (a Docker error, or null).
      type: dict
    server_process:
      description: C(running) (bool), C(pid) (in the container), C(host_pid), C(command) (basename of its argv[0]),
        C(elapsed_seconds) (int, seconds since the process started), C(reason) (why it is not running, or null).
      type: dict
    records:
      description: One per state file, C(path), C(error) (unreadable or not schema 1, else null) and C(state) (the
        deployment id, engine, updated_at, torn_down_at (set by C(playbooks/teardown.yml), else null), desired,
        running (fingerprint, target_model, method, max_draft_len, started_at, endpoint, image_id, port, members; null
        when no server is recorded as running, e.g. after a teardown), previous (the launch that ran before, the same
        keys, or null) and tuned).
      type: list
      elements: dict
    probes:
      description: One per deployment this node heads, C(deployment), C(engine), C(base_url), C(health) (C(status) int
        or null, C(error)), C(models) (C(ids) list or null, C(error)) and C(metrics) (C(path), C(status), C(error),
        C(counters) with C(standin), C(present), C(draft_tokens), C(accepted_tokens), C(drafts) (cumulative since the
        server started), C(acceptance_length_gauge), C(error)).
      type: list
      elements: dict
    docker_error:
      description: Why the server process could not be read (C(docker top) failed), or null.
      type: str
    pending_change:
      description:
        - A container change still pending (the C(trtllm_container) role kept the previous container, see
          M(sparkops.specdec.engine_container)), read from C(O(state_dir)/container-previous.json) and
          C(docker container inspect <container>-previous); null when there is no record.
        - C(record) (its path), C(error) (an unreadable record, else null), C(kept_name), C(kept_image) and
          C(kept_image_id) (what the previous container runs), C(requested_image) (the image of the change),
          C(differences), C(kept_at), C(kept_container) (V(present) the recorded container is there, V(absent),
          V(other) a container of that name with another id, V(unknown) Docker could not be read).
      type: dict
  sample:
    node: spark-1
    now: "2026-11-23T18:40:02+00:00"
    container: {name: trtllm-multinode, exists: true, running: true, status: running, image: "sparkops-lab/llamacpp-server:b1",
                image_id: "sha256:4f1c...", started_at: "2026-11-23T18:20:11.5Z", restart_count: 0, error: null}
    server_process: {running: true, pid: 57, host_pid: 4242, command: llama-server, elapsed_seconds: 311, reason: null}
    probes:
      - deployment: spark-1
        engine: llamacpp
        base_url: "http://127.0.0.1:8080"
        health: {status: 200, error: null}
        models: {ids: [sparkops-lab/Qwen2.5-Coder-1.5B-Instruct-GGUF], error: null}
        metrics: {path: /metrics, status: 200, error: null,
                  counters: {standin: false, present: true, draft_tokens: 143, accepted_tokens: 120, drafts: 41,
                             acceptance_length_gauge: null, error: null}}
"""

import datetime
import glob
import json
import os
import socket
import urllib.error

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import ConnectionError as UrlsConnectionError, open_url

from ansible_collections.sparkops.specdec.plugins.module_utils import _container_change, _status

# The record of a kept container (a pending container change) in state_dir, as the trtllm_container role writes it.
RECORD_FILE = "container-previous.json"

PROC = "/proc"


def _read(path, binary=False):
    try:
        with open(path, "rb" if binary else "r") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError):
        return None


def read_records(state_dir):
    out = []
    for path in sorted(glob.glob(os.path.join(state_dir, "deployments", "*.json"))):
        text = _read(path)
        rec = {"path": path, "error": None, "state": None}
        if text is None:
            rec["error"] = "cannot read %s" % path
        else:
            try:
                state = json.loads(text)
            except ValueError:
                state = None
            if not isinstance(state, dict) or state.get("schema_version") != _status.SCHEMA_VERSION:
                rec["error"] = "%s is not a schema %d state file" % (path, _status.SCHEMA_VERSION)
            else:
                rec["state"] = _status.trim_state(state)
        out.append(rec)
    return out


def container_processes(module, container, proc):
    """(processes, error) of the container: host pid, /proc status, stat and argv of each."""
    rc, out, err = module.run_command(["docker", "top", container, "-eo", "pid"])
    if rc != 0:
        return [], ((err or out or "").strip().splitlines() or ["docker top failed"])[-1]
    procs = []
    for line in (out or "").splitlines()[1:]:
        word = line.strip()
        if not word.isdigit():
            continue
        base = os.path.join(proc, word)
        cmdline = _read(os.path.join(base, "cmdline"), binary=True) or b""
        procs.append({"host_pid": int(word), "status": _read(os.path.join(base, "status")),
                      "stat": _read(os.path.join(base, "stat")),
                      "cmdline": [a.decode("utf-8", "replace") for a in cmdline.split(b"\0") if a]})
    return procs, None


def http_get(url, timeout, api_key=None):
    """(status, body text, error): an HTTP error status is a status, a failed connection an error."""
    headers = {"Authorization": "Bearer %s" % api_key} if api_key else None
    try:
        response = open_url(url, method="GET", timeout=timeout, use_proxy=False, use_netrc=False,
                            http_agent="sparkops-status", headers=headers)
        body = response.read().decode("utf-8", "replace")
        return response.status, body, None
    except urllib.error.HTTPError as exc:
        return exc.code, None, "HTTP %s" % exc.code
    except (urllib.error.URLError, OSError, socket.timeout, ValueError, UrlsConnectionError) as exc:
        reason = getattr(exc, "reason", None) or exc
        return None, None, str(reason)[:200]


def probe(record, timeout, api_key=None):
    state = record["state"]
    engine = state.get("engine")
    base = _status.probe_base(state)
    out = {"deployment": state.get("deployment"), "engine": engine, "base_url": base,
           "health": {"status": None, "error": None}, "models": {"ids": None, "error": None},
           "metrics": {"path": None, "status": None, "error": None, "counters": None}}
    if not base:
        out["health"]["error"] = "no port in the state file"
        return out
    status, dummy, error = http_get(base + "/health", timeout)
    out["health"] = {"status": status, "error": error}
    status, body, error = http_get(base + "/v1/models", timeout, api_key)
    ids = _status.model_ids(body) if status == 200 else None
    out["models"] = {"ids": ids, "error": error or (None if ids is not None else "not an OpenAI model list")}
    path = _status.METRICS_PATHS.get(engine)
    if path:
        status, body, error = http_get(base + path, timeout, api_key)
        out["metrics"] = {"path": path, "status": status, "error": error,
                          "counters": _status.metrics_counters(engine, body) if status == 200 else None}
    else:
        out["metrics"]["error"] = "engine %r has no known metrics path" % (engine,)
    return out


def gather(module, params, proc=None):
    proc = proc or PROC
    container = params["container"]
    kept_name = _container_change.kept_name(container)
    if module.get_bin_path("docker"):
        rc, out, err = module.run_command(["docker", "container", "inspect", container])
        kept = _status.kept_facts(*(module.run_command(["docker", "container", "inspect", kept_name]) + (kept_name,)))
    else:
        rc, out, err = 127, "", "docker: command not found"
        kept = _status.kept_facts(rc, out, err, kept_name)
    status = {"node": params["node"], "now": datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat(),
              "container": _status.container_facts(rc, out, err, container), "docker_error": None}
    procs = []
    if status["container"]["running"]:
        procs, status["docker_error"] = container_processes(module, container, proc)
    status["server_process"] = _status.server_process(_read(os.path.join(params["state_dir"], "server.pid")), procs,
                                                      _read(os.path.join(proc, "uptime")), os.sysconf("SC_CLK_TCK"))
    if not status["container"]["running"]:
        status["server_process"]["reason"] = "the container is %s" % status["container"]["status"]
    status["records"] = read_records(params["state_dir"])
    status["supervisor"] = _status.supervisor_facts(_read(os.path.join(params["state_dir"], _status.GUARD_FILE)))
    record_path = os.path.join(params["state_dir"], RECORD_FILE)
    status["pending_change"] = _status.pending_change(_read(record_path), kept, record_path)
    status["probes"] = []
    if params["probe"]:
        seen = set()
        for rec in status["records"]:
            # A deployment teardown.yml ended serves nothing: another server on its old port is not its answer.
            if rec["state"] and _status.head_of(rec["state"]) == params["node"] and not _status.torn_down(rec["state"]):
                key = (_status.probe_base(rec["state"]), rec["state"].get("engine"), rec["state"].get("deployment"))
                if key not in seen:
                    seen.add(key)
                    status["probes"].append(probe(rec, params["timeout"], params.get("api_key")))
    return status


def main():
    module = AnsibleModule(
        argument_spec={
            "node": {"type": "str", "required": True},
            "container": {"type": "str", "default": "trtllm-multinode"},
            "state_dir": {"type": "path", "default": "/var/lib/sparkops/specdec"},
            "probe": {"type": "bool", "default": True},
            "timeout": {"type": "int", "default": 5},
            "api_key": {"type": "str", "no_log": True},
        },
        supports_check_mode=True,
    )
    if module.params["timeout"] < 1:
        module.fail_json(msg="specdec_status_info: timeout=%s is below 1: set status_http_timeout to a number of "
                             "seconds >= 1." % module.params["timeout"])
    module.exit_json(changed=False, status=gather(module, module.params))


if __name__ == "__main__":
    main()
