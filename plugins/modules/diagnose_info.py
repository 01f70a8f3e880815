#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: diagnose_info
short_description: Collect one node's support-bundle items, read-only, with secrets removed
version_added: 0.2.0
description:
  - Read-only collection of C(playbooks/diagnose.yml), run on every node (with C(become), to read the netplan file and
    use Docker). Nothing on the node is changed; check mode runs the same way.
  - "An action plugin runs the node-side part and removes secrets on the controller before anything is returned: every
    form of the O(secrets) (raw, repr/JSON-escaped, URL-encoded, base64 also of C(user:secret), C(Bearer ...)), the
    values of secret-looking names (C(HF_TOKEN), C(*_PASSWORD), C(API_KEY), ... in mappings, C(NAME=value) strings
    such as C(Config.Env), and C(key: value) / C(KEY=value) lines), any C(Bearer)/C(Basic) credential and the password
    of C(scheme://user:password@) URLs. The secrets are never sent to the node."
  - "Items (RV(node_items) keys): C(os) (/etc/os-release, uname, /proc/version), C(docker_version) (docker version),
    C(docker_info) (docker info), C(nvidia_runtime) (nvidia runtimes in docker info, C(nvidia-ctk --version),
    C(nvidia-smi -L)), C(container_inspect) (docker container inspect O(container)), C(container_env) (its NCCL_,
    UCX_, OMPI_ and PMIX_ variables), C(container_log) (docker logs --tail O(log_lines)), C(netplan) (the
    O(netplan_files) that exist), C(ip_addr) (ip -j addr), C(ibdev2netdev), C(hostfile)
    (O(state_dir)/openmpi-hostfile), C(server_log) (the last O(log_lines) lines of O(state_dir)/server.log), C(state)
    (O(state_dir)/deployments/*.json)."
  - Each item has a C(status) of V(ok), V(missing) (program not installed, container or file absent) or V(error) (any
    other failure, e.g. Docker not running). Neither fails the task; M(sparkops.specdec.diagnose_bundle) lists them in
    the bundle's C(manifest.json).
author:
  - sparkops maintainers (@sparkops)
options:
  container:
    description: Name of the engine container (C(specdec_container_name)).
    type: str
    default: trtllm-multinode
  state_dir:
    description: The state directory on the node (C(specdec_state_dir)) with the hostfile, the server log and the deployment state files.
    type: path
    default: /var/lib/sparkops/specdec
  netplan_files:
    description: The netplan files the collection writes (C(netplan_qsfp_file)); each one that exists is collected.
    type: list
    elements: path
    default: [/etc/netplan/40-cx7.yaml]
  log_lines:
    description: Lines of the server log and of the container log to keep (the last ones), 0 to 100000.
    type: int
    default: 200
  secrets:
    description:
      - Values to remove in every form (the HF token, C(specdec_server_hf_token)). Used on the controller only, never
        sent to the node, never returned.
    type: list
    elements: str
    default: []
extends_documentation_fragment:
  - sparkops.specdec.attributes
  - sparkops.specdec.attributes.info_module
  - sparkops.specdec.attributes.platform
  - sparkops.specdec.attributes.action
notes:
  - Named C(sparkops.specdec.diagnose_facts) before 0.3.0; renamed because it returns no C(ansible_facts). The
    old name is a deprecated alias (C(meta/runtime.yml) redirect), removed in 0.4.0; it runs this module and
    prints a deprecation warning naming C(sparkops.specdec.diagnose_info).
  - Runs the node-side part through the action plugin of the same name; the raw output (before the secrets are
    removed) stays inside that action.
"""

EXAMPLES = r"""
- name: Collect this node's items for the support bundle
  sparkops.specdec.diagnose_info:
    container: "{{ specdec_container_name }}"
    state_dir: "{{ specdec_state_dir }}"
    netplan_files: ["{{ netplan_qsfp_file | default('/etc/netplan/40-cx7.yaml') }}"]
    secrets: ["{{ specdec_server_hf_token }}"]
  become: true
  register: diagnose_node
"""

RETURN = r"""
node_items:
  description:
    - Item name -> C(status) (V(ok), V(missing) or V(error)), C(reason) (why missing or failed, one line), C(source)
      (the command or path), C(format) (V(json), V(text) or V(dir)) and C(content) (JSON data, text, or for V(dir)
      file name -> text or data). Secrets removed.
    - The same mapping is also returned as C(items), which is deprecated and will be removed in 1.0.0 (a key named
      C(items) cannot be read with dot notation in Jinja, where it is the mapping's C(items) method); read
      RV(node_items).
  returned: always
  type: dict
  version_added: 0.2.0
  sample:
    ibdev2netdev: {status: missing, reason: "ibdev2netdev: command not found", source: ibdev2netdev, format: text,
                   content: null}
    hostfile: {status: ok, reason: "", source: /var/lib/sparkops/specdec/openmpi-hostfile, format: text,
               content: "192.168.100.10 slots=1\n192.168.100.11 slots=1\n"}
missing:
  description: The items with status V(missing), as C(item (reason)).
  returned: always
  type: list
  elements: str
  sample: ["ibdev2netdev (ibdev2netdev: command not found)"]
redacted:
  description: How many values were replaced by C(********) (all items).
  returned: always
  type: int
  sample: 2
"""

import glob
import json
import os
import platform

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkops.specdec.plugins.module_utils import _diagnose
from ansible_collections.sparkops.specdec.plugins.module_utils._diagnose import item, outcome


def command(module, argv, fmt="text"):
    """An item from one command (missing when the program is not installed)."""
    what = " ".join(argv)
    if not module.get_bin_path(argv[0]):
        return item("missing", "%s: command not found" % argv[0], what)
    rc, out, err = module.run_command(argv)
    return outcome(rc, out, err, what, fmt)


def read_text(path):
    """(text or None, reason)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read(), ""
    except OSError as exc:
        return None, "%s: %s" % (path, exc.strerror or exc)


def file_item(path):
    text, reason = read_text(path)
    if text is None:
        return item("missing" if not os.path.exists(path) else "error", reason, path)
    return item("ok", source=path, content=text)


def os_item():
    data = {"uname": dict(zip(("system", "node", "release", "version", "machine"), platform.uname()[:5]))}
    text, _reason = read_text("/etc/os-release")
    if text is not None:
        data["os_release"] = dict(
            (k, v.strip().strip('"')) for k, _s, v in (line.partition("=") for line in text.splitlines()) if _s)
    text, _reason = read_text("/proc/version")
    if text is not None:
        data["proc_version"] = text.strip()
    return item("ok", source="/etc/os-release, uname, /proc/version", content=data, fmt="json")


def nvidia_item(module, info):
    data = {}
    if info["status"] == "ok":
        runtimes = (info["content"] or {}).get("Runtimes") or {}
        data["docker_runtimes"] = sorted(runtimes)
        data["default_runtime"] = (info["content"] or {}).get("DefaultRuntime")
    for argv in (["nvidia-ctk", "--version"], ["nvidia-smi", "-L"]):
        got = command(module, argv)
        if got["status"] != "missing":
            data[argv[0]] = got["content"] if got["status"] == "ok" else got["reason"]
    if not [r for r in data.get("docker_runtimes", []) if "nvidia" in r] and not set(data) & {"nvidia-ctk", "nvidia-smi"}:
        return item("missing", "no nvidia runtime in docker info, no nvidia-ctk or nvidia-smi", "docker info, nvidia-ctk, "
                    "nvidia-smi")
    return item("ok", source="docker info, nvidia-ctk --version, nvidia-smi -L", content=data, fmt="json")


def container_items(module, params):
    name = params["container"]
    inspect = command(module, ["docker", "container", "inspect", name], "json")
    if inspect["status"] == "ok":
        inspect["content"] = (inspect["content"] or [{}])[0]
    if inspect["status"] == "ok":
        env = _diagnose.fabric_env(((inspect["content"] or {}).get("Config") or {}).get("Env"))
        env_item = item("ok", source="Config.Env of docker container inspect %s" % name, content=env, fmt="json")
        logs = container_log(module, name, params["log_lines"])
    else:
        env_item = item(inspect["status"], inspect["reason"], "Config.Env of docker container inspect %s" % name)
        logs = item(inspect["status"], inspect["reason"], "docker logs %s" % name)
    return {"container_inspect": inspect, "container_env": env_item, "container_log": logs}


def container_log(module, name, lines):
    argv = ["docker", "logs", "--tail", str(lines), name]
    rc, out, err = module.run_command(argv)
    got = outcome(rc, out, err, " ".join(argv))
    if got["status"] == "ok":
        got["content"] = "--- stdout ---\n%s--- stderr ---\n%s" % (out or "", err or "")
    return got


def netplan_item(paths):
    files, reasons = {}, []
    for path in paths:
        text, reason = read_text(path)
        if text is None:
            reasons.append(reason)
            continue
        files[os.path.basename(path)] = text
    if not files:
        return item("missing", "; ".join(reasons) or "no netplan file given", ", ".join(paths))
    managed = [n for n, t in sorted(files.items()) if _diagnose.MANAGED_MARK in t]
    source = ", ".join(paths) + " (written by sparkops.specdec: %s)" % (", ".join(managed) or "none")
    return item("ok", source=source, content=files, fmt="dir")


def state_item(state_dir):
    pattern = os.path.join(state_dir, "deployments", "*.json")
    files = {}
    for path in sorted(glob.glob(pattern)):
        text, reason = read_text(path)
        if text is None:
            files[os.path.basename(path) + ".error"] = reason
            continue
        try:
            files[os.path.basename(path)] = json.loads(text)
        except ValueError:
            files[os.path.basename(path)] = text
    if not files:
        return item("missing", "no deployment state file (%s)" % pattern, pattern)
    return item("ok", source=pattern, content=files, fmt="dir")


def log_item(path, lines):
    try:
        return item("ok", source="last %d lines of %s" % (lines, path), content=_diagnose.tail(path, lines))
    except OSError as exc:
        return item("missing" if not os.path.exists(path) else "error", "%s: %s" % (path, exc.strerror or exc), path)


def collect(module, params):
    """Every item of this node (ITEMS names)."""
    items = {"os": os_item()}
    items["docker_version"] = command(module, ["docker", "version", "--format", "{{json .}}"], "json")
    items["docker_info"] = command(module, ["docker", "info", "--format", "{{json .}}"], "json")
    items["nvidia_runtime"] = nvidia_item(module, items["docker_info"])
    items.update(container_items(module, params))
    items["netplan"] = netplan_item(params["netplan_files"])
    items["ip_addr"] = command(module, ["ip", "-j", "addr"], "json")
    items["ibdev2netdev"] = command(module, ["ibdev2netdev"])
    items["hostfile"] = file_item(os.path.join(params["state_dir"], "openmpi-hostfile"))
    items["server_log"] = log_item(os.path.join(params["state_dir"], "server.log"), params["log_lines"])
    items["state"] = state_item(params["state_dir"])
    return items


def main():
    module = AnsibleModule(
        argument_spec={
            "container": {"type": "str", "default": "trtllm-multinode"},
            "state_dir": {"type": "path", "default": "/var/lib/sparkops/specdec"},
            "netplan_files": {"type": "list", "elements": "path", "default": ["/etc/netplan/40-cx7.yaml"]},
            "log_lines": {"type": "int", "default": 200},
            "secrets": {"type": "list", "elements": "str", "default": [], "no_log": True},
        },
        supports_check_mode=True,
    )
    params = module.params
    if not 0 <= params["log_lines"] <= 100000:
        module.fail_json(msg="diagnose_info: log_lines=%s is out of range: set diagnose_log_lines to 0-100000."
                             % params["log_lines"])
    if params["secrets"]:
        module.fail_json(msg="diagnose_info: secrets reached the node: run the module through its action plugin "
                             "(sparkops.specdec.diagnose_info), which removes them on the controller.")
    items = collect(module, params)
    missing = ["%s (%s)" % (name, got["reason"]) for name, got in items.items() if got["status"] == "missing"]
    # items: the deprecated name of node_items (removed in 1.0.0).
    module.exit_json(changed=False, node_items=items, items=items, missing=missing, redacted=0)


if __name__ == "__main__":
    main()
