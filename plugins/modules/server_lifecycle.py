#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: server_lifecycle
short_description: Start, stop, restart and health-check the engine server on the head; arm the supervisor's record
version_added: 0.3.0
description:
  - Owns the server of a deployment on its head node, driving C(server.sh) in the engine container O(container) with
    the C(docker) CLI (C(docker exec)). Used by the C(specdec_server) role (start, restart, rollback) and the teardown
    playbook (stop). The decision to start or restart (and the consent to restart) is the plan's
    (M(sparkops.specdec.specdec_plan), C(decision.action)); this module acts on it.
  - "The on-node state, in one place (all under O(state_dir), the same path on the node and in the container):
    C(deployments/<deployment>.json), the state file (its C(running) entry names the launch spec that serves; written
    on every member by the role once a server serves, read here by O(state=status));
    C(server.sh), the control script run inside the container (C(start), C(stop), C(status), and C(recycle) for the
    supervisor's hang watchdog), rendered from O(launch) byte for byte as releases before 0.3.0 rendered it, so a
    deployment made by them is unchanged;
    C(server.pid) and C(server.log), written by C(server.sh);
    C(autostart.json), the consent record of the supervisor in the container (schema 1: C(deployment),
    C(state_file), C(fingerprint), C(server_sh_sha1) of C(server.sh), C(config_file), C(needs_hf_token),
    C(health_url), C(hang_timeout), and the bounded recovery C(max_failed_starts), C(backoff_initial), C(backoff_max),
    C(health_timeout), C(min_available_memory), C(drop_caches), C(completion_probe_interval), C(model),
    C(api_key_file); a record without these is served with the supervisor's documented defaults), which
    C(server.sh stop) removes first; the state file's C(supervisor_gave_up), written by the supervisor when it gives up
    after its cap of failed starts (a start by the role writes the state file without it);
    C(api-key), llama-server's key file (mode 0600) with C(specdec_api_key)."
  - O(state=status) reads the state file and whether the server runs (read-only, also in check mode).
  - O(state=started) writes C(server.sh) for O(launch) and the key file, then acts on O(action). C(none) checks that
    the running server answers C(/health) from the node. C(start) starts it, C(restart) stops the running one first.
    Both then wait for C(/health) at O(local_url) (O(health_timeout), O(health_interval)), stopping early when the
    server process exits. A server that does not become healthy is left for the caller's rollback (the role stops
    it and returns to the previous launch with this module) and the module fails with the role's one-line message.
    Once healthy, O(autostart=true) writes the consent record for the C(server.sh) on disk, O(autostart=false)
    removes it, and without O(api_key) the key file is removed.
  - O(state=stopped) runs C(server.sh stop) (which removes the consent record first); nothing without C(server.sh).
  - C(HF_TOKEN) (O(hf_token)) reaches the server only through the C(docker exec) environment (C(docker exec -e
    HF_TOKEN) takes it from the environment of the C(docker) CLI), never argv or the results; not at all when the
    launch runs offline (C(HF_HUB_OFFLINE=1) in O(launch)'s C(env)).
author:
  - sparkops maintainers (@sparkops)
options:
  state:
    description: What to do (see the description).
    type: str
    choices: [started, stopped, status]
    default: started
  container:
    description: The engine container's name (C(specdec_container_name)).
    type: str
    required: true
  state_dir:
    description: The state directory on the node, mounted at the same path in the container (C(specdec_state_dir)).
    type: path
    required: true
  state_file:
    description: The deployment's state file (C(<state_dir>/deployments/<deployment>.json)). Required with
      O(state=started) and O(state=status).
    type: path
  action:
    description: The plan's decision (C(decision.action)). Required with O(state=started).
    type: str
    choices: [none, start, restart]
  launch:
    description:
      - The launch spec (the plan's C(launch)) with C(argv), C(env) and C(members); required with O(state=started).
      - "Engine vllm across Sparks, on a worker: the plan's C(worker_launch[<host>]) (it has C(rendezvous), the head's
        C(tcp://MASTER_ADDR:MASTER_PORT)): C(server.sh) starts C(vllm serve ... --headless); after a start the module
        checks that the process still runs one O(health_interval) later (a headless worker serves no C(/health): the
        head's C(/health) answers once every rank joined), and O(action=none) checks that it runs (C(server.sh status))."
    type: dict
  local_url:
    description: Where the node reaches the server (the plan's C(local_url), C(http://ADDRESS:PORT)); required with
      O(state=started).
    type: str
  health_timeout:
    description: Seconds to wait for C(/health) after a start (C(specdec_server_health_timeout)).
    type: int
    default: 1800
  health_interval:
    description: Seconds between two looks (C(specdec_server_health_interval)).
    type: int
    default: 10
  hf_token:
    description: The Hugging Face token for ranks that may use the Hub (C(specdec_server_hf_token)); never logged.
    type: str
    default: ''
  api_key:
    description: llama-server's API key (C(specdec_api_key)); written to O(api_key_file). Never logged.
    type: str
    default: ''
  api_key_file:
    description:
      - The key file the launch reads (the plan's C(api_key.file)), written with O(api_key) (mode 0600).
      - An empty string when the launch reads none; C(<state_dir>/api-key) is then removed once the server serves.
      - Unset leaves the key file as it is (the role's rollback, whose previous server may read it).
    type: str
  autostart:
    description:
      - Once the server serves, C(true) writes the consent record for the C(server.sh) on disk and O(autostart_record),
        C(false) removes it; unset leaves it as it is.
    type: bool
  autostart_record:
    description:
      - The fields of the consent record with O(autostart=true) C(deployment), C(fingerprint) (of the running launch
        spec), C(config_file) (trtllm's extra-llm-api-config.yml, empty for llamacpp), C(health_url) and
        C(hang_timeout) (the hang watchdog; C(specdec_server_hang_timeout)). C(state_file) is O(state_file);
        C(needs_hf_token) is whether the launch gets O(hf_token).
      - Optional, the supervisor's bounded recovery (integers; left out, the supervisor's defaults apply) -
        C(max_failed_starts), C(backoff_initial) and C(backoff_max) (seconds), C(health_timeout) (seconds),
        C(min_available_memory) (bytes), C(completion_probe_interval) (seconds); C(drop_caches) (bool); C(model) and
        C(api_key_file) of the hang watchdog's one-token completion (the path of the key file, never the key).
    type: dict
  docker:
    description: The docker CLI.
    type: str
    default: docker
extends_documentation_fragment:
  - sparkops.specdec.attributes
  - sparkops.specdec.attributes.platform
attributes:
  check_mode:
    support: full
    details: Reports the action it would take and the files it would write (O(action=none) still checks C(/health)).
  diff_mode:
    support: full
    details: The difference of C(server.sh) and of the consent record.
  idempotent:
    support: partial
    details: O(action=none) (what the plan decides on a second run) with the same O(launch) changes nothing; O(action=restart)
      restarts the server each time it is given.
  platform:
    details: The head node, with the C(docker) CLI; C(server.sh) runs with bash in the container.
seealso:
  - module: sparkops.specdec.specdec_plan
  - module: sparkops.specdec.engine_container
"""

EXAMPLES = r"""
- name: Read the state file and whether the server runs
  sparkops.specdec.server_lifecycle:
    state: status
    container: trtllm-multinode
    state_dir: /var/lib/sparkops/specdec
    state_file: /var/lib/sparkops/specdec/deployments/spark-1.json
  register: probe

- name: Act on the plan's decision and arm the supervisor
  sparkops.specdec.server_lifecycle:
    container: trtllm-multinode
    state_dir: /var/lib/sparkops/specdec
    state_file: /var/lib/sparkops/specdec/deployments/spark-1.json
    action: "{{ specdec_server_launch.decision.action }}"
    launch: "{{ specdec_server_launch.plan.launch }}"
    local_url: "{{ specdec_server_launch.plan.local_url }}"
    hf_token: "{{ specdec_server_hf_token }}"
    autostart: true
    autostart_record:
      deployment: spark-1
      fingerprint: "{{ specdec_server_launch.plan.fingerprint }}"
      config_file: /var/lib/sparkops/specdec/extra-llm-api-config.yml
      health_url: "{{ specdec_server_launch.plan.local_url }}/health"
      hang_timeout: 600
      max_failed_starts: 5
      health_timeout: 3600
      min_available_memory: 8589934592

- name: Stop the server (and remove the consent record)
  sparkops.specdec.server_lifecycle:
    state: stopped
    container: trtllm-multinode
    state_dir: /var/lib/sparkops/specdec
    state_file: /var/lib/sparkops/specdec/deployments/spark-1.json
"""

RETURN = r"""
operation:
  description:
    - What it did (C(none), C(start), C(restart), C(stop)); in check mode what it would do.
    - Not named C(action), which callbacks (C(ansible.posix.json)) overwrite with the module's name.
  returned: always
  type: str
running:
  description: Whether the server runs now (O(state=status), O(state=stopped)).
  returned: always
  type: bool
pid:
  description: The server's pid in the container (after a start; or the pid a stop ended).
  returned: when known
  type: int
health:
  description: C(healthy), C(exited), C(timeout), C(error), or C(unchecked) (check mode, a start not made); a vLLM
    headless worker (O(launch) with C(rendezvous)) C(running) (its process runs one O(health_interval) after its start,
    or with O(action=none)), C(stopped) or C(exited).
  returned: with O(state=started)
  type: str
started:
  description: Whether this call started a server (the caller's rollback stops it when it does not serve).
  returned: always
  type: bool
stop:
  description: The C(server.sh stop) this call ran (C(rc), C(stdout)), before a restart or with O(state=stopped).
  returned: when a stop ran
  type: dict
script_changed:
  description: Whether C(server.sh) was (or would be) rewritten.
  returned: with O(state=started)
  type: bool
autostart:
  description: C(armed), C(disarmed) or C(unchanged) (the consent record).
  returned: with O(state=started)
  type: str
state:
  description: The state file's content (the current schema only; {} when absent, unreadable, or no container).
  returned: with O(state=status)
  type: dict
looks:
  description: How many times the health wait looked.
  returned: after a start
  type: int
ready_seconds:
  description: Seconds from C(server.sh start) to the first C(/health) 200 (the role records them in the state file as
    C(running.ready_seconds); the benchmark's time estimate reads them).
  returned: after a start that became healthy
  type: float
  version_added: 0.3.0
nccl_library:
  description:
    - Engine vllm, after a start that became healthy (every rank joined) - which NCCL the server's processes mapped
      (C(/proc/<pid>/maps) of its process group in the container) - C(source) C(pip) (a C(nvidia/nccl) wheel under
      site-packages or dist-packages), C(system) (under C(/usr/lib), C(/lib) or C(/usr/local)), C(other), or C(none) (no
      libnccl mapped, as in a CPU build); C(paths); C(warning), non-empty for pip's NCCL across Sparks (the known hang,
      vllm-project/vllm 41725 and 42354; also given as a module warning). The role records it in the state file as
      C(running.nccl_library).
  returned: engine vllm, after a start that became healthy
  type: dict
  version_added: 0.3.0
supervisor_gave_up:
  description:
    - The give-up the supervisor recorded in O(state_file) (C(supervisor_gave_up)) when this call began - its cap of
      failed starts, a wedge within the liveness cooldown (C(kind) C(liveness)), a memory wait past its bound
      (C(memory)) or a boot loop that disarmed autostart (C(boot_loop)), with C(at) and C(reason) - or null. Also
      given as a module warning, so that the deploy prints it; a start by this module arms the supervisor again
      (the role writes the state file without it, and the boot-loop count in C(supervisor-state.json) starts again).
  returned: with O(state=started)
  type: dict
  version_added: 0.4.0
"""

import json
import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sparkops.specdec.plugins.module_utils import _server


def _read(path):
    try:
        with open(path, "r", encoding="utf-8") as fh:
            return fh.read()
    except (IOError, OSError):
        return None


def _write(module, path, text, mode):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.chmod(tmp, mode)
    module.atomic_move(tmp, path)
    os.chmod(path, mode)


def _mode(path):
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        return None


class Lifecycle(object):
    """The state machine, with the module's run_command and file helpers (tests pass fakes)."""

    def __init__(self, module, run, http_get=_server.http_get, sleep=None):
        self.m = module
        self.p = module.params
        self.check = module.check_mode
        self.server = _server.Server(run, self.p["container"], self.p["state_dir"], self.p["docker"])
        self.http_get = http_get
        self.sleep = sleep
        self.result = {"changed": False, "started": False, "running": False}
        self.diff = []

    def path(self, name):
        return os.path.join(self.p["state_dir"], name)

    def fail(self, msg, **extra):
        self.result.update(extra)
        self.m.fail_json(msg=msg, **self.result)

    # ------------------------------------------------------------------------------------------- status
    def status(self):
        state, running, rc, err = self.server.status(self.p["state_file"])
        self.result.update(state=state, running=running, operation="none")
        return self.result

    # ------------------------------------------------------------------------------------------- stopped
    def stopped(self):
        self.result["operation"] = "stop"
        script = self.server.script
        if not os.path.exists(script):
            return self.result
        record_before = os.path.exists(self.path(_server.RECORD_NAME))
        if self.check:
            status_rc = self.server.call("status")[0]
            self.result["changed"] = status_rc == 0 or record_before
            return self.result
        rc, out, err = self.server.call("stop")
        self.result["stop"] = {"rc": rc, "stdout": out, "stderr": err}
        self.result["pid"] = _server.pid_of(out)
        if rc != 0:
            self.fail("server.sh stop failed in %s (rc %d): %s"
                      % (self.p["container"], rc, " ".join((err or out).split())))
        self.result["changed"] = "stopped" in out or record_before
        return self.result

    # ------------------------------------------------------------------------------------------- started
    def started(self):
        p = self.p
        action = p["action"]
        self.result["operation"] = action
        env = _server.hf_token_env(p["hf_token"], p["launch"].get("env") or {})
        text = _server.render_script(p["launch"], p["state_dir"], p["container"], p["state_file"])
        before = _read(self.server.script)
        self.result["script_changed"] = before != text
        if before != text:
            self.diff.append({"before_header": self.server.script, "after_header": self.server.script,
                              "before": before or "", "after": text})
        key_path = p["api_key_file"]
        key_text = (p["api_key"] + "\n") if key_path else None
        key_changed = bool(key_path) and (_read(key_path) != key_text or _mode(key_path) != 0o600)
        if key_path and not p["api_key"]:
            self.fail("api_key: empty, but the launch reads %s; set specdec_api_key." % key_path)
        # api_key_file '' (the launch reads none): the key file goes once the server serves.
        key_gone = key_path == "" and os.path.exists(self.path(_server.API_KEY_NAME))
        self.result["health"] = "unchecked"
        self._gave_up()
        if self.check:
            self.result["changed"] = self.result["script_changed"] or key_changed or key_gone or action != "none"
            if action == "none":
                self._check_running()
            self._autostart(text, env, write=False, started=action != "none")
            return self.result
        if self.result["script_changed"]:
            _write(self.m, self.server.script, text, 0o755)
        elif _mode(self.server.script) != 0o755:
            os.chmod(self.server.script, 0o755)
            self.result["script_changed"] = True
        if key_changed:
            _write(self.m, key_path, key_text, 0o600)
        self.result["changed"] = self.result["script_changed"] or key_changed
        if action == "none":
            self._check_running()
        else:
            if action == "restart":
                rc, out, err = self.server.call("stop")
                self.result["stop"] = {"rc": rc, "stdout": out, "stderr": err}
                self.result["changed"] = True
                if rc != 0:
                    self.fail("server.sh stop failed in %s (rc %d): %s" % (p["container"], rc, " ".join((err or out).split())))
            begun = time.monotonic()
            rc, out, err = self.server.call("start", env)
            self.result["changed"] = True
            self.result["started"] = rc == 0
            self.result["pid"] = _server.pid_of(out)
            if rc != 0:
                self.fail("server.sh start failed in %s (rc %d): %s" % (p["container"], rc, " ".join((err or out).split())))
            kwargs = {"get": self.http_get}
            if self.sleep is not None:
                kwargs["sleep"] = self.sleep
            if self._worker():
                outcome, detail, looks = _server.wait_worker(self.server, p["health_interval"],
                                                             **({"sleep": self.sleep} if self.sleep else {}))
            else:
                outcome, detail, looks = _server.wait_healthy(self.server, p["local_url"], p["health_timeout"],
                                                              p["health_interval"], **kwargs)
            self.result.update(health=outcome, looks=looks, running=outcome in ("healthy", "timeout", "running"))
            if outcome == "healthy":
                self.result["ready_seconds"] = round(time.monotonic() - begun, 1)
                if (p["launch"].get("engine") or "trtllm") == "vllm":
                    self._nccl_library()
            if outcome not in ("healthy", "running"):
                self.fail(_server.wait_message(outcome, detail, p["health_timeout"], p["container"]), detail=detail)
        if key_gone:
            os.remove(self.path(_server.API_KEY_NAME))
            self.result["changed"] = True
        if action != "none":
            self._clear_boot_loop()
        self._autostart(text, env, write=True, started=action != "none")
        return self.result

    def _gave_up(self):
        """The supervisor's give-up the state file records now: returned, and warned about (the deploy prints it)."""
        entry = _server.gave_up_entry(_read(self.p["state_file"]))
        self.result["supervisor_gave_up"] = entry
        if entry:
            self.m.warn("%s; %s" % (_server.gave_up_line(entry), "this start arms it again" if self.p["action"] != "none"
                                    else "the running server is left as it is (a restart arms it again)"))

    def _clear_boot_loop(self):
        """A start by Ansible is a new consent: the supervisor's boot-loop count (supervisor-state.json) starts again."""
        path = self.path(_server.GUARD_NAME)
        raw = _read(path)
        try:
            guard = json.loads(raw) if raw else None
        except ValueError:
            guard = None
        if isinstance(guard, dict) and guard.get("unstable_boots"):
            guard["unstable_boots"] = []
            _write(self.m, path, json.dumps(guard, indent=2, sort_keys=True) + "\n", _mode(path) or 0o644)

    def _nccl_library(self):
        """Engine vllm, once every rank joined: which NCCL the server's processes loaded (pip's or the system's), for
        the state file; a warning for pip's across Sparks (the known hang)."""
        rc, out, err = self.server.run(self.server.exec_(
            ["sh", "-c", _server.NCCL_PROBE, os.path.join(self.p["state_dir"], "server.pid")]))
        found = _server.nccl_library(out if rc == 0 else "", self.p["launch"].get("members"))
        if rc != 0:
            found["error"] = " ".join((err or out or "rc %d" % rc).split())
        self.result["nccl_library"] = found
        if found["warning"]:
            self.m.warn(found["warning"])

    def _worker(self):
        """A vLLM headless worker's launch (the plan's worker_launch: it has a rendezvous): no HTTP of its own."""
        return bool((self.p["launch"] or {}).get("rendezvous"))

    def _check_running(self):
        if self._worker():
            rc, out, err = self.server.call("status")
            self.result["health"] = "running" if rc == 0 else "stopped"
            self.result["running"] = rc == 0
            if rc != 0:
                self.fail("The headless vLLM worker does not run in %s (server.sh status: %s; see %s/server.log): its "
                          "head cannot serve without it; stop the head's server (server.sh stop in the head's "
                          "container) and re-run, which starts every worker and then the head." % (
                              self.p["container"], " ".join((out or err or "rc %d" % rc).split()), self.p["state_dir"]))
            return
        status, reason = self.http_get(self.p["local_url"].rstrip("/") + "/health", 30)
        self.result["health"] = "healthy" if status == 200 else "unhealthy"
        self.result["running"] = status == 200
        if status != 200:
            self.fail("The running server does not answer 200 at %s/health (%s); see %s/server.log." % (
                self.p["local_url"].rstrip("/"), reason, self.p["state_dir"]))

    def _autostart(self, text, env, write, started=False):
        p = self.p
        rec_path = self.path(_server.RECORD_NAME)
        self.result["autostart"] = "unchanged"
        if p["autostart"] is None:
            return
        raw = _read(rec_path)
        try:
            current = json.loads(raw) if raw is not None else None
        except ValueError:
            current = None
        if p["autostart"] is False:
            if raw is None:
                return
            self.result["autostart"] = "disarmed"
            self.result["changed"] = True
            self.diff.append({"before_header": rec_path, "after_header": rec_path, "before": raw, "after": ""})
            if write:
                os.remove(rec_path)
            return
        fields = dict(p["autostart_record"] or {})
        missing = [k for k in ("deployment", "fingerprint") if not fields.get(k)]
        if missing:
            self.fail("server_lifecycle: autostart_record needs %s with autostart=true; pass the plan's values."
                      % ", ".join(missing))
        if write and not os.path.exists(self.server.script):
            return
        fields["state_file"] = p["state_file"]
        wanted = _server.autostart_record(fields, _server.sha1_text(text), bool(env))
        # An earlier version's record of this very launch stays until the next start (an upgrade changes nothing).
        if current == wanted or (not started and _server.keeps_earlier_record(current, wanted)):
            return
        self.result["autostart"] = "armed"
        self.result["changed"] = True
        new = _server.nice_json(wanted)
        self.diff.append({"before_header": rec_path, "after_header": rec_path, "before": raw or "", "after": new})
        if write:
            _write(self.m, rec_path, new, 0o644)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", choices=["started", "stopped", "status"], default="started"),
            container=dict(type="str", required=True),
            state_dir=dict(type="path", required=True),
            state_file=dict(type="path"),
            action=dict(type="str", choices=["none", "start", "restart"]),
            launch=dict(type="dict"),
            local_url=dict(type="str"),
            health_timeout=dict(type="int", default=1800),
            health_interval=dict(type="int", default=10),
            hf_token=dict(type="str", default="", no_log=True),
            api_key=dict(type="str", default="", no_log=True),
            api_key_file=dict(type="str"),
            autostart=dict(type="bool"),
            autostart_record=dict(type="dict"),
            docker=dict(type="str", default="docker"),
        ),
        required_if=[("state", "started", ("state_file", "action", "launch", "local_url")),
                     ("state", "status", ("state_file",))],
        supports_check_mode=True,
    )

    def run(argv, env=None):
        return module.run_command(argv, environ_update=env or {})

    life = Lifecycle(module, run)
    result = getattr(life, module.params["state"])()
    if life.diff:
        result["diff"] = life.diff  # shown with --diff only
    module.exit_json(**result)


if __name__ == "__main__":
    main()
